/*
 * test_form_async.c — a job whose communicators take long to form does not
 * hold up the daemon (issues 10, 11). The host backend's test hook
 * ZPPD_TEST_FORM_DELAY ("MS:COUNT", backend.h) makes the first COUNT jobs
 * opened report "forming" for MS ms, as NCCL communicators still
 * connecting do on the cuda backend; the job layer polls them from a timer.
 *  1. Daemon A, first job "slow" forming for SLOW_MS: its ranks' calls are
 *     queued; meanwhile another job ("fast") joins, registers and runs an
 *     all-gather, and an admin status and jobs query are answered — all
 *     well before SLOW_MS ends (the jobs query shows "slow" forming, and
 *     the slow calls are still pending then). Once formed, the slow calls
 *     complete with the right data.
 *  2. Daemon B, join_timeout_ms = 500, first two jobs delayed LATE_MS:
 *     "late" never forms in time: its queued calls end with ZPP_ETIMEDOUT
 *     naming join_timeout_ms; "gone": a rank disconnects while the job
 *     forms: the other rank's queued call ends with ZPP_EABORTED naming the
 *     rank that left; then a third job forms at once and runs, and the
 *     daemon stops cleanly (no leak of the half-formed jobs under ASan).
 * The timing bounds are loose on purpose (seconds against milliseconds).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0"; /* the test process; the daemons check their own */
}

#define COUNT 64u /* elements of the gathered tensor: a shard of COUNT / 2 per rank */
#define SHARD (COUNT / 2)
#define SLOW_MS 3000   /* daemon A: the first job forms this long */
#define PROMPT_MS 1500 /* what "promptly" means while it forms */
#define LATE_MS 4000   /* daemon B: longer than its join_timeout_ms */
#define HANG_LIMIT_S 120

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_form_async: hung\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

/* Two ranks of one job, each with an input and an output buffer. */
struct pair {
    zpp_conn *c[2];
    zpp_shm *in[2], *out[2];
    uint64_t in_id[2], out_id[2];
};

static int pair_open(const zh_daemon *d, const char *job, struct pair *p)
{
    memset(p, 0, sizeof *p);
    for (uint32_t r = 0; r < 2; r++) {
        if (zh_connect_join(d, job, r, 2, 1, &p->c[r]) || zpp_shm_create(COUNT * 4, &p->in[r]) ||
            zpp_shm_create(COUNT * 4, &p->out[r]) ||
            zpp_register_shm(p->c[r], p->in[r], 0, COUNT * 4, &p->in_id[r]) ||
            zpp_register_shm(p->c[r], p->out[r], 0, COUNT * 4, &p->out_id[r]))
            return -1;
        float *x = zpp_shm_ptr(p->in[r]);
        for (uint32_t i = 0; i < SHARD; i++)
            x[i] = (float)(r * 1000 + i);
    }
    return 0;
}

static void pair_close(struct pair *p)
{
    for (int r = 0; r < 2; r++) {
        if (p->c[r])
            zpp_close(p->c[r]);
        if (p->in[r])
            zpp_shm_destroy(p->in[r]);
        if (p->out[r])
            zpp_shm_destroy(p->out[r]);
        p->c[r] = NULL;
        p->in[r] = p->out[r] = NULL;
    }
}

static int submit_allgather(struct pair *p, int r, uint64_t *req)
{
    zpp_coll ag;
    zpp_coll_init(&ag, ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
    ag.input = (zpp_bufref){p->in_id[r], 0};
    ag.output = (zpp_bufref){p->out_id[r], 0};
    return zpp_submit(p->c[r], &ag, req);
}

/* Every rank's output holds rank 0's shard, then rank 1's. */
static int allgather_ok(const struct pair *p)
{
    for (int r = 0; r < 2; r++) {
        const float *y = zpp_shm_ptr(p->out[r]);
        for (uint32_t q = 0; q < 2; q++)
            for (uint32_t i = 0; i < SHARD; i++)
                if (y[q * SHARD + i] != (float)(q * 1000 + i))
                    return 0;
    }
    return 1;
}

/* Both ranks submit an all-gather, wait for it, and check it: 1 if all
 * went well. */
static int allgather_runs(struct pair *p)
{
    uint64_t req[2];
    for (int r = 0; r < 2; r++)
        if (submit_allgather(p, r, &req[r]) != 0)
            return 0;
    for (int r = 0; r < 2; r++)
        if (zpp_wait(p->c[r], req[r], NULL) != 0)
            return 0;
    return allgather_ok(p);
}

static void test_others_served_while_a_job_forms(void)
{
    zh_daemon d;
    char buf[16384];
    setenv("ZPPD_TEST_FORM_DELAY", "3000:1", 1);
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    unsetenv("ZPPD_TEST_FORM_DELAY");

    struct pair slow, fast;
    uint64_t sreq[2];
    ASSERT_EQ(pair_open(&d, "slow", &slow), 0); /* both joined: forming from here */
    int64_t t0 = zh_now_ms();
    for (int r = 0; r < 2; r++)
        ASSERT_EQ(submit_allgather(&slow, r, &sreq[r]), 0);

    /* Another tenant-job joins, registers and runs meanwhile. */
    ASSERT_EQ(pair_open(&d, "fast", &fast), 0);
    ASSERT(allgather_runs(&fast));
    int64_t t_fast = zh_now_ms() - t0;

    /* Admin queries are answered meanwhile too. */
    zpp_conn *adm;
    ASSERT_EQ(zpp_connect(d.socket, &adm), 0);
    ASSERT_EQ(zpp_admin_status_json(adm, buf, sizeof buf), 0);
    ASSERT_EQ(zpp_admin_jobs_json(adm, buf, sizeof buf), 0);
    int64_t t_admin = zh_now_ms() - t0;
    printf("timing: fast job done %lld ms, admin answered %lld ms after the slow job began "
           "forming (%d ms)\n",
           (long long)t_fast, (long long)t_admin, SLOW_MS);
    ASSERT_LT(t_admin, PROMPT_MS);
    ASSERT_CONTAINS(buf, "\"slow\"");
    ASSERT_CONTAINS(buf, "forming");
    /* Still forming, so its calls have not run. */
    ASSERT_EQ(zpp_test(slow.c[0], sreq[0], NULL), ZPP_EBUSY);

    for (int r = 0; r < 2; r++) {
        int rc = zpp_wait(slow.c[r], sreq[r], NULL);
        if (rc)
            printf("slow rank %d: %s %s\n", r, zpp_err_name(rc), zpp_last_error(slow.c[r]));
        ASSERT_EQ(rc, 0);
    }
    int64_t t_slow = zh_now_ms() - t0;
    printf("timing: the slow job's queued call done %lld ms after it began forming\n",
           (long long)t_slow);
    ASSERT_GE(t_slow, SLOW_MS / 2); /* it did wait for the job to form */
    ASSERT(allgather_ok(&slow));
    ASSERT(zh_daemon_log_contains(&d, "communicators forming"));
    ASSERT(zh_daemon_log_contains(&d, "communicators ready"));

    zpp_close(adm);
    pair_close(&slow);
    pair_close(&fast);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

static void test_formation_deadline_and_leaving_rank(void)
{
    zh_daemon d;
    setenv("ZPPD_TEST_FORM_DELAY", "4000:2", 1);
    ASSERT_EQ(zh_daemon_start("join_timeout_ms = 500\n", &d), 0);
    unsetenv("ZPPD_TEST_FORM_DELAY");

    /* "late": not ready within join_timeout_ms. */
    struct pair late;
    uint64_t req[2];
    ASSERT_EQ(pair_open(&d, "late", &late), 0);
    int64_t t0 = zh_now_ms();
    for (int r = 0; r < 2; r++)
        ASSERT_EQ(submit_allgather(&late, r, &req[r]), 0);
    for (int r = 0; r < 2; r++) {
        int rc = zpp_wait(late.c[r], req[r], NULL);
        printf("late rank %d: %s %s\n", r, zpp_err_name(rc), zpp_last_error(late.c[r]));
        ASSERT_EQ(rc, ZPP_ETIMEDOUT);
        ASSERT_CONTAINS(zpp_last_error(late.c[r]), "not ready within 500 ms (join_timeout_ms)");
    }
    int64_t t_late = zh_now_ms() - t0;
    printf("timing: the late job failed %lld ms after it began forming (deadline 500)\n",
           (long long)t_late);
    ASSERT_LT(t_late, LATE_MS - 1000); /* the deadline ended it, not the hook */
    pair_close(&late);

    /* "gone": rank 0 disconnects while the job forms. */
    struct pair gone;
    uint64_t greq;
    ASSERT_EQ(pair_open(&d, "gone", &gone), 0);
    ASSERT_EQ(submit_allgather(&gone, 1, &greq), 0);
    zpp_close(gone.c[0]);
    gone.c[0] = NULL;
    int rc = zpp_wait(gone.c[1], greq, NULL);
    printf("gone rank 1: %s %s\n", zpp_err_name(rc), zpp_last_error(gone.c[1]));
    ASSERT_EQ(rc, ZPP_EABORTED);
    ASSERT_CONTAINS(zpp_last_error(gone.c[1]), "rank 0");
    pair_close(&gone);

    /* The daemon goes on: a new job forms at once and runs. */
    struct pair after;
    ASSERT_EQ(pair_open(&d, "after", &after), 0);
    ASSERT(allgather_runs(&after));
    pair_close(&after);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(HANG_LIMIT_S);
    test_others_served_while_a_job_forms();
    test_formation_deadline_and_leaving_rank();
    printf("test_form_async: ok\n");
    return 0;
}
