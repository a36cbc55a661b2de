/*
 * test_audit21c_client_hostile.c — libzpp against a daemon that answers
 * wrongly (a scripted fake on a Unix socket, as in test_client_conn.c):
 * replies that carry descriptors the client never asked for, a collective
 * answered with ZPP_EBUSY (which zpp_test uses for "not arrived yet"), a
 * frame announced far over the client's limit, a body that does not
 * unpack, waits on ids that were never handed out, and zpp_close with
 * calls in flight and replies stashed.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "frame.h"
#include "test.h"
#include "zpp.h"

#include "fake_daemon.h"

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ASSERT(d != NULL);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- descriptors on replies ------------------------------------------------- */

/* Answers an async call and a blocking barrier, and an id nobody asked
 * for, each with descriptors attached (three pipe ends). */
static void script_replies_with_fds(int fd)
{
    int p[2];
    if (pipe(p) != 0)
        _exit(60);
    int fds[3] = {p[0], p[1], p[0]};
    Zpp__Request *a = srv_read(fd, NULL);
    Zpp__Request *b = srv_read(fd, NULL);
    srv_coll_reply_fds(fd, 12345, 9, fds, 3); /* unsolicited: dropped */
    srv_coll_reply_fds(fd, a->req_id, 1, fds, 3);
    srv_coll_reply_fds(fd, b->req_id, 2, fds, 2);
    zpp_request_free(a);
    zpp_request_free(b);
    Zpp__Request *bye = srv_read(fd, NULL);
    srv_coll_reply(fd, bye->req_id, 3);
    zpp_request_free(bye);
}

static void test_descriptors_on_replies_never_reach_the_client(void)
{
    int before = open_fds();
    pid_t pid = serve(script_replies_with_fds);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    uint64_t a = 0;
    submit_ag(c, &a);
    zpp_coll bar;
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    zpp_result res;
    ASSERT_EQ(zpp_collective(c, &bar, &res), 0); /* a's reply is stashed meanwhile */
    ASSERT_EQ(res.seq, 2);
    ASSERT_EQ(zpp_wait(c, a, &res), 0);
    ASSERT_EQ(res.seq, 1);
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    ASSERT_EQ(open_fds(), before + 1); /* the socket, nothing else */
    zpp_close(c);
    reap(pid);
    ASSERT_EQ(open_fds(), before);
}

/* ---- ZPP_EBUSY in a collective's reply ---------------------------------------- */

static void script_ebusy_reply(int fd)
{
    Zpp__Request *a = srv_read(fd, NULL);
    Zpp__Request *b = srv_read(fd, NULL);
    Zpp__Reply busy = ZPP__REPLY__INIT;
    busy.req_id = a->req_id;
    busy.code = ZPP_EBUSY;
    busy.message = (char *)"daemon says busy";
    srv_send(fd, &busy);
    busy.req_id = b->req_id;
    srv_send(fd, &busy);
    Zpp__Request *ping = srv_read(fd, NULL); /* a barrier: a's reply is there */
    srv_coll_reply(fd, ping->req_id, 3);
    zpp_request_free(a);
    zpp_request_free(b);
    zpp_request_free(ping);
}

/* zpp_test's ZPP_EBUSY means "not arrived": a reply that carries that code
 * must not read as such, or the caller polls again and finds the id gone
 * (ZPP_ENOENT) with the answer lost. */
static void test_ebusy_in_a_reply_is_not_taken_for_not_arrived(void)
{
    pid_t pid = serve(script_ebusy_reply);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    uint64_t a = 0, b = 0;
    submit_ag(c, &a);
    submit_ag(c, &b);
    zpp_result res = {.seq = 77};
    ASSERT_EQ(zpp_barrier(c, &res), 0); /* both busy replies are stashed */
    int rc = zpp_test(c, a, &res);
    ASSERT_NE(rc, ZPP_EBUSY);
    ASSERT_EQ(rc, ZPP_EPROTO);
    ASSERT_CONTAINS(zpp_last_error(c), "daemon says busy");
    ASSERT_EQ(zpp_test(c, a, &res), ZPP_ENOENT); /* answered once */
    ASSERT_EQ(zpp_wait(c, b, &res), ZPP_EPROTO);
    ASSERT_CONTAINS(zpp_last_error(c), "daemon says busy");
    ASSERT_EQ(res.seq, 3); /* the barrier's; untouched since */
    zpp_close(c);
    reap(pid);
}

/* ---- frames the client refuses --------------------------------------------------- */

static void script_huge_frame(int fd)
{
    Zpp__Request *r = srv_read(fd, NULL);
    uint8_t hdr[4] = {0xff, 0xff, 0xff, 0xf0};
    write_all(fd, hdr, 4);
    zpp_request_free(r);
}

static void test_a_frame_over_the_limit_kills_the_connection(void)
{
    pid_t pid = serve(script_huge_frame);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    ASSERT_EQ(zpp_barrier(c, NULL), ZPP_EPROTO);
    ASSERT_CONTAINS(zpp_last_error(c), "limit");
    ASSERT_EQ(zpp_barrier(c, NULL), ZPP_ECLOSED);
    ASSERT_CONTAINS(zpp_last_error(c), "limit"); /* the first cause stays */
    zpp_close(c);
    reap(pid);
}

static void script_garbage_body(int fd)
{
    Zpp__Request *r = srv_read(fd, NULL);
    uint8_t frame[8] = {0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff};
    write_all(fd, frame, sizeof(frame));
    zpp_request_free(r);
}

static void test_a_body_that_does_not_unpack_kills_the_connection(void)
{
    pid_t pid = serve(script_garbage_body);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    uint64_t a = 0;
    submit_ag(c, &a);
    zpp_result res;
    ASSERT_EQ(zpp_wait(c, a, &res), ZPP_EPROTO);
    ASSERT_CONTAINS(zpp_last_error(c), "unpack");
    ASSERT_EQ(zpp_test(c, a, &res), ZPP_ECLOSED);
    zpp_close(c);
    reap(pid);
}

/* ---- a flood of replies nobody asked for ------------------------------------------ */

static void script_flood(int fd)
{
    Zpp__Request *r = srv_read(fd, NULL);
    zpp_request_free(r);
    /* Empty frames (4 bytes each: an empty Reply, req_id 0) cost the
     * client the most per byte. */
    size_t n = 64u << 10, len = 4;
    uint8_t *batch = calloc(n, len);
    for (;;) { /* until the client closes */
        size_t off = 0;
        while (off < n * len) {
            ssize_t w = write(fd, batch + off, n * len - off);
            if (w <= 0) {
                free(batch);
                return;
            }
            off += (size_t)w;
        }
    }
}

/* zpp_test does not block: a daemon that never stops sending replies for
 * ids nobody asked for must not keep it reading for ever. */
static void test_a_flood_of_unsolicited_replies_does_not_hold_zpp_test(void)
{
    pid_t pid = serve(script_flood);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    uint64_t a = 0;
    submit_ag(c, &a);
    usleep(100 * 1000); /* the flood is under way */
    alarm(20);          /* a zpp_test that never returns fails the test */
    zpp_result res;
    double worst_ms = 0;
    for (int i = 0; i < 10; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ASSERT_EQ(zpp_test(c, a, &res), ZPP_EBUSY);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms > worst_ms)
            worst_ms = ms;
        usleep(10 * 1000); /* the flood refills the socket */
    }
    /* Before the cap a call read for as long as the flood outran it
     * (seconds on a loaded machine); now a few thousand frames at most. */
    ASSERT_DBL_LE(worst_ms, 200.0);
    alarm(0);
    zpp_close(c);
    reap(pid);
}

/* ---- ids and close ------------------------------------------------------------------ */

static void script_stash_then_hold(int fd)
{
    Zpp__Request *r[3];
    for (int i = 0; i < 3; i++)
        r[i] = srv_read(fd, NULL);
    srv_coll_reply(fd, r[0]->req_id, 1); /* r[1] stays unanswered */
    srv_coll_reply(fd, r[2]->req_id, 3);
    for (int i = 0; i < 3; i++)
        zpp_request_free(r[i]);
    uint8_t b;
    while (read(fd, &b, 1) > 0) /* until the client closes */
        ;
}

static void test_unknown_ids_and_close_with_calls_in_flight(void)
{
    pid_t pid = serve(script_stash_then_hold);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_result res;
    ASSERT_EQ(zpp_wait(c, 0, &res), ZPP_ENOENT);
    ASSERT_EQ(zpp_test(c, UINT64_MAX, &res), ZPP_ENOENT);
    uint64_t id[3];
    for (int i = 0; i < 3; i++)
        submit_ag(c, &id[i]);
    ASSERT_EQ(zpp_wait(c, id[2], &res), 0); /* id[0]'s reply is stashed */
    ASSERT_EQ(res.seq, 3);
    ASSERT_EQ(zpp_wait(c, id[2], &res), ZPP_ENOENT);
    ASSERT_EQ(zpp_test(c, id[1], &res), ZPP_EBUSY);
    zpp_close(c); /* id[0] stashed, id[1] in flight: both abandoned */
    reap(pid);
}

/* A Hello reply whose next_seq would make the client's numbering wrap to
 * 0 ("the daemon picks") is refused as a protocol error. */
static void script_hello_huge_seq(int fd)
{
    Zpp__Request *req = srv_read(fd, NULL);
    Zpp__HelloReply hr = ZPP__HELLO_REPLY__INIT;
    hr.next_seq = UINT64_MAX;
    srv_hello_reply(fd, req, &hr);
    zpp_request_free(req);
}

static void test_a_hello_reply_with_a_wrapping_next_seq_is_refused(void)
{
    pid_t pid = serve(script_hello_huge_seq);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_job_desc jd = {.job_id = "j", .world_size = 2, .node_count = 1, .gpu_uuid = "host"};
    ASSERT_EQ(zpp_hello(c, &jd, NULL), ZPP_EPROTO);
    ASSERT_CONTAINS(zpp_last_error(c), "next_seq");
    zpp_close(c);
    reap(pid);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(sock_path, sizeof(sock_path), "/tmp/zpp-test-a21c-%d.sock", (int)getpid());
    test_descriptors_on_replies_never_reach_the_client();
    test_ebusy_in_a_reply_is_not_taken_for_not_arrived();
    test_a_frame_over_the_limit_kills_the_connection();
    test_a_body_that_does_not_unpack_kills_the_connection();
    test_a_flood_of_unsolicited_replies_does_not_hold_zpp_test();
    test_unknown_ids_and_close_with_calls_in_flight();
    test_a_hello_reply_with_a_wrapping_next_seq_is_refused();
    unlink(sock_path);
    return 0;
}
