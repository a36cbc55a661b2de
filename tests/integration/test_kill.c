/*
 * test_kill.c — a rank that dies aborts its job, and only its job:
 *  1. 4 ranks; ranks 0, 1, 3 sit in an all-gather that rank 2 never submits;
 *     rank 2 is SIGKILLed: the others get ZPP_EABORTED within a few seconds
 *     with a message naming rank 2.
 *  2. 4 ranks; rank 2 submits a large qgZ and is SIGKILLed right away (the
 *     call may be running with its buffers mapped): the others' next
 *     failing call is ZPP_EABORTED naming rank 2, the daemon survives.
 *  3. A new job on the same daemon completes.
 *  4. call_timeout_ms = 1000 and one rank never submits: the others get an
 *     error naming the missing rank within ~2 s (docs/protocol.md: the
 *     call ends with ZPP_ETIMEDOUT on the ranks that submitted it).
 *  5. Rank 0 of a 2-rank job that never forms (rank 1 never comes) queues
 *     a call and dies: its session, buffers and call are freed (the
 *     session count goes back, the daemon exits clean under LSan).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
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

#define BIG_COUNT (1u << 21)

static zh_daemon g_d;
static const char *g_job;

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

typedef struct {
    zpp_shm *in, *out;
    uint64_t in_id, out_id;
} bufs_t;

static void make_bufs(zpp_conn *c, size_t bytes, bufs_t *b)
{
    ASSERT_EQ(zpp_shm_create(bytes, &b->in), 0);
    ASSERT_EQ(zpp_shm_create(bytes, &b->out), 0);
    ASSERT_EQ(zpp_register_shm(c, b->in, 0, bytes, &b->in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, b->out, 0, bytes, &b->out_id), 0);
}

static int expect_abort_naming(zpp_conn *c, int rc, int64_t t0, const char *who, int rank)
{
    int64_t dt = zh_now_ms() - t0;
    if (rc != ZPP_EABORTED || !strstr(zpp_last_error(c), who)) {
        fprintf(stderr, "rank %d: got %s (%s), expected ZPP_EABORTED naming %s\n", rank,
                zpp_err_name(rc), zpp_last_error(c), who);
        return 1;
    }
    if (dt > 5000) {
        fprintf(stderr, "rank %d: the abort took %lld ms\n", rank, (long long)dt);
        return 1;
    }
    return 0;
}

/* Scenario 1: rank 2 never submits, then dies. */
static int rank_never_submits(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 4, 2, &c) != 0)
        return 1;
    bufs_t b;
    make_bufs(c, 4096, &b);
    zpp_result res;
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    if (rank == 2) {
        sleep_ms(300); /* the others are waiting in the all-gather */
        raise(SIGKILL);
    }
    int64_t t0 = zh_now_ms();
    int rc =
        zpp_allgather(c, (zpp_bufref){b.in_id, 0}, (zpp_bufref){b.out_id, 0}, 1000, ZPP_FP32, &res);
    /* The kill comes ~300 ms after t0: allow for that. */
    return expect_abort_naming(c, rc, t0, "rank 2", rank);
}

/* Scenario 2: rank 2 dies with a big call submitted. */
static int rank_dies_midway(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 4, 2, &c) != 0)
        return 1;
    bufs_t b;
    size_t bytes = (size_t)BIG_COUNT * 4;
    make_bufs(c, bytes, &b);
    float *in = zpp_shm_ptr(b.in);
    for (size_t i = 0; i < BIG_COUNT; i++)
        in[i] = (float)(i % 97) - 48.0f;
    zpp_result res;
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_QGZ_REDUCE_SCATTER, ZPP_FP32, BIG_COUNT);
    call.bits = 4;
    call.input = (zpp_bufref){b.in_id, 0};
    call.output = (zpp_bufref){b.out_id, 0};
    if (rank == 2) {
        uint64_t req;
        ASSERT_EQ(zpp_submit(c, &call, &req), 0);
        sleep_ms(2);
        raise(SIGKILL);
    }
    int64_t t0 = zh_now_ms();
    for (int k = 0; k < 3; k++) {
        int rc = zpp_collective(c, &call, &res);
        if (rc != 0)
            return expect_abort_naming(c, rc, t0, "rank 2", rank);
    }
    fprintf(stderr, "rank %d: three calls succeeded without rank 2\n", rank);
    return 1;
}

static int rank_new_job(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 4, 2, &c) != 0)
        return 1;
    bufs_t b;
    make_bufs(c, 4096, &b);
    float *in = zpp_shm_ptr(b.in);
    for (int i = 0; i < 250; i++)
        in[i] = (float)(rank * 250 + i);
    zpp_result res;
    int rc =
        zpp_allgather(c, (zpp_bufref){b.in_id, 0}, (zpp_bufref){b.out_id, 0}, 1000, ZPP_FP32, &res);
    if (rc != 0) {
        fprintf(stderr, "rank %d: new job: %s: %s\n", rank, zpp_err_name(rc), zpp_last_error(c));
        return 1;
    }
    const float *out = zpp_shm_ptr(b.out);
    for (int i = 0; i < 1000; i++)
        ASSERT_EQ(out[i], (float)i);
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    zpp_close(c);
    return 0;
}

/* Scenario 4: rank 1 of 3 never submits; call_timeout_ms = 1000. */
static int rank_timeout(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 3, 1, &c) != 0)
        return 1;
    zpp_result res;
    if (rank == 1) {
        sleep_ms(4000);
        zpp_close(c);
        return 0;
    }
    int64_t t0 = zh_now_ms();
    int rc = zpp_barrier(c, &res);
    int64_t dt = zh_now_ms() - t0;
    const char *msg = zpp_last_error(c);
    printf("rank %d: timeout after %lld ms: %s: %s\n", rank, (long long)dt, zpp_err_name(rc), msg);
    if (rc == 0 || !strstr(msg, "1") || !strstr(msg, "timed out")) {
        fprintf(stderr, "rank %d: expected a time-out naming rank 1, got %s: %s\n", rank,
                zpp_err_name(rc), msg);
        return 1;
    }
    if (dt < 900 || dt > 2500) {
        fprintf(stderr, "rank %d: time-out after %lld ms (configured 1000)\n", rank, (long long)dt);
        return 1;
    }
    if (rc != ZPP_ETIMEDOUT) {
        fprintf(stderr, "rank %d: time-out code %s, docs/protocol.md says ZPP_ETIMEDOUT\n", rank,
                zpp_err_name(rc));
        return 2;
    }
    return 0;
}

/* Scenario 5: rank 0 alone in a forming job queues an all-gather, dies. */
static int rank_alone_dies(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    bufs_t b;
    make_bufs(c, 4096, &b);
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_ALLGATHER, ZPP_FP32, 1000);
    call.input = (zpp_bufref){b.in_id, 0};
    call.output = (zpp_bufref){b.out_id, 0};
    uint64_t req;
    ASSERT_EQ(zpp_submit(c, &call, &req), 0);
    sleep_ms(200); /* the call is queued in the daemon */
    raise(SIGKILL);
    return 1;
}

/* Waits up to 5 s for `zppd status` to count n sessions (the asking one
 * included). */
static int sessions_become(int n)
{
    char want[32], buf[8192] = "";
    snprintf(want, sizeof want, "\"sessions\":%d,", n);
    for (int64_t end = zh_now_ms() + 5000; zh_now_ms() < end; usleep(20000)) {
        zpp_conn *c;
        if (zpp_connect(g_d.socket, &c) != 0)
            continue;
        int rc = zpp_admin_status_json(c, buf, sizeof buf);
        zpp_close(c);
        if (rc == 0 && strstr(buf, want))
            return 1;
    }
    fprintf(stderr, "test_kill: status never counted %d sessions: %s\n", n, buf);
    return 0;
}

/* Waits up to 5 s for the daemon to log how job `job`'s backend state
 * ended ("graceful", "abort" or "none"); returns that word's first letter,
 * or 0 if the job was not freed in time. */
static int freed_how(const char *job)
{
    char needle[160];
    static const char *const how[] = {"graceful", "abort", "none"};
    for (int64_t end = zh_now_ms() + 5000; zh_now_ms() < end; usleep(20000))
        for (int i = 0; i < 3; i++) {
            snprintf(needle, sizeof needle, "msg=\"job freed\" job=%s uid=%u backend=%s", job,
                     (unsigned)getuid(), how[i]);
            if (zh_daemon_log_contains(&g_d, needle))
                return how[i][0];
        }
    return 0;
}

int main(void)
{
    int codes[4];
    ASSERT_EQ(zh_daemon_start("virtual_nodes = 0\n", &g_d), 0);

    g_job = "kill-1";
    zh_run_ranks(4, rank_never_submits, NULL, 30000, codes);
    ASSERT_EQ(codes[0], 0);
    ASSERT_EQ(codes[1], 0);
    ASSERT_EQ(codes[2], 128 + SIGKILL);
    ASSERT_EQ(codes[3], 0);
    ASSERT(zh_daemon_alive(&g_d));
    printf("test_kill: never-submitting rank killed: ok\n");

    g_job = "kill-2";
    zh_run_ranks(4, rank_dies_midway, NULL, 30000, codes);
    ASSERT_EQ(codes[0], 0);
    ASSERT_EQ(codes[1], 0);
    ASSERT_EQ(codes[2], 128 + SIGKILL);
    ASSERT_EQ(codes[3], 0);
    ASSERT(zh_daemon_alive(&g_d));
    printf("test_kill: rank killed mid-call: ok\n");

    /* An aborted job's backend state is aborted, never ended gracefully
     * (cuda: ncclCommAbort, not a finalize that would wait for the dead). */
    ASSERT(freed_how("kill-2") == 'a' || freed_how("kill-2") == 'n');

    g_job = "kill-new";
    ASSERT_EQ(zh_run_ranks(4, rank_new_job, NULL, 30000, NULL), 0);
    /* A job whose ranks all left after their calls ends gracefully. */
    ASSERT_EQ(freed_how("kill-new"), 'g');
    /* The first job's id is free again once its ranks are gone. */
    g_job = "kill-1";
    ASSERT_EQ(zh_run_ranks(4, rank_new_job, NULL, 30000, NULL), 0);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_kill: new jobs after the kills: ok\n");

    /* This daemon and these ranks never poll (busy_poll_us = 0, ZPP_SPIN_US
     * = 0): the sleeping paths stay covered, the other tests poll. */
    ASSERT_EQ(zh_daemon_start("call_timeout_ms = 1000\nbusy_poll_us = 0\n", &g_d), 0);
    setenv("ZPP_SPIN_US", "0", 1);
    g_job = "timeout";
    zh_run_ranks(3, rank_timeout, NULL, 30000, codes);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    if (codes[0] != 0 || codes[2] != 0) {
        fprintf(stderr, "test_kill: call time-out: rank 0 code %d, rank 2 code %d\n", codes[0],
                codes[2]);
        return 1;
    }
    printf("test_kill: call time-out: ok\n");

    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    g_job = "kill-forming";
    zh_run_ranks(1, rank_alone_dies, NULL, 30000, codes);
    ASSERT_EQ(codes[0], 128 + SIGKILL);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT(sessions_become(1));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_kill: rank alone in a forming job killed with a call queued: ok\n");
    printf("test_kill: ok\n");
    return 0;
}
