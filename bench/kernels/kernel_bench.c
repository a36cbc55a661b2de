/*
 * kernel_bench.c — effective bandwidth of the CUDA kernels (kernels/quant.cu, qgz.cu)
 * next to a device-to-device cudaMemcpy measured in the same run.
 *
 * Effective bandwidth = the bytes a kernel must move (every input byte read
 * once, every output byte written once) / its time. Each figure is the
 * median of BENCH_REPS timed launches (CUDA events around each launch) after
 * BENCH_WARMUP untimed ones; launches rotate over BENCH_ROT input/output
 * sets, each >= 256 MiB of input, far beyond the L2. Every kernel row is
 * paired with the copy: its launches come in BENCH_ROUNDS runs alternating
 * with runs of a device-to-device copy of the same size (a rotation of its
 * own), and the row is printed as a fraction of that copy's median ("copy
 * TB/s"). A GPU's bandwidth drifts by a few percent over a run, and a figure
 * set against a copy timed a minute earlier drifted with it. Inputs are random normal
 * data (never zeros).
 *
 * Usage: kernel_bench [MiB]   (input size per launch, default 256)
 * ZK_BENCH_ONLY=quant,traffic,reorder,reduce,sum (any of them) times those sections
 * alone, besides the copy and memset rows: tests/gpu/run_gpu.sh gives it to
 * the variants it times (ZK_VARIANT_BENCH) when a call compares only some
 * kernels and wants more variants in it.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "zpp_kernels.h"
#include "tests/gpu/cuda_check.h"
#include "zpp_kernels_cuda.h"
#include "bench/kernels/traffic.h"

#define BENCH_WARMUP 5
#define BENCH_REPS 30
#define BENCH_ROT 3
#define BENCH_ROUNDS 5 /* runs of the kernel, and of its paired copy, per row */
_Static_assert(BENCH_REPS % BENCH_ROUNDS == 0, "a row's timed launches split evenly into runs");
#define MIB (1024.0 * 1024.0)
#define DEFAULT_MIB 256
#define QGZ_K 8 /* peers summed by the fused reductions (G or N) */

static cudaEvent_t ev0, ev1;
static double g_copy_tbs;     /* the first copy rows' bandwidth */
static double g_pair_tbs;     /* the copy timed next to the last kernel (0: none) */
static struct ctx *g_pair;    /* the paired copy's rotation */
static uint64_t g_pair_bytes; /* its bytes per launch */

/* One launch of the kernel under test on rotation set r. */
typedef void (*launch_fn)(int r, void *ctx);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double time_one(launch_fn fn, int r, void *ctx)
{
    float t;
    CK(cudaEventRecord(ev0, 0));
    fn(r, ctx);
    CK(cudaEventRecord(ev1, 0));
    CK(cudaEventSynchronize(ev1));
    CK(cudaEventElapsedTime(&t, ev0, ev1));
    return t;
}

static void run_copy(int r, void *p);

/* Median milliseconds of one launch of fn. With pair, fn's launches come
 * in BENCH_ROUNDS runs alternating with runs of the copy's, and g_pair_tbs
 * gets the copy's median bandwidth. Each run starts with one untimed
 * launch: a launch pays for the dirty L2 lines the launch before it left,
 * and a timed launch should follow one of its own kind, as in a stream of
 * them (a kernel timed right after a copy pays for up to an L2 of the
 * copy's writes, and a copy after a read-mostly kernel for almost none). */
static double time_median_of(launch_fn fn, void *ctx, int pair)
{
    double ms[BENCH_REPS], cm[BENCH_REPS];
    const int per = BENCH_REPS / BENCH_ROUNDS;
    for (int i = 0; i < BENCH_WARMUP; i++)
        fn(i % BENCH_ROT, ctx);
    CK(cudaDeviceSynchronize());
    for (int r = 0, i = 0; r < BENCH_ROUNDS; r++) {
        if (pair) {
            run_copy(BENCH_ROT - 1, g_pair);
            for (int j = 0; j < per; j++)
                cm[r * per + j] = time_one(run_copy, j % BENCH_ROT, g_pair);
        }
        fn((i + BENCH_ROT - 1) % BENCH_ROT, ctx);
        for (int j = 0; j < per; j++, i++)
            ms[i] = time_one(fn, i % BENCH_ROT, ctx);
    }
    CK(cudaGetLastError());
    qsort(ms, BENCH_REPS, sizeof ms[0], cmp_double);
    g_pair_tbs = 0;
    if (pair) {
        qsort(cm, BENCH_REPS, sizeof cm[0], cmp_double);
        g_pair_tbs = 2.0 * (double)g_pair_bytes / (cm[BENCH_REPS / 2] * 1e-3) / 1e12;
    }
    return ms[BENCH_REPS / 2];
}

/* A kernel row's time, paired with the copy. */
static double time_median(launch_fn fn, void *ctx)
{
    return time_median_of(fn, ctx, 1);
}

static void row(const char *name, const char *cfg, double bytes, double ms)
{
    double tbs = bytes / (ms * 1e-3) / 1e12, ref = g_pair_tbs > 0 ? g_pair_tbs : g_copy_tbs;
    printf("%-22s %-26s %9.1f %9.4f %8.3f %9.3f %7.1f%%\n", name, cfg, bytes / MIB, ms, tbs,
           ref > 0 ? ref : tbs, ref > 0 ? 100.0 * tbs / ref : 100.0);
    g_pair_tbs = 0;
    fflush(stdout);
}

/* ---- buffers ------------------------------------------------------------ */

/* Random data for one dtype, made once on the host and reused (content does
 * not matter to the timing, only that it is not zeros). */
static uint8_t *g_host[4];
static uint64_t g_host_bytes[4];

static void *dev_random(uint64_t bytes, int dtype, uint64_t *seed)
{
    if (g_host_bytes[dtype] < bytes) {
        free(g_host[dtype]);
        g_host[dtype] = malloc(bytes);
        if (!g_host[dtype]) {
            fprintf(stderr, "out of host memory\n");
            exit(1);
        }
        g_host_bytes[dtype] = bytes;
        uint64_t n = bytes / zk_dtype_size(dtype);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t z = (*seed += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            /* sum of 4 uniforms: close enough to normal for timing */
            double v = 0;
            for (int k = 0; k < 4; k++)
                v += (double)((z >> (16 * k)) & 0xFFFF) / 65536.0;
            zk_narrow((float)(v - 2.0), g_host[dtype], dtype, i);
        }
    }
    void *d;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemcpy(d, g_host[dtype], bytes, cudaMemcpyHostToDevice));
    return d;
}

static void *dev_alloc(uint64_t bytes)
{
    void *d;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemset(d, 0, bytes));
    return d;
}

/* Whether section `name` is timed: listed in ZK_BENCH_ONLY (comma
 * separated), or that variable unset or empty. */
static int section_on(const char *name)
{
    const char *p = getenv("ZK_BENCH_ONLY");
    if (!p || !*p)
        return 1;
    const size_t n = strlen(name);
    for (;;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        if (!e)
            return 0;
        p = e + 1;
    }
}

/* ---- kernels under test ------------------------------------------------- */

struct ctx {
    void *x[BENCH_ROT]; /* element inputs or quantized inputs */
    void *y[BENCH_ROT]; /* outputs */
    uint64_t n, bytes;
    int dtype, bits, k, out_dtype;
    uint32_t block;
    uint64_t stride;
    struct zk_qgz_geom g;
    enum zkb_form form; /* traffic rows */
};

static void run_copy(int r, void *p)
{
    struct ctx *c = p;
    CK(cudaMemcpyAsync(c->y[r], c->x[r], c->bytes, cudaMemcpyDeviceToDevice, 0));
}
static void run_memset(int r, void *p)
{
    struct ctx *c = p;
    CK(cudaMemsetAsync(c->y[r], 0, c->bytes, 0));
}
static void run_traffic(int r, void *p)
{
    struct ctx *c = p; /* bytes read, k bytes written per byte read */
    CK(zkb_traffic_cuda(c->x[r], c->bytes, c->y[r], c->form, c->k, 0));
}
static void run_quant(int r, void *p)
{
    struct ctx *c = p;
    CK(zk_quantize_cuda(c->x[r], c->dtype, c->n, c->n, c->bits, c->block, c->y[r], NULL, 0));
}
static void run_dequant(int r, void *p)
{
    struct ctx *c = p;
    CK(zk_dequantize_cuda(c->x[r], c->n, c->n, c->bits, c->block, c->y[r], c->dtype, 0));
}
static void run_reorder(int r, void *p)
{
    struct ctx *c = p;
    CK(zk_qgz_reorder_quantize_cuda(c->x[r], c->dtype, &c->g, c->y[r], NULL, 0));
}
static void run_requant(int r, void *p)
{
    struct ctx *c = p;
    CK(zk_reduce_requant_cuda(c->x[r], c->stride, c->k, c->n, c->bits, c->block, c->y[r], NULL, 0));
}
static void run_out(int r, void *p)
{
    struct ctx *c = p;
    CK(zk_reduce_out_cuda(c->x[r], c->stride, c->k, c->n, c->bits, c->block, c->n, ZK_SUM, 1.0f,
                          c->y[r], c->out_dtype, 0));
}
static void run_sum(int r, void *p)
{
    struct ctx *c = p;
    CK(zk_sum_cuda(c->x[r], c->n, c->k, c->n, c->dtype, ZK_SUM, 1.0f, c->y[r], c->out_dtype, 0));
}

static void free_ctx(struct ctx *c)
{
    for (int r = 0; r < BENCH_ROT; r++) {
        CK(cudaFree(c->x[r]));
        CK(cudaFree(c->y[r]));
    }
}

static const char *dtn(int dt)
{
    return dt == ZK_FP32 ? "fp32" : dt == ZK_FP16 ? "fp16" : "bf16";
}

/* A copy of `bytes` on a rotation of its own (random fp32 in, a buffer out). */
static void copy_ctx(struct ctx *c, uint64_t bytes, uint64_t *seed)
{
    memset(c, 0, sizeof *c);
    c->bytes = bytes;
    for (int r = 0; r < BENCH_ROT; r++) {
        c->x[r] = dev_random(bytes, ZK_FP32, seed);
        c->y[r] = dev_alloc(bytes);
    }
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : DEFAULT_MIB;
    uint64_t in_bytes = mib << 20, seed = 1;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("kernel_bench: no GPU\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("kernel_bench: %s, %d SMs, L2 %d MiB; input %llu MiB per launch, %d rotating sets, "
           "median of %d after %d warm-up\n",
           prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, (unsigned long long)mib,
           BENCH_ROT, BENCH_REPS, BENCH_WARMUP);
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    printf("%-22s %-26s %9s %9s %8s %9s %8s\n", "kernel", "config", "MiB moved", "ms", "TB/s",
           "copy TB/s", "of copy");

    struct ctx c;
    /* copy: in_bytes read + in_bytes written */
    copy_ctx(&c, in_bytes, &seed);
    /* the better of two medians: the first can catch the clocks ramping up */
    double ms = time_median_of(run_copy, &c, 0), ms2 = time_median_of(run_copy, &c, 0);
    ms = ms2 < ms ? ms2 : ms;
    g_copy_tbs = 2.0 * in_bytes / (ms * 1e-3) / 1e12;
    row("cudaMemcpy D2D", "", 2.0 * in_bytes, ms);
    double copy_ms = ms;
    /* the copy every kernel row is paired with: a rotation of its own */
    struct ctx pc;
    copy_ctx(&pc, in_bytes, &seed);
    g_pair = &pc;
    g_pair_bytes = pc.bytes;
    /* a write-only stream, for the kernels that mostly write (dequantize
     * into fp32 writes 8 of the 9 bytes it moves): a reference, no goal */
    row("cudaMemset (writes)", "", (double)in_bytes, time_median(run_memset, &c));

    /* quantize / dequantize */
    const int dts[3] = {ZK_BF16, ZK_FP16, ZK_FP32};
    const uint32_t qblocks[] = {256, 32, 2048};
    for (int t = 0; t < 3 && section_on("quant"); t++)
        for (int bw = 0; bw < 2; bw++)
            for (size_t b = 0; b < sizeof qblocks / sizeof qblocks[0]; b++) {
                if (qblocks[b] != 256 && (t != 0 || bw != 0))
                    continue; /* other block sizes: bf16 int8 only */
                memset(&c, 0, sizeof c);
                c.dtype = dts[t];
                c.bits = bw ? 4 : 8;
                c.block = qblocks[b];
                c.n = in_bytes / zk_dtype_size(c.dtype);
                uint64_t cb = zk_chunk_bytes(c.n, c.bits, c.block);
                for (int r = 0; r < BENCH_ROT; r++) {
                    c.x[r] = dev_random(in_bytes, c.dtype, &seed);
                    c.y[r] = dev_alloc(cb);
                }
                char cfg[64];
                snprintf(cfg, sizeof cfg, "%s int%d B=%u", dtn(c.dtype), c.bits, c.block);
                row("quantize", cfg, (double)(in_bytes + cb), time_median(run_quant, &c));
                /* dequantize the chunks just made back into x */
                for (int r = 0; r < BENCH_ROT; r++) {
                    void *tmp = c.x[r];
                    c.x[r] = c.y[r];
                    c.y[r] = tmp;
                }
                row("dequantize", cfg, (double)(in_bytes + cb), time_median(run_dequant, &c));
                free_ctx(&c);
            }

    /* the write-heavy dequantize shapes' traffic alone: 1 byte read per
     * `ratio` written (int8 -> 16-bit, int8 -> fp32 or int4 -> 16-bit,
     * int4 -> fp32), read with that shape's code loads or 16 bytes per
     * lane, stored plainly or as one bulk copy per CTA, with readers and
     * writers apart, or as all reads then all writes (traffic.h); a
     * reference for the dequantize rows, no goal */
    static const struct {
        int ratio;
        enum zkb_form form;
        const char *what;
    } mixes[] = {
        {2, ZKB_LOAD8, "read 8B/lane"},
        {2, ZKB_LOAD16, "read 16B/lane"},
        {2, ZKB_BULK, "read 16B/lane, bulk st"},
        {2, ZKB_APART, "readers apart"},
        {2, ZKB_PHASED, "reads, then writes"},
        {2, ZKB_AHEAD, "read ahead, 16B/lane"},
        {2, ZKB_AHEAD_NORMAL, "read ahead (normal)"},
        {4, ZKB_LOAD4, "read 4B/lane"},
        {4, ZKB_LOAD16, "read 16B/lane"},
        {4, ZKB_BULK, "read 16B/lane, bulk st"},
        {4, ZKB_APART, "readers apart"},
        {4, ZKB_PHASED, "reads, then writes"},
        {4, ZKB_AHEAD, "read ahead, 16B/lane"},
        {4, ZKB_AHEAD_NORMAL, "read ahead (normal)"},
        {8, ZKB_LOAD2, "read 2B/lane"},
        {8, ZKB_LOAD16, "read 16B/lane"},
        {8, ZKB_BULK, "read 16B/lane, bulk st"},
        {8, ZKB_APART, "readers apart"},
        {8, ZKB_PHASED, "reads, then writes"},
        {8, ZKB_AHEAD, "read ahead, 16B/lane"},
        {8, ZKB_AHEAD_NORMAL, "read ahead (normal)"},
    };
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0] && section_on("traffic"); m++) {
        if (mixes[m].form == ZKB_BULK && prop.major < 9)
            continue; /* the bulk copy engine is sm_90's */
        memset(&c, 0, sizeof c);
        c.k = mixes[m].ratio;
        c.form = mixes[m].form;
        c.bytes = in_bytes / (uint64_t)c.k;
        for (int r = 0; r < BENCH_ROT; r++) {
            c.x[r] = dev_random(c.bytes, ZK_FP32, &seed);
            c.y[r] = dev_alloc(in_bytes);
        }
        char cfg[64];
        snprintf(cfg, sizeof cfg, "1:%d %s", c.k, mixes[m].what);
        row("traffic (no arith)", cfg, (double)(c.bytes + in_bytes), time_median(run_traffic, &c));
        free_ctx(&c);
    }

    /* qgZ step 0: reorder + quantize, W = 2 x 8, S = 2 */
    for (int t = 0; t < 2 && section_on("reorder"); t++)
        for (int bw = 0; bw < 2; bw++) {
            memset(&c, 0, sizeof c);
            c.dtype = t ? ZK_FP32 : ZK_BF16;
            c.bits = bw ? 4 : 8;
            c.n = in_bytes / zk_dtype_size(c.dtype);
            CK(zk_qgz_geom_init(&c.g, c.n, 2, 8, 2, c.bits, 256));
            uint64_t ob = (uint64_t)c.g.stages * 16 * c.g.piece_bytes;
            for (int r = 0; r < BENCH_ROT; r++) {
                c.x[r] = dev_random(in_bytes, c.dtype, &seed);
                c.y[r] = dev_alloc(ob);
            }
            char cfg[64];
            snprintf(cfg, sizeof cfg, "%s int%d N2 G8 S2", dtn(c.dtype), c.bits);
            row("qgz reorder+quant", cfg, (double)(in_bytes + ob), time_median(run_reorder, &c));
            free_ctx(&c);
        }

    /* qgZ steps 2 and 4: k = 8 chunks whose payloads total >= in_bytes */
    for (int bw = 0; bw < 2 && section_on("reduce"); bw++) {
        memset(&c, 0, sizeof c);
        c.bits = bw ? 4 : 8;
        c.block = 256;
        c.k = QGZ_K;
        c.n = in_bytes * 8 / (uint64_t)c.bits / QGZ_K; /* elements per chunk */
        c.stride = zk_chunk_bytes(c.n, c.bits, c.block);
        uint64_t cb = c.stride;
        for (int r = 0; r < BENCH_ROT; r++) {
            /* quantize random bf16 data into the k chunks */
            void *src = dev_random(c.n * 2, ZK_BF16, &seed);
            c.x[r] = dev_alloc(cb * QGZ_K);
            for (int j = 0; j < QGZ_K; j++)
                CK(zk_quantize_cuda(src, ZK_BF16, c.n, c.n, c.bits, c.block,
                                    (uint8_t *)c.x[r] + j * cb, NULL, 0));
            CK(cudaFree(src));
            c.y[r] = dev_alloc(c.n * 4 > cb ? c.n * 4 : cb);
        }
        char cfg[64];
        snprintf(cfg, sizeof cfg, "int%d B=256 k=%d", c.bits, QGZ_K);
        row("qgz reduce+requant", cfg, (double)(cb * QGZ_K + cb), time_median(run_requant, &c));
        c.out_dtype = ZK_BF16;
        snprintf(cfg, sizeof cfg, "int%d k=%d -> bf16", c.bits, QGZ_K);
        row("qgz reduce_out", cfg, (double)(cb * QGZ_K + c.n * 2), time_median(run_out, &c));
        c.out_dtype = ZK_FP32;
        snprintf(cfg, sizeof cfg, "int%d k=%d -> fp32", c.bits, QGZ_K);
        row("qgz reduce_out", cfg, (double)(cb * QGZ_K + c.n * 4), time_median(run_out, &c));
        free_ctx(&c);
    }

    /* exact sum (plain reduce-scatter), bf16 k=8 -> bf16 */
    if (section_on("sum")) {
        memset(&c, 0, sizeof c);
        c.dtype = ZK_BF16;
        c.out_dtype = ZK_BF16;
        c.k = QGZ_K;
        c.n = in_bytes / 2 / QGZ_K;
        for (int r = 0; r < BENCH_ROT; r++) {
            c.x[r] = dev_random(in_bytes, ZK_BF16, &seed);
            c.y[r] = dev_alloc(c.n * 2);
        }
        row("sum (exact)", "bf16 k=8 -> bf16", (double)(in_bytes + c.n * 2),
            time_median(run_sum, &c));
        free_ctx(&c);
    }

    /* the copy again, to see the spread */
    copy_ctx(&c, in_bytes, &seed);
    ms = time_median_of(run_copy, &c, 0);
    row("cudaMemcpy D2D (again)", "", 2.0 * in_bytes, ms);
    printf("copy spread: %.4f ms then %.4f ms\n", copy_ms, ms);
    free_ctx(&c);
    free_ctx(&pc);
    return 0;
}
