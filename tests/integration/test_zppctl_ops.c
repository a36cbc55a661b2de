/*
 * test_zppctl_ops.c — the operations commands of zppctl against a live
 * daemon (host backend):
 *  - `health` says ok (exit 0) on a fresh daemon;
 *  - with a 2-rank job that kept an hpZ key: `sessions` lists both rank
 *    sessions with their job, `store` the job's bytes, the entry and the
 *    per-tenant budget, `metrics` the Prometheus text with the job's calls;
 *  - `drain`: health turns "draining" (exit 4), a Hello for a new job gets
 *    ZPP_EDRAINING, the running job still runs calls, `drain --wait=1`
 *    exits 4 while it runs and `drain --wait=10` exits 0 once its ranks
 *    left; `drain --off` takes jobs again (health exit 0, a new job joins);
 *  - a caller that is neither root nor the daemon's uid cannot drain or
 *    read the metrics (exit 1, ZPP_EPERM) but may ask for health (run as root:
 *    needs setuid; that part is skipped otherwise);
 *  - usage errors exit 2 (an option the command does not take).
 */
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define N 2
#define COUNT 1024u
#define OTHER_UID 65534

static zh_daemon g_d;
static char g_out[1 << 17];

static int ctl(const char *a, const char *b, const char *c)
{
    return zh_zppctl(&g_d, g_out, sizeof g_out, a, b, c);
}

typedef struct {
    zpp_conn *c[N];
    zpp_shm *in[N], *out[N];
    uint64_t in_id[N], out_id[N];
} job_t;

static void job_join(job_t *j, const char *id)
{
    for (int r = 0; r < N; r++) {
        ASSERT_EQ(zh_connect_join(&g_d, id, (uint32_t)r, N, 1, &j->c[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &j->in[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &j->out[r]), 0);
        ASSERT_EQ(zpp_register_shm(j->c[r], j->in[r], 0, COUNT * 4, &j->in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(j->c[r], j->out[r], 0, COUNT * 4, &j->out_id[r]), 0);
    }
}

/* One call on every rank (submitted on all, then waited for). */
static void job_call(job_t *j, zpp_op_t op, const char *hpz_key)
{
    uint64_t req[N];
    for (int r = 0; r < N; r++) {
        zpp_coll call;
        zpp_coll_init(&call, op, ZPP_FP32, COUNT);
        call.bits = 8;
        call.hpz_key = hpz_key;
        call.input = (zpp_bufref){j->in_id[r], 0};
        call.output = (zpp_bufref){j->out_id[r], 0};
        ASSERT_EQ(zpp_submit(j->c[r], &call, &req[r]), 0);
    }
    for (int r = 0; r < N; r++) {
        int rc = zpp_wait(j->c[r], req[r], NULL);
        if (rc)
            fprintf(stderr, "rank %d: %s: %s\n", r, zpp_err_name(rc), zpp_last_error(j->c[r]));
        ASSERT_EQ(rc, 0);
    }
}

static void job_close(job_t *j)
{
    for (int r = 0; r < N; r++) {
        zpp_close(j->c[r]);
        zpp_shm_destroy(j->in[r]);
        zpp_shm_destroy(j->out[r]);
    }
}

/* As another uid: drain and metrics are refused, health answers. */
static int other_uid(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    if (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(OTHER_UID) != 0) {
        perror("other_uid: dropping privileges");
        return 10;
    }
    if (ctl("drain", NULL, NULL) != 1 || !strstr(g_out, "EPERM"))
        return 11;
    if (ctl("metrics", NULL, NULL) != 1 || !strstr(g_out, "EPERM"))
        return 12;
    if (ctl("health", NULL, NULL) != 4) /* the daemon is draining */
        return 13;
    if (ctl("sessions", "--json", NULL) != 0 || strstr(g_out, "\"uid\":0,"))
        return 14; /* sees only its own (uid 65534) session */
    return 0;
}

int main(void)
{
    int root = geteuid() == 0;
    char conf[256] = "store_budget_per_tenant = 1M\n";
    struct group *gr = root ? getgrgid(OTHER_UID) : NULL;
    if (gr)
        snprintf(conf + strlen(conf), sizeof conf - strlen(conf),
                 "socket_mode = 0660\nsocket_group = %s\n", gr->gr_name);
    ASSERT_EQ(zh_daemon_start(conf, &g_d), 0);
    if (gr)
        ASSERT_EQ(chmod(g_d.dir, 0711), 0);

    ASSERT_EQ(ctl("health", NULL, NULL), 0);
    ASSERT_CONTAINS(g_out, "ok");
    ASSERT_EQ(ctl("health", "--json", NULL), 0);
    ASSERT_CONTAINS(g_out, "{\"health\":\"ok\"");

    job_t a;
    job_join(&a, "ops-a");
    job_call(&a, ZPP_OP_QWZ_ALLGATHER, "w0");

    ASSERT_EQ(ctl("sessions", "--json", NULL), 0);
    ASSERT_CONTAINS(g_out,
                    "\"role\":\"rank\",\"tenant_label\":\"\",\"job_id\":\"ops-a\",\"rank\":0");
    ASSERT_CONTAINS(g_out, "\"job_id\":\"ops-a\",\"rank\":1");
    ASSERT_CONTAINS(g_out, "\"buffers\":2");
    /* the host backend's sessions meet no stream: no events, no flags */
    ASSERT_CONTAINS(g_out, "\"sync\":\"\"");
    ASSERT_EQ(ctl("sessions", NULL, NULL), 0);
    ASSERT_CONTAINS(g_out, "SESSION");
    ASSERT_CONTAINS(g_out, "SYNC");
    ASSERT_CONTAINS(g_out, "ops-a");

    ASSERT_EQ(ctl("store", "--json", NULL), 0);
    ASSERT_CONTAINS(g_out, "\"entries\":1");
    ASSERT_CONTAINS(g_out, "\"budget_per_tenant\":1048576");
    ASSERT_CONTAINS(g_out, "{\"job_id\":\"ops-a\",\"tenant_uid\":0,\"bytes\":4096}");
    ASSERT_EQ(ctl("store", NULL, NULL), 0);
    ASSERT_CONTAINS(g_out, "1 entries");
    ASSERT_CONTAINS(g_out, "ops-a");

    ASSERT_EQ(ctl("metrics", NULL, NULL), 0);
    ASSERT_CONTAINS(g_out, "# TYPE zppd_calls_total counter");
    ASSERT_CONTAINS(g_out, "zppd_calls_total{tenant=\"0\",op=\"qwz_allgather\",outcome=\"ok\"} 1");
    ASSERT_CONTAINS(g_out, "zppd_job_hpz_bytes{tenant=\"0\",job_id=\"ops-a\"} 4096");
    /* the same bytes per device (the budget is per device: each rank's
     * half on its own), and no shared replica */
    ASSERT_CONTAINS(g_out, "zppd_hpz_store_device_bytes{device=\"0\"} 2048");
    ASSERT_CONTAINS(g_out, "zppd_hpz_store_device_bytes{device=\"1\"} 2048");
    ASSERT_CONTAINS(g_out, "zppd_hpz_shared_replicas 0");
    ASSERT_CONTAINS(g_out, "zppd_hpz_shared_events_total{event=\"published\"} 0");

    /* Drain: no new jobs, the running one goes on. */
    ASSERT_EQ(ctl("drain", NULL, NULL), 0);
    ASSERT_CONTAINS(g_out, "draining");
    ASSERT_EQ(ctl("health", NULL, NULL), 4);
    ASSERT_CONTAINS(g_out, "draining");
    ASSERT_EQ(ctl("--json", "status", NULL), 0);
    ASSERT_CONTAINS(g_out, "\"draining\":true");
    ASSERT_CONTAINS(g_out, "\"running_jobs\":1");
    zpp_conn *late = NULL;
    ASSERT_EQ(zh_connect_join(&g_d, "ops-b", 0, N, 1, &late), ZPP_EDRAINING);
    job_call(&a, ZPP_OP_ALLGATHER, NULL);
    ASSERT_EQ(ctl("drain", "--wait=1", NULL), 4);
    ASSERT_CONTAINS(g_out, "1 running");

    if (gr) {
        int code = -1;
        zh_run_ranks(1, other_uid, NULL, 60000, &code);
        ASSERT_EQ(code, 0);
    } else {
        printf("test_zppctl_ops: not root: the other-uid checks are skipped\n");
    }

    job_close(&a);
    ASSERT_EQ(ctl("drain", "--wait=10", "--json"), 0);
    ASSERT_CONTAINS(g_out, "{\"draining\":true,\"running_jobs\":0}");
    ASSERT_EQ(ctl("drain", "--off", NULL), 0);
    ASSERT_EQ(ctl("health", NULL, NULL), 0);
    job_t b;
    job_join(&b, "ops-b");
    job_call(&b, ZPP_OP_ALLGATHER, NULL);
    job_close(&b);
    /* Both jobs ended well (their ranks left between calls): counted as
     * ended, not as aborts, once the daemon has seen b's ranks go. */
    for (int i = 0; i < 100; i++) {
        ASSERT_EQ(ctl("metrics", NULL, NULL), 0);
        if (strstr(g_out, "zppd_jobs_ended_total{tenant=\"0\"} 2"))
            break;
        usleep(50 * 1000);
    }
    ASSERT_CONTAINS(g_out, "# TYPE zppd_jobs_ended_total counter");
    ASSERT_CONTAINS(g_out, "zppd_jobs_ended_total{tenant=\"0\"} 2");
    ASSERT(!strstr(g_out, "zppd_job_aborts_total{"));

    ASSERT_EQ(ctl("status", "--off", NULL), 2);
    ASSERT_EQ(ctl("drain", "--wait=x", NULL), 2);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_zppctl_ops: ok\n");
    return 0;
}
