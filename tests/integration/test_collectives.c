/*
 * test_collectives.c — every collective against a real daemon, one client
 * process per rank, for (nodes x ranks per node) in 1x1, 1x4, 2x2, 4x2,
 * 3x3 and awkward counts (1, 7, W-1, 1001, 65537).
 *
 * Every rank can regenerate every rank's input from a seed, so each rank
 * computes the exact result itself and checks the daemon's:
 *   qwZ int8 (bf16 in)       rel L2 <= 1%; int4 <= 25%
 *   hpZ gather after qwZ     bit-identical to that qwZ output, 0 bytes
 *                            across nodes; after invalidate: ZPP_ENOENT
 *   qgZ int8 / int4          rel L2 <= 2% (quantized twice) / 25%, stages
 *                            1..3, sum and mean, fp32 and bf16 out,
 *                            elements past count written as 0
 *   plain all-gather         bit-exact
 *   plain reduce-scatter     exact (integer-valued data: no rounding)
 *   barrier                  completes, ALGO_NONE
 * Shards of all-gathers carry NaN past count: the daemon must ignore them.
 * For N > 1 and the largest count, bytes_inter / bytes_zero3_inter is about
 * 0.5 (qwZ int8 from bf16), 0 (hpZ) and 0.25 (qgZ int4 from bf16); a single
 * node's qgZ runs the exact reduce-scatter unless ZPP_FLAG_FORCE_QUANT.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernels/zpp_kernels.h"
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

#define RANKS_TIMEOUT_MS 120000
#define MAX_COUNT 65537u

typedef struct {
    int nodes, local;
    const char *job;
} topo_t;

static zh_daemon g_d;

/* Deterministic value of element i of tensor `tag` held by rank r
 * (r = -1 for a tensor shared by all): roughly Gaussian. */
static float gauss(uint64_t tag, int r, uint64_t i)
{
    uint64_t s = tag * 0x100000001B3ull ^ ((uint64_t)(r + 1) << 40) ^ i;
    double u = 0;
    for (int k = 0; k < 4; k++) {
        u += test_uniform(&s);
    }
    return (float)((u - 2.0) * 1.7320508);
}

/* Small integers: sums of up to 9 of them stay exact in fp32. */
static float small_int(uint64_t tag, int r, uint64_t i)
{
    uint64_t s = tag * 0x9E37ull ^ ((uint64_t)(r + 1) << 40) ^ i;
    return (float)((int)(test_rand64(&s) % 129) - 64);
}

/* Rounds through dtype (what the rank actually sends). */
static float through(float v, int dtype)
{
    uint32_t tmp[1];
    zk_narrow(v, tmp, dtype, 0);
    return zk_widen(tmp, dtype, 0);
}

static double rel_l2(const float *got, const double *exact, uint64_t n)
{
    double e = 0, x = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = (double)got[i] - exact[i];
        e += d * d;
        x += exact[i] * exact[i];
    }
    if (x == 0) {
        return e == 0 ? 0 : INFINITY;
    }
    return sqrt(e / x);
}

typedef struct {
    zpp_conn *c;
    zpp_shm *in_shm, *out_shm, *out2_shm;
    uint64_t in_id, out_id, out2_id;
    int rank, world, nodes, local;
    float *fbuf;   /* widened output */
    double *exact; /* exact result */
} rank_ctx;

static void fail_rc(const rank_ctx *x, int rc, const char *what, uint64_t count)
{
    fprintf(stderr, "rank %d: %s count=%llu: %s: %s\n", x->rank, what, (unsigned long long)count,
            zpp_err_name(rc), zpp_last_error(x->c));
    exit(1);
}

#define CALL_OK(x, call, res, what, count)                                                         \
    do {                                                                                           \
        int rc_ = zpp_collective((x)->c, (call), (res));                                           \
        if (rc_ != 0)                                                                              \
            fail_rc((x), rc_, (what), (count));                                                    \
    } while (0)

static void check_ratio(const rank_ctx *x, const zpp_result *res, double lo, double hi,
                        const char *what)
{
    ASSERT_GT(res->bytes_zero3_inter, 0);
    double ratio = (double)res->bytes_inter / (double)res->bytes_zero3_inter;
    if (ratio < lo || ratio > hi) {
        fprintf(stderr, "rank %d: %s: bytes_inter/bytes_zero3_inter = %llu/%llu = %.3f, not in "
                        "[%.2f, %.2f]\n",
                x->rank, what, (unsigned long long)res->bytes_inter,
                (unsigned long long)res->bytes_zero3_inter, ratio, lo, hi);
        exit(1);
    }
}

/* Fills this rank's all-gather shard of tensor tag (entries past count are
 * NaN: the daemon must ignore them). */
static void fill_shard(rank_ctx *x, uint64_t tag, uint64_t count, int dtype, int ints)
{
    uint64_t shard = (count + (uint64_t)x->world - 1) / (uint64_t)x->world;
    void *in = zpp_shm_ptr(x->in_shm);
    for (uint64_t i = 0; i < shard; i++) {
        uint64_t g = (uint64_t)x->rank * shard + i;
        float v = g < count ? (ints ? small_int(tag, -1, g) : gauss(tag, -1, g)) : NAN;
        zk_narrow(v, in, dtype, i);
    }
}

/* qwZ (bits) of a bf16/fp32 tensor; returns the result in x->fbuf. */
static void run_qwz(rank_ctx *x, uint64_t tag, uint64_t count, int dtype, int bits,
                    const char *key, zpp_result *res)
{
    fill_shard(x, tag, count, dtype, 0);
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_QWZ_ALLGATHER, dtype, count);
    call.bits = bits;
    call.block = 256;
    call.hpz_key = key;
    call.input = (zpp_bufref){x->in_id, 0};
    call.output = (zpp_bufref){x->out_id, 0};
    CALL_OK(x, &call, res, bits == 8 ? "qwZ int8" : "qwZ int4", count);
    ASSERT_EQ(res->algo, ZPP_ALGO_QWZ);
    ASSERT_EQ(res->nonfinite_blocks, 0);
    ASSERT_EQ(res->logical_bytes, count * zk_dtype_size(dtype));
    const void *out = zpp_shm_ptr(x->out_shm);
    for (uint64_t i = 0; i < count; i++) {
        x->fbuf[i] = zk_widen(out, dtype, i);
        x->exact[i] = through(gauss(tag, -1, i), dtype);
    }
    double err = rel_l2(x->fbuf, x->exact, count);
    double bound = bits == 8 ? 0.01 : 0.25;
    if (!(err <= bound)) {
        fprintf(stderr, "rank %d: qwZ int%d count %llu: rel L2 %.4f > %.2f\n", x->rank, bits,
                (unsigned long long)count, err, bound);
        exit(1);
    }
}

static void test_qwz_hpz(rank_ctx *x, uint64_t count, uint64_t tag)
{
    zpp_result res;
    char key[64];
    snprintf(key, sizeof key, "w.%llu", (unsigned long long)count);
    size_t esz = 2;
    /* qwZ int8 from bf16, keeping the hpZ slice. */
    run_qwz(x, tag, count, ZPP_BF16, 8, key, &res);
    if (x->nodes > 1 && count == MAX_COUNT) {
        check_ratio(x, &res, 0.45, 0.56, "qwZ int8 bf16");
    }
    if (x->nodes == 1) {
        ASSERT_EQ(res.bytes_inter, 0);
    }
    /* hpZ gather: bit-identical to the qwZ output, no inter-node bytes. */
    memset(zpp_shm_ptr(x->out2_shm), 0xAB, count * esz);
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_HPZ_GATHER, ZPP_BF16, count);
    call.hpz_key = key;
    call.output = (zpp_bufref){x->out2_id, 0};
    CALL_OK(x, &call, &res, "hpZ gather", count);
    ASSERT_EQ(res.algo, ZPP_ALGO_HPZ);
    ASSERT_EQ(res.bytes_inter, 0);
    if (memcmp(zpp_shm_ptr(x->out2_shm), zpp_shm_ptr(x->out_shm), count * esz) != 0) {
        fprintf(stderr, "rank %d: hpZ gather of %s (count %llu) differs from the qwZ output\n",
                x->rank, key, (unsigned long long)count);
        exit(1);
    }
    /* qwZ int4 from fp32 (no key). */
    run_qwz(x, tag + 1, count, ZPP_FP32, 4, NULL, &res);
    /* Invalidate, then the gather finds nothing. */
    zpp_coll_init(&call, ZPP_OP_HPZ_INVALIDATE, 0, 0);
    call.hpz_key = key;
    CALL_OK(x, &call, &res, "hpZ invalidate", count);
    ASSERT_EQ(res.algo, ZPP_ALGO_NONE);
    zpp_coll_init(&call, ZPP_OP_HPZ_GATHER, ZPP_BF16, count);
    call.hpz_key = key;
    call.output = (zpp_bufref){x->out2_id, 0};
    int rc = zpp_collective(x->c, &call, &res);
    if (rc != ZPP_ENOENT) {
        fprintf(stderr, "rank %d: hpZ gather after invalidate: %s (%s), expected ZPP_ENOENT\n",
                x->rank, zpp_err_name(rc), zpp_last_error(x->c));
        exit(1);
    }
}

/* One reduce-scatter (quantized or not): this rank's input is its own
 * full tensor; checks this rank's shard against the exact sum. */
static void run_rs(rank_ctx *x, int op, uint64_t tag, uint64_t count, int dtype, int out_dtype,
                   int bits, uint32_t stages, int reduce, uint32_t flags, zpp_result *res)
{
    int ints = op == ZPP_OP_REDUCE_SCATTER;
    void *in = zpp_shm_ptr(x->in_shm);
    for (uint64_t i = 0; i < count; i++) {
        zk_narrow(ints ? small_int(tag, x->rank, i) : gauss(tag, x->rank, i), in, dtype, i);
    }
    uint64_t shard = (count + (uint64_t)x->world - 1) / (uint64_t)x->world;
    void *out = zpp_shm_ptr(x->out_shm);
    memset(out, 0x7F, shard * 4); /* NaN-ish garbage: must be overwritten */
    zpp_coll call;
    zpp_coll_init(&call, op, dtype, count);
    call.out_dtype = out_dtype;
    call.bits = bits;
    call.stages = stages;
    call.reduce = reduce;
    call.flags = flags;
    call.input = (zpp_bufref){x->in_id, 0};
    call.output = (zpp_bufref){x->out_id, 0};
    char what[96];
    snprintf(what, sizeof what, "%s bits=%d stages=%u reduce=%d out=%d flags=%u",
             ints ? "reduce-scatter" : "qgZ", bits, stages, reduce, out_dtype, flags);
    CALL_OK(x, &call, res, what, count);
    ASSERT_EQ(res->nonfinite_blocks, 0);
    uint64_t valid = 0;
    double rss = 0; /* sum of the squared inputs: the scale of the error */
    for (uint64_t i = 0; i < shard; i++) {
        uint64_t g = (uint64_t)x->rank * shard + i;
        float v = zk_widen(out, out_dtype, i);
        if (g >= count) {
            if (v != 0.0f) {
                fprintf(stderr, "rank %d: %s count %llu: element %llu past count is %g, not 0\n",
                        x->rank, what, (unsigned long long)count, (unsigned long long)g, v);
                exit(1);
            }
            continue;
        }
        double sum = 0, sq = 0;
        for (int r = 0; r < x->world; r++) {
            double v_r = through(ints ? small_int(tag, r, g) : gauss(tag, r, g), dtype);
            sum += v_r;
            sq += v_r * v_r;
        }
        if (reduce == ZPP_MEAN) {
            sum /= x->world;
            sq /= (double)x->world * x->world;
        }
        rss += sq;
        x->fbuf[valid] = v;
        x->exact[valid] = sum;
        valid++;
    }
    if (ints) {
        /* Integer sums are exact; the mean and bf16 output round once. */
        for (uint64_t i = 0; i < valid; i++) {
            double tol = fabs(x->exact[i]) * (out_dtype == ZPP_BF16 ? 1.0 / 128 : 1e-6);
            if (fabs(x->fbuf[i] - x->exact[i]) > tol) {
                fprintf(stderr, "rank %d: %s count %llu: element %llu is %.8g, exact %.8g\n",
                        x->rank, what, (unsigned long long)count, (unsigned long long)i,
                        x->fbuf[i], x->exact[i]);
                exit(1);
            }
        }
        return;
    }
    /* Relative L2 against the exact sum; for quantized runs the error is
     * measured against the inputs' own size (sqrt of the sum of squares,
     * equal to the sum's norm in expectation for independent Gaussians):
     * a shard of a few elements whose sum cancels by chance would otherwise
     * make the bound meaningless. */
    double err = rel_l2(x->fbuf, x->exact, valid);
    if (res->algo != ZPP_ALGO_RS_EXACT && rss > 0) {
        double e = 0;
        for (uint64_t i = 0; i < valid; i++) {
            e += (x->fbuf[i] - x->exact[i]) * (x->fbuf[i] - x->exact[i]);
        }
        err = sqrt(e / rss);
    }
    double bound = res->algo == ZPP_ALGO_RS_EXACT ? (out_dtype == ZPP_BF16 ? 0.005 : 1e-5)
                   : bits == 8                    ? 0.02
                                                  : 0.25;
    if (!(err <= bound)) {
        fprintf(stderr, "rank %d: %s count %llu algo %s: rel L2 %.5f > %.5f\n", x->rank, what,
                (unsigned long long)count, zpp_algo_name(res->algo), err, bound);
        for (uint64_t i = 0; i < valid && i < 8; i++) {
            fprintf(stderr, "  shard element %llu: got %.6g exact %.6g\n", (unsigned long long)i,
                    x->fbuf[i], x->exact[i]);
        }
        exit(1);
    }
}

static void test_qgz(rank_ctx *x, uint64_t count, uint64_t tag)
{
    zpp_result res;
    int quant_algo = x->local == 1 ? ZPP_ALGO_QGZ_FLAT : ZPP_ALGO_QGZ_HIER;
    for (uint32_t stages = 1; stages <= 3; stages++) {
        for (int bits = 4; bits <= 8; bits += 4) {
            int reduce = (stages + (uint32_t)bits) % 2 ? ZPP_MEAN : ZPP_SUM;
            int out_dtype = stages == 2 ? ZPP_BF16 : ZPP_FP32;
            run_rs(x, ZPP_OP_QGZ_REDUCE_SCATTER, tag + stages * 10 + (uint64_t)bits, count,
                   ZPP_BF16, out_dtype, bits, stages, reduce, 0, &res);
            if (x->nodes == 1) {
                if (res.algo != ZPP_ALGO_RS_EXACT) {
                    fprintf(stderr, "rank %d: single-node qgZ ran %s, expected RS_EXACT\n",
                            x->rank, zpp_algo_name(res.algo));
                    exit(1);
                }
                ASSERT_EQ(res.bytes_inter, 0);
            } else {
                ASSERT_EQ(res.algo, quant_algo);
                if (count == MAX_COUNT && bits == 4) {
                    check_ratio(x, &res, 0.2, 0.32, "qgZ int4 bf16");
                }
            }
        }
    }
    /* Forced quantization on one node; fp32 input. */
    run_rs(x, ZPP_OP_QGZ_REDUCE_SCATTER, tag + 99, count, ZPP_FP32, ZPP_FP32, 8, 2, ZPP_SUM,
           ZPP_FLAG_FORCE_QUANT, &res);
    if (res.algo != quant_algo) {
        fprintf(stderr, "rank %d: qgZ with FORCE_QUANT on %dx%d ran %s, expected %s\n", x->rank,
                x->nodes, x->local, zpp_algo_name(res.algo), zpp_algo_name(quant_algo));
        exit(1);
    }
}

static void test_plain(rank_ctx *x, uint64_t count, uint64_t tag)
{
    zpp_result res;
    static const int dts[] = {ZPP_FP32, ZPP_BF16, ZPP_FP16};
    for (int k = 0; k < 3; k++) {
        int dt = dts[k];
        fill_shard(x, tag + (uint64_t)k, count, dt, 1);
        zpp_coll call;
        zpp_coll_init(&call, ZPP_OP_ALLGATHER, dt, count);
        call.input = (zpp_bufref){x->in_id, 0};
        call.output = (zpp_bufref){x->out_id, 0};
        CALL_OK(x, &call, &res, "allgather", count);
        ASSERT_EQ(res.algo, ZPP_ALGO_AG_EXACT);
        const void *out = zpp_shm_ptr(x->out_shm);
        for (uint64_t i = 0; i < count; i++) {
            float want = small_int(tag + (uint64_t)k, -1, i);
            float got = zk_widen(out, dt, i);
            if (got != want) {
                fprintf(stderr, "rank %d: allgather dtype %d count %llu: element %llu is %g, "
                                "expected %g\n",
                        x->rank, dt, (unsigned long long)count, (unsigned long long)i, got, want);
                exit(1);
            }
        }
    }
    run_rs(x, ZPP_OP_REDUCE_SCATTER, tag + 5, count, ZPP_FP32, ZPP_FP32, 0, 0, ZPP_SUM, 0, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_RS_EXACT);
    run_rs(x, ZPP_OP_REDUCE_SCATTER, tag + 6, count, ZPP_BF16, ZPP_FP32, 0, 0, ZPP_MEAN, 0, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_RS_EXACT);
    run_rs(x, ZPP_OP_REDUCE_SCATTER, tag + 7, count, ZPP_FP32, ZPP_BF16, 0, 0, ZPP_SUM, 0, &res);
    ASSERT_EQ(res.algo, ZPP_ALGO_RS_EXACT);
    CALL_OK(x, &(zpp_coll){.op = ZPP_OP_BARRIER}, &res, "barrier", count);
    ASSERT_EQ(res.algo, ZPP_ALGO_NONE);
}

static int rank_main(int rank, void *arg)
{
    const topo_t *t = arg;
    rank_ctx x = {.rank = rank, .nodes = t->nodes, .local = t->local,
                  .world = t->nodes * t->local};
    if (zh_connect_join(&g_d, t->job, (uint32_t)rank, (uint32_t)x.world, (uint32_t)t->nodes,
                        &x.c) != 0) {
        return 1;
    }
    size_t bytes = MAX_COUNT * 4 + 64;
    ASSERT_EQ(zpp_shm_create(bytes, &x.in_shm), 0);
    ASSERT_EQ(zpp_shm_create(bytes, &x.out_shm), 0);
    ASSERT_EQ(zpp_shm_create(bytes, &x.out2_shm), 0);
    ASSERT_EQ(zpp_register_shm(x.c, x.in_shm, 0, bytes, &x.in_id), 0);
    ASSERT_EQ(zpp_register_shm(x.c, x.out_shm, 0, bytes, &x.out_id), 0);
    ASSERT_EQ(zpp_register_shm(x.c, x.out2_shm, 0, bytes, &x.out2_id), 0);
    x.fbuf = calloc(MAX_COUNT, sizeof *x.fbuf);
    x.exact = calloc(MAX_COUNT, sizeof *x.exact);
    ASSERT(x.fbuf && x.exact);

    uint64_t counts[] = {1, 7, (uint64_t)x.world - 1, 1001, MAX_COUNT};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        uint64_t count = counts[k];
        if (count == 0) {
            continue;
        }
        uint64_t tag = 1000 * (k + 1);
        test_qwz_hpz(&x, count, tag);
        test_qgz(&x, count, tag + 100);
        test_plain(&x, count, tag + 200);
    }
    free(x.fbuf);
    free(x.exact);
    zpp_close(x.c);
    zpp_shm_destroy(x.in_shm);
    zpp_shm_destroy(x.out_shm);
    zpp_shm_destroy(x.out2_shm);
    return 0;
}

int main(void)
{
    static const topo_t topos[] = {
        {1, 1, "coll-1x1"}, {1, 4, "coll-1x4"}, {2, 2, "coll-2x2"},
        {4, 2, "coll-4x2"}, {3, 3, "coll-3x3"},
    };
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    for (size_t i = 0; i < sizeof topos / sizeof topos[0]; i++) {
        const topo_t *t = &topos[i];
        int64_t t0 = zh_now_ms();
        int rc = zh_run_ranks(t->nodes * t->local, rank_main, (void *)t, RANKS_TIMEOUT_MS, NULL);
        if (rc != 0) {
            fprintf(stderr, "test_collectives: %dx%d failed\n", t->nodes, t->local);
            zh_daemon_dump_log(&g_d);
            exit(1);
        }
        printf("test_collectives: %dx%d ok (%lld ms)\n", t->nodes, t->local,
               (long long)(zh_now_ms() - t0));
    }
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_collectives: ok\n");
    return 0;
}
