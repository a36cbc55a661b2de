/*
 * coll.c — the collective algorithms (qwZ, hpZ gather/invalidate, plain
 * all-gather and reduce-scatter, barrier; qgZ lives in qgz.c), written
 * against the backend table of backend.h, plus argument validation and the
 * byte accounting.
 *
 * Byte accounting (coll_result; whole job, all ranks, the same on every
 * backend; computed from the geometry in coll_prepare). Notation: W = N*G,
 * esize = size of dtype, shard = ceil(count/W), chunk = zk_chunk_bytes(
 * shard, bits, block), slice = ceil(count/G), piece_bytes and S' (stages
 * that carry data, <= S) from the qgZ geometry. An all-gather delivers each
 * rank's block to the W-1 other ranks; delivered hierarchically, N-1 of
 * those deliveries cross a node boundary (one per other node) and the other
 * W-N stay inside nodes. A reduce-scatter is its mirror image.
 *   logical_bytes      = count * esize                 (0: invalidate, barrier)
 *   bytes_zero3_inter  = (N-1) * count * esize         (0: invalidate, barrier)
 *   qwZ                inter = (N-1) * W * chunk
 *                      intra = (W-N) * W * chunk
 *   plain all-gather   inter = (N-1) * W * shard * esize
 *                      intra = (W-N) * W * shard * esize
 *   hpZ gather         inter = 0
 *                      intra = N * G * (G-1) * slice * esize
 *   plain RS, and qgZ on one node (exact)
 *                      inter = (N-1) * W * shard * esize
 *                      intra = W * (G-1) * N * shard * esize
 *   qgZ hierarchical   inter = W * (N-1) * S' * piece_bytes
 *                      intra = W * (G-1) * N * S' * piece_bytes
 *   qgZ flat (G = 1)   inter = W * (N-1) * S' * piece_bytes, intra = 0
 * Ratios inter / zero3 for bf16: qwZ int8 ~0.5, hpZ 0, qgZ int4 ~0.25 (the
 * fp32 scales add 4/B per element).
 *
 * hpZ slices: the qwZ that names a key keeps, on the rank of local index i,
 * elements [i*slice, min(count, (i+1)*slice)) of its dequantized output
 * (zero-padded to slice, dtype of the output), so the G ranks of any node
 * together hold the whole tensor.
 *
 * Non-finite inputs: result.nonfinite_blocks sums the blocks poisoned at
 * every quantization step of the call, on every rank (zpp_kernels.h).
 *
 * Shared replicas (docs/hpz-sharing.md): a publish keeps the same slices,
 * in a shared entry, and before the commit checks, for every node this
 * daemon hosts, that the SHA-256 of its G slices in local order cut to
 * count elements (= the gathered tensor) is the content key. When a
 * replica of the key is already there, nothing is stored: the call's own
 * slices are hashed the same way, and equal bytes attach the job to the
 * replica, different bytes are refused. Nothing writes into a shared entry
 * after its commit: keep_slices writes only the entry this call reserved.
 */
#include "coll.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "frame.h"
#include "hpz_store.h"
#include "sha256.h"
#include "zpp.h"

#define QWZ_MAX_PIECES 8
#define QWZ_EARLY_BYTES (1ull << 20) /* run_qwz: own part dequantized beside the gather */

#define COLL_MAX_STAGES 64u
#define COLL_HASH_STAGING (4u << 20) /* bytes per device-to-host copy when hashing */

/* What coll_exec.store_ref is. */
enum coll_store {
    COLL_STORE_NONE = 0,
    COLL_STORE_PRIVATE, /* qwZ with hpz_key: a pending private entry */
    COLL_STORE_PIN,     /* hpZ gather of hpz_key: a pinned private entry */
    COLL_STORE_PUBLISH, /* publish: a pending shared entry */
    COLL_STORE_DEDUP,   /* publish of a key already there: the pinned replica */
    COLL_STORE_READ     /* hpZ gather of a content key: the pinned replica */
};

/* ---- errors --------------------------------------------------------- */

int coll_fail_at(struct coll_exec *x, int rc, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    int code = rc < 0 && rc >= ZPP_ERRNO_MAX ? rc : ZPP_EBACKEND;
    snprintf(x->msg, sizeof x->msg, "%.16s backend failed at %.32s:%d: %.160s",
             x->call.ops && x->call.ops->name ? x->call.ops->name : "?", base ? base + 1 : file,
             line, x->call.err[0] ? x->call.err : zpp_strerror(code));
    return code;
}

static int bad(char *why, size_t why_len, const char *what)
{
    if (why && why_len)
        snprintf(why, why_len, "%s", what);
    return ZPP_EINVAL;
}

/* ---- validation ----------------------------------------------------- */

static int op_is_gather(int op)
{
    return op == ZPP_OP_QWZ_ALLGATHER || op == ZPP_OP_ALLGATHER;
}

static int op_is_reduce(int op)
{
    return op == ZPP_OP_QGZ_REDUCE_SCATTER || op == ZPP_OP_REDUCE_SCATTER;
}

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b && a > UINT64_MAX / b)
        return 0;
    *out = a * b;
    return 1;
}

static size_t key_len(const struct coll_args *a)
{
    const char *nul = memchr(a->hpz_key, '\0', sizeof a->hpz_key);
    return nul ? (size_t)(nul - a->hpz_key) : sizeof a->hpz_key;
}

/* The content key and ZPP_FLAG_PUBLISH: a publish is an all-gather with a
 * content key and no hpz_key; otherwise a content key names a replica to
 * read (hpZ gather) or detach from (hpZ invalidate), in place of hpz_key. */
static int check_content_key(const struct coll_args *a, char *why, size_t why_len)
{
    int has = a->content_key[0] != '\0';
    if (has && !hpz_content_key_ok(a->content_key))
        return bad(why, why_len,
                   "content_key must be \"sha256:\" and 64 lowercase hex digits (the SHA-256 "
                   "of the tensor)");
    if (a->flags & ZPP_FLAG_PUBLISH) {
        if (!op_is_gather(a->op))
            return bad(why, why_len, "ZPP_FLAG_PUBLISH applies to qwZ and plain all-gathers");
        if (!has)
            return bad(why, why_len, "ZPP_FLAG_PUBLISH needs a content_key");
        if (key_len(a))
            return bad(why, why_len, "a publish takes content_key, not hpz_key");
        return 0;
    }
    if (!has)
        return 0;
    if (a->op != ZPP_OP_HPZ_GATHER && a->op != ZPP_OP_HPZ_INVALIDATE)
        return bad(why, why_len,
                   "content_key applies to hpZ gathers and invalidates, and to all-gathers with "
                   "ZPP_FLAG_PUBLISH");
    if (key_len(a))
        return bad(why, why_len, "give hpz_key or content_key, not both");
    return 0;
}

/* Checks everything about args and topology; fills the buffer sizes. */
static int check_args(const struct coll_args *a, const struct be_topo *t, uint64_t *in_b,
                      uint64_t *out_b, char *why, size_t why_len)
{
    *in_b = *out_b = 0;
    if (t->nodes < 1 || t->local < 1 || t->world != t->nodes * t->local || t->nslots < 1 ||
        t->rank0 < 0 || t->nslots > t->world || t->rank0 > t->world - t->nslots)
        return bad(why, why_len, "bad topology");
    if (a->op < ZPP_OP_QWZ_ALLGATHER || a->op > ZPP_OP_BARRIER)
        return bad(why, why_len, "unknown operation");
    /* The protocol's limit (frame.c: shorter than ZPP_MAX_KEY), though
     * hpz_key has room for one byte more. */
    if (key_len(a) >= ZPP_MAX_KEY) {
        if (why && why_len)
            snprintf(why, why_len, "hpZ key too long (at most %u bytes)", ZPP_MAX_KEY - 1);
        return ZPP_EINVAL;
    }
    int ck = check_content_key(a, why, why_len);
    if (ck)
        return ck;
    if ((a->flags & ZPP_FLAG_KEEP_SHARED) &&
        (a->op != ZPP_OP_HPZ_INVALIDATE || !(a->flags & ZPP_FLAG_INVALIDATE_ALL)))
        return bad(why, why_len, "ZPP_FLAG_KEEP_SHARED applies to an hpZ invalidate-all only");
    if (a->op == ZPP_OP_BARRIER)
        return 0;
    if (a->op == ZPP_OP_HPZ_INVALIDATE) {
        if (key_len(a) == 0 && !a->content_key[0] && !(a->flags & ZPP_FLAG_INVALIDATE_ALL))
            return bad(why, why_len,
                       "hpZ invalidate needs a key, a content key or the invalidate-all flag");
        return 0;
    }
    size_t esize = zk_dtype_size(a->dtype);
    if (!esize)
        return bad(why, why_len, "unknown dtype (fp32, fp16 or bf16)");
    if (a->count < 1)
        return bad(why, why_len, "count must be at least 1");
    if (a->op == ZPP_OP_QWZ_ALLGATHER || a->op == ZPP_OP_QGZ_REDUCE_SCATTER) {
        if (a->bits != 8 && a->bits != 4)
            return bad(why, why_len, "bits must be 8 or 4");
        if (!zk_params_ok(a->bits, a->block))
            return bad(why, why_len, "block must be a multiple of 32 in 32..8192");
    }
    if (a->op == ZPP_OP_QGZ_REDUCE_SCATTER && (a->stages < 1 || a->stages > COLL_MAX_STAGES))
        return bad(why, why_len, "stages must be in 1..64");
    if (op_is_reduce(a->op)) {
        if (!zk_dtype_size(a->out_dtype))
            return bad(why, why_len, "unknown output dtype (fp32, bf16 or fp16)");
        if (a->reduce != ZPP_SUM && a->reduce != ZPP_MEAN)
            return bad(why, why_len, "unknown reduction (sum or mean)");
    }
    if (a->op == ZPP_OP_HPZ_GATHER && key_len(a) == 0 && !a->content_key[0])
        return bad(why, why_len, "hpZ gather needs a key or a content key");

    uint64_t W = (uint64_t)t->world, shard = (a->count + W - 1) / W, total, sb, tmp;
    /* Every size the algorithms form, checked once here. */
    if (!mul_ok(a->count, esize, &total) || !mul_ok(shard * W, esize, &tmp) ||
        !mul_ok(shard, esize, &sb) || total > SIZE_MAX / 2)
        return bad(why, why_len, "count too large");
    if (a->op == ZPP_OP_QWZ_ALLGATHER &&
        (!mul_ok(zk_chunk_bytes(shard, a->bits, a->block) + (uint64_t)QWZ_MAX_PIECES * 4096, W,
                 &tmp) ||
         tmp > SIZE_MAX / 4))
        return bad(why, why_len, "count too large");
    if (a->op == ZPP_OP_QGZ_REDUCE_SCATTER) {
        struct zk_qgz_geom g;
        if (zk_qgz_geom_init(&g, a->count, t->nodes, t->local, (int)a->stages, a->bits, a->block) ||
            !mul_ok(g.piece_bytes, W, &tmp) || tmp > SIZE_MAX / 4)
            return bad(why, why_len, "count too large for the qgZ geometry");
    }
    if (op_is_gather(a->op)) {
        *in_b = sb;
        *out_b = total;
    } else if (op_is_reduce(a->op)) {
        *in_b = total;
        if (!mul_ok(shard, zk_dtype_size(a->out_dtype), out_b))
            return bad(why, why_len, "count too large");
    } else { /* hpZ gather */
        *out_b = total;
    }
    return 0;
}

int coll_buffer_needs(const struct coll_args *a, const struct be_topo *t, size_t *in_bytes,
                      size_t *out_bytes, char *why, size_t why_len)
{
    uint64_t in_b, out_b;
    int rc = check_args(a, t, &in_b, &out_b, why, why_len);
    if (rc)
        return rc;
    *in_bytes = (size_t)in_b;
    *out_bytes = (size_t)out_b;
    return 0;
}

/* ---- accounting ----------------------------------------------------- */

static void account(struct coll_exec *x, const struct qgz_plan *qp)
{
    const struct coll_args *a = &x->args;
    struct coll_result *r = &x->result;
    uint64_t N = (uint64_t)x->topo.nodes, G = (uint64_t)x->topo.local, W = N * G;
    uint64_t esize = zk_dtype_size(a->dtype);
    uint64_t shard = (a->count + W - 1) / W;
    if (a->op == ZPP_OP_BARRIER || a->op == ZPP_OP_HPZ_INVALIDATE)
        return;
    r->logical_bytes = a->count * esize;
    r->bytes_zero3_inter = (N - 1) * a->count * esize;
    switch (a->op) {
    case ZPP_OP_QWZ_ALLGATHER: {
        uint64_t chunk = zk_chunk_bytes(shard, a->bits, a->block);
        r->bytes_inter = (N - 1) * W * chunk;
        r->bytes_intra = (W - N) * W * chunk;
        break;
    }
    case ZPP_OP_ALLGATHER:
        r->bytes_inter = (N - 1) * W * shard * esize;
        r->bytes_intra = (W - N) * W * shard * esize;
        break;
    case ZPP_OP_HPZ_GATHER:
        r->bytes_intra = N * G * (G - 1) * ((a->count + G - 1) / G) * esize;
        break;
    case ZPP_OP_QGZ_REDUCE_SCATTER:
        if (qp->algo != ZPP_ALGO_RS_EXACT) {
            uint64_t moved = (uint64_t)qp->stages_run * qp->g.piece_bytes;
            r->bytes_inter = W * (N - 1) * moved;
            r->bytes_intra = W * (G - 1) * N * moved;
            break;
        }
        r->bytes_inter = (N - 1) * W * shard * esize; /* the exact reduce-scatter */
        r->bytes_intra = W * (G - 1) * N * shard * esize;
        break;
    default: /* ZPP_OP_REDUCE_SCATTER */
        r->bytes_inter = (N - 1) * W * shard * esize;
        r->bytes_intra = W * (G - 1) * N * shard * esize;
        break;
    }
}

/* ---- prepare -------------------------------------------------------- */

static int prepare_store(struct coll_exec *x)
{
    const struct coll_args *a = &x->args;
    const char *key = a->hpz_key;
    const char *jid = x->owner.job_id ? x->owner.job_id : "?";
    int rc;

    if (!x->store) {
        snprintf(x->msg, sizeof x->msg, "hpZ store not available in this daemon");
        return ZPP_EUNSUPPORTED;
    }
    if (op_is_gather(a->op)) {
        struct hpz_spec sp = {
            .tenant = x->owner.tenant_uid,
            .job = x->owner.job,
            .job_id = jid,
            .key = key,
            .count = a->count,
            .dtype = a->dtype,
            .slice = (a->count + (uint64_t)x->topo.local - 1) / (uint64_t)x->topo.local,
            .nslots = x->topo.nslots,
            .devices = x->devices,
        };
        struct hpz_entry *e = NULL;
        rc = hpz_store_reserve(x->store, &sp, &e, x->msg, sizeof x->msg);
        if (rc == 0) {
            x->store_ref = e;
            x->store_kind = COLL_STORE_PRIVATE;
        }
        return rc;
    }
    if (a->op == ZPP_OP_HPZ_GATHER) {
        struct hpz_entry *e = NULL;
        rc = hpz_store_lookup(x->store, x->owner.tenant_uid, x->owner.job, key, &e);
        if (rc) {
            snprintf(x->msg, sizeof x->msg, "hpZ key '%.120s' not found for job %.100s", key, jid);
            return ZPP_ENOENT;
        }
        if (hpz_entry_count(e) != a->count || hpz_entry_dtype(e) != a->dtype ||
            hpz_entry_nslots(e) != x->topo.nslots) {
            snprintf(
                x->msg, sizeof x->msg,
                "hpZ key '%.64s' of job %.48s holds %llu elements of dtype %d, the gather asks "
                "for %llu of dtype %d",
                key, jid, (unsigned long long)hpz_entry_count(e), hpz_entry_dtype(e),
                (unsigned long long)a->count, a->dtype);
            hpz_store_unpin(x->store, e);
            return ZPP_EINVAL;
        }
        x->store_ref = e;
        x->store_kind = COLL_STORE_PIN;
        return 0;
    }
    /* invalidate: idempotent, done here (no data work follows). A content
     * key detaches the job from that replica; invalidate-all detaches it
     * from every replica too, whether or not a content key is named, unless
     * ZPP_FLAG_KEEP_SHARED keeps them attached (a training loop that drops
     * its own keys every step but reads frozen weights from replicas). The
     * replicas stay, for other jobs. */
    if (a->content_key[0] && !(a->flags & ZPP_FLAG_INVALIDATE_ALL)) {
        hpz_store_detach(x->store, x->owner.job, a->content_key);
        return 0;
    }
    hpz_store_invalidate(x->store, x->owner.tenant_uid, x->owner.job,
                         (a->flags & ZPP_FLAG_INVALIDATE_ALL) ? NULL : key);
    if ((a->flags & ZPP_FLAG_INVALIDATE_ALL) && !(a->flags & ZPP_FLAG_KEEP_SHARED))
        hpz_store_detach(x->store, x->owner.job, NULL);
    return 0;
}

/* The store spec of the shared replica this call publishes or reads. */
static struct hpz_spec shared_spec(const struct coll_exec *x)
{
    uint64_t G = (uint64_t)x->topo.local;
    struct hpz_spec sp = {
        .tenant = x->owner.tenant_uid,
        .job = x->owner.job,
        .job_id = x->owner.job_id ? x->owner.job_id : "?",
        .key = x->args.content_key,
        .count = x->args.count,
        .dtype = x->args.dtype,
        .slice = (x->args.count + G - 1) / G,
        .nslots = x->topo.nslots,
        .devices = x->devices,
        .shared = 1,
        .local = x->topo.local,
        .rank0 = x->topo.rank0,
    };
    return sp;
}

/* A publish: attaches to the replica already there (its bytes are checked
 * after the gather), or reserves a new shared entry. */
static int prepare_publish(struct coll_exec *x)
{
    const struct be_ops *ops = x->call.ops;
    struct hpz_entry *e = NULL;
    char why[256];
    int rc;

    if (!x->store) {
        snprintf(x->msg, sizeof x->msg, "hpZ store not available in this daemon");
        return ZPP_EUNSUPPORTED;
    }
    if (ops->enqueue_only && !ops->to_host) {
        snprintf(x->msg, sizeof x->msg,
                 "the %.16s backend cannot read device memory back to verify a content key "
                 "(no to_host hook): publishing is not supported there",
                 ops->name ? ops->name : "?");
        return ZPP_EUNSUPPORTED;
    }
    if (x->topo.rank0 % x->topo.local || x->topo.nslots % x->topo.local) {
        snprintf(x->msg, sizeof x->msg,
                 "publishing needs every rank of a node on this daemon (ranks %d..%d of %d per "
                 "node)",
                 x->topo.rank0, x->topo.rank0 + x->topo.nslots - 1, x->topo.local);
        return ZPP_EUNSUPPORTED;
    }
    struct hpz_spec sp = shared_spec(x);
    if (hpz_store_find_shared(x->store, &sp, 0, &e, why, sizeof why) == 0) {
        x->store_ref = e;
        x->store_kind = COLL_STORE_DEDUP;
        return 0;
    }
    /* Not there, or only where this tenant may not read it: a new copy. */
    rc = hpz_store_reserve(x->store, &sp, &e, x->msg, sizeof x->msg);
    if (rc == 0) {
        x->store_ref = e;
        x->store_kind = COLL_STORE_PUBLISH;
    }
    return rc;
}

/* An hpZ gather of a content key: pins the replica and attaches the job. */
static int prepare_read(struct coll_exec *x)
{
    struct hpz_entry *e = NULL;
    if (!x->store) {
        snprintf(x->msg, sizeof x->msg, "hpZ store not available in this daemon");
        return ZPP_EUNSUPPORTED;
    }
    struct hpz_spec sp = shared_spec(x);
    int rc = hpz_store_find_shared(x->store, &sp, 1, &e, x->msg, sizeof x->msg);
    if (rc)
        return rc;
    x->store_ref = e;
    x->store_kind = COLL_STORE_READ;
    return 0;
}

int coll_prepare(struct coll_exec *x)
{
    const struct coll_args *a = &x->args;
    uint64_t in_b, out_b;
    struct qgz_plan qp = {0};
    int rc;

    x->store_ref = NULL;
    x->store_kind = COLL_STORE_NONE;
    x->ran = 0;
    x->verify_pending = 0;
    x->status = 0;
    x->msg[0] = '\0';
    memset(&x->result, 0, sizeof x->result);
    x->call.topo = x->topo;
    x->call.err[0] = '\0';
    rc = check_args(a, &x->topo, &in_b, &out_b, x->msg, sizeof x->msg);
    if (rc)
        goto exit;
    if (!x->call.ops) {
        snprintf(x->msg, sizeof x->msg, "no backend");
        rc = ZPP_EINVAL;
        goto exit;
    }
    if (in_b || out_b) {
        for (int s = 0; s < x->topo.nslots; s++) {
            const struct coll_slot *sl = &x->slots[s];
            if ((in_b && (!sl->in || sl->in_len < in_b)) ||
                (out_b && (!sl->out || sl->out_len < out_b))) {
                snprintf(x->msg, sizeof x->msg,
                         "rank %d: buffer too small (need %llu in, %llu out bytes)",
                         be_rank(&x->topo, s), (unsigned long long)in_b, (unsigned long long)out_b);
                rc = ZPP_ERANGE;
                goto exit;
            }
        }
    }
    switch (a->op) {
    case ZPP_OP_QWZ_ALLGATHER:
        x->result.algo = ZPP_ALGO_QWZ;
        if (a->flags & ZPP_FLAG_PUBLISH)
            rc = prepare_publish(x);
        else if (a->hpz_key[0])
            rc = prepare_store(x);
        break;
    case ZPP_OP_HPZ_GATHER:
        x->result.algo = ZPP_ALGO_HPZ;
        rc = a->content_key[0] ? prepare_read(x) : prepare_store(x);
        break;
    case ZPP_OP_HPZ_INVALIDATE:
        x->result.algo = ZPP_ALGO_NONE;
        rc = prepare_store(x);
        break;
    case ZPP_OP_QGZ_REDUCE_SCATTER:
        if (qgz_plan(a, &x->topo, &qp)) {
            rc = bad(x->msg, sizeof x->msg, "qgZ geometry refused");
            break;
        }
        x->result.algo = qp.algo;
        break;
    case ZPP_OP_ALLGATHER:
        x->result.algo = ZPP_ALGO_AG_EXACT;
        if (a->flags & ZPP_FLAG_PUBLISH)
            rc = prepare_publish(x);
        else if (a->hpz_key[0])
            rc = prepare_store(x);
        break;
    case ZPP_OP_REDUCE_SCATTER:
        x->result.algo = ZPP_ALGO_RS_EXACT;
        break;
    default:
        x->result.algo = ZPP_ALGO_NONE;
        break;
    }
    if (rc == 0)
        account(x, &qp);
exit:
    x->status = rc;
    return rc;
}

/* ---- the algorithms ------------------------------------------------- */

/* Keeps every slot's node-level slice of its gathered output in the
 * reserved store entry. */
static int keep_slices(struct coll_exec *x, struct hpz_entry *e)
{
    int rc = 0;
    const struct be_ops *ops = x->call.ops;
    uint64_t count = x->args.count, slice = hpz_entry_slice(e), G = (uint64_t)x->topo.local;
    size_t esize = zk_dtype_size(x->args.dtype);
    for (int s = 0; s < x->topo.nslots; s++) {
        uint64_t lo = (uint64_t)be_rank(&x->topo, s) % G * slice;
        uint64_t n = be_clamp(count, lo, slice);
        uint8_t *buf = hpz_entry_buf(e, s);
        COLL_CHECK(x, ops->copy(&x->call, s, buf, (uint8_t *)x->slots[s].out + lo * esize,
                                (size_t)(n * esize)));
        if (n < slice)
            COLL_CHECK(x, ops->zero(&x->call, s, buf + n * esize, (size_t)((slice - n) * esize)));
    }
exit:
    return rc;
}

/* Adds n bytes at src (slot s's memory) to the hash: straight from host
 * memory, or through stage with the backend's to_host hook. */
static int hash_bytes(struct coll_exec *x, struct sha256_ctx *h, int s, const uint8_t *src,
                      size_t n, uint8_t *stage)
{
    int rc = 0;
    const struct be_ops *ops = x->call.ops;
    if (!ops->to_host) {
        sha256_update(h, src, n);
        return 0;
    }
    for (size_t off = 0; off < n; off += COLL_HASH_STAGING) {
        size_t k = n - off < COLL_HASH_STAGING ? n - off : COLL_HASH_STAGING;
        COLL_CHECK(x, ops->to_host(&x->call, s, stage, src + off, k));
        sha256_update(h, stage, k);
    }
exit:
    return rc;
}

/* Checks that the replica of every node this daemon hosts hashes to the
 * content key: the slices of the node's G slots in local order, cut to
 * count elements, read from the reserved entry (publish) or from the
 * outputs (a key already there). Slot s0 of each node has local index 0
 * (prepare_publish checked it). */
static int verify_content(struct coll_exec *x)
{
    int rc = 0;
    struct hpz_entry *e = x->store_ref;
    const char *want = x->args.content_key + sizeof HPZ_CONTENT_PREFIX - 1;
    uint64_t count = x->args.count, slice = hpz_entry_slice(e);
    int G = x->topo.local;
    size_t esize = zk_dtype_size(x->args.dtype);
    uint8_t *stage = NULL;
    if (x->call.ops->to_host && !(stage = malloc(COLL_HASH_STAGING))) {
        snprintf(x->msg, sizeof x->msg, "out of memory hashing the replica");
        return ZPP_ENOMEM;
    }
    for (int s0 = 0; s0 < x->topo.nslots; s0 += G) {
        struct sha256_ctx h;
        uint8_t digest[SHA256_DIGEST_LEN];
        char hex[SHA256_HEX_LEN + 1];
        if (sha256_init(&h) != 0) {
            snprintf(x->msg, sizeof x->msg, "out of memory hashing the replica");
            rc = ZPP_ENOMEM;
            goto exit;
        }
        for (int s = s0; s < s0 + G; s++) {
            uint64_t lo = (uint64_t)(be_rank(&x->topo, s) % G) * slice;
            uint64_t n = be_clamp(count, lo, slice);
            const uint8_t *src = x->store_kind == COLL_STORE_PUBLISH
                                     ? (const uint8_t *)hpz_entry_buf(e, s)
                                     : (const uint8_t *)x->slots[s].out + lo * esize;
            rc = hash_bytes(x, &h, s, src, (size_t)(n * esize), stage);
            if (rc) {
                sha256_abort(&h);
                goto exit;
            }
        }
        if (sha256_final(&h, digest) != 0) {
            snprintf(x->msg, sizeof x->msg, "libcrypto failed hashing the replica");
            rc = ZPP_ENOMEM;
            goto exit;
        }
        sha256_hex(digest, hex);
        if (strcmp(hex, want) != 0) {
            if (x->store_kind == COLL_STORE_DEDUP) {
                snprintf(x->msg, sizeof x->msg,
                         "content key %.71s already holds different bytes: this call's tensor "
                         "hashes to sha256:%s",
                         x->args.content_key, hex);
                rc = ZPP_EEXIST;
            } else {
                snprintf(x->msg, sizeof x->msg,
                         "content key %.71s is not the SHA-256 of the gathered tensor "
                         "(sha256:%s): nothing published",
                         x->args.content_key, hex);
                rc = ZPP_EMISMATCH;
            }
            goto exit;
        }
    }
exit:
    free(stage);
    return rc;
}

/* After an all-gather: keeps the slices (hpz_key, or a new replica) and
 * checks a publish's content key: here when coll_run runs on a worker
 * thread, else later, in coll_verify (coll.h). */
static int store_after_gather(struct coll_exec *x)
{
    int rc = 0;
    if (x->store_kind == COLL_STORE_PRIVATE || x->store_kind == COLL_STORE_PUBLISH)
        rc = keep_slices(x, x->store_ref);
    if (!rc && (x->store_kind == COLL_STORE_PUBLISH || x->store_kind == COLL_STORE_DEDUP)) {
        if (x->call.ops->enqueue_only)
            x->verify_pending = 1;
        else
            rc = verify_content(x);
    }
    return rc;
}

int coll_verify(struct coll_exec *x)
{
    int rc = 0;
    if (x->verify_pending && x->status == 0)
        rc = verify_content(x);
    x->verify_pending = 0;
    x->status = rc;
    return rc;
}

/* qwZ in pieces. The shard is quantized and gathered in P pieces of `ps`
 * elements (a multiple of the block, so the blocks and their bytes are the
 * same whatever P is): piece p's dequantize runs on lane 1 while piece
 * p + 1 travels on lane 0. The gathered buffer is piece-major: piece p
 * starts at W * p * cb(ps), rank r's part of it at r * cb(len_p), so each
 * piece is one in-place all-gather. One piece by default (qwz_plan);
 * ZPP_QWZ_PIECE_MIB makes P about one piece per that many gathered bytes,
 * at most QWZ_MAX_PIECES. */
struct qwz_plan {
    uint64_t shard, ps, P;
};

/* Peer access (be_ops.peer_ok): the mode for `comm`, or 0. */
static int peer_mode(struct coll_exec *x, int comm)
{
    const struct be_ops *o = x->call.ops;
    return o->peer_ok && o->peer_fence ? o->peer_ok(&x->call, comm) : 0;
}

/* The slot hosting member i of slot s's group in `comm` (peer_mode said
 * every member is hosted here). */
static int peer_slot(const struct coll_exec *x, int comm, int s, int i)
{
    return be_member_slot(&x->topo, comm, s, i);
}

/* The gathers' switches and test hook (docs/cuda.md, "Switches"), read
 * once: ZPP_QWZ_PIECE_MIB / _KIB set qwZ's gathered bytes per piece,
 * ZPP_QWZ_HIER and ZPP_AG_HIER the hierarchical paths, ZPP_QWZ_EARLY the own
 * part's dequantize beside the gather. */
static struct {
    uint64_t piece_bytes; /* 0: the plan's own choice */
    int hier;
    int ag_hier; /* ZPP_AG_HIER: the plain all-gather the same way */
    int early;   /* ZPP_QWZ_EARLY: the own part dequantized beside the gather */
    uint64_t peer_max; /* ZPPD_PEER_GATHER_MAX (0: no limit): gather_peers_ok */
} gather_env;
static pthread_once_t gather_env_once = PTHREAD_ONCE_INIT;

static void gather_env_read(void)
{
    const char *mib = getenv("ZPP_QWZ_PIECE_MIB"), *kib = getenv("ZPP_QWZ_PIECE_KIB");
    if (mib && atoi(mib) > 0)
        gather_env.piece_bytes = (uint64_t)atoi(mib) << 20;
    if (kib && atoi(kib) > 0) /* test hook: pieces of the tests' small calls */
        gather_env.piece_bytes = (uint64_t)atoi(kib) << 10;
    gather_env.hier = be_env_switch("ZPP_QWZ_HIER", 1);
    gather_env.ag_hier = be_env_switch("ZPP_AG_HIER", 1);
    gather_env.early = be_env_switch("ZPP_QWZ_EARLY", 1);
    gather_env.peer_max = be_env_uint("ZPPD_PEER_GATHER_MAX", 0, 1024);
}

/* Whether a gather of `members` ranks that the fenced one-kernel paths did
 * not take (be_ops.peer_gather / peer_qwz decline calls over
 * ZPPD_XSYNC_MAX_KIB) may read its peers, else NCCL. Such a gather reads its
 * peers one after the other, a copy or a dequantize per member on each
 * GPU's stream, each reader starting at its own index (be_gather_member), so
 * that at every step each GPU serves one reader. 1 node x 4 H200s
 * (bench/results/x4-2026-11-28-s24/, call 1), against NCCL's all-gather:
 * the plain all-gather 1.02-1.05x and qwZ 1.52-1.66x at 256 MiB - 1 GiB,
 * where the same gathers through NCCL in the daemon gave 0.95-0.99x and
 * 0.94-1.38x (and every reader starting at member 0, session 23: 0.55x and
 * 0.91x). So no limit by default; ZPPD_PEER_GATHER_MAX=N sends gathers of
 * more than N members through NCCL, for machines whose links between GPUs
 * serve one peer pair at a time less well than NCCL's ring. */
static int gather_peers_ok(int members)
{
    pthread_once(&gather_env_once, gather_env_read);
    return !gather_env.peer_max || (uint64_t)members <= gather_env.peer_max;
}

static void qwz_plan(struct coll_exec *x, uint64_t W, struct qwz_plan *q)
{
    const struct coll_args *a = &x->args;
    /* One piece unless ZPP_QWZ_PIECE_MIB asks for pieces. On one node
     * pieces measured slower, with and without MPS
     * (bench/results/cuda-2026-11-22-h200x2-gate.txt: 256 MiB - 1 GiB,
     * 1.13-1.21x NCCL in one piece, 0.83-1.10x in 32 MiB pieces). Across
     * nodes the dequantize a piece hides is ~1 % of its transfer, and every
     * further all-gather pays the network's ramp again: on two simulated
     * nodes one piece gave 1.99x NCCL on average (1.64-2.26x, 2x1)
     * against 1.83x (1.73-1.96x) in 32 MiB pieces, alternated in one
     * call; 2x2 the same within the spread
     * (bench/results/multi-2026-11-23-h200x2-pairag.txt). */
    uint64_t piece_bytes = UINT64_MAX;
    pthread_once(&gather_env_once, gather_env_read);
    if (gather_env.piece_bytes)
        piece_bytes = gather_env.piece_bytes;
    q->shard = (a->count + W - 1) / W;
    uint64_t full = zk_chunk_bytes(q->shard, a->bits, a->block) * W;
    uint64_t P = full / piece_bytes;
    P = P < 1 ? 1 : P > QWZ_MAX_PIECES ? QWZ_MAX_PIECES : P;
    uint64_t ps = (q->shard + P - 1) / P;
    ps = (ps + a->block - 1) / a->block * a->block;
    q->ps = ps;
    q->P = (q->shard + ps - 1) / ps;
}

/* Hierarchical qwZ (several nodes of several ranks each; ZPP_QWZ_HIER=0
 * turns it off, docs/cuda.md): each rank's codes
 * cross the network once, in an all-gather among the N ranks of its local
 * index (BE_COMM_INTER), and reach the rest of the node inside it: read in
 * the peers' staging (peer access) or through an all-gather over
 * BE_COMM_INTRA. NCCL's ring over all W ranks carries (W - 1) / W of the
 * codes across each node boundary it crosses, this (N - 1) / N. The codes
 * and the dequantize are the flat path's, so are the output bytes. Piece
 * p's node step runs on lane 1 while piece p + 1 crosses on lane 0.
 * Two simulated nodes of 2 H200s each: 1.8-1.9x NCCL's bf16 all-gather
 * flat, 3.2-4.2x this way (bench/results/multi-2026-11-22-h200x2-hier.txt),
 * and it is what the byte accounting above always counted. */
static int run_qwz_hier(struct coll_exec *x, const struct qwz_plan *q)
{
    int rc = 0;
    const struct coll_args *a = &x->args;
    const struct be_ops *ops = x->call.ops;
    struct be_call *c = &x->call;
    int ns = x->topo.nslots, N = x->topo.nodes, G = x->topo.local;
    size_t esize = zk_dtype_size(a->dtype);
    uint64_t poisoned = 0;
    uint64_t cbf = zk_chunk_bytes(q->ps, a->bits, a->block);
    uint64_t last = q->shard - (q->P - 1) * q->ps;
    int pm = gather_peers_ok(G) ? peer_mode(x, BE_COMM_INTRA) : 0;
    int lanes = coll_lanes(x);
    void **S = calloc((size_t)ns, sizeof *S), **E = calloc((size_t)ns, sizeof *E);
    void **F = calloc((size_t)ns, sizeof *F), **snd = calloc((size_t)ns, sizeof *snd);
    void **rcv = calloc((size_t)ns, sizeof *rcv);
    if (!S || !E || !F || !snd || !rcv) {
        snprintf(x->msg, sizeof x->msg, "out of memory");
        rc = ZPP_ENOMEM;
        goto exit;
    }
    for (int s = 0; s < ns; s++) { /* own parts into S, piece p at p * cbf */
        uint64_t r = (uint64_t)be_rank(&x->topo, s);
        COLL_CHECK(x, ops->scratch(c, s, (size_t)(q->P * cbf), &S[s]));
        COLL_CHECK(x, ops->scratch(c, s, (size_t)(q->P * (uint64_t)N * cbf), &E[s]));
        if (!pm)
            COLL_CHECK(x, ops->scratch(c, s, (size_t)(q->P * (uint64_t)(N * G) * cbf), &F[s]));
        for (uint64_t p = 0; p < q->P; p++) {
            uint64_t len = p + 1 < q->P ? q->ps : last, lo = r * q->shard + p * q->ps;
            COLL_CHECK(x, ops->quantize(c, s, (const uint8_t *)x->slots[s].in + p * q->ps * esize,
                                        a->dtype, len, be_clamp(a->count, lo, len), a->bits,
                                        a->block, (uint8_t *)S[s] + p * cbf, &poisoned));
        }
    }
    for (uint64_t p = 0; p < q->P; p++) {
        uint64_t len = p + 1 < q->P ? q->ps : last;
        uint64_t cb = zk_chunk_bytes(len, a->bits, a->block);
        for (int s = 0; s < ns; s++) {
            if (lanes)
                COLL_CHECK(x, coll_lane_use(x, s, 0));
            snd[s] = (uint8_t *)S[s] + p * cbf;
            rcv[s] = (uint8_t *)E[s] + p * N * cbf; /* node n's part at n * cb */
        }
        COLL_CHECK(x, ops->allgather(c, BE_COMM_INTER, snd, rcv, (size_t)cb));
        for (int s = 0; s < ns && lanes; s++) {
            COLL_CHECK(x, coll_lane_follow(x, s, 1, 0));
            COLL_CHECK(x, coll_lane_use(x, s, 1));
        }
        if (pm) {
            COLL_CHECK(x, ops->peer_fence(c, BE_COMM_INTRA));
        } else {
            for (int s = 0; s < ns; s++) {
                snd[s] = (uint8_t *)E[s] + p * N * cbf;
                rcv[s] = (uint8_t *)F[s] + p * (uint64_t)(N * G) * cbf; /* [i][n] */
            }
            COLL_CHECK(x, ops->allgather(c, BE_COMM_INTRA, snd, rcv, (size_t)(N * cb)));
        }
        for (int s = 0; s < ns; s++)
            for (int j = 0; j < G; j++) {
                int i = be_gather_member(&x->topo, BE_COMM_INTRA, s, j, G);
                for (int n = 0; n < N; n++) {
                    uint64_t m = (uint64_t)n * (uint64_t)G + (uint64_t)i;
                    uint64_t lo = m * q->shard + p * q->ps, cnt = be_clamp(a->count, lo, len);
                    const uint8_t *src =
                        pm ? (const uint8_t *)E[peer_slot(x, BE_COMM_INTRA, s, i)] + p * N * cbf +
                                 (uint64_t)n * cb
                           : (const uint8_t *)F[s] + p * (uint64_t)(N * G) * cbf +
                                 ((uint64_t)i * N + (uint64_t)n) * cb;
                    if (cnt)
                        COLL_CHECK(x, ops->dequantize(c, s, src, len, cnt, a->bits, a->block,
                                                      (uint8_t *)x->slots[s].out + lo * esize,
                                                      a->dtype));
                }
            }
    }
    if (lanes)
        for (int s = 0; s < ns; s++) {
            COLL_CHECK(x, coll_lane_use(x, s, 0));
            COLL_CHECK(x, coll_lane_follow(x, s, 0, 1));
        }
    lanes = 0;
    if (pm) /* no rank reuses E while a peer still reads it */
        COLL_CHECK(x, ops->peer_fence(c, BE_COMM_INTRA));
    pm = 0;
    rc = store_after_gather(x);
exit:
    if (lanes)
        for (int s = 0; s < ns; s++)
            if (coll_lane_use(x, s, 0) == 0)
                coll_lane_follow(x, s, 0, 1);
    if (pm)
        ops->peer_fence(c, BE_COMM_INTRA);
    free(S);
    free(E);
    free(F);
    free(snd);
    free(rcv);
    x->result.nonfinite_blocks += poisoned;
    return rc;
}

static int run_qwz(struct coll_exec *x, void **send, void **recv)
{
    int rc = 0;
    const struct coll_args *a = &x->args;
    const struct be_ops *ops = x->call.ops;
    struct be_call *c = &x->call;
    uint64_t W = (uint64_t)x->topo.world;
    size_t esize = zk_dtype_size(a->dtype);
    uint64_t poisoned = 0;
    struct qwz_plan q;
    qwz_plan(x, W, &q);
    if (x->topo.nodes > 1 && x->topo.local > 1 && gather_env.hier) /* read by qwz_plan */
        return run_qwz_hier(x, &q);
    /* One piece whose members read each other's memory: the backend may
     * quantize and dequantize every member's shard where it lies, in one
     * step (be_ops.peer_qwz: one fenced kernel per GPU for small calls),
     * the bytes of the steps below. */
    if (q.P == 1 && ops->peer_qwz && !c->in_private &&
        peer_mode(x, BE_COMM_GLOBAL) == BE_PEER_LOAD) {
        for (int s = 0; s < x->topo.nslots; s++) {
            send[s] = x->slots[s].in;
            recv[s] = x->slots[s].out;
        }
        int g = ops->peer_qwz(c, BE_COMM_GLOBAL, send, recv, q.shard, a->count, a->dtype, a->bits,
                              a->block, &poisoned);
        if (g != BE_DECLINED) {
            x->result.nonfinite_blocks += poisoned;
            return g ? coll_fail_at(x, g, __FILE__, __LINE__) : store_after_gather(x);
        }
    }
    uint64_t cbf = zk_chunk_bytes(q.ps, a->bits, a->block);
    uint64_t last = q.shard - (q.P - 1) * q.ps;
    uint64_t total = W * ((q.P - 1) * cbf + zk_chunk_bytes(last, a->bits, a->block));
    /* Lanes: piece p's dequantize overlaps piece p + 1's gather; and this
     * rank's own part of each piece, whose codes are local before the
     * gather, is dequantized on lane 1 while lane 0 gathers (calls of at
     * least QWZ_EARLY_BYTES: below that the lane hops cost more). */
    int early = coll_lanes(x) && total >= QWZ_EARLY_BYTES && gather_env.early;
    /* One piece over peer access: no NCCL gather, each rank reads the
     * others' codes from their staging (copies, or the dequantize kernel
     * itself), fenced before and after. */
    int pm = q.P == 1 && gather_peers_ok((int)W) ? peer_mode(x, BE_COMM_GLOBAL) : 0;
    int lanes = coll_lanes(x) && (q.P > 1 || early);
    int ns = x->topo.nslots;
    void **sp = calloc((size_t)ns, sizeof *sp), **rp = calloc((size_t)ns, sizeof *rp);
    if (!sp || !rp) {
        snprintf(x->msg, sizeof x->msg, "out of memory");
        rc = ZPP_ENOMEM;
        goto exit;
    }

    for (int s = 0; s < ns; s++) {
        uint64_t r = (uint64_t)be_rank(&x->topo, s);
        COLL_CHECK(x, ops->scratch(c, s, (size_t)total, &recv[s]));
        for (uint64_t p = 0; p < q.P; p++) {
            uint64_t len = p + 1 < q.P ? q.ps : last;
            uint64_t cb = zk_chunk_bytes(len, a->bits, a->block);
            uint8_t *dst = (uint8_t *)recv[s] + W * p * cbf + r * cb;
            uint64_t lo = r * q.shard + p * q.ps;
            COLL_CHECK(x, ops->quantize(c, s, (const uint8_t *)x->slots[s].in + p * q.ps * esize,
                                        a->dtype, len, be_clamp(a->count, lo, len), a->bits,
                                        a->block, dst, &poisoned));
        }
    }
    for (uint64_t p = 0; p < q.P; p++) {
        uint64_t len = p + 1 < q.P ? q.ps : last;
        uint64_t cb = zk_chunk_bytes(len, a->bits, a->block);
        for (int s = 0; s < ns; s++) {
            uint64_t r = (uint64_t)be_rank(&x->topo, s);
            rp[s] = (uint8_t *)recv[s] + W * p * cbf;
            sp[s] = (uint8_t *)rp[s] + r * cb; /* in place, as NCCL allows */
            uint64_t lo = r * q.shard + p * q.ps, n = be_clamp(a->count, lo, len);
            if (early && n) { /* own part: after its quantize, beside the gather */
                COLL_CHECK(x, coll_lane_follow(x, s, 1, 0));
                COLL_CHECK(x, coll_lane_use(x, s, 1));
                COLL_CHECK(x, ops->dequantize(c, s, sp[s], len, n, a->bits, a->block,
                                              (uint8_t *)x->slots[s].out + lo * esize, a->dtype));
            }
            if (lanes)
                COLL_CHECK(x, coll_lane_use(x, s, 0));
        }
        if (pm) { /* every rank's codes are in its staging: read them there */
            COLL_CHECK(x, ops->peer_fence(c, BE_COMM_GLOBAL));
            for (int s = 0; s < ns && pm == BE_PEER_COPY; s++)
                for (int j = 1; j < (int)W; j++) { /* the peers, round from this rank */
                    int m = be_gather_member(&x->topo, BE_COMM_GLOBAL, s, j, (int)W);
                    COLL_CHECK(x, ops->copy(c, s, (uint8_t *)rp[s] + (uint64_t)m * cb,
                                            (uint8_t *)rp[peer_slot(x, BE_COMM_GLOBAL, s, m)] +
                                                (uint64_t)m * cb,
                                            (size_t)cb));
                }
        } else {
            COLL_CHECK(x, ops->allgather(c, BE_COMM_GLOBAL, sp, rp, (size_t)cb));
        }
        for (int s = 0; s < ns; s++) {
            if (lanes) { /* this piece's dequantize after its all-gather */
                COLL_CHECK(x, coll_lane_follow(x, s, 1, 0));
                COLL_CHECK(x, coll_lane_use(x, s, 1));
            }
            uint64_t r = (uint64_t)be_rank(&x->topo, s);
            for (uint64_t j = 0; j < W; j++) {
                uint64_t m =
                    (uint64_t)be_gather_member(&x->topo, BE_COMM_GLOBAL, s, (int)j, (int)W);
                uint64_t lo = m * q.shard + p * q.ps;
                uint64_t n = be_clamp(a->count, lo, len);
                /* BE_PEER_LOAD: straight from member m's staging */
                const uint8_t *src =
                    (const uint8_t *)
                        rp[pm == BE_PEER_LOAD && m != r ? peer_slot(x, BE_COMM_GLOBAL, s, (int)m)
                                                        : s] +
                    m * cb;
                if (n && !(early && m == r))
                    COLL_CHECK(x,
                               ops->dequantize(c, s, src, len, n, a->bits, a->block,
                                               (uint8_t *)x->slots[s].out + lo * esize, a->dtype));
            }
        }
    }
    if (lanes)
        for (int s = 0; s < ns; s++) {
            COLL_CHECK(x, coll_lane_use(x, s, 0));
            COLL_CHECK(x, coll_lane_follow(x, s, 0, 1));
        }
    lanes = 0;
    if (pm) /* no rank reuses its staging while a peer still reads it */
        COLL_CHECK(x, ops->peer_fence(c, BE_COMM_GLOBAL));
    pm = 0;
    rc = store_after_gather(x);
exit:
    if (lanes) /* a failure half-way: the call still ends on lane 0 */
        for (int s = 0; s < ns; s++)
            if (coll_lane_use(x, s, 0) == 0)
                coll_lane_follow(x, s, 0, 1);
    if (pm) /* and after the peers' reads */
        ops->peer_fence(c, BE_COMM_GLOBAL);
    free(sp);
    free(rp);
    x->result.nonfinite_blocks += poisoned;
    return rc;
}

/* Plain all-gather of several nodes of several ranks each, the way
 * run_qwz_hier moves codes (default; ZPP_AG_HIER=0 gives the flat ring;
 * in 2 x 2 on 2 H200s 1.52-1.55x NCCL's all-gather at 256 MiB - 1 GiB,
 * the flat ring 1.07x: bench/results/multi-2026-11-23-h200x2.txt):
 * an all-gather of the shards among the N ranks of equal local index
 * (BE_COMM_INTER) into E, then inside the node each rank copies the
 * others' E from their memory (peer access) or gets them by an all-gather
 * over BE_COMM_INTRA into F. Shard m = n * G + i lands at m * shard of the
 * output, cut to count. */
static int run_allgather_hier(struct coll_exec *x)
{
    int rc = 0;
    const struct be_ops *ops = x->call.ops;
    struct be_call *c = &x->call;
    int ns = x->topo.nslots, N = x->topo.nodes, G = x->topo.local;
    size_t esize = zk_dtype_size(x->args.dtype);
    uint64_t shard = (x->args.count + (uint64_t)x->topo.world - 1) / (uint64_t)x->topo.world;
    size_t part = (size_t)(shard * esize);
    int pm = gather_peers_ok(G) ? peer_mode(x, BE_COMM_INTRA) : 0;
    void **E = calloc((size_t)ns, sizeof *E), **F = calloc((size_t)ns, sizeof *F);
    void **snd = calloc((size_t)ns, sizeof *snd);
    if (!E || !F || !snd) {
        snprintf(x->msg, sizeof x->msg, "out of memory");
        rc = ZPP_ENOMEM;
        goto exit;
    }
    for (int s = 0; s < ns; s++) {
        COLL_CHECK(x, ops->scratch(c, s, (size_t)N * part, &E[s]));
        if (!pm)
            COLL_CHECK(x, ops->scratch(c, s, (size_t)(N * G) * part, &F[s]));
        snd[s] = x->slots[s].in;
    }
    COLL_CHECK(x, ops->allgather(c, BE_COMM_INTER, snd, E, part));
    if (pm) {
        COLL_CHECK(x, ops->peer_fence(c, BE_COMM_INTRA));
    } else {
        COLL_CHECK(x, ops->allgather(c, BE_COMM_INTRA, E, F, (size_t)N * part));
    }
    for (int s = 0; s < ns; s++)
        for (int j = 0; j < G; j++) {
            int i = be_gather_member(&x->topo, BE_COMM_INTRA, s, j, G);
            for (int n = 0; n < N; n++) {
                uint64_t lo = ((uint64_t)n * (uint64_t)G + (uint64_t)i) * shard;
                uint64_t cnt = be_clamp(x->args.count, lo, shard);
                const uint8_t *src =
                    pm ? (const uint8_t *)E[peer_slot(x, BE_COMM_INTRA, s, i)] + (size_t)n * part
                       : (const uint8_t *)F[s] + (size_t)(i * N + n) * part;
                if (cnt)
                    COLL_CHECK(x, ops->copy(c, s, (uint8_t *)x->slots[s].out + lo * esize, src,
                                            (size_t)(cnt * esize)));
            }
        }
    if (pm) /* no rank reuses E while a peer still copies from it */
        COLL_CHECK(x, ops->peer_fence(c, BE_COMM_INTRA));
    pm = 0;
exit:
    if (pm)
        ops->peer_fence(c, BE_COMM_INTRA);
    free(E);
    free(F);
    free(snd);
    return rc;
}

/* Plain all-gather (stride is the per-rank block: shard elements) and hpZ
 * gather (send = the store's slices over INTRA): straight into the output
 * when the blocks tile it exactly, else through scratch. */
static int run_gather(struct coll_exec *x, void **send, void **recv, int comm, uint64_t per,
                      int members, int send_is_input)
{
    int rc = 0;
    /* the peers read send where it lies: not a private input */
    int pm = send_is_input && x->call.in_private ? 0 : peer_mode(x, comm);
    const struct be_ops *ops = x->call.ops;
    size_t esize = zk_dtype_size(x->args.dtype);
    uint64_t count = x->args.count;
    int direct = per * (uint64_t)members == count;
    for (int s = 0; s < x->topo.nslots; s++) {
        if (direct)
            recv[s] = x->slots[s].out;
        else
            COLL_CHECK(x, ops->scratch(&x->call, s, (size_t)(per * members * esize), &recv[s]));
    }
    int gathered = 0;
    if (pm && ops->peer_gather) { /* small gathers: one fenced kernel per GPU */
        int g = ops->peer_gather(&x->call, comm, send, recv, (size_t)(per * esize));
        if (g != BE_DECLINED) {
            pm = 0; /* the backend fenced (or cleaned up) itself */
            COLL_CHECK(x, g);
            gathered = 1;
        }
    }
    if (!gathered && !gather_peers_ok(members))
        pm = 0; /* NCCL, below */
    if (pm) { /* copy from the peers' memory (their store slices or inputs) */
        COLL_CHECK(x, ops->peer_fence(&x->call, comm));
        for (int s = 0; s < x->topo.nslots; s++)
            for (int j = 0; j < members; j++) {
                int i = be_gather_member(&x->topo, comm, s, j, members);
                COLL_CHECK(x, ops->copy(&x->call, s, (uint8_t *)recv[s] + (size_t)(i * per * esize),
                                        send[peer_slot(x, comm, s, i)], (size_t)(per * esize)));
            }
        pm = 0;
        COLL_CHECK(x, ops->peer_fence(&x->call, comm));
    } else if (!gathered) {
        COLL_CHECK(x, ops->allgather(&x->call, comm, send, recv, (size_t)(per * esize)));
    }
    if (!direct)
        for (int s = 0; s < x->topo.nslots; s++)
            COLL_CHECK(x,
                       ops->copy(&x->call, s, x->slots[s].out, recv[s], (size_t)(count * esize)));
exit:
    if (pm) /* failed half-way: still no store reuse before the peers' reads */
        ops->peer_fence(&x->call, comm);
    return rc;
}

int coll_run(struct coll_exec *x)
{
    int rc = 0;
    const struct coll_args *a = &x->args;
    int ns = x->topo.nslots;
    uint64_t W = (uint64_t)x->topo.world;
    void **send = calloc((size_t)ns, sizeof *send), **recv = calloc((size_t)ns, sizeof *recv);

    x->ran = 1;
    if (!send || !recv) {
        snprintf(x->msg, sizeof x->msg, "out of memory");
        rc = ZPP_ENOMEM;
        goto exit;
    }
    switch (a->op) {
    case ZPP_OP_QWZ_ALLGATHER:
        rc = run_qwz(x, send, recv);
        break;
    case ZPP_OP_HPZ_GATHER:
        for (int s = 0; s < ns; s++)
            send[s] = hpz_entry_buf(x->store_ref, s);
        rc = run_gather(x, send, recv, BE_COMM_INTRA, hpz_entry_slice(x->store_ref), x->topo.local,
                        0);
        break;
    case ZPP_OP_ALLGATHER:
        for (int s = 0; s < ns; s++)
            send[s] = x->slots[s].in;
        pthread_once(&gather_env_once, gather_env_read);
        if (x->topo.nodes > 1 && x->topo.local > 1 && gather_env.ag_hier)
            rc = run_allgather_hier(x);
        else
            rc = run_gather(x, send, recv, BE_COMM_GLOBAL, (a->count + W - 1) / W, x->topo.world,
                            1);
        if (rc == 0)
            rc = store_after_gather(x);
        break;
    case ZPP_OP_QGZ_REDUCE_SCATTER:
        rc = qgz_run(x);
        break;
    case ZPP_OP_REDUCE_SCATTER:
        for (int s = 0; s < ns; s++) {
            send[s] = x->slots[s].in;
            recv[s] = x->slots[s].out;
        }
        COLL_CHECK(x, x->call.ops->reduce_scatter(&x->call, BE_COMM_GLOBAL, send, recv, a->count,
                                                  (a->count + W - 1) / W, a->dtype, a->out_dtype,
                                                  a->reduce));
        break;
    default: /* barrier, invalidate: no data work */
        break;
    }
exit:
    free(send);
    free(recv);
    x->status = rc;
    return rc;
}

/* ---- finish --------------------------------------------------------- */

void coll_finish(struct coll_exec *x)
{
    int rc;
    if (x->verify_pending && x->status == 0) {
        /* never published or attached unchecked */
        x->status = ZPP_EABORTED;
        snprintf(x->msg, sizeof x->msg, "content key %.71s was not checked: nothing published",
                 x->args.content_key);
    }
    x->verify_pending = 0;
    int ok = x->ran && x->status == 0 && !x->discard;
    if (x->store_ref && x->store) {
        switch (x->store_kind) {
        case COLL_STORE_PRIVATE:
            if (!ok) {
                hpz_store_rollback(x->store, x->store_ref);
            } else if (hpz_store_commit(x->store, x->store_ref) != 0) {
                x->status = ZPP_EABORTED;
                snprintf(x->msg, sizeof x->msg,
                         "hpZ key '%.120s' not kept: the job ended during the call",
                         x->args.hpz_key);
            }
            break;
        case COLL_STORE_PUBLISH:
            if (!ok) {
                hpz_store_rollback(x->store, x->store_ref);
            } else if ((rc = hpz_store_commit(x->store, x->store_ref)) != 0) {
                x->status = rc;
                snprintf(x->msg, sizeof x->msg, "shared replica %.71s not published: %s",
                         x->args.content_key,
                         rc == ZPP_EABORTED ? "the job ended during the call" : "out of memory");
            }
            break;
        case COLL_STORE_DEDUP:
            if (ok && (rc = hpz_store_attach(x->store, x->store_ref, x->owner.job)) != 0) {
                x->status = rc;
                snprintf(x->msg, sizeof x->msg, "cannot attach to shared replica %.71s: %s",
                         x->args.content_key, zpp_strerror(rc));
            }
            hpz_store_unpin(x->store, x->store_ref);
            break;
        case COLL_STORE_PIN:
        case COLL_STORE_READ:
            hpz_store_unpin(x->store, x->store_ref);
            break;
        }
    }
    x->store_ref = NULL;
    x->store_kind = COLL_STORE_NONE;
    if (!x->ran && x->status == 0 && x->args.op != ZPP_OP_HPZ_INVALIDATE &&
        x->args.op != ZPP_OP_BARRIER) {
        /* prepared but never run (the job ended first) */
        x->status = ZPP_EABORTED;
        snprintf(x->msg, sizeof x->msg, "call ended before it ran");
    }
    be_call_end(&x->call);
}
