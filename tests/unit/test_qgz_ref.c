/*
 * test_qgz_ref.c — the qgZ reference kernels (kernels/qgz_ref.c) proven by
 * simulation: W = N x G ranks live in memory; each runs step 0 (reorder +
 * quantize, all stages), the intra-node all-to-all (GPU i gets positions
 * [i*N, (i+1)*N) of every local peer's stage buffer), step 2 (reduce over
 * the G peers + requantize), the inter-node all-to-all among equal local
 * index (node nd gets the piece of its slice from every node) and step 4
 * (reduce over the N nodes into the output). Every rank's output must equal
 * the exact reduce-scatter within the quantization error bound, for many
 * (N, G, S, n) including awkward sizes. Slices get distinct signed
 * magnitudes, so a piece that lands in the wrong place fails loudly. Also:
 * the geometry, the per-stage entry point, and the poisoning rule across
 * the pipeline.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zpp_kernels.h"

#define MAG_LEVELS 6      /* slice magnitudes 2^0 .. 2^5 */
#define NOISE 0.25        /* relative spread of values inside a slice */
#define BOUND_SLACK 1.001 /* rounding of the fp32 sums on top of the bound */

static double slice_mag(int s)
{
    return (s % 2 ? -1.0 : 1.0) * ldexp(1.0, s % MAG_LEVELS);
}

struct sim {
    struct zk_qgz_geom g;
    int w, dtype, op, out_dtype;
    uint8_t **x;   /* per rank gradient, dtype */
    double *exact; /* exact sum over ranks, n elements */
    double *amax;  /* per slice: max |x| over ranks */
};

static void sim_fill(struct sim *sm, uint64_t *seed)
{
    struct zk_qgz_geom *g = &sm->g;
    size_t es = zk_dtype_size(sm->dtype);
    sm->x = calloc((size_t)sm->w, sizeof *sm->x);
    sm->exact = calloc(g->n + 1, sizeof *sm->exact);
    sm->amax = calloc((size_t)sm->w, sizeof *sm->amax);
    ASSERT(sm->x && sm->exact && sm->amax);
    for (int r = 0; r < sm->w; r++) {
        sm->x[r] = malloc(g->n * es + 1);
        ASSERT(sm->x[r]);
        for (uint64_t e = 0; e < g->n; e++) {
            int s = (int)(e / g->shard);
            float v = (float)(slice_mag(s) * (1.0 + NOISE * (2 * test_uniform(seed) - 1)));
            zk_narrow(v, sm->x[r], sm->dtype, e);
            double wv = zk_widen(sm->x[r], sm->dtype, e);
            sm->exact[e] += wv;
            if (fabs(wv) > sm->amax[s])
                sm->amax[s] = fabs(wv);
        }
    }
}

static void sim_free(struct sim *sm)
{
    for (int r = 0; r < sm->w; r++)
        free(sm->x[r]);
    free(sm->x);
    free(sm->exact);
    free(sm->amax);
}

/* Runs the whole pipeline and checks every rank's output. */
static void sim_run_and_check(struct sim *sm)
{
    const struct zk_qgz_geom *g = &sm->g;
    int N = g->nodes, G = g->local, S = g->stages, W = sm->w;
    uint64_t pb = g->piece_bytes, stage_bytes = (uint64_t)W * pb;
    size_t oes = zk_dtype_size(sm->out_dtype);
    uint8_t **buf = calloc((size_t)W, sizeof *buf);
    uint8_t *recv = malloc((size_t)W * stage_bytes + 1); /* per rank: G x N pieces */
    uint8_t *red = malloc((size_t)W * N * pb + 1);       /* per rank: N pieces */
    uint8_t *recv2 = malloc((size_t)W * N * pb + 1);     /* per rank: N pieces */
    uint8_t *stage_only = malloc(stage_bytes + 1);
    uint8_t **y = calloc((size_t)W, sizeof *y);
    ASSERT(buf && recv && red && recv2 && stage_only && y);
    for (int r = 0; r < W; r++) {
        buf[r] = malloc((size_t)S * stage_bytes + 1);
        y[r] = malloc(g->shard * oes + 1);
        ASSERT(buf[r] && y[r]);
        memset(y[r], 0xA5, g->shard * oes);
        ASSERT_EQ(zk_qgz_reorder_quantize_ref(sm->x[r], sm->dtype, g, buf[r]), 0);
        /* the single-stage entry point writes the same bytes */
        int k = r % S;
        ASSERT_EQ(zk_qgz_reorder_quantize_stage_ref(sm->x[r], sm->dtype, g, k, stage_only), 0);
        ASSERT_EQ(memcmp(stage_only, buf[r] + (uint64_t)k * stage_bytes, stage_bytes), 0);
    }
    for (int k = 0; k < S; k++) {
        /* intra-node all-to-all: rank (nd, i) gets positions [i*N, (i+1)*N)
         * of stage k from every local peer j, peer-major */
        for (int r = 0; r < W; r++) {
            int nd = r / G, i = r % G;
            for (int j = 0; j < G; j++)
                memcpy(recv + ((uint64_t)r * G + j) * N * pb,
                       buf[nd * G + j] + (uint64_t)k * stage_bytes + (uint64_t)i * N * pb,
                       (uint64_t)N * pb);
        }
        /* step 2: for each of my N positions, sum over the G peers */
        for (int r = 0; r < W; r++)
            for (int m = 0; m < N; m++)
                ASSERT_EQ(zk_reduce_requant_ref(recv + (uint64_t)r * G * N * pb + (uint64_t)m * pb,
                                                (uint64_t)N * pb, G, g->piece, g->bits, g->block,
                                                red + ((uint64_t)r * N + m) * pb),
                          0);
        /* inter-node all-to-all among equal local index: node nd gets, from
         * node m, the piece m holds for position nd */
        for (int r = 0; r < W; r++) {
            int nd = r / G, i = r % G;
            for (int m = 0; m < N; m++)
                memcpy(recv2 + ((uint64_t)r * N + m) * pb,
                       red + ((uint64_t)(m * G + i) * N + nd) * pb, pb);
        }
        /* step 4 */
        for (int r = 0; r < W; r++) {
            uint64_t start = (uint64_t)r * g->shard;
            uint64_t len = start >= g->n ? 0 : (g->n - start < g->shard ? g->n - start : g->shard);
            uint64_t off = (uint64_t)k * g->piece;
            if (off >= len)
                continue;
            uint64_t cnt = len - off < g->piece ? len - off : g->piece;
            zk_reduce_out_ref(recv2 + (uint64_t)r * N * pb, pb, N, g->piece, g->bits, g->block, cnt,
                              sm->op, (float)W, y[r] + off * oes, sm->out_dtype);
        }
    }
    /* check: each rank's shard equals the exact reduce-scatter */
    double q = zk_qmax(g->bits);
    for (int r = 0; r < W; r++) {
        uint64_t start = (uint64_t)r * g->shard;
        uint64_t len = start >= g->n ? 0 : (g->n - start < g->shard ? g->n - start : g->shard);
        /* step 0 error <= amax/(2q) per rank; step 2 requant <= G*amax/(2q);
         * summed over the N nodes */
        double div = sm->op == ZK_MEAN ? W : 1;
        double bound = len ? (W * sm->amax[r] / (2 * q) + N * G * sm->amax[r] / (2 * q)) / div : 0;
        double out_ulp = sm->out_dtype == ZK_BF16 ? 1.0 / 128 : 1e-6;
        for (uint64_t e = 0; e < len; e++) {
            double want = sm->exact[start + e] / div;
            double got = zk_widen(y[r], sm->out_dtype, e);
            double tol = bound * BOUND_SLACK + fabs(want) * out_ulp;
            if (!(fabs(got - want) <= tol)) {
                fprintf(stderr,
                        "qgz N=%d G=%d S=%d n=%llu bits=%d B=%u dt=%d: rank %d elem %llu got %g "
                        "want %g tol %g\n",
                        N, G, S, (unsigned long long)g->n, g->bits, g->block, sm->dtype, r,
                        (unsigned long long)e, got, want, tol);
                exit(1);
            }
        }
        /* nothing written past the shard's real length */
        for (uint64_t b = len * oes; b < g->shard * oes; b++)
            ASSERT_EQ(y[r][b], 0xA5);
    }
    for (int r = 0; r < W; r++) {
        free(buf[r]);
        free(y[r]);
    }
    free(buf);
    free(y);
    free(recv);
    free(red);
    free(recv2);
    free(stage_only);
}

static void test_geometry(void)
{
    struct zk_qgz_geom g;
    ASSERT_EQ(zk_qgz_geom_init(&g, 1000, 2, 4, 3, 4, 32), 0);
    ASSERT_EQ(g.shard, 125);
    ASSERT_EQ(g.piece, 64); /* ceil(125/3) = 42 -> 64 */
    ASSERT_EQ(g.piece_bytes, zk_chunk_bytes(64, 4, 32));
    ASSERT_EQ(g.piece_bytes % ZK_ALIGN, 0);
    /* position p = i*N + nd holds slice nd*G + i */
    ASSERT_EQ(zk_qgz_slice_at(&g, 0), 0);
    ASSERT_EQ(zk_qgz_slice_at(&g, 1), 4);
    ASSERT_EQ(zk_qgz_slice_at(&g, 2), 1);
    ASSERT_EQ(zk_qgz_slice_at(&g, 7), 7);
    ASSERT_EQ(zk_qgz_geom_init(&g, 10, 0, 4, 1, 4, 32), -1);
    ASSERT_EQ(zk_qgz_geom_init(&g, 10, 1, 0, 1, 4, 32), -1);
    ASSERT_EQ(zk_qgz_geom_init(&g, 10, 1, 1, 0, 4, 32), -1);
    ASSERT_EQ(zk_qgz_geom_init(&g, 10, 1, 1, 1, 5, 32), -1);
    ASSERT_EQ(zk_qgz_geom_init(&g, 10, 1, 1, 1, 8, 48), -1);
    ASSERT_EQ(zk_qgz_geom_init(&g, 10, 1, 1, 1, 8, 16384), -1);
    ASSERT_EQ(zk_qgz_geom_init(NULL, 10, 1, 1, 1, 8, 32), -1);
}

/* The reordered buffer holds, at (stage k, position p), exactly the
 * quantized sub-chunk k of slice slice_at(p). */
static void test_reorder_places_slices(void)
{
    struct zk_qgz_geom g;
    ASSERT_EQ(zk_qgz_geom_init(&g, 777, 3, 2, 2, 8, 32), 0);
    float *x = malloc(777 * 4);
    ASSERT(x);
    for (int e = 0; e < 777; e++)
        x[e] = (float)(e + 1);
    int W = 6;
    uint8_t *buf = malloc((size_t)g.stages * W * g.piece_bytes);
    uint8_t *one = malloc(g.piece_bytes);
    ASSERT(buf && one);
    zk_qgz_reorder_quantize_ref(x, ZK_FP32, &g, buf);
    for (int k = 0; k < g.stages; k++)
        for (int p = 0; p < W; p++) {
            int s = zk_qgz_slice_at(&g, p);
            uint64_t start = (uint64_t)s * g.shard + (uint64_t)k * g.piece;
            uint64_t end = (uint64_t)(s + 1) * g.shard;
            end = end < 777 ? end : 777;
            uint64_t valid = start < end ? (end - start < g.piece ? end - start : g.piece) : 0;
            zk_quantize_ref(x + (valid ? start : 0), ZK_FP32, g.piece, valid, 8, 32, one);
            ASSERT_EQ(memcmp(one, buf + ((uint64_t)k * W + p) * g.piece_bytes, g.piece_bytes), 0);
        }
    free(x);
    free(buf);
    free(one);
}

static void test_pipeline_property(void)
{
    const int nodes[] = {1, 2, 3};
    const int locals[] = {1, 2, 4};
    const int stages[] = {1, 2, 3};
    const uint64_t sizes[] = {1, 5, 64, 1000, 4099, 12288};
    const uint32_t blocks[] = {32, 64, 256};
    const int dtypes[] = {ZK_FP32, ZK_BF16, ZK_FP16};
    uint64_t seed = 77;
    int runs = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t d = 0; d < sizeof sizes / sizeof sizes[0]; d++) {
                    /* rotate through the other parameters so every value is
                     * covered without the full product */
                    int v = runs++;
                    struct sim sm;
                    memset(&sm, 0, sizeof sm);
                    int bits = v % 2 ? 4 : 8;
                    uint32_t block = blocks[(v / 2) % 3];
                    ASSERT_EQ(zk_qgz_geom_init(&sm.g, sizes[d], nodes[a], locals[b], stages[c],
                                               bits, block),
                              0);
                    sm.w = nodes[a] * locals[b];
                    sm.dtype = dtypes[(v / 3) % 3];
                    sm.op = (v / 5) % 2 ? ZK_MEAN : ZK_SUM;
                    sm.out_dtype = (v / 7) % 2 ? ZK_BF16 : ZK_FP32;
                    sim_fill(&sm, &seed);
                    sim_run_and_check(&sm);
                    sim_free(&sm);
                }
    printf("qgz pipeline: %d configurations ok\n", runs);
}

/* A NaN in one rank's gradient poisons exactly the blocks downstream of
 * it: the owner's output is canonical NaN over that block, elsewhere finite. */
static void test_pipeline_poison(void)
{
    struct zk_qgz_geom g;
    ASSERT_EQ(zk_qgz_geom_init(&g, 256, 1, 2, 1, 8, 32), 0); /* shard 128, piece 128 */
    float x0[256], x1[256];
    for (int e = 0; e < 256; e++)
        x0[e] = x1[e] = 1.0f;
    x1[130] = NAN; /* slice 1, block 0 of rank 1's piece */
    uint64_t pb = g.piece_bytes;
    uint8_t *b0 = malloc(2 * pb), *b1 = malloc(2 * pb), *in = malloc(2 * pb), *out = malloc(pb);
    ASSERT(b0 && b1 && in && out);
    ASSERT_EQ(zk_qgz_reorder_quantize_ref(x0, ZK_FP32, &g, b0), 0);
    ASSERT_EQ(zk_qgz_reorder_quantize_ref(x1, ZK_FP32, &g, b1), 1);
    /* rank 1 (local 1) receives position 1 from both */
    memcpy(in, b0 + pb, pb);
    memcpy(in + pb, b1 + pb, pb);
    ASSERT_EQ(zk_reduce_requant_ref(in, pb, 2, g.piece, 8, 32, out), 1);
    float y[128];
    zk_reduce_out_ref(out, pb, 1, g.piece, 8, 32, 128, ZK_SUM, 1.0f, y, ZK_FP32);
    for (int e = 0; e < 128; e++) {
        uint32_t u;
        memcpy(&u, &y[e], 4);
        if (e < 32)
            ASSERT_EQ(u, ZK_NAN_BITS);
        else
            ASSERT(y[e] == 2.0f);
    }
    free(b0);
    free(b1);
    free(in);
    free(out);
}

/* The fused reductions add each code times its scale to the sum as one
 * fused multiply-add (zpp_kernels.h): element 0 of two int8 chunks, codes
 * 1 and 3, scales picked so that rounding the product first gives another
 * sum; the output must be the once-rounded one. */
static void test_reduce_rounds_once(void)
{
    const uint64_t piece = 32, pb = zk_chunk_bytes(piece, 8, 32), pay = zk_payload_bytes(piece, 8);
    uint8_t *in = calloc(2, pb);
    ASSERT(in);
    float s0 = 0, s1 = 0, fused = 0, twice = 0;
    uint32_t r = 12345;
    int found = 0;
    for (int t = 0; t < 100000 && !found; t++) {
        r = r * 1664525u + 1013904223u;
        uint32_t a = 0x3F800000u | (r >> 9); /* [1, 2) */
        r = r * 1664525u + 1013904223u;
        uint32_t b = 0x3F800000u | (r >> 9);
        memcpy(&s0, &a, 4);
        memcpy(&s1, &b, 4);
        fused = fmaf(3.0f, s1, fmaf(1.0f, s0, 0.0f));
        volatile float p = 3.0f * s1;
        twice = s0 + p;
        found = memcmp(&fused, &twice, 4) != 0;
    }
    ASSERT(found);
    in[0] = 1;
    in[pb] = 3;
    memcpy(in + pay, &s0, 4);
    memcpy(in + pb + pay, &s1, 4);
    float y[32];
    zk_reduce_out_ref(in, pb, 2, piece, 8, 32, piece, ZK_SUM, 1.0f, y, ZK_FP32);
    ASSERT(memcmp(&y[0], &fused, 4) == 0);
    for (int e = 1; e < 32; e++)
        ASSERT(y[e] == 0.0f);
    free(in);
}

int main(void)
{
    test_geometry();
    test_reorder_places_slices();
    test_pipeline_poison();
    test_reduce_rounds_once();
    test_pipeline_property();
    printf("test_qgz_ref: ok\n");
    return 0;
}
