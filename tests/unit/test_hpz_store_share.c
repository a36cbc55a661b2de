/*
 * test_hpz_store_share.c — shared, read-only hpZ replicas (docs/hpz-sharing.md),
 * at the store level and through coll_prepare/run/finish on the host
 * backend.
 *
 * Store: content keys are "sha256:" + 64 lowercase hex digits; share rules
 * are one-way (owner -> reader); a committed replica is found by key and
 * layout by its tenant and by tenants a rule opens it to, refused to
 * others (ZPP_EPERM), invisible to private lookups and invalidates; two
 * publishes of one key at once keep one copy; a dropped job detaches and
 * leaves the replica idle; idle replicas are evicted least-recently-used
 * when a reserve needs their room, never while attached or pinned, and
 * not at all when evicting would not make the reserve fit; a replica
 * counts against its owner's budget only.
 * Collectives: a qwZ or plain all-gather with ZPP_FLAG_PUBLISH stores one
 * copy after checking the SHA-256 of the gathered tensor; a second job
 * publishing the same bytes attaches (no second copy); different bytes
 * under a used key are refused with ZPP_EEXIST, a key that is not the
 * tensor's hash with ZPP_EMISMATCH (nothing stored either way); other jobs
 * of the tenant and of allowed tenants read bit-identical bytes with an
 * hpZ gather, a third tenant gets ZPP_EPERM; bad arguments are refused.
 */
#include <string.h>

#include "coll.h"
#include "config.h"
#include "hpz_store.h"
#include "sha256.h"
#include "test.h"
#include "zpp.h"

#define MAX_W 8
#define T_OWNER 1000u
#define T_FRIEND 1001u
#define T_OTHER 1002u

static int g_job[6]; /* their addresses are job identities */

static const char KEY_A[] = "sha256:"
                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char KEY_B[] = "sha256:"
                            "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static struct hpz_spec sspec(uint32_t tenant, const void *job, const char *key, uint64_t slice,
                             int nslots)
{
    struct hpz_spec s = {.tenant = tenant,
                         .job = job,
                         .job_id = "job",
                         .key = key,
                         .count = slice * (uint64_t)nslots,
                         .dtype = ZK_FP32,
                         .slice = slice,
                         .nslots = nslots,
                         .shared = 1,
                         .local = nslots,
                         .rank0 = 0};
    return s;
}

static uint64_t used(struct hpz_store *st)
{
    uint64_t b;
    hpz_store_stats(st, &b, NULL, NULL, NULL);
    return b;
}

static struct hpz_share_stats sstats(struct hpz_store *st)
{
    struct hpz_share_stats s;
    hpz_store_share_stats(st, &s);
    return s;
}

/* Reserves and commits a shared replica for job. */
static struct hpz_entry *publish(struct hpz_store *st, const struct hpz_spec *sp)
{
    struct hpz_entry *e;
    char msg[256];
    int rc = hpz_store_reserve(st, sp, &e, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "reserve: %s\n", msg);
    ASSERT_EQ(rc, 0);
    ASSERT(hpz_entry_shared(e));
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    return e;
}

/* ---- store ---------------------------------------------------------- */

static void test_content_key_form_and_share_rules(void)
{
    ASSERT(hpz_content_key_ok(KEY_A));
    ASSERT(!hpz_content_key_ok(NULL));
    ASSERT(!hpz_content_key_ok(""));
    ASSERT(!hpz_content_key_ok("sha256:abc"));
    ASSERT(!hpz_content_key_ok(
        "sha512:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    ASSERT(!hpz_content_key_ok(
        "sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    ASSERT(!hpz_content_key_ok(
        "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    ASSERT(!hpz_content_key_ok(
        "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaag"));

    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    const uint32_t rules[][2] = {{T_OWNER, T_FRIEND}};
    ASSERT(hpz_store_may_read(st, T_OWNER, T_OWNER));
    ASSERT(!hpz_store_may_read(st, T_FRIEND, T_OWNER));
    hpz_store_set_share(st, rules, 1);
    ASSERT(hpz_store_may_read(st, T_FRIEND, T_OWNER));
    ASSERT(!hpz_store_may_read(st, T_OWNER, T_FRIEND)); /* one way */
    ASSERT(!hpz_store_may_read(st, T_OTHER, T_OWNER));
    hpz_store_set_share(st, NULL, 0);
    ASSERT(!hpz_store_may_read(st, T_FRIEND, T_OWNER));

    /* A shared reserve needs a content key and a layout. */
    struct hpz_entry *e;
    char msg[256];
    struct hpz_spec sp = sspec(T_OWNER, &g_job[0], "plain", 8, 2);
    ASSERT_EQ(hpz_store_reserve(st, &sp, &e, msg, sizeof msg), ZPP_EINVAL);
    sp = sspec(T_OWNER, &g_job[0], KEY_A, 8, 2);
    sp.local = 0;
    ASSERT_EQ(hpz_store_reserve(st, &sp, &e, msg, sizeof msg), ZPP_EINVAL);
    ASSERT_EQ(used(st), 0);
    hpz_store_free(st);
}

static void test_replica_found_by_tenant_rules_and_layout(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    const uint32_t rules[][2] = {{T_OWNER, T_FRIEND}};
    hpz_store_set_share(st, rules, 1);
    struct hpz_spec sp = sspec(T_OWNER, &g_job[0], KEY_A, 16, 2);
    struct hpz_entry *e = publish(st, &sp), *got;
    char msg[256];
    ASSERT_EQ(used(st), 128);
    struct hpz_share_stats ss = sstats(st);
    ASSERT_EQ(ss.replicas, 1);
    ASSERT_EQ(ss.bytes, 128);
    ASSERT_EQ(ss.attachments, 1); /* the publisher */
    ASSERT_EQ(ss.published, 1);
    /* It belongs to no job, and private lookups and invalidates of the
     * same string do not see it. */
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job[0]), 0);
    ASSERT_EQ(hpz_store_tenant_bytes(st, T_OWNER), 128);
    ASSERT_EQ(hpz_store_lookup(st, T_OWNER, &g_job[0], KEY_A, &got), ZPP_ENOENT);
    ASSERT_EQ(hpz_store_invalidate(st, T_OWNER, &g_job[0], NULL), 0);

    /* Another job of the owner, and a job of an allowed tenant: the same
     * entry, pinned and attached. */
    struct hpz_spec rd = sspec(T_OWNER, &g_job[1], KEY_A, 16, 2);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), 0);
    ASSERT(got == e);
    hpz_store_unpin(st, got);
    rd = sspec(T_FRIEND, &g_job[2], KEY_A, 16, 2);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), 0);
    ASSERT(got == e);
    hpz_store_unpin(st, got);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), 0); /* idempotent */
    hpz_store_unpin(st, got);
    ASSERT_EQ(sstats(st).attachments, 3);
    ASSERT_EQ(sstats(st).reads, 3);
    ASSERT_EQ(hpz_store_tenant_bytes(st, T_FRIEND), 0); /* readers are not charged */

    /* A third tenant is refused; another layout or key is not found. */
    rd = sspec(T_OTHER, &g_job[3], KEY_A, 16, 2);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), ZPP_EPERM);
    ASSERT_CONTAINS(msg, "does not share it with tenant 1002");
    ASSERT_EQ(sstats(st).refused, 1);
    rd = sspec(T_OWNER, &g_job[1], KEY_A, 8, 4);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), ZPP_EINVAL);
    ASSERT_CONTAINS(msg, "is published, but not for");
    rd = sspec(T_OWNER, &g_job[1], KEY_A, 16, 2);
    int devs[2] = {1, 0};
    rd.devices = devs;
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), ZPP_EINVAL);
    rd = sspec(T_OWNER, &g_job[1], KEY_B, 16, 2);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &got, msg, sizeof msg), ZPP_ENOENT);
    ASSERT_CONTAINS(msg, "is not published");

    /* Detach: by key, by job end; the replica stays, idle. */
    ASSERT_EQ(hpz_store_detach(st, &g_job[2], KEY_A), 1);
    ASSERT_EQ(hpz_store_detach(st, &g_job[2], KEY_A), 0);
    hpz_store_drop_job(st, &g_job[0]);
    ASSERT_EQ(hpz_store_detach(st, &g_job[1], NULL), 1);
    ss = sstats(st);
    ASSERT_EQ(ss.replicas, 1);
    ASSERT_EQ(ss.attachments, 0);
    ASSERT_EQ(ss.idle, 1);
    ASSERT_EQ(used(st), 128);
    hpz_store_free(st);
}

static void count_cb(const struct hpz_shared_info *in, void *arg)
{
    int *n = arg;
    ASSERT_STR_EQ(in->key, KEY_A);
    ASSERT_EQ(in->owner, T_OWNER);
    ASSERT_EQ(in->bytes, 128);
    ASSERT_EQ(in->attachments, 2);
    ASSERT_EQ(in->pins, 0);
    (*n)++;
}

static void test_two_publishes_at_once_keep_one_copy(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct hpz_spec s1 = sspec(T_OWNER, &g_job[0], KEY_A, 16, 2);
    struct hpz_spec s2 = sspec(T_OWNER, &g_job[1], KEY_A, 16, 2);
    struct hpz_entry *e1, *e2, *got;
    char msg[256];
    ASSERT_EQ(hpz_store_reserve(st, &s1, &e1, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_reserve(st, &s2, &e2, msg, sizeof msg), 0);
    ASSERT_EQ(used(st), 256); /* both pending: both in memory */
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job[1]), 128);
    ASSERT_EQ(hpz_store_find_shared(st, &s2, 0, &got, msg, sizeof msg), ZPP_ENOENT);
    ASSERT_EQ(hpz_store_commit(st, e1), 0);
    ASSERT_EQ(hpz_store_commit(st, e2), 0); /* dedup: e2 freed */
    ASSERT_EQ(used(st), 128);
    struct hpz_share_stats ss = sstats(st);
    ASSERT_EQ(ss.replicas, 1);
    ASSERT_EQ(ss.attachments, 2);
    ASSERT_EQ(ss.published, 1);
    ASSERT_EQ(ss.deduplicated, 1);
    int n = 0;
    hpz_store_shared_foreach(st, count_cb, &n);
    ASSERT_EQ(n, 1);

    /* A publish whose job ends before the commit stores nothing. */
    struct hpz_spec s3 = sspec(T_OWNER, &g_job[2], KEY_B, 16, 2);
    struct hpz_entry *e3;
    ASSERT_EQ(hpz_store_reserve(st, &s3, &e3, msg, sizeof msg), 0);
    hpz_store_drop_job(st, &g_job[2]);
    ASSERT_EQ(hpz_store_commit(st, e3), ZPP_EABORTED);
    ASSERT_EQ(used(st), 128);
    /* A second tenant who may not read the owner's replica gets its own. */
    struct hpz_spec s4 = sspec(T_OTHER, &g_job[3], KEY_A, 16, 2);
    publish(st, &s4);
    ASSERT_EQ(used(st), 256);
    ASSERT_EQ(sstats(st).replicas, 2);
    hpz_store_free(st);
}

static void test_idle_replicas_evicted_lru_never_in_use(void)
{
    /* 2 slots of 64 bytes per replica; 3 replicas fit the device budget. */
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 200, 0);
    static char keys[4][HPZ_CONTENT_KEY_LEN + 1];
    for (int i = 0; i < 4; i++) {
        snprintf(keys[i], sizeof keys[i], "sha256:%064d", i);
        ASSERT(hpz_content_key_ok(keys[i]));
    }
    struct hpz_entry *e[4], *got;
    char msg[256];
    for (int i = 0; i < 3; i++) {
        struct hpz_spec sp = sspec(T_OWNER, &g_job[i], keys[i], 16, 2);
        e[i] = publish(st, &sp);
    }
    ASSERT_EQ(used(st), 384);
    /* Replica 0 stays attached; 1 and 2 go idle; 2 is then read (pinned,
     * more recent). A new replica needs the room of one: 1 goes. */
    hpz_store_drop_job(st, &g_job[1]);
    hpz_store_drop_job(st, &g_job[2]);
    struct hpz_spec rd = sspec(T_OWNER, &g_job[4], keys[2], 16, 2);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 0, &got, msg, sizeof msg), 0);
    ASSERT(got == e[2]);
    struct hpz_spec sp3 = sspec(T_OWNER, &g_job[3], keys[3], 16, 2);
    e[3] = publish(st, &sp3);
    ASSERT_EQ(sstats(st).evicted, 1);
    rd = sspec(T_OWNER, &g_job[4], keys[1], 16, 2);
    ASSERT_EQ(hpz_store_find_shared(st, &rd, 0, &got, msg, sizeof msg), ZPP_ENOENT);
    ASSERT_EQ(used(st), 384);

    /* Everything left is attached or pinned: a reserve fails, evicting
     * nothing. */
    struct hpz_spec big = sspec(T_OWNER, &g_job[5], KEY_B, 16, 2);
    struct hpz_entry *eb;
    ASSERT_EQ(hpz_store_reserve(st, &big, &eb, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_EQ(used(st), 384);
    /* Unpinned, replica 2 is idle: a private reserve evicts it. */
    hpz_store_unpin(st, e[2]);
    struct hpz_spec priv = {.tenant = T_OTHER,
                            .job = &g_job[5],
                            .key = "w",
                            .count = 32,
                            .dtype = ZK_FP32,
                            .slice = 16,
                            .nslots = 2};
    ASSERT_EQ(hpz_store_reserve(st, &priv, &eb, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, eb), 0);
    ASSERT_EQ(sstats(st).evicted, 2);
    ASSERT_EQ(sstats(st).replicas, 2);
    /* Would not fit even with every idle replica gone: nothing evicted. */
    hpz_store_drop_job(st, &g_job[3]); /* replica 3 idle */
    struct hpz_spec huge = sspec(T_OWNER, &g_job[5], KEY_B, 64, 2);
    ASSERT_EQ(hpz_store_reserve(st, &huge, &eb, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_EQ(sstats(st).replicas, 2);
    hpz_store_free(st);

    /* The tenant budget: a replica counts against its owner, and the
     * owner's idle replicas make room for the owner. */
    st = hpz_store_new(&be_host_ops, NULL, 0, 256);
    struct hpz_spec a = sspec(T_OWNER, &g_job[0], keys[0], 16, 2);
    publish(st, &a);
    struct hpz_spec b = sspec(T_OWNER, &g_job[1], keys[1], 16, 2);
    publish(st, &b);
    struct hpz_spec c = sspec(T_OWNER, &g_job[2], keys[2], 16, 2);
    ASSERT_EQ(hpz_store_reserve(st, &c, &eb, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "budget of tenant 1000");
    hpz_store_drop_job(st, &g_job[0]);
    publish(st, &c);
    ASSERT_EQ(sstats(st).evicted, 1);
    ASSERT_EQ(hpz_store_tenant_bytes(st, T_OWNER), 256);
    hpz_store_free(st);
}

/* The config key: pairs parsed, bad values refused without a change,
 * printed back in the file format, copied on reload. */
static void test_config_hpz_share(void)
{
    struct zpp_config c, d;
    char why[256], buf[4096];
    cfg_defaults(&c);
    ASSERT_EQ(c.hpz_share.n, 0);
    ASSERT_EQ(cfg_set(&c, "hpz_share", "1000:1001, 1000:1002  7:0", why, sizeof why), 0);
    ASSERT_EQ(c.hpz_share.n, 3);
    ASSERT_EQ(c.hpz_share.pair[1][0], 1000);
    ASSERT_EQ(c.hpz_share.pair[1][1], 1002);
    ASSERT_EQ(c.hpz_share.pair[2][0], 7);
    ASSERT_EQ(c.hpz_share.pair[2][1], 0);
    const char *bad[] = {"1000", "1000:", ":1001", "1000:1001x", "a:b", "1000:99999999999", "-1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(cfg_set(&c, "hpz_share", bad[i], why, sizeof why), -1);
        ASSERT_CONTAINS(why, "hpz_share");
        ASSERT_EQ(c.hpz_share.n, 3);
    }
    FILE *f = fmemopen(buf, sizeof buf, "w");
    ASSERT(f);
    cfg_print(&c, f);
    fclose(f);
    ASSERT_CONTAINS(buf, "hpz_share = 1000:1001 1000:1002 7:0\n");
    cfg_defaults(&d);
    cfg_apply_reloadable(&d, &c);
    ASSERT_EQ(d.hpz_share.n, 3);
    ASSERT_EQ(cfg_set(&c, "hpz_share", "", why, sizeof why), 0);
    ASSERT_EQ(c.hpz_share.n, 0);
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    hpz_store_set_share(st, d.hpz_share.pair, d.hpz_share.n);
    ASSERT(hpz_store_may_read(st, 1002, 1000));
    ASSERT(hpz_store_may_read(st, 0, 7));
    ASSERT(!hpz_store_may_read(st, 1000, 1002));
    hpz_store_free(st);
}

/* ---- through the collectives (host backend) --------------------------- */

struct rig {
    struct be_topo t;
    struct coll_slot slots[MAX_W];
};

static struct coll_args args_of(int op, int dtype, uint64_t count)
{
    struct coll_args a = {.op = op,
                          .dtype = dtype,
                          .out_dtype = dtype,
                          .bits = 8,
                          .reduce = ZK_SUM,
                          .block = COLL_DEFAULT_BLOCK,
                          .stages = 1,
                          .count = count};
    return a;
}

static void rig_alloc(struct rig *g, const struct coll_args *a)
{
    size_t in_b, out_b;
    char why[256];
    ASSERT_EQ(coll_buffer_needs(a, &g->t, &in_b, &out_b, why, sizeof why), 0);
    for (int s = 0; s < g->t.nslots; s++) {
        free(g->slots[s].in);
        free(g->slots[s].out);
        g->slots[s].in = in_b ? malloc(in_b) : NULL;
        g->slots[s].in_len = in_b;
        g->slots[s].out = out_b ? malloc(out_b) : NULL;
        g->slots[s].out_len = out_b;
        if (out_b)
            memset(g->slots[s].out, 0x5A, out_b);
    }
}

static void rig_free(struct rig *g)
{
    for (int s = 0; s < g->t.nslots; s++) {
        free(g->slots[s].in);
        free(g->slots[s].out);
        g->slots[s].in = g->slots[s].out = NULL;
    }
}

static int run_as(struct rig *g, const struct coll_args *a, struct hpz_store *st, uint32_t tenant,
                  const void *job, char *msg)
{
    struct coll_exec x;
    memset(&x, 0, sizeof x);
    x.args = *a;
    x.topo = g->t;
    x.slots = g->slots;
    x.owner.tenant_uid = tenant;
    x.owner.job_id = "job";
    x.owner.job = job;
    x.store = st;
    x.call.ops = &be_host_ops;
    if (coll_prepare(&x) == 0)
        coll_run(&x);
    coll_finish(&x);
    snprintf(msg, 256, "%s", x.msg);
    return x.status;
}

static void expect(int got, int want, const char *msg)
{
    if (got != want)
        fprintf(stderr, "got %s, expected %s: %s\n", zpp_err_name(got), zpp_err_name(want), msg);
    ASSERT_EQ(got, want);
}

/* The content key of n bytes. */
static void key_of(const void *p, size_t n, char *key)
{
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    sha256(p, n, d);
    sha256_hex(d, hex);
    snprintf(key, HPZ_CONTENT_KEY_LEN + 1, "sha256:%s", hex);
}

/* Fills rank shards of the tensor whose element i is base + i (as dtype). */
static void fill(struct rig *g, const struct coll_args *a, float base)
{
    uint64_t W = (uint64_t)g->t.world, shard = (a->count + W - 1) / W;
    for (int s = 0; s < g->t.nslots; s++)
        for (uint64_t i = 0; i < shard; i++)
            zk_narrow(base + (float)((uint64_t)s * shard + i) * 0.25f, g->slots[s].in, a->dtype, i);
}

static void check_publish_and_read(int nodes, int local, int op, int dtype, uint64_t count)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    const uint32_t rules[][2] = {{T_OWNER, T_FRIEND}};
    hpz_store_set_share(st, rules, 1);
    struct rig g = {.t = {.world = nodes * local,
                          .nodes = nodes,
                          .local = local,
                          .nslots = nodes * local,
                          .rank0 = 0}};
    size_t esize = zk_dtype_size(dtype), tbytes = (size_t)count * esize;
    uint64_t slice = (count + (uint64_t)local - 1) / (uint64_t)local;
    uint64_t one_copy = (uint64_t)(nodes * local) * slice * esize;
    char msg[256], key[HPZ_CONTENT_KEY_LEN + 1], bad_key[HPZ_CONTENT_KEY_LEN + 1];

    /* The tensor this gather returns (for qwZ, dequantized): its hash is
     * the content key. */
    struct coll_args a = args_of(op, dtype, count);
    rig_alloc(&g, &a);
    fill(&g, &a, 1.0f);
    expect(run_as(&g, &a, st, T_OWNER, &g_job[0], msg), 0, msg);
    uint8_t *want = malloc(tbytes);
    memcpy(want, g.slots[0].out, tbytes);
    key_of(want, tbytes, key);
    snprintf(bad_key, sizeof bad_key, "%s", key);
    bad_key[10] = bad_key[10] == '0' ? '1' : '0';

    /* A key that is not the tensor's hash: refused, nothing kept. */
    struct coll_args p = a;
    p.flags = ZPP_FLAG_PUBLISH;
    snprintf(p.content_key, sizeof p.content_key, "%s", bad_key);
    expect(run_as(&g, &p, st, T_OWNER, &g_job[0], msg), ZPP_EMISMATCH, msg);
    ASSERT_CONTAINS(msg, "is not the SHA-256 of the gathered tensor");
    ASSERT_EQ(used(st), 0);

    /* Job 0 publishes: one copy, and its output is the gathered tensor. */
    snprintf(p.content_key, sizeof p.content_key, "%s", key);
    expect(run_as(&g, &p, st, T_OWNER, &g_job[0], msg), 0, msg);
    ASSERT(memcmp(g.slots[nodes * local - 1].out, want, tbytes) == 0);
    ASSERT_EQ(used(st), one_copy);
    ASSERT_EQ(sstats(st).replicas, 1);

    /* Job 1 (same tenant) publishes the same bytes: attached, no copy. */
    expect(run_as(&g, &p, st, T_OWNER, &g_job[1], msg), 0, msg);
    ASSERT_EQ(used(st), one_copy);
    ASSERT_EQ(sstats(st).attachments, 2);
    ASSERT_EQ(sstats(st).deduplicated, 1);

    /* Job 2 publishes different bytes under the used key: refused. */
    fill(&g, &a, 7.0f);
    expect(run_as(&g, &p, st, T_OWNER, &g_job[2], msg), ZPP_EEXIST, msg);
    ASSERT_CONTAINS(msg, "already holds different bytes");
    ASSERT_EQ(used(st), one_copy);
    ASSERT_EQ(sstats(st).attachments, 2);

    /* Readers: the owner's job 3 and an allowed tenant's job 4 get the
     * published bytes; a third tenant is refused. */
    struct coll_args r = args_of(ZPP_OP_HPZ_GATHER, dtype, count);
    snprintf(r.content_key, sizeof r.content_key, "%s", key);
    rig_alloc(&g, &r);
    expect(run_as(&g, &r, st, T_OWNER, &g_job[3], msg), 0, msg);
    for (int s = 0; s < g.t.nslots; s++)
        ASSERT(memcmp(g.slots[s].out, want, tbytes) == 0);
    rig_alloc(&g, &r);
    expect(run_as(&g, &r, st, T_FRIEND, &g_job[4], msg), 0, msg);
    for (int s = 0; s < g.t.nslots; s++)
        ASSERT(memcmp(g.slots[s].out, want, tbytes) == 0);
    expect(run_as(&g, &r, st, T_OTHER, &g_job[5], msg), ZPP_EPERM, msg);
    ASSERT_EQ(used(st), one_copy);
    ASSERT_EQ(sstats(st).attachments, 4);

    /* A content-key invalidate detaches; invalidate-all too, unless
     * ZPP_FLAG_KEEP_SHARED keeps the job's replicas (its own keys go). */
    struct coll_args inv = args_of(ZPP_OP_HPZ_INVALIDATE, dtype, 0);
    snprintf(inv.content_key, sizeof inv.content_key, "%s", key);
    expect(run_as(&g, &inv, st, T_OWNER, &g_job[3], msg), 0, msg);
    inv.content_key[0] = '\0';
    inv.flags = ZPP_FLAG_INVALIDATE_ALL | ZPP_FLAG_KEEP_SHARED;
    expect(run_as(&g, &inv, st, T_FRIEND, &g_job[4], msg), 0, msg);
    ASSERT_EQ(sstats(st).attachments, 3);
    inv.flags = ZPP_FLAG_INVALIDATE_ALL;
    expect(run_as(&g, &inv, st, T_FRIEND, &g_job[4], msg), 0, msg);
    ASSERT_EQ(sstats(st).attachments, 2);
    ASSERT_EQ(used(st), one_copy);
    free(want);
    rig_free(&g);
    hpz_store_free(st);
}

static void check_bad_arguments(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct rig g = {.t = {.world = 2, .nodes = 1, .local = 2, .nslots = 2, .rank0 = 0}};
    char msg[256];
    struct coll_args a = args_of(ZPP_OP_ALLGATHER, ZK_FP32, 64);
    rig_alloc(&g, &a);
    a.flags = ZPP_FLAG_PUBLISH;
    expect(run_as(&g, &a, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg); /* no key */
    ASSERT_CONTAINS(msg, "needs a content_key");
    snprintf(a.content_key, sizeof a.content_key, "sha256:ABC");
    expect(run_as(&g, &a, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    ASSERT_CONTAINS(msg, "64 lowercase hex digits");
    snprintf(a.content_key, sizeof a.content_key, "%s", KEY_A);
    snprintf(a.hpz_key, sizeof a.hpz_key, "w");
    expect(run_as(&g, &a, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    a.hpz_key[0] = '\0';
    a.flags = 0; /* a content key on an all-gather without the flag */
    expect(run_as(&g, &a, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    struct coll_args rs = args_of(ZPP_OP_REDUCE_SCATTER, ZK_FP32, 64);
    rig_alloc(&g, &rs);
    rs.flags = ZPP_FLAG_PUBLISH;
    snprintf(rs.content_key, sizeof rs.content_key, "%s", KEY_A);
    expect(run_as(&g, &rs, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    struct coll_args r = args_of(ZPP_OP_HPZ_GATHER, ZK_FP32, 64);
    snprintf(r.content_key, sizeof r.content_key, "%s", KEY_A);
    rig_alloc(&g, &r);
    snprintf(r.hpz_key, sizeof r.hpz_key, "w");
    expect(run_as(&g, &r, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    r.hpz_key[0] = '\0';
    expect(run_as(&g, &r, st, T_OWNER, &g_job[0], msg), ZPP_ENOENT, msg);
    /* ZPP_FLAG_KEEP_SHARED belongs to an invalidate-all alone. */
    struct coll_args ks = args_of(ZPP_OP_HPZ_INVALIDATE, ZK_FP32, 0);
    snprintf(ks.hpz_key, sizeof ks.hpz_key, "w");
    ks.flags = ZPP_FLAG_KEEP_SHARED;
    expect(run_as(&g, &ks, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    ASSERT_CONTAINS(msg, "ZPP_FLAG_KEEP_SHARED applies to an hpZ invalidate-all only");
    rs.content_key[0] = '\0';
    rs.flags = ZPP_FLAG_INVALIDATE_ALL | ZPP_FLAG_KEEP_SHARED;
    expect(run_as(&g, &rs, st, T_OWNER, &g_job[0], msg), ZPP_EINVAL, msg);
    /* A daemon hosting only part of a node cannot publish. */
    struct rig h = {.t = {.world = 4, .nodes = 1, .local = 4, .nslots = 2, .rank0 = 1}};
    struct coll_args p = args_of(ZPP_OP_ALLGATHER, ZK_FP32, 64);
    rig_alloc(&h, &p);
    p.flags = ZPP_FLAG_PUBLISH;
    snprintf(p.content_key, sizeof p.content_key, "%s", KEY_A);
    expect(run_as(&h, &p, st, T_OWNER, &g_job[0], msg), ZPP_EUNSUPPORTED, msg);
    ASSERT_EQ(used(st), 0);
    rig_free(&g);
    rig_free(&h);
    hpz_store_free(st);
}

int main(void)
{
    test_content_key_form_and_share_rules();
    test_replica_found_by_tenant_rules_and_layout();
    test_two_publishes_at_once_keep_one_copy();
    test_idle_replicas_evicted_lru_never_in_use();
    test_config_hpz_share();
    check_bad_arguments();
    check_publish_and_read(1, 2, ZPP_OP_ALLGATHER, ZK_FP32, 1000);
    check_publish_and_read(2, 2, ZPP_OP_ALLGATHER, ZK_BF16, 1001);
    check_publish_and_read(1, 4, ZPP_OP_QWZ_ALLGATHER, ZK_BF16, 4099);
    check_publish_and_read(2, 3, ZPP_OP_QWZ_ALLGATHER, ZK_FP16, 777);
    check_publish_and_read(1, 1, ZPP_OP_QWZ_ALLGATHER, ZK_FP32, 5);
    printf("test_hpz_store_share: ok\n");
    return 0;
}
