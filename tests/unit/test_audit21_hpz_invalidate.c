/*
 * test_audit21_hpz_invalidate.c — an hpZ invalidate with
 * ZPP_FLAG_INVALIDATE_ALL drops every private key of the job and detaches
 * it from every shared replica, also when the call names a content key
 * (docs/protocol.md: "with content_key, detaches the job from that shared
 * replica (invalidate-all detaches from all)"; the Python client sends both
 * for hpz_invalidate(content_key=..., all=True)). Before the fix the flag
 * was ignored when a content key was named: the job's private keys stayed
 * readable (a later hpZ gather returned the stale weights instead of
 * ZPP_ENOENT) and its other attachments kept their replicas pinned.
 */
#include <string.h>

#include "coll_rig.h"
#include "hpz_store.h"
#include "sha256.h"
#include "zpp.h"

#define W 2
#define COUNT 1000u

static struct coll_args args_of(int op)
{
    struct coll_args a = {.op = op,
                          .dtype = ZK_FP32,
                          .out_dtype = ZK_FP32,
                          .bits = 8,
                          .reduce = ZPP_SUM,
                          .block = COLL_DEFAULT_BLOCK,
                          .stages = 1,
                          .count = COUNT};
    return a;
}

/* The rig's buffers for a (fresh ones), inputs holding the shards of the
 * tensor t[i] = i * scale. */
static void rig_alloc(struct rig *g, const struct coll_args *a, float scale)
{
    rig_free(g);
    rig_alloc_fill(g, a, 0x5A);
    uint64_t shard = (COUNT + W - 1) / W;
    for (int s = 0; s < W; s++)
        for (uint64_t e = 0; g->in_b && e < shard; e++) {
            uint64_t i = s * shard + e;
            ((float *)g->slots[s].in)[e] = i < COUNT ? (float)i * scale : 0;
        }
}

static int run(struct rig *g, const struct coll_args *a, struct hpz_store *st, char *msg)
{
    return rig_call(g, a, st, "audit21", NULL, msg);
}

static void content_key_of(float scale, char *key, size_t len)
{
    float *t = malloc(COUNT * sizeof *t);
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    ASSERT(t);
    for (uint64_t i = 0; i < COUNT; i++)
        t[i] = (float)i * scale;
    sha256(t, COUNT * sizeof *t, d);
    sha256_hex(d, hex);
    snprintf(key, len, "sha256:%s", hex);
    free(t);
}

static uint64_t attachments(struct hpz_store *st)
{
    struct hpz_share_stats s;
    hpz_store_share_stats(st, &s);
    return s.attachments;
}

static void test_invalidate_all_with_content_key_drops_everything(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct rig g = {.t = topo_of(1, W)};
    char msg[256], k1[80], k2[80];
    ASSERT(st);
    content_key_of(1.0f, k1, sizeof k1);
    content_key_of(2.0f, k2, sizeof k2);

    /* The job keeps a private key and publishes (attaches to) two replicas. */
    struct coll_args a = args_of(ZPP_OP_ALLGATHER);
    snprintf(a.hpz_key, sizeof a.hpz_key, "layer0");
    rig_alloc(&g, &a, 1.0f);
    ASSERT_EQ(run(&g, &a, st, msg), 0);
    struct coll_args p = args_of(ZPP_OP_ALLGATHER);
    p.flags = ZPP_FLAG_PUBLISH;
    snprintf(p.content_key, sizeof p.content_key, "%s", k1);
    rig_alloc(&g, &p, 1.0f);
    ASSERT_EQ(run(&g, &p, st, msg), 0);
    snprintf(p.content_key, sizeof p.content_key, "%s", k2);
    rig_alloc(&g, &p, 2.0f);
    ASSERT_EQ(run(&g, &p, st, msg), 0);
    ASSERT_EQ(attachments(st), 2);

    /* Invalidate-all that also names one content key. */
    struct coll_args inv = args_of(ZPP_OP_HPZ_INVALIDATE);
    inv.flags = ZPP_FLAG_INVALIDATE_ALL;
    snprintf(inv.content_key, sizeof inv.content_key, "%s", k1);
    ASSERT_EQ(run(&g, &inv, st, msg), 0);

    /* Every attachment is gone, and so is the private key. */
    ASSERT_EQ(attachments(st), 0);
    struct coll_args r = args_of(ZPP_OP_HPZ_GATHER);
    snprintf(r.hpz_key, sizeof r.hpz_key, "layer0");
    rig_alloc(&g, &r, 1.0f);
    int rc = run(&g, &r, st, msg);
    if (rc != ZPP_ENOENT)
        fprintf(stderr, "hpZ gather of an invalidated key: rc %d (%s)\n", rc, msg);
    ASSERT_EQ(rc, ZPP_ENOENT);
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job), 0);

    /* A plain content-key invalidate still only detaches that key. */
    snprintf(p.content_key, sizeof p.content_key, "%s", k1);
    rig_alloc(&g, &p, 1.0f);
    ASSERT_EQ(run(&g, &p, st, msg), 0);
    snprintf(p.content_key, sizeof p.content_key, "%s", k2);
    rig_alloc(&g, &p, 2.0f);
    ASSERT_EQ(run(&g, &p, st, msg), 0);
    ASSERT_EQ(attachments(st), 2);
    inv.flags = 0;
    ASSERT_EQ(run(&g, &inv, st, msg), 0);
    ASSERT_EQ(attachments(st), 1);

    hpz_store_drop_job(st, &g_job);
    rig_free(&g);
    hpz_store_free(st);
}

int main(void)
{
    test_invalidate_all_with_content_key_drops_everything();
    printf("test_audit21_hpz_invalidate: ok\n");
    return 0;
}
