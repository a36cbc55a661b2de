/*
 * test_hello_fds.c — the descriptors that ride on a Hello (its done flags:
 * a memfd and a pipe's write end, proto Hello.flags_nfds).
 *
 * - Good ones are taken: the reply says flag_sync (the host backend runs
 *   sessions on flags too), the pipe's read end sees its last writer go
 *   once the session has closed (what tells libzpp that nothing will write
 *   the flags), and the next RegisterBuffer registers the memfd it carries
 *   itself, not the Hello's leftover. (test_flags_host: the flags' values.)
 * - Bad ones get an error with a message naming what is wrong (the memfd
 *   passes the checks of a registered one, sess_map_memfd): not a memfd,
 *   not sealed against shrinking, sealed against writing, smaller than
 *   flags_size; a second descriptor that is not a pipe's write end; fewer
 *   descriptors than announced.
 * - None of them stays open in the daemon.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

/* A Hello of a 1-rank job with 4 ready events and done flags of size bytes
 * in the nfds descriptors fds (flags_nfds = announced), on a fresh
 * connection. Returns the reply's code; *sync its flag_sync; the message
 * must contain needle when given. */
static int flags_hello(const zh_daemon *d, const char *job, const int *fds, int nfds,
                       uint32_t announced, uint64_t size, int *sync, const char *needle)
{
    int fd = zh_raw_connect(d->socket);
    ASSERT(fd >= 0);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_flags_hello(fd, job, fds, nfds, announced, size, &rep), 0);
    int code = rep->code;
    if (sync)
        *sync = rep->hello ? rep->hello->flag_sync : -1;
    if (needle && (!rep->message || !strstr(rep->message, needle))) {
        fprintf(stderr, "want \"%s\" in \"%s\"\n", needle, rep->message ? rep->message : "");
        ASSERT(0);
    }
    zpp_reply_free(rep);
    close(fd);
    return code;
}

/* 1 if fd (a pipe's read end) sees end of file within ms. */
static int pipe_ends(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 0;
}

static void test_bad_flags(const zh_daemon *d)
{
    zpp_shm *good;
    ASSERT_EQ(zpp_shm_create(4096, &good), 0);
    int mfd = zpp_shm_fd(good), p[2];
    ASSERT_EQ(pipe(p), 0);
    int fds[2];

    /* the flags in a pipe, not a memfd */
    fds[0] = p[1];
    ASSERT_EQ(flags_hello(d, "bad-1", fds, 1, 1, 4096, NULL, "not a shared-memory file"), ZPP_EINVAL);
    /* a memfd not sealed against shrinking */
    int raw = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT(raw >= 0);
    ASSERT_EQ(ftruncate(raw, 4096), 0);
    fds[0] = raw;
    ASSERT_EQ(flags_hello(d, "bad-2", fds, 1, 1, 4096, NULL, "F_SEAL_SHRINK"), ZPP_EPERM);
    /* sealed against writing: zppd's stream must write it */
    ASSERT_EQ(fcntl(raw, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_WRITE), 0);
    ASSERT_EQ(flags_hello(d, "bad-3", fds, 1, 1, 4096, NULL, "sealed against writing"), ZPP_EINVAL);
    close(raw);
    /* smaller than flags_size says */
    fds[0] = mfd;
    ASSERT_EQ(flags_hello(d, "bad-4", fds, 1, 1, 8192, NULL, "4096-byte object"), ZPP_ERANGE);
    /* a pipe's read end where the write end belongs */
    fds[1] = p[0];
    ASSERT_EQ(flags_hello(d, "bad-5", fds, 2, 2, 4096, NULL, "write end"), ZPP_EINVAL);
    /* two announced, one sent */
    ASSERT_EQ(flags_hello(d, "bad-6", fds, 1, 2, 4096, NULL, "fewer descriptors"), ZPP_EINVAL);
    close(p[0]);
    close(p[1]);
    zpp_shm_destroy(good);
}

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    int fds_before = zh_steady_fds(d.pid);
    ASSERT(fds_before > 0);

    /* Good flags on the host backend: taken, and closed with the session. */
    zpp_shm *flags;
    ASSERT_EQ(zpp_shm_create(4096, &flags), 0);
    int p[2], sync = -1;
    ASSERT_EQ(pipe(p), 0);
    int ffds[2] = {zpp_shm_fd(flags), p[1]};
    ASSERT_EQ(flags_hello(&d, "flags-host", ffds, 2, 2, 4096, &sync, NULL), 0);
    ASSERT_EQ(sync, 1);
    close(p[1]); /* the daemon's copy is the only other writer */
    ASSERT_EQ(pipe_ends(p[0], 5000), 1);
    close(p[0]);
    zpp_shm_destroy(flags);

    test_bad_flags(&d);

    int fd = zh_raw_connect(d.socket);
    ASSERT(fd >= 0);

    /* Hello for a 1-rank job, announcing one descriptor: a sealed memfd of
     * 8 KiB that is NOT the buffer registered next. */
    zpp_shm *decoy, *buf;
    ASSERT_EQ(zpp_shm_create(8192, &decoy), 0);
    ASSERT_EQ(zpp_shm_create(4096, &buf), 0);
    int dfd = zpp_shm_fd(decoy);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_flags_hello(fd, "hello-fds", &dfd, 1, 1, 8192, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    zpp_reply_free(rep);

    /* Register 8 KiB of the 4 KiB buffer: refused, because the daemon maps
     * the descriptor this frame carries (had it claimed the Hello's 8 KiB
     * decoy instead, this would succeed). */
    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.offset = 0;
    rb.length = 8192;
    rb.nfds = 1;
    Zpp__Request rr = ZPP__REQUEST__INIT;
    rr.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    rr.req_id = 2;
    rr.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    rr.register_buffer = &rb;
    int bfd = zpp_shm_fd(buf);
    ASSERT_EQ(zh_raw_request(fd, &rr, &bfd, 1), 0);
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, ZPP_ERANGE);
    zpp_reply_free(rep);

    /* The whole 4 KiB buffer registers. */
    rb.length = 4096;
    rr.req_id = 3;
    ASSERT_EQ(zh_raw_request(fd, &rr, &bfd, 1), 0);
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    ASSERT_EQ(rep->register_buffer->length, 4096);
    zpp_reply_free(rep);

    close(fd);
    zpp_shm_destroy(decoy);
    zpp_shm_destroy(buf);
    /* every descriptor a Hello brought is closed (sessions end shortly
     * after their connections do) */
    ASSERT_EQ(zh_steady_fds(d.pid), fds_before);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("3 passed, 0 failed\n");
    return 0;
}
