/*
 * test_tenant.c — tenants (peer uids) are kept apart. Needs root (setuid);
 * exits 77 otherwise. The socket is group-accessible (socket_group = the
 * group of gid 65534, mode 0660: world-writable modes are refused), its
 * directory enterable.
 *  - Tenant A (uid 0, ranks 0 and 1) forms job "j" and stores hpZ key
 *    "secret" with a qwZ.
 *  - Tenant B (a child that drops to uid/gid 65534) says Hello for job "j"
 *    ranks 0 and 1 (two connections): it gets its own job — the jobs list
 *    (seen by root) shows two jobs "j", A's with uid 0 and ranks 0,1, B's
 *    with uid 65534 and ranks 0,1; B's own list shows only its job, and
 *    B's status counts only its own sessions, jobs, calls and store
 *    bytes (root's the whole daemon's).
 *  - B cannot use A's buffer ids (ZPP_ENOENT) nor read A's hpZ key
 *    (ZPP_ENOENT); registering a memfd created by A (inherited through
 *    fork) is refused (ZPP_EPERM); so is an unsealed memfd of B's own
 *    (sent raw: libzpp refuses it before sending).
 */

#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

#define B_UID 65534
#define COUNT 1000u

static zh_daemon g_d;
static int p_a_ready[2], p_b_joined[2], p_checked[2], p_b_done[2];
static zpp_shm *g_a_shm;     /* made by A (root) before the fork */
static uint64_t g_a_buf_ids[2] = {1, 2};

static void sig_write(int *p)
{
    char ch = 'x';
    ASSERT_EQ(write(p[1], &ch, 1), 1);
}

static void sig_wait(int *p)
{
    char ch;
    ASSERT_EQ(read(p[0], &ch, 1), 1);
}

static int tenant_a(int rank)
{
    zpp_conn *c;
    if (zh_connect_join(&g_d, "j", (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    zpp_shm *in, *out;
    uint64_t in_id, out_id;
    ASSERT_EQ(zpp_shm_create(COUNT * 4, &in), 0);
    ASSERT_EQ(zpp_shm_create(COUNT * 4, &out), 0);
    ASSERT_EQ(zpp_register_shm(c, in, 0, COUNT * 4, &in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, out, 0, COUNT * 4, &out_id), 0);
    ASSERT_EQ(in_id, g_a_buf_ids[0]);
    ASSERT_EQ(out_id, g_a_buf_ids[1]);
    float *x = zpp_shm_ptr(in);
    for (unsigned i = 0; i < COUNT / 2; i++)
        x[i] = (float)i * 0.01f;
    zpp_result res;
    ASSERT_EQ(zpp_qwz_allgather(c, (zpp_bufref){in_id, 0}, (zpp_bufref){out_id, 0}, COUNT,
                                ZPP_FP32, 8, 0, "secret", &res),
              0);
    if (rank == 0) {
        sig_write(p_a_ready);
        sig_wait(p_b_joined);
        /* Root sees both jobs named "j", each with its own tenant's ranks. */
        zpp_conn *adm;
        ASSERT_EQ(zpp_connect(g_d.socket, &adm), 0);
        static char js[65536];
        ASSERT_EQ(zpp_admin_jobs_json(adm, js, sizeof js), 0);
        static char st[65536];
        ASSERT_EQ(zpp_admin_status_json(adm, st, sizeof st), 0);
        zpp_close(adm);
        /* and counts of the whole daemon: both tenants' jobs and sessions */
        printf("status seen by root: %s\n", st);
        ASSERT_CONTAINS(st, "\"jobs\":2,");
        ASSERT_CONTAINS(st, "\"store_bytes\":4000,");
        ASSERT_CONTAINS(st, "\"calls_ok\":1,");
        ASSERT_CONTAINS(st, "\"own_uid_only\":false");
        printf("jobs seen by root: %s\n", js);
        ASSERT_CONTAINS(js, "\"job_id\":\"j\",\"tenant_uid\":0,\"world_size\":2,\"nodes\":1,"
                            "\"state\":\"running\",\"joined_ranks\":[0,1]");
        ASSERT_CONTAINS(js, "\"job_id\":\"j\",\"tenant_uid\":65534,\"world_size\":2,\"nodes\":1,"
                            "\"state\":\"running\",\"joined_ranks\":[0,1]");
        sig_write(p_checked);
        sig_wait(p_b_done);
    }
    /* A's job still works, and its key is still there. */
    ASSERT_EQ(zpp_hpz_gather(c, (zpp_bufref){out_id, 0}, COUNT, ZPP_FP32, "secret", &res), 0);
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    zpp_close(c);
    return 0;
}

static int expect(zpp_conn *c, int rc, int want, const char *what)
{
    if (rc != want) {
        fprintf(stderr, "tenant B: %s: got %s (%s), expected %s\n", what, zpp_err_name(rc),
                rc ? zpp_last_error(c) : "", zpp_err_name(want));
        return 1;
    }
    return 0;
}

/* Raw Hello + RegisterBuffer with fd: returns the reply code. */
static int raw_register(int fd_mem)
{
    int s = zh_raw_connect(g_d.socket);
    ASSERT(s >= 0);
    ASSERT_EQ(zh_raw_hello(s, "raw", 1), 0);
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    Zpp__Reply *rep;
    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.length = 4096;
    rb.nfds = 1;
    rb.gpu_uuid = "host";
    req.req_id = 2;
    req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &rb;
    ASSERT_EQ(zh_raw_request(s, &req, &fd_mem, 1), 0);
    ASSERT_EQ(zh_raw_reply(s, 3000, &rep), 0);
    int code = rep->code;
    printf("tenant B: raw register -> %s: %s\n", zpp_err_name(code), rep->message);
    zpp_reply_free(rep);
    close(s);
    return code;
}

static int tenant_b(void)
{
    sig_wait(p_a_ready);
    if (setgroups(0, NULL) != 0 || setgid(B_UID) != 0 || setuid(B_UID) != 0) {
        perror("tenant B: dropping privileges");
        return 1;
    }
    zpp_conn *c[2];
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(zpp_connect(g_d.socket, &c[r]), 0);
        zpp_job_desc job = {.job_id = "j", .rank = (uint32_t)r, .world_size = 2,
                            .local_rank = (uint32_t)r, .node_count = 1, .gpu_uuid = "host"};
        int rc = zpp_hello(c[r], &job, NULL);
        if (rc != 0) {
            fprintf(stderr, "tenant B: hello j rank %d: %s: %s\n", r, zpp_err_name(rc),
                    zpp_last_error(c[r]));
            return 1;
        }
    }
    sig_write(p_b_joined);
    sig_wait(p_checked);
    int fails = 0;

    /* B's own view: its job only. */
    static char js[65536];
    ASSERT_EQ(zpp_admin_jobs_json(c[0], js, sizeof js), 0);
    if (strstr(js, "\"tenant_uid\":0,") || !strstr(js, "\"tenant_uid\":65534")) {
        fprintf(stderr, "tenant B sees: %s\n", js);
        fails++;
    }
    /* and its own counts in status, not A's: two sessions, one job, no
     * calls, no store bytes (A's job has stored 4000) */
    ASSERT_EQ(zpp_admin_status_json(c[0], js, sizeof js), 0);
    printf("status seen by tenant B: %s\n", js);
    if (!strstr(js, "\"sessions\":2,") || !strstr(js, "\"jobs\":1,") ||
        !strstr(js, "\"store_bytes\":0,") || !strstr(js, "\"calls_ok\":0,") ||
        !strstr(js, "\"running_jobs\":1,") || !strstr(js, "\"own_uid_only\":true")) {
        fprintf(stderr, "tenant B's status shows more than its own\n");
        fails++;
    }

    /* A's buffer ids (1, 2) on B's sessions: not registered there. */
    zpp_coll ag[2];
    uint64_t req[2];
    for (int r = 0; r < 2; r++) {
        zpp_coll_init(&ag[r], ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
        ag[r].input = (zpp_bufref){g_a_buf_ids[0], 0};
        ag[r].output = (zpp_bufref){g_a_buf_ids[1], 0};
        ASSERT_EQ(zpp_submit(c[r], &ag[r], &req[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        fails += expect(c[r], zpp_wait(c[r], req[r], NULL), ZPP_ENOENT, "A's buffer ids");

    /* A's hpZ key from B's job. */
    zpp_shm *out[2];
    uint64_t out_id[2];
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &out[r]), 0);
        ASSERT_EQ(zpp_register_shm(c[r], out[r], 0, COUNT * 4, &out_id[r]), 0);
        zpp_coll_init(&ag[r], ZPP_OP_HPZ_GATHER, ZPP_FP32, COUNT);
        ag[r].hpz_key = "secret";
        ag[r].output = (zpp_bufref){out_id[r], 0};
        ASSERT_EQ(zpp_submit(c[r], &ag[r], &req[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        fails += expect(c[r], zpp_wait(c[r], req[r], NULL), ZPP_ENOENT, "A's hpZ key");

    /* A memfd that A created (inherited through fork): refused. */
    uint64_t id;
    fails += expect(c[0], zpp_register_fd(c[0], zpp_shm_fd(g_a_shm), 0, 4096, &id), ZPP_EPERM,
                    "register A's memfd");
    /* B's own memfd, unsealed (raw: libzpp would refuse it itself). */
    int mfd = memfd_create("zh-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT(mfd >= 0);
    ASSERT_EQ(ftruncate(mfd, 4096), 0);
    int code = raw_register(mfd);
    if (code != ZPP_EPERM) {
        fprintf(stderr, "tenant B: unsealed memfd: %s, expected ZPP_EPERM\n", zpp_err_name(code));
        fails++;
    }
    /* Sealed against shrinking, B's own: accepted (the control case). */
    ASSERT_EQ(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    ASSERT_EQ(raw_register(mfd), 0);
    close(mfd);
    for (int r = 0; r < 2; r++)
        zpp_close(c[r]);
    sig_write(p_b_done);
    return fails ? 1 : 0;
}

static int rank_main(int rank, void *arg)
{
    (void)arg;
    return rank < 2 ? tenant_a(rank) : tenant_b();
}

int main(void)
{
    if (geteuid() != 0) {
        printf("test_tenant: needs root (setuid): skipped\n");
        return TEST_SKIP;
    }
    struct group *gr = getgrgid(B_UID);
    if (!gr) {
        printf("test_tenant: no group with gid %d: skipped\n", B_UID);
        return TEST_SKIP;
    }
    char conf[256];
    snprintf(conf, sizeof conf, "socket_mode = 0660\nsocket_group = %s\n", gr->gr_name);
    ASSERT_EQ(zh_daemon_start(conf, &g_d), 0);
    ASSERT_EQ(chmod(g_d.dir, 0711), 0);
    ASSERT_EQ(pipe(p_a_ready), 0);
    ASSERT_EQ(pipe(p_b_joined), 0);
    ASSERT_EQ(pipe(p_checked), 0);
    ASSERT_EQ(pipe(p_b_done), 0);
    ASSERT_EQ(zpp_shm_create(4096, &g_a_shm), 0);
    int rc = zh_run_ranks(3, rank_main, NULL, 30000, NULL);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    ASSERT_EQ(rc, 0);
    printf("test_tenant: ok\n");
    return 0;
}
