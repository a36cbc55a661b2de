/*
 * test_rejoin.c — a rank that leaves between calls may come back.
 *
 * 1. Rank 1 of a 2-rank job closes its connection while nothing is
 *    pending, reconnects, says Hello for the same rank, registers new
 *    buffers and goes on: its calls continue the job's numbering (the
 *    HelloReply's next_seq), an exact all-gather gives the right bytes, and
 *    the hpZ slices stored before it left are still there (the job and its
 *    state outlived the client's connection).
 * 2. With rejoin_timeout_ms = 500, a rank that leaves and never comes back
 *    fails its peer's next call with an error naming it, within about the
 *    timeout.
 * 3. A job still forming: rank 0 joins and leaves before rank 1 has
 *    joined. Rank 1 joins that job (its place kept), and its first call
 *    fails naming rank 0 within about rejoin_timeout_ms (700), not after
 *    call_timeout_ms (the default five minutes: before, the job had ended
 *    and rank 1 formed a new one that waited for rank 0).
 * 4. The same, but a new connection takes rank 0's place before rank 1
 *    joins: the job forms with it and an exact all-gather runs.
 * 5. A Goodbye counts only as the last request (rejoin_timeout_ms 20000):
 *    rank 1 sends a Goodbye, then a StatusQuery, then dies (_exit): rank
 *    0's next call fails within a few seconds naming rank 1 "without a
 *    goodbye", not after the rejoin timeout.
 */
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

/* Rank children return early holding their connection and memory. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 1000u

static zh_daemon g_d;
static const char *g_job;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct bufs {
    zpp_shm *in, *out, *hpz;
    uint64_t in_id, out_id, hpz_id;
};

static void make_bufs(zpp_conn *c, int rank, struct bufs *b)
{
    size_t shard = COUNT / 2 * sizeof(float), full = COUNT * sizeof(float);
    ASSERT_EQ(zpp_shm_create(shard, &b->in), 0);
    ASSERT_EQ(zpp_shm_create(full, &b->out), 0);
    ASSERT_EQ(zpp_shm_create(full, &b->hpz), 0);
    float *in = zpp_shm_ptr(b->in);
    for (uint32_t i = 0; i < COUNT / 2; i++)
        in[i] = (float)(rank * 10000 + (int)i);
    ASSERT_EQ(zpp_register_shm(c, b->in, 0, shard, &b->in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, b->out, 0, full, &b->out_id), 0);
    ASSERT_EQ(zpp_register_shm(c, b->hpz, 0, full, &b->hpz_id), 0);
}

static void check_gathered(const float *out)
{
    for (uint32_t i = 0; i < COUNT; i++) {
        uint32_t r = i / (COUNT / 2), k = i % (COUNT / 2);
        ASSERT_EQ((int)out[i], (int)(r * 10000 + k));
    }
}

static int rejoin_rank(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    struct bufs b;
    zpp_result res;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    make_bufs(c, rank, &b);
    /* call 1: an exact all-gather that keeps the hpZ slice under "w" */
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
    call.input = (zpp_bufref){b.in_id, 0};
    call.output = (zpp_bufref){b.out_id, 0};
    call.hpz_key = "w";
    ASSERT_EQ(zpp_collective(c, &call, &res), 0);
    ASSERT_EQ(res.seq, 1);
    check_gathered(zpp_shm_ptr(b.out));
    ASSERT_EQ(zpp_barrier(c, &res), 0); /* call 2: both are past call 1 */
    if (rank == 1) {
        /* leave between calls, come back on a new connection */
        zpp_close(c);
        sleep_ms(100);
        if (zh_connect_join(&g_d, g_job, 1, 2, 1, &c) != 0) {
            fprintf(stderr, "rank 1: rejoin refused\n");
            return 2;
        }
        make_bufs(c, rank, &b);
    } else {
        sleep_ms(400); /* rank 1 is away, then back */
    }
    /* call 3 on both: the rejoined rank continues the numbering */
    memset(zpp_shm_ptr(b.out), 0, COUNT * sizeof(float));
    ASSERT_EQ(zpp_allgather(c, (zpp_bufref){b.in_id, 0}, (zpp_bufref){b.out_id, 0}, COUNT,
                            ZPP_FP32, &res),
              0);
    ASSERT_EQ(res.seq, 3);
    check_gathered(zpp_shm_ptr(b.out));
    /* call 4: the hpZ slices stored in call 1 survived the reconnect */
    ASSERT_EQ(zpp_hpz_gather(c, (zpp_bufref){b.hpz_id, 0}, COUNT, ZPP_FP32, "w", &res), 0);
    ASSERT_EQ(res.bytes_inter, 0);
    check_gathered(zpp_shm_ptr(b.hpz));
    zpp_close(c);
    return 0;
}

/* `who`'s next call (a barrier) on c must fail with ZPP_EABORTED, its
 * message holding both needles, within max_ms. 0, or 2 after saying why. */
static int barrier_aborts(zpp_conn *c, const char *who, const char *a, const char *b,
                          int64_t max_ms)
{
    zpp_result res;
    int64_t t0 = zh_now_ms();
    int rc = zpp_barrier(c, &res);
    int64_t dt = zh_now_ms() - t0;
    const char *m = zpp_last_error(c);
    if (rc != ZPP_EABORTED || !strstr(m, a) || !strstr(m, b) || dt > max_ms) {
        fprintf(stderr, "%s: got %s (%s) after %lld ms\n", who, zpp_err_name(rc), m, (long long)dt);
        return 2;
    }
    printf("%s: '%s' after %lld ms\n", who, m, (long long)dt);
    return 0;
}

/* Rank `rank` of the job joined, past a first barrier with the other;
 * NULL if the join failed. */
static zpp_conn *joined(int rank)
{
    zpp_conn *c;
    zpp_result res;
    if (zh_connect_join(&g_d, g_job, (uint32_t)rank, 2, 1, &c) != 0)
        return NULL;
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    return c;
}

static int never_back_rank(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c = joined(rank);
    if (!c)
        return 1;
    if (rank == 1) {
        zpp_close(c);
        return 0;
    }
    sleep_ms(100);
    if (barrier_aborts(c, "rank 0", "rank 1", "rejoin", 3000))
        return 2;
    zpp_close(c);
    return 0;
}

/* Scenario 3: rank 0 leaves a forming job for good. */
static int left_forming_rank(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (rank == 0) {
        if (zh_connect_join(&g_d, g_job, 0, 2, 1, &c) != 0)
            return 1;
        zpp_close(c); /* before rank 1 joins */
        return 0;
    }
    sleep_ms(300);
    if (zh_connect_join(&g_d, g_job, 1, 2, 1, &c) != 0)
        return 1;
    if (barrier_aborts(c, "rank 1", "rank 0 left before every rank", "rejoin_timeout_ms", 4000))
        return 2;
    zpp_close(c);
    return 0;
}

/* Scenario 4: rank 0 leaves a forming job and a new connection takes its
 * place before rank 1 comes. */
static int back_forming_rank(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    zpp_result res;
    struct bufs b;
    if (rank == 0) {
        if (zh_connect_join(&g_d, g_job, 0, 2, 1, &c) != 0)
            return 1;
        zpp_close(c);
        sleep_ms(100);
        if (zh_connect_join(&g_d, g_job, 0, 2, 1, &c) != 0) {
            fprintf(stderr, "rank 0: rejoin refused\n");
            return 2;
        }
    } else {
        sleep_ms(400);
        if (zh_connect_join(&g_d, g_job, 1, 2, 1, &c) != 0)
            return 1;
    }
    make_bufs(c, rank, &b);
    ASSERT_EQ(zpp_allgather(c, (zpp_bufref){b.in_id, 0}, (zpp_bufref){b.out_id, 0}, COUNT,
                            ZPP_FP32, &res),
              0);
    ASSERT_EQ(res.seq, 1);
    check_gathered(zpp_shm_ptr(b.out));
    zpp_close(c);
    return 0;
}

/* Scenario 5: a Goodbye followed by more requests, then a death. */
static int early_goodbye_rank(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c = joined(rank);
    if (!c)
        return 1;
    if (rank == 1) { /* by hand on libzpp's socket: Goodbye, then a query */
        int fd = zpp_fd(c);
        Zpp__Goodbye g = ZPP__GOODBYE__INIT;
        Zpp__Request req = ZPP__REQUEST__INIT;
        req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
        req.req_id = 1000;
        req.body_case = ZPP__REQUEST__BODY_GOODBYE;
        req.goodbye = &g;
        ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
        Zpp__StatusQuery q = ZPP__STATUS_QUERY__INIT;
        req.req_id = 1001;
        req.body_case = ZPP__REQUEST__BODY_STATUS;
        req.status = &q;
        ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
        Zpp__Reply *rep = NULL;
        ASSERT_EQ(zh_raw_reply(fd, 3000, &rep), 0);
        ASSERT_EQ(rep->req_id, 1001);
        zpp_reply_free(rep);
        _exit(0); /* dies: no at-exit Goodbye */
    }
    sleep_ms(100);
    if (barrier_aborts(c, "rank 0", "rank 1", "without a goodbye", 3000))
        return 2;
    zpp_close(c);
    return 0;
}

/* Runs job `job` with two ranks of fn on the running daemon; both must
 * end well. */
static void run_job(const char *job, zh_rank_fn fn)
{
    int codes[2];
    g_job = job;
    zh_run_ranks(2, fn, NULL, 20000, codes);
    ASSERT_EQ(codes[0], 0);
    ASSERT_EQ(codes[1], 0);
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start("rejoin_timeout_ms = 5000\n", &g_d), 0);
    run_job("rejoin-1", rejoin_rank);
    ASSERT(zh_daemon_log_contains(&g_d, "rank rejoined"));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);

    ASSERT_EQ(zh_daemon_start("rejoin_timeout_ms = 500\n", &g_d), 0);
    run_job("rejoin-2", never_back_rank);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);

    ASSERT_EQ(zh_daemon_start("rejoin_timeout_ms = 700\n", &g_d), 0);
    run_job("rejoin-3", left_forming_rank);
    ASSERT(zh_daemon_log_contains(&g_d, "it may rejoin\" job=rejoin-3 state=forming"));
    run_job("rejoin-4", back_forming_rank);
    ASSERT(zh_daemon_log_contains(&g_d, "rank rejoined"));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);

    ASSERT_EQ(zh_daemon_start("rejoin_timeout_ms = 20000\n", &g_d), 0);
    run_job("rejoin-5", early_goodbye_rank);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("1 passed, 0 failed\n");
    return 0;
}
