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
#include "pair.h"
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

static int tenant_root(void)
{
    int fails = 0;
    zh_pair base, lora, evil;
    if (zh_pair_open(&base, g_d.socket, "base", COUNT) ||
        zh_pair_open(&lora, g_d.socket, "lora", COUNT) ||
        zh_pair_open(&evil, g_d.socket, "evil", COUNT))
        return 1;

    /* A wrong key first: refused, nothing kept. */
    char wrong[80];
    snprintf(wrong, sizeof wrong, "%s", g_key);
    wrong[7] = wrong[7] == '0' ? '1' : '0';
    zh_pair_fill(&base, tensor, 1.0f);
    fails +=
        zh_expect(zh_pair_call(&base, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, wrong, "base: wrong key"),
                  ZPP_EMISMATCH, "publish under a key that is not the hash");
    fails += zh_expect((int)zh_store_bytes(g_d.socket), 0, "store bytes after a refused publish");

    /* base publishes; lora reads, then publishes the same bytes. */
    fails +=
        zh_expect(zh_pair_call(&base, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key, "base: publish"),
                  0, "base publishes");
    fails += !zh_pair_holds(&base, tensor, 1.0f);
    fails += zh_expect((int)zh_store_bytes(g_d.socket), ONE_COPY, "store bytes after the publish");
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
    fails += zh_expect(zh_pair_call(&lora, ZPP_OP_HPZ_GATHER, 0, g_key, "lora: hpZ gather"), 0,
                       "lora reads");
    fails += !zh_pair_holds(&lora, tensor, 1.0f);
    zh_pair_fill(&lora, tensor, 1.0f);
    fails +=
        zh_expect(zh_pair_call(&lora, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key, "lora: publish"),
                  0, "lora publishes the same bytes");
    fails += !zh_pair_holds(&lora, tensor, 1.0f);
    unsigned long long sb = zh_store_bytes(g_d.socket);
    printf("store_bytes with base and lora sharing the replica: %llu (one copy: %u)\n", sb,
           ONE_COPY);
    fails += zh_expect((int)sb, ONE_COPY, "one copy for two jobs");

    /* evil publishes different bytes under the used key. */
    zh_pair_fill(&evil, tensor, 2.0f);
    int rc = zh_pair_call(&evil, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key, "evil: publish");
    fails += zh_expect(rc, ZPP_EEXIST, "different bytes under a used key");
    if (!strstr(zpp_last_error(evil.c[0]), "already holds different bytes")) {
        fprintf(stderr, "evil: message: %s\n", zpp_last_error(evil.c[0]));
        fails++;
    }
    fails += zh_expect((int)zh_store_bytes(g_d.socket), ONE_COPY, "store bytes after the refusal");

    /* The other tenants, then base reads the replica unchanged. */
    sig_write(p_ready, 2);
    sig_wait(p_done, 2);
    fails += zh_expect(zh_pair_call(&base, ZPP_OP_HPZ_GATHER, 0, g_key, "base: hpZ gather"), 0,
                       "base reads");
    fails += !zh_pair_holds(&base, tensor, 1.0f);
    fails += zh_expect((int)zh_store_bytes(g_d.socket), ONE_COPY, "one copy at the end");
    zh_pair_close(&base);
    zh_pair_close(&lora);
    zh_pair_close(&evil);
    return fails ? 1 : 0;
}

static int tenant_setuid(uid_t uid, const char *job, int want)
{
    sig_wait(p_ready, 1);
    if (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(uid) != 0) {
        perror("dropping privileges");
        return 1;
    }
    zh_pair p;
    if (zh_pair_open(&p, g_d.socket, job, COUNT))
        return 1;
    int fails = zh_expect(zh_pair_call(&p, ZPP_OP_HPZ_GATHER, 0, g_key, job), want, job);
    if (want == 0)
        fails += !zh_pair_holds(&p, tensor, 1.0f);
    else if (!strstr(zpp_last_error(p.c[0]), "does not share it with tenant"))
        fails++;
    /* zppctl store lists the replica to a tenant who may read it only. */
    char row[512];
    if ((store_replica(row, sizeof row) != NULL) != (want == 0)) {
        fprintf(stderr, "%s: zppctl store %s the replica\n", job, want ? "lists" : "omits");
        fails++;
    }
    zh_pair_close(&p);
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
