/*
 * test_goodbye_last.c — a Goodbye counts only as the last thing on the
 * stream before its end (docs/protocol.md, "Leaving, dying, rejoining"):
 * whatever follows it, valid or not, makes a later disconnect a death.
 * In each scenario rank 1 of a 2-rank job (libzpp sets says_goodbye)
 * sends a Goodbye on its socket by hand, then
 *  1. a request that fails validation (a StatusQuery of protocol version
 *     0: answered with ZPP_EVERSION), then dies (_exit);
 *  2. a frame that does not unpack (the daemon closes the connection:
 *     "bad frame");
 *  3. the first bytes of a frame never finished, then dies;
 * and rank 0's next call fails within a few seconds naming rank 1 "without
 * a goodbye" — not after rejoin_timeout_ms (20 s), as a rank that left on
 * purpose would. Before, only a request that passed validation cleared the
 * Goodbye, so all three counted as deliberate leaves.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

/* Rank children return early holding their connection. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

enum after { AFTER_INVALID = 1, AFTER_BAD_FRAME = 2, AFTER_PARTIAL = 3 };

static zh_daemon g_d;
static const char *g_job;
static enum after g_after;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Rank 1's end: Goodbye, then what g_after says, on libzpp's socket. */
static void goodbye_then(zpp_conn *c)
{
    int fd = zpp_fd(c);
    Zpp__Goodbye g = ZPP__GOODBYE__INIT;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = 1000;
    req.body_case = ZPP__REQUEST__BODY_GOODBYE;
    req.goodbye = &g;
    ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
    if (g_after == AFTER_INVALID) {
        Zpp__StatusQuery q = ZPP__STATUS_QUERY__INIT;
        req.version = 0; /* not a version the daemon speaks */
        req.req_id = 1001;
        req.body_case = ZPP__REQUEST__BODY_STATUS;
        req.status = &q;
        ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
        Zpp__Reply *rep = NULL;
        ASSERT_EQ(zh_raw_reply(fd, 3000, &rep), 0); /* handled, refused */
        ASSERT_EQ(rep->req_id, 1001);
        ASSERT_EQ(rep->code, ZPP_EVERSION);
        zpp_reply_free(rep);
    } else if (g_after == AFTER_BAD_FRAME) {
        /* a 4-byte body of 0xff: a field tag that does not parse */
        static const uint8_t bad[8] = {0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff};
        ASSERT_EQ(zh_raw_send(fd, bad, sizeof bad, NULL, 0), 0);
        ASSERT_EQ(zh_raw_closed(fd, 3000), 1); /* the daemon hung up */
    } else {
        static const uint8_t part[2] = {0, 0}; /* half a frame header */
        ASSERT_EQ(zh_raw_send(fd, part, sizeof part, NULL, 0), 0);
        sleep_ms(200); /* read by the daemon before the end of the stream */
    }
    _exit(0); /* dies: no at-exit Goodbye */
}

static int rank_main(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    zpp_result res;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    ASSERT_EQ(zpp_barrier(c, &res), 0); /* both joined, the job runs */
    if (rank == 1)
        goodbye_then(c);
    sleep_ms(100);
    int64_t t0 = zh_now_ms();
    int rc = zpp_barrier(c, &res);
    int64_t dt = zh_now_ms() - t0;
    const char *m = zpp_last_error(c);
    printf("scenario %d: rank 0: %s '%s' after %lld ms\n", (int)g_after, zpp_err_name(rc), m,
           (long long)dt);
    /* 10 s: generous, and still half the 20 s a leave would wait */
    if (rc != ZPP_EABORTED || !strstr(m, "rank 1") || !strstr(m, "without a goodbye") || dt > 10000)
        return 2;
    zpp_close(c);
    return 0;
}

static void run(const char *job, enum after after)
{
    int codes[2];
    g_job = job;
    g_after = after;
    zh_run_ranks(2, rank_main, NULL, 40000, codes);
    ASSERT_EQ(codes[0], 0);
    ASSERT_EQ(codes[1], 0);
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start("rejoin_timeout_ms = 20000\n", &g_d), 0);
    run("bye-invalid", AFTER_INVALID);
    run("bye-bad-frame", AFTER_BAD_FRAME);
    run("bye-partial", AFTER_PARTIAL);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("3 passed, 0 failed\n");
    return 0;
}
