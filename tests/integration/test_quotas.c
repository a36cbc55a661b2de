/*
 * test_quotas.c — per-tenant quotas refuse with ZPP_ELIMIT and a message
 * naming the quota key:
 *  - tenant_max_sessions = 2: a job of 2 ranks joins; a third rank session
 *    of the same tenant (another job) is refused ("tenant_max_sessions");
 *  - after a SIGHUP that sets tenant_max_sessions = 0 and
 *    tenant_max_jobs = 1, a second job is refused ("tenant_max_jobs");
 *    once the first job's ranks left, the second job is created;
 *  - store_budget_per_tenant = 2K: a qwZ all-gather that would keep 4 KiB
 *    of hpZ slices fails with ZPP_ELIMIT and leaves nothing in the store;
 *    the same call without a key runs;
 *  - tenant_max_device_memory = 1: host jobs hold no device memory (0), so
 *    it refuses nothing there.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 1024u

static zh_daemon g_d;

static void append_conf(const char *lines)
{
    FILE *f = fopen(g_d.conf, "a");
    ASSERT(f != NULL);
    fputs(lines, f);
    fclose(f);
}

static int join_raw(const char *job, uint32_t rank, uint32_t world, zpp_conn **c)
{
    return zh_join_rc(&g_d, job, rank, world, c);
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start("tenant_max_sessions = 2\nstore_budget_per_tenant = 2K\n"
                              "tenant_max_device_memory = 1\n",
                              &g_d),
              0);
    zpp_conn *a[2], *x = NULL;
    zpp_shm *in[2], *o[2];
    uint64_t in_id[2], out_id[2], req[2];
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(join_raw("qa", (uint32_t)r, 2, &a[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &in[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &o[r]), 0);
        ASSERT_EQ(zpp_register_shm(a[r], in[r], 0, COUNT * 4, &in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(a[r], o[r], 0, COUNT * 4, &out_id[r]), 0);
    }
    ASSERT_EQ(join_raw("qb", 0, 1, &x), ZPP_ELIMIT);
    ASSERT_CONTAINS(zpp_last_error(x), "tenant_max_sessions = 2");
    zpp_close(x);

    /* hpZ bytes: 1024 fp32 elements keep 4 KiB of slices > 2 KiB. */
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < 2; r++) {
            zpp_coll q;
            zpp_coll_init(&q, ZPP_OP_QWZ_ALLGATHER, ZPP_FP32, COUNT);
            q.bits = 8;
            q.hpz_key = pass == 0 ? "too-big" : NULL;
            q.input = (zpp_bufref){in_id[r], 0};
            q.output = (zpp_bufref){out_id[r], 0};
            ASSERT_EQ(zpp_submit(a[r], &q, &req[r]), 0);
        }
        for (int r = 0; r < 2; r++) {
            int rc = zpp_wait(a[r], req[r], NULL);
            printf("qwz pass %d rank %d: %s %s\n", pass, r, zpp_err_name(rc),
                   rc ? zpp_last_error(a[r]) : "");
            ASSERT_EQ(rc, pass == 0 ? ZPP_ELIMIT : 0);
            if (pass == 0)
                ASSERT_CONTAINS(zpp_last_error(a[r]), "budget of tenant 0 exceeded");
        }
    }
    static char out[8192];
    char *store[] = {ZPPCTL_BIN, "-s", g_d.socket, "--json", "store", NULL};
    ASSERT_EQ(zh_run_capture(store, 10000, out, sizeof out), 0);
    ASSERT_CONTAINS(out, "\"bytes\":0,\"entries\":0");

    /* Reload: sessions unlimited, one job per tenant. */
    append_conf("tenant_max_sessions = 0\ntenant_max_jobs = 1\n");
    ASSERT_EQ(kill(g_d.pid, SIGHUP), 0);
    int64_t deadline = zh_now_ms() + 5000;
    while (!zh_daemon_log_contains(&g_d, "configuration reloaded") && zh_now_ms() < deadline)
        usleep(20000);
    ASSERT(zh_daemon_log_contains(&g_d, "configuration reloaded"));
    ASSERT_EQ(join_raw("qb", 0, 1, &x), ZPP_ELIMIT);
    ASSERT_CONTAINS(zpp_last_error(x), "tenant_max_jobs = 1");
    zpp_close(x);

    for (int r = 0; r < 2; r++) {
        zpp_close(a[r]);
        zpp_shm_destroy(in[r]);
        zpp_shm_destroy(o[r]);
    }
    /* The job is freed once the daemon has seen both ranks leave. */
    int rc = -1;
    deadline = zh_now_ms() + 5000;
    while (zh_now_ms() < deadline) {
        rc = join_raw("qb", 0, 1, &x);
        if (rc == 0)
            break;
        zpp_close(x);
        x = NULL;
        usleep(50000);
    }
    ASSERT_EQ(rc, 0);
    zpp_close(x);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_quotas: ok\n");
    return 0;
}
