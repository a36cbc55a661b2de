/*
 * test_admin_audit.c — zppctl and the admin replies against hostile strings
 * and odd arguments (host backend):
 *  - a tenant's hpZ keys reach the job's ring of recent calls through a
 *    call's mismatch message ("rank 1 has hpz_key='...'"), and root lists
 *    every job: a key carrying a C1 control (CSI, U+009B as UTF-8, or the
 *    raw byte 0x9B that 8-bit terminals read as CSI) is shown as '?' by
 *    `zppctl jobs` and escaped (\u009b) by `zppctl --json jobs`;
 *  - `zppctl -s ''` is a usage error (exit 2), not a silent fall back to
 *    $ZPP_SOCKET or the default socket;
 *  - a daemon that closes the connection without an answer (over
 *    max_connections_per_uid: refused at accept) is unreachable: exit 3,
 *    and `health` says "unreachable";
 *  - another uid's `store` and `jobs` show none of root's jobs or its
 *    tenant row (run as root: needs setuid; skipped otherwise);
 *  - bad `--wait` values are usage errors.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
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
#define COUNT 256u
#define OTHER_UID 65534
#define PER_UID 6 /* max_connections_per_uid */

static zh_daemon g_d;
static char g_out[1 << 17];

static int ctl(const char *a, const char *b, const char *c)
{
    return zh_zppctl(&g_d, g_out, sizeof g_out, a, b, c);
}

/* 1 if buf holds a byte in [lo, hi]. */
static int has_byte(const char *buf, unsigned lo, unsigned hi)
{
    for (const unsigned char *p = (const unsigned char *)buf; *p; p++)
        if (*p >= lo && *p <= hi)
            return 1;
    return 0;
}

/* Two ranks submit call 1 with different hpZ keys carrying C1 controls:
 * the call fails with ZPP_EMISMATCH on both, its record keeps the keys. */
static void hostile_keys(void)
{
    zpp_conn *c[N];
    zpp_shm *in[N], *out[N];
    uint64_t in_id[N], out_id[N], req[N];
    /* Octal: "\x9b2" would read as one escape. */
    const char *key[N] = {"k\302\2332J", "\23331m"};
    for (int r = 0; r < N; r++) {
        ASSERT_EQ(zh_connect_join(&g_d, "audit-c1", (uint32_t)r, N, 1, &c[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &in[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4 * N, &out[r]), 0);
        ASSERT_EQ(zpp_register_shm(c[r], in[r], 0, COUNT * 4, &in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(c[r], out[r], 0, COUNT * 4 * N, &out_id[r]), 0);
    }
    for (int r = 0; r < N; r++) {
        zpp_coll call;
        zpp_coll_init(&call, ZPP_OP_QWZ_ALLGATHER, ZPP_FP32, COUNT);
        call.bits = 8;
        call.hpz_key = key[r];
        call.input = (zpp_bufref){in_id[r], 0};
        call.output = (zpp_bufref){out_id[r], 0};
        ASSERT_EQ(zpp_submit(c[r], &call, &req[r]), 0);
        if (r == 0) /* rank 0's arguments are the call's */
            usleep(100 * 1000);
    }
    for (int r = 0; r < N; r++)
        ASSERT_EQ(zpp_wait(c[r], req[r], NULL), ZPP_EMISMATCH);

    ASSERT_EQ(ctl("--json", "jobs", NULL), 0);
    ASSERT_CONTAINS(g_out, "differs across ranks");
    ASSERT_CONTAINS(g_out, "k\\u009b2J");
    if (has_byte(g_out, 0x80, 0x9F)) {
        fprintf(stderr, "zppctl --json jobs: a C1 control byte is in the output\n");
        exit(1);
    }
    ASSERT_EQ(ctl("jobs", NULL, NULL), 0);
    ASSERT_CONTAINS(g_out, "differs across ranks");
    ASSERT_CONTAINS(g_out, "hpz_key='?31m'");
    ASSERT_CONTAINS(g_out, "hpz_key='k?2J'");
    if (has_byte(g_out, 0x80, 0x9F)) {
        fprintf(stderr, "zppctl jobs: a C1 control byte reaches the terminal\n");
        exit(1);
    }
    for (int r = 0; r < N; r++) {
        zpp_close(c[r]);
        zpp_shm_destroy(in[r]);
        zpp_shm_destroy(out[r]);
    }
}

/* As another uid: root's job and tenant row are not listed. */
static int other_uid(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    if (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(OTHER_UID) != 0) {
        perror("other_uid: dropping privileges");
        return 10;
    }
    if (ctl("store", "--json", NULL) != 0)
        return 11;
    if (strstr(g_out, "audit-own") || strstr(g_out, "\"uid\":0,") ||
        !strstr(g_out, "\"tenants\":[{\"uid\":65534,"))
        return 12;
    if (ctl("jobs", "--json", NULL) != 0 || strcmp(g_out, "{\"jobs\":[]}\n") != 0)
        return 13;
    if (ctl("drain", NULL, NULL) != 1 || !strstr(g_out, "EPERM"))
        return 14;
    return 0;
}

int main(void)
{
    int root = geteuid() == 0;
    char conf[256];
    snprintf(conf, sizeof conf, "max_connections_per_uid = %d\n", PER_UID);
    struct group *gr = root ? getgrgid(OTHER_UID) : NULL;
    if (gr)
        snprintf(conf + strlen(conf), sizeof conf - strlen(conf),
                 "socket_mode = 0660\nsocket_group = %s\n", gr->gr_name);
    ASSERT_EQ(zh_daemon_start(conf, &g_d), 0);
    if (gr)
        ASSERT_EQ(chmod(g_d.dir, 0711), 0);

    hostile_keys();

    /* An explicit empty socket is a usage error, whatever $ZPP_SOCKET says. */
    ASSERT_EQ(setenv("ZPP_SOCKET", g_d.socket, 1), 0);
    char *empty[] = {ZPPCTL_BIN, "-s", "", "health", NULL};
    int rc = zh_run_capture(empty, 15000, g_out, sizeof g_out);
    printf("$ zppctl -s '' health -> %d\n%s", rc, g_out);
    ASSERT_EQ(rc, 2);
    char *empty_long[] = {ZPPCTL_BIN, "--socket=", "status", NULL};
    rc = zh_run_capture(empty_long, 15000, g_out, sizeof g_out);
    printf("$ zppctl --socket= status -> %d\n%s", rc, g_out);
    ASSERT_EQ(rc, 2);
    unsetenv("ZPP_SOCKET");

    ASSERT_EQ(ctl("drain", "--wait=", NULL), 2);
    ASSERT_EQ(ctl("drain", "--wait=86401", NULL), 2);
    ASSERT_EQ(ctl("drain", "--wait=-1", NULL), 2);
    ASSERT_EQ(ctl("drain", "--wait", NULL), 2);

    /* Another uid's view of root's job. */
    zpp_conn *own = NULL;
    ASSERT_EQ(zh_connect_join(&g_d, "audit-own", 0, 1, 1, &own), 0);
    if (gr) {
        int code = -1;
        zh_run_ranks(1, other_uid, NULL, 60000, &code);
        ASSERT_EQ(code, 0);
    } else {
        printf("test_admin_audit: not root: the other-uid checks are skipped\n");
    }

    /* Fill root's connections (own holds one) until the daemon refuses. */
    zpp_conn *hold[PER_UID + 2];
    int nhold = 0, refused = 0;
    while (nhold < PER_UID + 2) {
        zpp_conn *c = NULL;
        ASSERT_EQ(zpp_connect(g_d.socket, &c), 0);
        static char js[1 << 14];
        if (zpp_admin_status_json(c, js, sizeof js) != 0) {
            zpp_close(c);
            refused = 1;
            break;
        }
        hold[nhold++] = c;
    }
    ASSERT(refused);
    ASSERT_EQ(ctl("health", NULL, NULL), 3);
    ASSERT_CONTAINS(g_out, "unreachable");
    ASSERT_EQ(ctl("status", NULL, NULL), 3);
    for (int i = 0; i < nhold; i++)
        zpp_close(hold[i]);
    zpp_close(own);
    for (int i = 0; i < 100 && ctl("health", NULL, NULL) != 0; i++)
        usleep(50 * 1000);
    ASSERT_EQ(ctl("health", NULL, NULL), 0);

    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_admin_audit: ok\n");
    return 0;
}
