/*
 * test_garbage.c — the daemon survives hostile bytes on its socket:
 *  - random bytes on many raw connections (several KB each, fixed seeds);
 *  - a header announcing 2 GiB (the connection is closed);
 *  - a valid header with a garbage body; a truncated frame, then close;
 *  - 100 descriptors in one SCM_RIGHTS message (closed; the daemon keeps
 *    none of them);
 *  - valid Requests with bad fields (bits 5, block 33, rank >= world, a
 *    200-byte job id, a wrong protocol version, no body): each gets an
 *    error reply and the connection stays (a status query answers after);
 *  - a RegisterBuffer and a Hello refused by validation with a descriptor
 *    attached: the descriptor is dropped with them, so the next
 *    RegisterBuffer maps the memfd it carries itself;
 *  - a collective refused for its event_slot leaves no call behind: the
 *    1-rank job still ends gracefully when its rank leaves;
 * and then a real 2-rank job completes and `zppctl status` answers.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

/* Rank children return straight after a failed check, connections and
 * shared memory still open: LeakSanitizer in the test's own processes would
 * report that, not a bug. The daemon (a separate program) keeps its own
 * leak checking. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static zh_daemon g_d;

static void assert_alive(const char *after)
{
    zpp_conn *c = NULL;
    char buf[8192];
    int rc = zpp_connect(g_d.socket, &c);
    if (rc == 0)
        rc = zpp_admin_status_json(c, buf, sizeof buf);
    zpp_close(c);
    if (!zh_daemon_alive(&g_d) || rc != 0) {
        fprintf(stderr, "test_garbage: daemon gone or mute after %s (%s)\n", after,
                zpp_err_name(rc));
        zh_daemon_dump_log(&g_d);
        exit(1);
    }
}

static void random_streams(void)
{
    for (uint64_t seed = 1; seed <= 64; seed++) {
        int fd = zh_raw_connect(g_d.socket);
        ASSERT(fd >= 0);
        uint64_t s = seed;
        size_t len = 1024 + test_rand64(&s) % 8192;
        uint8_t *buf = malloc(len);
        ASSERT(buf != NULL);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)test_rand64(&s);
        if (seed % 4 == 0) {
            buf[0] = buf[1] = 0; /* a plausible length: the body is parsed */
        }
        zh_raw_send(fd, buf, len, NULL, 0); /* may fail once the daemon closed */
        free(buf);
        close(fd);
    }
    assert_alive("random streams");
}

static int status_request(int fd, uint64_t req_id)
{
    Zpp__Request req = ZPP__REQUEST__INIT;
    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = req_id;
    req.body_case = ZPP__REQUEST__BODY_STATUS;
    req.status = &sq;
    return zh_raw_request(fd, &req, NULL, 0);
}

static void framing(void)
{
    /* 2 GiB announced. */
    int fd = zh_raw_connect(g_d.socket);
    uint8_t hdr[4] = {0x80, 0, 0, 0};
    ASSERT_EQ(zh_raw_send(fd, hdr, 4, NULL, 0), 0);
    ASSERT_EQ(zh_raw_closed(fd, 3000), 1);
    close(fd);

    /* A valid header with a body that is not a Request. */
    fd = zh_raw_connect(g_d.socket);
    uint8_t bad[4 + 64] = {0, 0, 0, 64};
    memset(bad + 4, 0xFF, 64);
    ASSERT_EQ(zh_raw_send(fd, bad, sizeof bad, NULL, 0), 0);
    ASSERT_EQ(zh_raw_closed(fd, 3000), 1);
    close(fd);

    /* A truncated frame, then close. */
    fd = zh_raw_connect(g_d.socket);
    uint8_t trunc[4 + 10] = {0, 0, 0, 100, 8, 1, 16, 1};
    ASSERT_EQ(zh_raw_send(fd, trunc, sizeof trunc, NULL, 0), 0);
    close(fd);

    /* A valid frame split byte by byte still works. */
    fd = zh_raw_connect(g_d.socket);
    Zpp__Request req = ZPP__REQUEST__INIT;
    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = 5;
    req.body_case = ZPP__REQUEST__BODY_STATUS;
    req.status = &sq;
    uint8_t *p;
    size_t n;
    ASSERT_EQ(zpp_request_pack(&req, 1 << 20, &p, &n), 0);
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(zh_raw_send(fd, p + i, 1, NULL, 0), 0);
        usleep(1000);
    }
    free(p);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_reply(fd, 3000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    ASSERT_EQ(rep->req_id, 5);
    zpp_reply_free(rep);
    close(fd);
    assert_alive("bad frames");
}

static void many_fds(void)
{
    int before = zh_count_fds(g_d.pid);
    ASSERT(before > 0);
    int fds[100];
    int mfd = memfd_create("zh-garbage", MFD_CLOEXEC);
    ASSERT(mfd >= 0);
    for (int i = 0; i < 100; i++)
        fds[i] = mfd;
    for (int round = 0; round < 5; round++) {
        int fd = zh_raw_connect(g_d.socket);
        ASSERT(fd >= 0);
        uint8_t hdr[4] = {0, 0, 0, 0}; /* an empty frame carrying the fds */
        zh_raw_send(fd, hdr, 4, fds, 100);
        ASSERT_EQ(zh_raw_closed(fd, 3000), 1);
        close(fd);
    }
    close(mfd);
    assert_alive("100 descriptors");
    int after = -1;
    for (int i = 0; i < 100; i++) { /* closes land a tick later */
        after = zh_count_fds(g_d.pid);
        if (after <= before)
            break;
        usleep(20000);
    }
    if (after > before) {
        fprintf(stderr, "test_garbage: daemon holds %d descriptors, %d before the SCM_RIGHTS "
                        "floods\n",
                after, before);
        exit(1);
    }
}

/* Sends req, expects an error reply with code `want` (0: any negative),
 * then a status query on the same connection must answer. */
static void bad_request(int fd, Zpp__Request *req, int want, const char *what)
{
    static uint64_t id = 100;
    req->req_id = ++id;
    ASSERT_EQ(zh_raw_request(fd, req, NULL, 0), 0);
    Zpp__Reply *rep = NULL;
    int rc = zh_raw_reply(fd, 3000, &rep);
    if (rc != 0) {
        fprintf(stderr, "test_garbage: %s: no reply (%s)\n", what,
                rc == 1 ? "connection closed" : "timeout");
        exit(1);
    }
    if (rep->code >= 0 || (want && rep->code != want) || rep->req_id != id ||
        !rep->message[0]) {
        fprintf(stderr, "test_garbage: %s: reply code %d (%s) req_id %llu message '%s'\n", what,
                rep->code, zpp_err_name(rep->code), (unsigned long long)rep->req_id,
                rep->message);
        exit(1);
    }
    printf("test_garbage: %s -> %s: %s\n", what, zpp_err_name(rep->code), rep->message);
    zpp_reply_free(rep);
    ASSERT_EQ(status_request(fd, ++id), 0);
    ASSERT_EQ(zh_raw_reply(fd, 3000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    ASSERT_EQ(rep->body_case, ZPP__REPLY__BODY_STATUS);
    zpp_reply_free(rep);
}

static void bad_fields(void)
{
    int fd = zh_raw_connect(g_d.socket);
    ASSERT(fd >= 0);
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;

    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = "garbage";
    h.rank = 4;
    h.world_size = 4;
    h.node_count = 1;
    h.gpu_uuid = "host";
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    bad_request(fd, &req, ZPP_EINVAL, "hello rank >= world");

    char huge[201];
    memset(huge, 'j', 200);
    huge[200] = 0;
    h.rank = 0;
    h.job_id = huge;
    bad_request(fd, &req, ZPP_EINVAL, "hello 200-byte job id");

    h.job_id = "bad job id";
    bad_request(fd, &req, ZPP_EINVAL, "hello job id with spaces");

    h.job_id = "garbage";
    h.world_size = 1u << 30;
    bad_request(fd, &req, ZPP_ELIMIT, "hello huge world");
    h.world_size = 4;

    Zpp__Collective co = ZPP__COLLECTIVE__INIT;
    Zpp__BufRef in = ZPP__BUF_REF__INIT, out = ZPP__BUF_REF__INIT;
    co.seq = 1;
    co.op = ZPP__OP__QWZ_ALLGATHER;
    co.dtype = ZPP__DTYPE__FP32;
    co.count = 100;
    co.bits = 5;
    co.input = &in;
    co.output = &out;
    req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
    req.collective = &co;
    bad_request(fd, &req, ZPP_EINVAL, "collective bits 5");
    co.bits = 8;
    co.block = 33;
    bad_request(fd, &req, ZPP_EINVAL, "collective block 33");
    co.block = 0;
    co.op = (Zpp__Op)99;
    bad_request(fd, &req, ZPP_EINVAL, "collective op 99");
    co.op = ZPP__OP__QWZ_ALLGATHER;
    co.count = UINT64_MAX;
    bad_request(fd, &req, ZPP_EINVAL, "collective count 2^64-1");
    co.count = 100;
    bad_request(fd, &req, ZPP_ESTATE, "collective before hello");

    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.length = 4096;
    rb.nfds = 1;
    req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &rb;
    bad_request(fd, &req, 0, "register without descriptor or hello");

    req.body_case = ZPP__REQUEST__BODY__NOT_SET;
    bad_request(fd, &req, 0, "request without a body");

    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    req.body_case = ZPP__REQUEST__BODY_STATUS;
    req.status = &sq;
    req.version = 77;
    bad_request(fd, &req, ZPP_EVERSION, "protocol version 77");
    close(fd);
    assert_alive("bad fields");
}

/* A raw connection that said Hello as the one rank of job_id. */
static int raw_joined(const char *job_id)
{
    int fd = zh_raw_connect(g_d.socket);
    ASSERT(fd >= 0);
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = (char *)job_id;
    h.world_size = 1;
    h.node_count = 1;
    h.gpu_uuid = "host";
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    req.req_id = 1;
    ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    zpp_reply_free(rep);
    return fd;
}

/* Sends req with one descriptor; returns the reply's code. */
static int request_with_fd(int fd, Zpp__Request *req, int xfd)
{
    static uint64_t id = 1000;
    req->req_id = ++id;
    ASSERT_EQ(zh_raw_request(fd, req, &xfd, 1), 0);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->req_id, id);
    int code = rep->code;
    printf("test_garbage: stale descriptors: req %llu -> %s: %s\n", (unsigned long long)id,
           zpp_err_name(code), rep->message);
    zpp_reply_free(rep);
    return code;
}

static void refused_with_fds(void)
{
    int fd = raw_joined("garbage-fds");
    zpp_shm *decoy, *buf;
    ASSERT_EQ(zpp_shm_create(8192, &decoy), 0);
    ASSERT_EQ(zpp_shm_create(4096, &buf), 0);
    int dfd = zpp_shm_fd(decoy), bfd = zpp_shm_fd(buf);
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;

    /* Refused by validation (length 0), the 8 KiB decoy attached. */
    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.nfds = 1;
    rb.length = 0;
    req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &rb;
    ASSERT_EQ(request_with_fd(fd, &req, dfd), ZPP_EINVAL);
    /* A second Hello refused by validation (a flag array of 0 bytes). */
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = "garbage-fds";
    h.world_size = 1;
    h.node_count = 1;
    h.gpu_uuid = "host";
    h.flags_nfds = 1;
    h.nslots = 1;
    h.flags_size = 0;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    ASSERT_EQ(request_with_fd(fd, &req, dfd), ZPP_EINVAL);

    /* 8 KiB of the 4 KiB buffer: refused, since the daemon must map this
     * frame's descriptor, not a leftover decoy of 8 KiB. */
    rb.length = 8192;
    req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &rb;
    ASSERT_EQ(request_with_fd(fd, &req, bfd), ZPP_ERANGE);
    rb.length = 4096;
    ASSERT_EQ(request_with_fd(fd, &req, bfd), 0);
    close(fd);
    zpp_shm_destroy(decoy);
    zpp_shm_destroy(buf);
    assert_alive("refused requests with descriptors");
}

static void refused_event_slot(void)
{
    int fd = raw_joined("garbage-slot");
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    Zpp__Reply *rep = NULL;

    /* Call 2 names an event slot the session does not have (host: none). */
    Zpp__Collective co = ZPP__COLLECTIVE__INIT;
    co.seq = 2;
    co.op = ZPP__OP__BARRIER;
    co.event_slot = 1;
    req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
    req.collective = &co;
    req.req_id = 2;
    ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, ZPP_EINVAL);
    zpp_reply_free(rep);
    /* Call 1 completes; then the rank leaves between calls. */
    co.seq = 1;
    co.event_slot = 0;
    req.req_id = 3;
    ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    zpp_reply_free(rep);
    close(fd);
    char needle[160];
    snprintf(needle, sizeof needle,
             "msg=\"job freed\" job=garbage-slot uid=%u backend=", (unsigned)getuid());
    for (int i = 0; i < 250 && !zh_daemon_log_contains(&g_d, needle); i++)
        usleep(20000);
    ASSERT(zh_daemon_log_contains(&g_d, needle));
    strcat(needle, "graceful");
    if (!zh_daemon_log_contains(&g_d, needle)) {
        fprintf(stderr, "test_garbage: the job of a refused call did not end gracefully\n");
        zh_daemon_dump_log(&g_d);
        exit(1);
    }
    assert_alive("a call refused for its event slot");
}

static int rank_main(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, "after-garbage", (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    zpp_shm *in, *out;
    uint64_t in_id, out_id;
    ASSERT_EQ(zpp_shm_create(4096, &in), 0);
    ASSERT_EQ(zpp_shm_create(4096, &out), 0);
    ASSERT_EQ(zpp_register_shm(c, in, 0, 4096, &in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, out, 0, 4096, &out_id), 0);
    float *x = zpp_shm_ptr(in);
    for (int i = 0; i < 500; i++)
        x[i] = (float)(rank * 500 + i);
    zpp_result res;
    int rc = zpp_allgather(c, (zpp_bufref){in_id, 0}, (zpp_bufref){out_id, 0}, 1000, ZPP_FP32,
                           &res);
    if (rc) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, zpp_err_name(rc), zpp_last_error(c));
        return 1;
    }
    const float *y = zpp_shm_ptr(out);
    for (int i = 0; i < 1000; i++)
        ASSERT_EQ(y[i], (float)i);
    zpp_close(c);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    random_streams();
    framing();
    many_fds();
    bad_fields();
    refused_with_fds();
    refused_event_slot();
    ASSERT_EQ(zh_run_ranks(2, rank_main, NULL, 30000, NULL), 0);
    char *argv[] = {ZPPCTL_BIN, "-s", g_d.socket, "status", NULL};
    char out[8192];
    ASSERT_EQ(zh_run_capture(argv, 10000, out, sizeof out), 0);
    ASSERT_CONTAINS(out, "host");
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_garbage: ok\n");
    return 0;
}
