/*
 * test_job_edges.c — edges of a job's life (daemon/job.c) that the other
 * tests do not reach:
 *  1. tenant_max_sessions = 2 holds for a rank that rejoins: rank 1 of job
 *     "ra" leaves between calls, the tenant's job "rb" takes the free
 *     session, and rank 1's rejoin is refused naming the key (it was let in:
 *     3 rank sessions at once).
 *  2. A call running on the host backend's worker when its job is aborted
 *     (rank 1 submits a large reduce-scatter and closes at once): the others get
 *     ZPP_EABORTED naming rank 1, and zppctl's recent calls show that call
 *     failed with the cause, not "running" forever.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

/* Connections and shared memory are left open on a failed check. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define BIG (1u << 23) /* fp32 elements: a 32 MiB reduce-scatter input per rank */

static zh_daemon g_d;

static int join(const char *job, uint32_t rank, uint32_t world, zpp_conn **c)
{
    return zh_join_rc(&g_d, job, rank, world, c);
}

static void wait_log(const char *needle)
{
    int64_t deadline = zh_now_ms() + 5000;
    while (!zh_daemon_log_contains(&g_d, needle) && zh_now_ms() < deadline)
        usleep(10000);
    ASSERT(zh_daemon_log_contains(&g_d, needle));
}

static void barrier2(zpp_conn *a, zpp_conn *b)
{
    zpp_coll q;
    uint64_t ra, rb;
    zpp_coll_init(&q, ZPP_OP_BARRIER, ZPP_FP32, 0);
    ASSERT_EQ(zpp_submit(a, &q, &ra), 0);
    ASSERT_EQ(zpp_submit(b, &q, &rb), 0);
    ASSERT_EQ(zpp_wait(a, ra, NULL), 0);
    ASSERT_EQ(zpp_wait(b, rb, NULL), 0);
}

static void rejoin_quota(void)
{
    ASSERT_EQ(zh_daemon_start("tenant_max_sessions = 2\nrejoin_timeout_ms = 10000\n", &g_d), 0);
    zpp_conn *a[2], *x, *y;
    for (uint32_t r = 0; r < 2; r++)
        ASSERT_EQ(join("ra", r, 2, &a[r]), 0);
    barrier2(a[0], a[1]); /* running */
    zpp_close(a[1]);
    wait_log("rank left: it may rejoin");
    ASSERT_EQ(join("rb", 0, 1, &x), 0); /* 2 rank sessions: ra/0, rb/0 */
    int rc = join("ra", 1, 2, &y);
    ASSERT_EQ(rc, ZPP_ELIMIT);
    ASSERT_CONTAINS(zpp_last_error(y), "tenant_max_sessions = 2");
    zpp_close(y);
    zpp_close(x);
    zpp_close(a[0]);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
}

static void abort_while_running(void)
{
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    zpp_conn *a[2], *adm;
    zpp_shm *in[2], *out[2];
    uint64_t in_id[2], out_id[2], req[2];
    for (uint32_t r = 0; r < 2; r++) {
        ASSERT_EQ(join("run", r, 2, &a[r]), 0);
        ASSERT_EQ(zpp_shm_create(BIG * 4, &in[r]), 0);
        ASSERT_EQ(zpp_shm_create(BIG * 4, &out[r]), 0);
        ASSERT_EQ(zpp_register_shm(a[r], in[r], 0, BIG * 4, &in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(a[r], out[r], 0, BIG * 4, &out_id[r]), 0);
    }
    barrier2(a[0], a[1]); /* call 1 */
    zpp_coll q;
    zpp_coll_init(&q, ZPP_OP_REDUCE_SCATTER, ZPP_FP32, BIG);
    for (int r = 0; r < 2; r++) {
        q.input = (zpp_bufref){in_id[r], 0};
        q.output = (zpp_bufref){out_id[r], 0};
        ASSERT_EQ(zpp_submit(a[r], &q, &req[r]), 0); /* call 2 */
        usleep(50000);                               /* rank 0's part is in before rank 1's */
    }
    zpp_close(a[1]); /* while call 2 runs on the worker */
    int rc = zpp_wait(a[0], req[0], NULL);
    printf("rank 0: %s %s\n", zpp_err_name(rc), rc ? zpp_last_error(a[0]) : "");
    wait_log("job aborted");
    static char buf[65536];
    ASSERT_EQ(zpp_connect(g_d.socket, &adm), 0);
    ASSERT_EQ(zpp_admin_jobs_json(adm, buf, sizeof buf), 0);
    printf("jobs: %s\n", buf);
    ASSERT_EQ(rc, ZPP_EABORTED);
    ASSERT_CONTAINS(zpp_last_error(a[0]), "rank 1");
    char *rec = strstr(buf, "\"seq\":2");
    ASSERT(rec != NULL); /* call 2 ran: it has a record */
    ASSERT(strstr(rec, "\"running\"") == NULL);
    ASSERT_CONTAINS(rec, "rank 1");
    zpp_close(adm);
    zpp_close(a[0]);
    for (int r = 0; r < 2; r++) {
        zpp_shm_destroy(in[r]);
        zpp_shm_destroy(out[r]);
    }
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
}

int main(void)
{
    rejoin_quota();
    abort_while_running();
    printf("2 passed, 0 failed\n");
    return 0;
}
