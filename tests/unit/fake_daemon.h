/*
 * fake_daemon.h — a scripted zppd for the client's unit tests: the test
 * binds sock_path, serve() forks a child that accepts one connection and
 * runs a script of reads and replies on it (any failure there exits the
 * child non-zero), and reap() fails the test unless the child exited 0.
 * Shared by test_client_conn.c and test_audit21c_client_hostile.c.
 */
#ifndef ZPP_TEST_FAKE_DAEMON_H
#define ZPP_TEST_FAKE_DAEMON_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "test.h"
#include "zpp.h"

static char sock_path[108];

static inline void read_exact(int fd, void *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t r = read(fd, (char *)buf + off, n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            _exit(20);
        off += (size_t)r;
    }
}

/* Reads one request; *passed gets the SCM_RIGHTS descriptor or -1. */
static inline Zpp__Request *srv_read(int fd, int *passed)
{
    uint8_t hdr[4];
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = hdr, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    msg.msg_control = ctl.space;
    msg.msg_controllen = sizeof(ctl.space);
    if (recvmsg(fd, &msg, MSG_CMSG_CLOEXEC) != 1)
        _exit(21);
    if (passed) {
        *passed = -1;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        if (cm && cm->cmsg_type == SCM_RIGHTS)
            memcpy(passed, CMSG_DATA(cm), sizeof(int));
    }
    read_exact(fd, hdr + 1, 3);
    size_t len = ((size_t)hdr[0] << 24) | ((size_t)hdr[1] << 16) | ((size_t)hdr[2] << 8) | hdr[3];
    if (len > ZPP_FRAME_DEFAULT_MAX)
        _exit(22);
    uint8_t *body = malloc(len ? len : 1);
    read_exact(fd, body, len);
    Zpp__Request *req = NULL;
    if (zpp_request_unpack(body, len, 1u << 20, &req) < 0)
        _exit(23);
    free(body);
    const char *why;
    if (zpp_request_validate(req, &why) < 0)
        _exit(24);
    return req;
}

static inline void write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n <= 0)
            _exit(26);
        buf += n;
        len -= (size_t)n;
    }
}

/* Sends rep; with nfds > 0 the descriptors ride SCM_RIGHTS on its first
 * byte, as the client's own requests carry theirs. */
static inline void srv_send_fds(int fd, const Zpp__Reply *rep, const int *fds, int nfds)
{
    uint8_t *buf;
    size_t len;
    if (zpp_reply_pack(rep, 16u << 20, &buf, &len) < 0)
        _exit(25);
    size_t off = 0;
    if (nfds > 0) {
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(int) * 4)];
        } ctl;
        memset(&ctl, 0, sizeof(ctl));
        struct iovec iov = {.iov_base = buf, .iov_len = 1};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        msg.msg_control = ctl.space;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
        if (sendmsg(fd, &msg, 0) != 1)
            _exit(27);
        off = 1;
    }
    write_all(fd, buf + off, len - off);
    free(buf);
}

static inline void srv_send(int fd, const Zpp__Reply *rep)
{
    srv_send_fds(fd, rep, NULL, 0);
}

/* Answers request req (a Hello) with hr. */
static inline void srv_hello_reply(int fd, const Zpp__Request *req, Zpp__HelloReply *hr)
{
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req->req_id;
    rep.body_case = ZPP__REPLY__BODY_HELLO;
    rep.hello = hr;
    srv_send(fd, &rep);
}

static inline void srv_coll_reply_fds(int fd, uint64_t req_id, uint64_t seq, const int *fds,
                                      int nfds)
{
    Zpp__CollectiveReply cr = ZPP__COLLECTIVE_REPLY__INIT;
    cr.algo = ZPP__ALGO__ALGO_AG_EXACT;
    cr.seq = seq;
    cr.logical_bytes = seq * 100;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_COLLECTIVE;
    rep.collective = &cr;
    srv_send_fds(fd, &rep, fds, nfds);
}

static inline void srv_coll_reply(int fd, uint64_t req_id, uint64_t seq)
{
    srv_coll_reply_fds(fd, req_id, seq, NULL, 0);
}

/* Binds the socket in the parent (no race), forks; the child accepts one
 * connection and runs script on it. */
static inline pid_t serve(void (*script)(int fd))
{
    unlink(sock_path);
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(ls, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
    ASSERT_EQ(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ASSERT_EQ(listen(ls, 4), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(20);
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            _exit(27);
        script(fd);
        close(fd);
        _exit(0);
    }
    close(ls);
    return pid;
}

static inline void reap(pid_t pid)
{
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "fake daemon failed: status 0x%x\n", st);
        exit(1);
    }
}

/* Client side: submits an all-gather of 1000 fp32 between buffers 1 and 2
 * (the scripted daemon checks nothing of them). */
static inline void submit_ag(zpp_conn *c, uint64_t *id)
{
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_ALLGATHER, ZPP_FP32, 1000);
    call.input.buffer_id = 1;
    call.output.buffer_id = 2;
    ASSERT_EQ(zpp_submit(c, &call, id), 0);
}

#endif
