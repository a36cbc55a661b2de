/*
 * test_hpz_share.c — shared, read-only hpZ replicas on a real daemon
 * (docs/hpz-sharing.md). Needs root (setuid); exits 77 otherwise. The
 * daemon runs with `hpz_share = 0:65533`: tenant 65533 may read root's
 * replicas, tenant 65534 may not. Every job has 2 ranks on one node, both
 * driven from one process over two connections.
 *  - Job "base" (root) publishes a frozen 1000-element fp32 tensor with a
 *    plain all-gather, ZPP_FLAG_PUBLISH and its SHA-256 as content key.
 *  - Job "lora" (root) reads it with an hpZ gather naming the key: both
 *    ranks get the tensor, bit for bit; it then publishes the same bytes
 *    itself: accepted, no second copy. With both jobs alive the daemon
 *    holds one copy: its status reports store_bytes = 2 slices of 500
 *    floats.
 *  - Job "evil" (root) publishes different bytes under the used key:
 *    ZPP_EEXIST "already holds different bytes"; store_bytes unchanged,
 *    and job "base" still reads the original bytes.
 *  - A key that is not the tensor's hash is refused (ZPP_EMISMATCH).
 *  - Job "friend" of tenant 65533 (allowed) reads the right bytes; job
 *    "other" of tenant 65534 is refused with ZPP_EPERM.
 *  - `zppctl store --json` lists the replica by its key: as root right
 *    after base's publish with one attached job (and the table of
 *    `zppctl store` has its key); for tenant 65533 (who may read it) too,
 *    and not for tenant 65534.
 */

#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

/* The daemon's SHA-256, compiled into this test: the key a client computes
 * must be the one the daemon checks. */
#include "daemon/sha256.c"

/* Rank children return straight after a failed check, connections still
 * open: LeakSanitizer would report that, not a bug. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define FRIEND_UID 65533
#define OTHER_UID 65534
#define COUNT 1000u
#define SHARD (COUNT / 2)
#define ONE_COPY (2u * SHARD * 4u) /* 2 slots of 500 fp32 */

static zh_daemon g_d;
static int p_ready[2], p_done[2];
static char g_key[80];

/* One job of 2 ranks driven from this process. */
struct pair {
    zpp_conn *c[2];
    zpp_shm *in[2], *out[2];
    uint64_t in_id[2], out_id[2];
};

static void sig_write(int *p, int n)
{
    for (int i = 0; i < n; i++) {
        char ch = 'x';
        ASSERT_EQ(write(p[1], &ch, 1), 1);
    }
}

static void sig_wait(int *p, int n)
{
    for (int i = 0; i < n; i++) {
        char ch;
        ASSERT_EQ(read(p[0], &ch, 1), 1);
    }
}

static float tensor(unsigned i, float base)
{
    return base + (float)i * 0.5f;
}

static int pair_open(struct pair *p, const char *job)
{
    memset(p, 0, sizeof *p);
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(zpp_connect(g_d.socket, &p->c[r]), 0);
        zpp_job_desc jd = {.job_id = job,
                           .rank = (uint32_t)r,
                           .world_size = 2,
                           .local_rank = (uint32_t)r,
                           .node_count = 1,
                           .gpu_uuid = "host"};
        int rc = zpp_hello(p->c[r], &jd, NULL);
        if (rc) {
            fprintf(stderr, "%s rank %d: hello: %s: %s\n", job, r, zpp_err_name(rc),
                    zpp_last_error(p->c[r]));
            return rc;
        }
        ASSERT_EQ(zpp_shm_create(SHARD * 4, &p->in[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &p->out[r]), 0);
        ASSERT_EQ(zpp_register_shm(p->c[r], p->in[r], 0, SHARD * 4, &p->in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(p->c[r], p->out[r], 0, COUNT * 4, &p->out_id[r]), 0);
    }
    return 0;
}

static void pair_close(struct pair *p)
{
    for (int r = 0; r < 2; r++) {
        zpp_close(p->c[r]);
        zpp_shm_destroy(p->in[r]);
        zpp_shm_destroy(p->out[r]);
    }
}

/* Fills both ranks' shards with the tensor starting at base. */
static void pair_fill(struct pair *p, float base)
{
    for (int r = 0; r < 2; r++) {
        float *x = zpp_shm_ptr(p->in[r]);
        for (unsigned i = 0; i < SHARD; i++)
            x[i] = tensor((unsigned)r * SHARD + i, base);
        memset(zpp_shm_ptr(p->out[r]), 0x5A, COUNT * 4);
    }
}

/* Runs one call on both ranks; returns rank 0's code (both must agree). */
static int pair_call(struct pair *p, int op, uint32_t flags, const char *content_key,
                     const char *what)
{
    uint64_t req[2];
    int rc[2];
    for (int r = 0; r < 2; r++) {
        zpp_coll call;
        zpp_coll_init(&call, (zpp_op_t)op, ZPP_FP32, COUNT);
        call.input = (zpp_bufref){p->in_id[r], 0};
        call.output = (zpp_bufref){p->out_id[r], 0};
        call.flags = flags;
        call.content_key = content_key;
        ASSERT_EQ(zpp_submit(p->c[r], &call, &req[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        rc[r] = zpp_wait(p->c[r], req[r], NULL);
    printf("%s -> %s%s%s\n", what, zpp_err_name(rc[0]), rc[0] ? ": " : "",
           rc[0] ? zpp_last_error(p->c[0]) : "");
    ASSERT_EQ(rc[0], rc[1]);
    return rc[0];
}

/* 1 if both ranks' outputs hold the tensor starting at base. */
static int pair_holds(struct pair *p, float base)
{
    for (int r = 0; r < 2; r++) {
        const float *y = zpp_shm_ptr(p->out[r]);
        for (unsigned i = 0; i < COUNT; i++)
            if (memcmp(&y[i], &(float){tensor(i, base)}, 4) != 0) {
                fprintf(stderr, "rank %d element %u: %g, expected %g\n", r, i, (double)y[i],
                        (double)tensor(i, base));
                return 0;
            }
    }
    return 1;
}

static unsigned long long store_bytes(void)
{
    zpp_conn *adm;
    static char js[65536];
    ASSERT_EQ(zpp_connect(g_d.socket, &adm), 0);
    ASSERT_EQ(zpp_admin_status_json(adm, js, sizeof js), 0);
    zpp_close(adm);
    const char *p = strstr(js, "\"store_bytes\":");
    ASSERT(p);
    return strtoull(p + strlen("\"store_bytes\":"), NULL, 10);
}

static char g_ctl_out[65536];

/* Runs `zppctl -s SOCKET store [--json]`, output in g_ctl_out. */
static int ctl_store(int json)
{
    char *argv[] = {ZPPCTL_BIN, "-s", g_d.socket, "store", json ? "--json" : NULL, NULL};
    int rc = zh_run_capture(argv, 15000, g_ctl_out, sizeof g_ctl_out);
    printf("$ zppctl store%s -> %d\n%s\n", json ? " --json" : "", rc, g_ctl_out);
    return rc;
}

/* The JSON object of the replica g_key in `zppctl store --json`, cut at
 * its closing brace into buf; NULL if the listing does not have it. */
static const char *store_replica(char *buf, size_t len)
{
    const char *out = g_ctl_out;
    if (ctl_store(1) != 0)
        return NULL;
    char want[128];
    snprintf(want, sizeof want, "{\"content_key\":\"%s\"", g_key);
    const char *p = strstr(out, want);
    const char *end = p ? strchr(p, '}') : NULL;
    if (!end)
        return NULL;
    snprintf(buf, len, "%.*s", (int)(end - p + 1), p);
    return buf;
}

static int expect(int rc, int want, const char *what)
{
    if (rc != want) {
        fprintf(stderr, "%s: got %s, expected %s\n", what, zpp_err_name(rc), zpp_err_name(want));
        return 1;
    }
    return 0;
}

static int tenant_root(void)
{
    int fails = 0;
    struct pair base, lora, evil;
    if (pair_open(&base, "base") || pair_open(&lora, "lora") || pair_open(&evil, "evil"))
        return 1;

    /* A wrong key first: refused, nothing kept. */
    char wrong[80];
    snprintf(wrong, sizeof wrong, "%s", g_key);
    wrong[7] = wrong[7] == '0' ? '1' : '0';
    pair_fill(&base, 1.0f);
    fails += expect(pair_call(&base, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, wrong, "base: wrong key"),
                    ZPP_EMISMATCH, "publish under a key that is not the hash");
    fails += expect((int)store_bytes(), 0, "store bytes after a refused publish");

    /* base publishes; lora reads, then publishes the same bytes. */
    fails += expect(pair_call(&base, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key, "base: publish"), 0,
                    "base publishes");
    fails += !pair_holds(&base, 1.0f);
    fails += expect((int)store_bytes(), ONE_COPY, "store bytes after the publish");
    char row[512];
    const char *r = store_replica(row, sizeof row);
    if (!r || !strstr(r, "\"owner_uid\":0,\"count\":1000,\"dtype\":\"fp32\",\"slots\":2") ||
        !strstr(r, "\"attached_jobs\":1,")) {
        fprintf(stderr, "zppctl store: replica row after base's publish: %s\n", r ? r : "absent");
        fails++;
    }
    if (ctl_store(0) != 0 || !strstr(g_ctl_out, "REPLICA") || !strstr(g_ctl_out, g_key)) {
        fprintf(stderr, "zppctl store: no replica table with the key\n");
        fails++;
    }
    fails +=
        expect(pair_call(&lora, ZPP_OP_HPZ_GATHER, 0, g_key, "lora: hpZ gather"), 0, "lora reads");
    fails += !pair_holds(&lora, 1.0f);
    pair_fill(&lora, 1.0f);
    fails += expect(pair_call(&lora, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key, "lora: publish"), 0,
                    "lora publishes the same bytes");
    fails += !pair_holds(&lora, 1.0f);
    unsigned long long sb = store_bytes();
    printf("store_bytes with base and lora sharing the replica: %llu (one copy: %u)\n", sb,
           ONE_COPY);
    fails += expect((int)sb, ONE_COPY, "one copy for two jobs");

    /* evil publishes different bytes under the used key. */
    pair_fill(&evil, 2.0f);
    int rc = pair_call(&evil, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key, "evil: publish");
    fails += expect(rc, ZPP_EEXIST, "different bytes under a used key");
    if (!strstr(zpp_last_error(evil.c[0]), "already holds different bytes")) {
        fprintf(stderr, "evil: message: %s\n", zpp_last_error(evil.c[0]));
        fails++;
    }
    fails += expect((int)store_bytes(), ONE_COPY, "store bytes after the refusal");

    /* The other tenants, then base reads the replica unchanged. */
    sig_write(p_ready, 2);
    sig_wait(p_done, 2);
    fails +=
        expect(pair_call(&base, ZPP_OP_HPZ_GATHER, 0, g_key, "base: hpZ gather"), 0, "base reads");
    fails += !pair_holds(&base, 1.0f);
    fails += expect((int)store_bytes(), ONE_COPY, "one copy at the end");
    pair_close(&base);
    pair_close(&lora);
    pair_close(&evil);
    return fails ? 1 : 0;
}

static int tenant_setuid(uid_t uid, const char *job, int want)
{
    sig_wait(p_ready, 1);
    if (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(uid) != 0) {
        perror("dropping privileges");
        return 1;
    }
    struct pair p;
    if (pair_open(&p, job))
        return 1;
    int fails = expect(pair_call(&p, ZPP_OP_HPZ_GATHER, 0, g_key, job), want, job);
    if (want == 0)
        fails += !pair_holds(&p, 1.0f);
    else if (!strstr(zpp_last_error(p.c[0]), "does not share it with tenant"))
        fails++;
    /* zppctl store lists the replica to a tenant who may read it only. */
    char row[512];
    if ((store_replica(row, sizeof row) != NULL) != (want == 0)) {
        fprintf(stderr, "%s: zppctl store %s the replica\n", job, want ? "lists" : "omits");
        fails++;
    }
    pair_close(&p);
    sig_write(p_done, 1);
    return fails ? 1 : 0;
}

static int rank_main(int rank, void *arg)
{
    (void)arg;
    if (rank == 0)
        return tenant_root();
    if (rank == 1)
        return tenant_setuid(FRIEND_UID, "friend", 0);
    return tenant_setuid(OTHER_UID, "other", ZPP_EPERM);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("test_hpz_share: needs root (setuid): skipped\n");
        return TEST_SKIP;
    }
    struct group *gr = getgrgid(OTHER_UID);
    if (!gr) {
        printf("test_hpz_share: no group with gid %d: skipped\n", OTHER_UID);
        return TEST_SKIP;
    }
    /* The content key: SHA-256 of the 1000 floats, little-endian. */
    float t[COUNT];
    for (unsigned i = 0; i < COUNT; i++)
        t[i] = tensor(i, 1.0f);
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    sha256(t, sizeof t, d);
    sha256_hex(d, hex);
    snprintf(g_key, sizeof g_key, "sha256:%s", hex);

    char conf[256];
    snprintf(conf, sizeof conf, "socket_mode = 0660\nsocket_group = %s\nhpz_share = 0:%d\n",
             gr->gr_name, FRIEND_UID);
    ASSERT_EQ(zh_daemon_start(conf, &g_d), 0);
    ASSERT_EQ(chmod(g_d.dir, 0711), 0);
    ASSERT_EQ(pipe(p_ready), 0);
    ASSERT_EQ(pipe(p_done), 0);
    int rc = zh_run_ranks(3, rank_main, NULL, 30000, NULL);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    ASSERT_EQ(rc, 0);
    printf("test_hpz_share: ok\n");
    return 0;
}
