/*
 * test_coll_host.c — the collective algorithms of coll.c/qgz.c on the host
 * backend, driven directly (coll_prepare/run/finish) with malloc'd buffers
 * of exactly the sizes coll_buffer_needs gives (so ASan sees any overrun).
 *
 * For topologies (nodes x local) 1x1, 1x4, 2x2, 4x2, 3x3, 2x1 and awkward
 * counts it proves: plain all-gather is bit-exact; plain reduce-scatter
 * matches a double-precision sum/mean; qwZ is within the int8/int4 bound
 * and identical on every rank; an hpZ gather is bit-identical to the qwZ
 * that stored the key; qgZ is within its bound of the exact sum/mean with
 * zeros past count, and every rank gets its own slice (per-slice constant
 * inputs); the byte counters give inter/zero3 ratios ~0.5 (qwZ int8), 0
 * (hpZ), ~0.25 (qgZ int4); a store budget exceeded gives ZPP_ELIMIT with
 * nothing allocated; a missing key gives ZPP_ENOENT.
 */
#include <math.h>
#include <string.h>

#include "coll.h"
#include "coll_rig.h"
#include "hpz_store.h"
#include "test.h"
#include "zpp.h"

#define PAD_GARBAGE 12345.0 /* written past count in inputs: must be ignored */

struct topo_case {
    int nodes, local;
};
static const struct topo_case TOPOS[] = {{1, 1}, {1, 4}, {2, 2}, {4, 2}, {3, 3}, {2, 1}};
static const int DTYPES[] = {ZK_FP32, ZK_BF16, ZK_FP16};
static const int OUT_DTYPES[] = {ZK_FP32, ZK_BF16};

static uint64_t g_seed = 42;

static double out_rel(int dtype)
{
    return dtype == ZK_FP32 ? 1e-7 : dtype == ZK_FP16 ? 1.0 / 2048 : 1.0 / 256;
}

static void put(void *buf, int dtype, uint64_t i, double v)
{
    zk_narrow((float)v, buf, dtype, i);
}

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

/* outputs start as garbage the call must overwrite */
static void rig_alloc(struct rig *g, const struct coll_args *a)
{
    rig_alloc_fill(g, a, 0x5A);
}

static int run_call(struct rig *g, const struct coll_args *a, struct hpz_store *st,
                    struct coll_result *res, char *msg)
{
    return rig_call(g, a, st, "job-1", res, msg);
}

/* run_call that must succeed; prints the message if it does not. */
static void run_ok(struct rig *g, const struct coll_args *a, struct hpz_store *st,
                   struct coll_result *res)
{
    char msg[256];
    int rc = run_call(g, a, st, res, msg);
    if (rc)
        fprintf(stderr, "op %d count %llu failed: %s\n", a->op, (unsigned long long)a->count, msg);
    ASSERT_EQ(rc, 0);
}

/* ---- all-gathers ------------------------------------------------------ */

/* Fills each rank's shard of a random tensor (kept in t_ref, doubles as
 * stored in dtype), garbage past count. Returns absmax. */
static double fill_shards(struct rig *g, const struct coll_args *a, double *t_ref)
{
    uint64_t W = (uint64_t)g->t.world, shard = (a->count + W - 1) / W;
    double amax = 0;
    for (int s = 0; s < g->t.nslots; s++) {
        for (uint64_t e = 0; e < shard; e++) {
            uint64_t gi = (uint64_t)s * shard + e;
            if (gi < a->count) {
                put(g->slots[s].in, a->dtype, e, test_uniform(&g_seed) * 4 - 2);
                t_ref[gi] = get(g->slots[s].in, a->dtype, e);
                amax = fmax(amax, fabs(t_ref[gi]));
            } else {
                put(g->slots[s].in, a->dtype, e, PAD_GARBAGE);
            }
        }
    }
    return amax;
}

static void check_allgather(int nodes, int local, uint64_t count, int dtype)
{
    struct rig g = {.t = topo_of(nodes, local)};
    struct coll_args a = args_of(ZPP_OP_ALLGATHER, dtype, count);
    struct coll_result res;
    double *t_ref = malloc(sizeof *t_ref * count);
    rig_alloc(&g, &a);
    fill_shards(&g, &a, t_ref);
    run_ok(&g, &a, NULL, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_AG_EXACT);
    for (int s = 0; s < g.t.nslots; s++)
        for (uint64_t e = 0; e < count; e++)
            ASSERT(get(g.slots[s].out, dtype, e) == t_ref[e]);
    ASSERT_EQ(res.logical_bytes, count * zk_dtype_size(dtype));
    ASSERT_EQ(res.bytes_zero3_inter, (uint64_t)(nodes - 1) * count * zk_dtype_size(dtype));
    rig_free(&g);
    free(t_ref);
}

/* qwZ (with an hpZ key), then the hpZ gather of that key, then
 * invalidate, then the gather fails with ZPP_ENOENT. */
static void check_qwz_hpz(int nodes, int local, uint64_t count, int dtype, int bits,
                          struct hpz_store *st, int check_ratio)
{
    struct rig g = {.t = topo_of(nodes, local)}, h = {.t = topo_of(nodes, local)};
    struct coll_args a = args_of(ZPP_OP_QWZ_ALLGATHER, dtype, count);
    struct coll_result res;
    char msg[256];
    double *t_ref = malloc(sizeof *t_ref * count);
    size_t esize = zk_dtype_size(dtype);
    a.bits = bits;
    snprintf(a.hpz_key, sizeof a.hpz_key, "layer.%llu", (unsigned long long)count);
    rig_alloc(&g, &a);
    double amax = fill_shards(&g, &a, t_ref);
    run_ok(&g, &a, st, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_QWZ);
    double q = zk_qmax(bits);
    for (int s = 0; s < g.t.nslots; s++) {
        ASSERT(memcmp(g.slots[s].out, g.slots[0].out, count * esize) == 0);
    }
    for (uint64_t e = 0; e < count; e++) {
        double v = get(g.slots[0].out, dtype, e);
        double tol = amax * (0.5 / q) * 1.001 + fabs(t_ref[e]) * out_rel(dtype) + 1e-30;
        ASSERT_DBL_LE(fabs(v - t_ref[e]), tol);
    }
    if (check_ratio && nodes > 1) {
        double ratio = (double)res.bytes_inter / (double)res.bytes_zero3_inter;
        ASSERT_DBL_LE(0.45, ratio);
        ASSERT_DBL_LE(ratio, 0.55);
    }

    /* hpZ gather: bit-identical to the qwZ output, nothing across nodes. */
    struct coll_args b = args_of(ZPP_OP_HPZ_GATHER, dtype, count);
    memcpy(b.hpz_key, a.hpz_key, sizeof a.hpz_key);
    rig_alloc(&h, &b);
    run_ok(&h, &b, st, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_HPZ);
    ASSERT_EQ(res.bytes_inter, 0);
    ASSERT_EQ(res.bytes_intra,
              (uint64_t)nodes * local * (local - 1) * ((count + local - 1) / local) * esize);
    for (int s = 0; s < g.t.nslots; s++)
        ASSERT(memcmp(h.slots[s].out, g.slots[0].out, count * esize) == 0);

    /* A gather with another count is refused, the entry stays. */
    struct coll_args b2 = b;
    b2.count = count + 1;
    struct rig h2 = {.t = topo_of(nodes, local)};
    rig_alloc(&h2, &b2);
    ASSERT_EQ(run_call(&h2, &b2, st, NULL, msg), ZPP_EINVAL);
    rig_free(&h2);

    struct coll_args inv = args_of(ZPP_OP_HPZ_INVALIDATE, dtype, 0);
    memcpy(inv.hpz_key, a.hpz_key, sizeof a.hpz_key);
    struct rig none = {.t = topo_of(nodes, local)};
    run_ok(&none, &inv, st, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_NONE);
    ASSERT_EQ(run_call(&h, &b, st, NULL, msg), ZPP_ENOENT);
    ASSERT_CONTAINS(msg, "not found");
    ASSERT_CONTAINS(msg, a.hpz_key);
    uint64_t used;
    hpz_store_stats(st, &used, NULL, NULL, NULL);
    ASSERT_EQ(used, 0);
    rig_free(&g);
    rig_free(&h);
    free(t_ref);
}

/* ---- reduce-scatters -------------------------------------------------- */

/* Random full gradients on every rank (garbage-free: count elements);
 * ref[e] = exact sum (or mean) over ranks. Returns absmax of inputs. */
static double fill_grads(struct rig *g, const struct coll_args *a, double *ref)
{
    double amax = 0;
    for (uint64_t e = 0; e < a->count; e++)
        ref[e] = 0;
    for (int s = 0; s < g->t.nslots; s++)
        for (uint64_t e = 0; e < a->count; e++) {
            put(g->slots[s].in, a->dtype, e, test_uniform(&g_seed) * 2 - 1);
            double v = get(g->slots[s].in, a->dtype, e);
            ref[e] += v;
            amax = fmax(amax, fabs(v));
        }
    if (a->reduce == ZK_MEAN)
        for (uint64_t e = 0; e < a->count; e++)
            ref[e] /= g->t.world;
    return amax;
}

/* Checks each rank's shard against ref within tol(e) and zeros past count. */
static void check_shards(struct rig *g, const struct coll_args *a, const double *ref,
                         double abs_tol)
{
    uint64_t W = (uint64_t)g->t.world, shard = (a->count + W - 1) / W;
    for (int s = 0; s < g->t.nslots; s++) {
        for (uint64_t e = 0; e < shard; e++) {
            uint64_t gi = (uint64_t)s * shard + e;
            double v = get(g->slots[s].out, a->out_dtype, e);
            if (gi >= a->count) {
                ASSERT(v == 0.0);
                continue;
            }
            double tol = abs_tol + fabs(ref[gi]) * out_rel(a->out_dtype) * 1.01;
            if (!(fabs(v - ref[gi]) <= tol))
                fprintf(stderr, "rank %d elem %llu: got %g want %g (tol %g)\n", s,
                        (unsigned long long)e, v, ref[gi], tol);
            ASSERT_DBL_LE(fabs(v - ref[gi]), tol);
        }
    }
}

static void check_reduce_scatter(int nodes, int local, uint64_t count, int dtype, int out_dtype,
                                 int reduce)
{
    struct rig g = {.t = topo_of(nodes, local)};
    struct coll_args a = args_of(ZPP_OP_REDUCE_SCATTER, dtype, count);
    struct coll_result res;
    double *ref = malloc(sizeof *ref * count);
    a.out_dtype = out_dtype;
    a.reduce = reduce;
    rig_alloc(&g, &a);
    double amax = fill_grads(&g, &a, ref);
    run_ok(&g, &a, NULL, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_RS_EXACT);
    check_shards(&g, &a, ref, amax * g.t.world * 1e-6);
    rig_free(&g);
    free(ref);
}

static void check_qgz(int nodes, int local, uint64_t count, int dtype, int out_dtype, int bits,
                      int stages, int reduce, uint32_t flags, int check_ratio)
{
    struct rig g = {.t = topo_of(nodes, local)};
    struct coll_args a = args_of(ZPP_OP_QGZ_REDUCE_SCATTER, dtype, count);
    struct coll_result res;
    double *ref = malloc(sizeof *ref * count);
    a.out_dtype = out_dtype;
    a.reduce = reduce;
    a.bits = bits;
    a.stages = (uint32_t)stages;
    a.flags = flags;
    rig_alloc(&g, &a);
    double amax = fill_grads(&g, &a, ref);
    run_ok(&g, &a, NULL, &res);
    int W = nodes * local, quant = nodes > 1 || (flags & ZPP_FLAG_FORCE_QUANT);
    if (!quant)
        ASSERT_EQ(res.algo, ZPP_ALGO_RS_EXACT);
    else
        ASSERT_EQ(res.algo, local > 1 ? ZPP_ALGO_QGZ_HIER : ZPP_ALGO_QGZ_FLAT);
    /* Each rank's quantization errs by <= absmax/(2 qmax) per element; a
     * node's partial sum (G terms) is requantized once more. */
    double q = zk_qmax(bits), e1 = amax / (2 * q), bound = amax * W * 1e-6;
    if (quant) {
        bound += W * e1;
        if (nodes > 1 && local > 1)
            bound += nodes * local * (amax + e1) / (2 * q);
        bound *= 1.01;
    }
    if (reduce == ZK_MEAN)
        bound /= W;
    check_shards(&g, &a, ref, bound);
    if (check_ratio) {
        double ratio = (double)res.bytes_inter / (double)res.bytes_zero3_inter;
        ASSERT_DBL_LE(0.2, ratio);
        ASSERT_DBL_LE(ratio, 0.3);
    }
    rig_free(&g);
    free(ref);
}

/* Every rank's input holds, in slice j, the constant j+1: after the sum,
 * rank r must hold W*(r+1) everywhere (0 past count). A slice sent to the
 * wrong rank shows up as a wrong constant. */
static void check_qgz_slice_mapping(int nodes, int local, uint64_t count, int bits, int stages)
{
    struct rig g = {.t = topo_of(nodes, local)};
    struct coll_args a = args_of(ZPP_OP_QGZ_REDUCE_SCATTER, ZK_FP32, count);
    a.bits = bits;
    a.stages = (uint32_t)stages;
    a.flags = ZPP_FLAG_FORCE_QUANT;
    a.block = 32;
    uint64_t W = (uint64_t)g.t.world, shard = (count + W - 1) / W;
    rig_alloc(&g, &a);
    for (int s = 0; s < g.t.nslots; s++)
        for (uint64_t e = 0; e < count; e++)
            put(g.slots[s].in, ZK_FP32, e, (double)(e / shard + 1));
    run_ok(&g, &a, NULL, NULL);
    for (int s = 0; s < g.t.nslots; s++)
        for (uint64_t e = 0; e < shard; e++) {
            double v = get(g.slots[s].out, ZK_FP32, e);
            double want = (uint64_t)s * shard + e < count ? (double)W * (s + 1) : 0.0;
            ASSERT_DBL_LE(fabs(v - want), want * 1e-5);
        }
    rig_free(&g);
}

/* ---- errors ----------------------------------------------------------- */

static void check_errors(void)
{
    struct be_topo t = topo_of(2, 2);
    size_t in_b, out_b;
    char why[128];
    struct coll_args a = args_of(ZPP_OP_QWZ_ALLGATHER, ZK_BF16, 10);
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), 0);
    ASSERT_EQ(in_b, 3 * 2);
    ASSERT_EQ(out_b, 10 * 2);
    a.bits = 6;
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    ASSERT_CONTAINS(why, "bits");
    a = args_of(ZPP_OP_QWZ_ALLGATHER, ZK_BF16, 10);
    a.block = 100;
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    a = args_of(ZPP_OP_QWZ_ALLGATHER, 7, 10);
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    a = args_of(ZPP_OP_ALLGATHER, ZK_FP32, 0);
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    a = args_of(ZPP_OP_ALLGATHER, ZK_FP32, UINT64_MAX / 2);
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    a = args_of(ZPP_OP_QGZ_REDUCE_SCATTER, ZK_BF16, 10);
    a.stages = 65;
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    a.stages = 2;
    a.out_dtype = ZK_FP32;
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), 0);
    ASSERT_EQ(in_b, 20);
    ASSERT_EQ(out_b, 3 * 4);
    a = args_of(99, ZK_FP32, 1);
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    a = args_of(ZPP_OP_BARRIER, 0, 0);
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), 0);
    ASSERT_EQ(in_b + out_b, 0);

    /* A buffer smaller than needed is refused before any work. */
    struct rig g = {.t = t};
    a = args_of(ZPP_OP_ALLGATHER, ZK_FP32, 100);
    rig_alloc(&g, &a);
    g.slots[3].out_len -= 1;
    ASSERT_EQ(run_call(&g, &a, NULL, NULL, NULL), ZPP_ERANGE);
    rig_free(&g);

    /* Store budget exceeded: ZPP_ELIMIT, nothing allocated, no key. */
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 64, 0);
    char msg[256];
    a = args_of(ZPP_OP_QWZ_ALLGATHER, ZK_FP32, 1000);
    snprintf(a.hpz_key, sizeof a.hpz_key, "too-big");
    rig_alloc(&g, &a);
    fill_shards(&g, &a, (double[1000]){0});
    ASSERT_EQ(run_call(&g, &a, st, NULL, msg), ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "budget");
    uint64_t used, entries;
    hpz_store_stats(st, &used, &entries, NULL, NULL);
    ASSERT_EQ(used, 0);
    ASSERT_EQ(entries, 0);
    rig_free(&g);
    struct coll_args b = args_of(ZPP_OP_HPZ_GATHER, ZK_FP32, 1000);
    snprintf(b.hpz_key, sizeof b.hpz_key, "too-big");
    rig_alloc(&g, &b);
    ASSERT_EQ(run_call(&g, &b, st, NULL, msg), ZPP_ENOENT);
    ASSERT_CONTAINS(msg, "hpZ key 'too-big' not found for job job-1");
    rig_free(&g);
    /* Without a store, a key cannot be used. */
    rig_alloc(&g, &a);
    ASSERT_EQ(run_call(&g, &a, NULL, NULL, NULL), ZPP_EUNSUPPORTED);
    rig_free(&g);
    hpz_store_free(st);
}

/* A NaN in one rank's shard poisons its block: counted on the result,
 * decoded as NaN, never a wrong finite number. */
static void check_nonfinite_counted(void)
{
    struct rig g = {.t = topo_of(2, 2)};
    struct coll_args a = args_of(ZPP_OP_QWZ_ALLGATHER, ZK_FP32, 1000);
    struct coll_result res;
    double ref[1000];
    rig_alloc(&g, &a);
    fill_shards(&g, &a, ref);
    put(g.slots[1].in, ZK_FP32, 3, NAN);
    run_ok(&g, &a, NULL, &res);
    ASSERT_EQ(res.nonfinite_blocks, 1);
    ASSERT(isnan(get(g.slots[2].out, ZK_FP32, 250 + 3)));
    ASSERT(!isnan(get(g.slots[2].out, ZK_FP32, 0)));
    rig_free(&g);

    a = args_of(ZPP_OP_QGZ_REDUCE_SCATTER, ZK_FP32, 1000);
    rig_alloc(&g, &a);
    fill_grads(&g, &a, ref);
    put(g.slots[0].in, ZK_FP32, 600, INFINITY);
    run_ok(&g, &a, NULL, &res);
    ASSERT_GE(res.nonfinite_blocks, 1);
    ASSERT(isnan(get(g.slots[2].out, ZK_FP32, 600 - 500)));
    rig_free(&g);
}

/* A qwZ prepared but never run (its job ended) keeps nothing. */
static void check_prepared_not_run_rolls_back(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct rig g = {.t = topo_of(2, 2)};
    struct coll_args a = args_of(ZPP_OP_QWZ_ALLGATHER, ZK_BF16, 100);
    snprintf(a.hpz_key, sizeof a.hpz_key, "w");
    rig_alloc(&g, &a);
    struct coll_exec x;
    memset(&x, 0, sizeof x);
    x.args = a;
    x.topo = g.t;
    x.slots = g.slots;
    x.owner.tenant_uid = 1000;
    x.owner.job_id = "job-1";
    x.owner.job = &g_job;
    x.store = st;
    x.call.ops = &be_host_ops;
    ASSERT_EQ(coll_prepare(&x), 0);
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job), 4 * 50 * 2); /* slice = 100/G */
    coll_finish(&x);
    ASSERT_EQ(x.status, ZPP_EABORTED);
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job), 0);
    rig_free(&g);
    hpz_store_free(st);
}

/* qwZ in pieces (run_qwz) gives the same bytes as in one piece: the
 * blocks do not move. ZPP_QWZ_PIECE_MIB=1 makes a ~9 MB gather 8 pieces. */
static void check_qwz_pieces(int nodes, int local, uint64_t count, int dtype, int bits,
                             uint32_t block)
{
    struct rig g = {.t = topo_of(nodes, local)}, h = {.t = topo_of(nodes, local)};
    struct coll_args a = args_of(ZPP_OP_QWZ_ALLGATHER, dtype, count);
    struct coll_result res;
    size_t esize = zk_dtype_size(dtype);
    double *t_ref = malloc(sizeof *t_ref * count);
    a.bits = bits;
    a.block = block;
    rig_alloc(&g, &a);
    rig_alloc(&h, &a);
    fill_shards(&g, &a, t_ref);
    uint64_t shard = (count + (uint64_t)g.t.world - 1) / (uint64_t)g.t.world;
    for (int s = 0; s < g.t.nslots; s++)
        memcpy(h.slots[s].in, g.slots[s].in, shard * esize);
    unsetenv("ZPP_QWZ_PIECE_MIB");
    run_ok(&g, &a, NULL, &res);
    setenv("ZPP_QWZ_PIECE_MIB", "1", 1);
    run_ok(&h, &a, NULL, &res);
    unsetenv("ZPP_QWZ_PIECE_MIB");
    ASSERT_EQ(res.algo, ZPP_ALGO_QWZ);
    for (int s = 0; s < g.t.nslots; s++)
        ASSERT(memcmp(h.slots[s].out, g.slots[0].out, count * esize) == 0);
    double amax = 0;
    for (uint64_t e = 0; e < count; e++)
        amax = fmax(amax, fabs(t_ref[e]));
    for (uint64_t e = 0; e < count; e += 997) {
        double v = get(h.slots[0].out, dtype, e);
        double tol = amax * (0.5 / zk_qmax(bits)) * 1.001 + fabs(t_ref[e]) * out_rel(dtype);
        ASSERT_DBL_LE(fabs(v - t_ref[e]), tol);
    }
    rig_free(&g);
    rig_free(&h);
    free(t_ref);
}

int main(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    check_errors();
    check_nonfinite_counted();
    check_prepared_not_run_rolls_back();
    for (size_t ti = 0; ti < sizeof TOPOS / sizeof TOPOS[0]; ti++) {
        int N = TOPOS[ti].nodes, G = TOPOS[ti].local, W = N * G;
        uint64_t counts[] = {1, 7, (uint64_t)(W > 1 ? W - 1 : 2), 1000, 4099, 65537};
        int idx = 0;
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++, idx++) {
            uint64_t n = counts[ci];
            int dt = DTYPES[idx % 3], odt = OUT_DTYPES[idx % 2];
            int bits = idx % 2 ? 4 : 8;
            check_allgather(N, G, n, dt);
            check_reduce_scatter(N, G, n, dt, odt, idx % 2 ? ZK_MEAN : ZK_SUM);
            check_qwz_hpz(N, G, n, dt, bits, st, 0);
            for (int stages = 1; stages <= 3; stages++) {
                check_qgz(N, G, n, DTYPES[(idx + stages) % 3], odt, (idx + stages) % 2 ? 4 : 8,
                          stages, stages % 2 ? ZK_MEAN : ZK_SUM, 0, 0);
                if (N == 1)
                    check_qgz(N, G, n, dt, odt, bits, stages, ZK_MEAN, ZPP_FLAG_FORCE_QUANT, 0);
                check_qgz_slice_mapping(N, G, n, (idx + stages) % 2 ? 4 : 8, stages);
            }
        }
        if (N > 1) {
            /* The ratios of DESIGN.md's table, on a tensor large enough
             * that padding does not matter. */
            uint64_t big = (uint64_t)W * 16384;
            check_qwz_hpz(N, G, big, ZK_BF16, 8, st, 1);
            check_qgz(N, G, big, ZK_BF16, ZK_FP32, 4, 2, ZK_MEAN, 0, 1);
        }
    }
    check_qwz_pieces(1, 2, 9000001, ZK_BF16, 8, 256);
    check_qwz_pieces(2, 2, 9000011, ZK_FP32, 4, 64);
    check_qwz_pieces(3, 1, 5000000, ZK_FP16, 8, 2048);
    hpz_store_free(st);
    printf("test_coll_host: ok\n");
    return 0;
}
