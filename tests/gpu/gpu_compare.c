/*
 * gpu_compare.c — proves the CUDA kernels (kernels/quant.cu, qgz.cu) give the same bytes
 * as the C reference (kernels/quant_ref.c, qgz_ref.c). For every kernel it draws fresh
 * random inputs (normal, uniform, heavy-tailed, with exact zeros and whole
 * zero blocks, tiny/subnormal blocks, NaN, Inf), over many sizes including
 * odd ones and tails, all dtypes, both bit widths and block sizes 32..8192;
 * it runs each GPU kernel twice over outputs poisoned with two different
 * byte patterns (so an element the kernel never wrote cannot match both),
 * compares every byte with the reference, checks the guard bytes after the
 * output, and compares the poisoned-block counts. Needs a GPU; exits 77
 * (skip) when there is none. Prints one line per kernel family and FAIL
 * lines with the first differing byte.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../test.h"
#include "zpp_kernels.h"
#include "tests/gpu/cuda_check.h"
#include "zpp_kernels_cuda.h"

#define GUARD 64 /* bytes checked after every output */
#define POISON_A 0xA5
#define POISON_B 0x5A
#define ELEM_OFFSET_UNALIGNED 1 /* elements: moves x off 16-byte alignment */

enum dist { D_NORMAL, D_UNIFORM, D_HEAVY, D_ZEROS, D_SPECIAL, D_TINY, D_WIDE, D_COUNT };
static const char *dist_name[D_COUNT] = {"normal",  "uniform", "heavy", "zeros",
                                         "nan-inf", "tiny",    "wide"};

static uint64_t g_seed = 0x5EEDull;
static long g_checks, g_fail;
static int g_quick; /* "quick": sizes <= QUICK_MAX only (for compute-sanitizer) */
#define QUICK_MAX 70000

static double gauss(void)
{
    double u1 = test_uniform(&g_seed), u2 = test_uniform(&g_seed);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Fills n elements of dtype with distribution d (host memory). */
static void fill(void *x, int dtype, uint64_t n, int d, uint32_t block)
{
    for (uint64_t i = 0; i < n; i++) {
        double v;
        switch (d) {
        case D_UNIFORM:
            v = 2 * test_uniform(&g_seed) - 1;
            break;
        case D_HEAVY:
            v = gauss() / (test_uniform(&g_seed) + 1e-3); /* Cauchy-like tails */
            break;
        case D_ZEROS:
            /* whole zero blocks, and exact zeros among values */
            v = (i / block) % 3 == 0 || test_uniform(&g_seed) < 0.3 ? 0.0 : gauss();
            break;
        case D_SPECIAL: {
            double u = test_uniform(&g_seed);
            v = u < 0.002 ? NAN : u < 0.004 ? INFINITY : u < 0.006 ? -INFINITY : gauss() * 1e3;
            break;
        }
        case D_TINY:
            v = gauss() * ((i / block) % 2 ? 1e-41 : 1e-20); /* fp32 subnormal blocks */
            break;
        case D_WIDE: /* every binade from fp32 subnormals to near FLT_MAX, per block */
            v = gauss() * pow(10.0, (double)((i / block * 7919) % 78) - 40.0);
            break;
        default:
            v = gauss();
        }
        zk_narrow((float)v, x, dtype, i);
    }
}

static const char *dt_name(int dt)
{
    return dt == ZK_FP32 ? "fp32" : dt == ZK_FP16 ? "fp16" : "bf16";
}

/* Compares `bytes` of device output (plus GUARD poison bytes after it) with
 * the reference; reports the first difference. */
static int compare(const char *what, const uint8_t *ref, const void *dev, uint64_t bytes,
                   int poison)
{
    uint8_t *h = malloc(bytes + GUARD);
    ASSERT(h);
    CK(cudaMemcpy(h, dev, bytes + GUARD, cudaMemcpyDeviceToHost));
    g_checks++;
    for (uint64_t i = 0; i < bytes + GUARD; i++) {
        int want = i < bytes ? ref[i] : poison;
        if (h[i] != want) {
            fprintf(stderr, "FAIL %s: byte %llu of %llu: gpu 0x%02x ref 0x%02x (poison 0x%02x)\n",
                    what, (unsigned long long)i, (unsigned long long)bytes, h[i], want, poison);
            g_fail++;
            free(h);
            return 0;
        }
    }
    free(h);
    return 1;
}

/* Device buffers reused across cases. */
static uint8_t *d_x, *d_c, *d_y;
static unsigned long long *d_pz;
static uint64_t cap_x, cap_c, cap_y;

static void ensure(uint8_t **p, uint64_t *cap, uint64_t need)
{
    need += GUARD + 64;
    if (need <= *cap)
        return;
    if (*p)
        CK(cudaFree(*p));
    CK(cudaMalloc((void **)p, need));
    *cap = need;
}

static unsigned long long read_pz(void)
{
    unsigned long long v;
    CK(cudaMemcpy(&v, d_pz, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

/* quantize + dequantize for one case. */
static void case_quant(int dtype, int bits, uint32_t block, uint64_t n, uint64_t n_valid, int d,
                       int unaligned)
{
    size_t es = zk_dtype_size(dtype);
    uint64_t off = unaligned ? ELEM_OFFSET_UNALIGNED : 0;
    uint64_t cb = zk_chunk_bytes(n, bits, block);
    uint8_t *hx = malloc((n + 1) * es), *hc = malloc(cb), *hy = malloc(n * 4 + 16);
    ASSERT(hx && hc && hy);
    fill(hx, dtype, n, d, block);
    uint64_t pz_ref = zk_quantize_ref(hx, dtype, n, n_valid, bits, block, hc);
    ensure(&d_x, &cap_x, (n + 1) * es);
    ensure(&d_c, &cap_c, cb);
    ensure(&d_y, &cap_y, n * 4);
    CK(cudaMemcpy(d_x + off * es, hx, n * es, cudaMemcpyHostToDevice));
    char what[160];
    snprintf(what, sizeof what, "quantize %s int%d B=%u n=%llu nv=%llu %s%s", dt_name(dtype), bits,
             block, (unsigned long long)n, (unsigned long long)n_valid, dist_name[d],
             unaligned ? " unaligned-x" : "");
    const int poisons[2] = {POISON_A, POISON_B};
    for (int r = 0; r < 2; r++) {
        CK(cudaMemset(d_c, poisons[r], cb + GUARD));
        CK(cudaMemset(d_pz, 0, sizeof *d_pz));
        CK(zk_quantize_cuda(d_x + off * es, dtype, n, n_valid, bits, block, d_c, d_pz, 0));
        CK(cudaDeviceSynchronize());
        if (!compare(what, hc, d_c, cb, poisons[r]))
            break;
        if (read_pz() != pz_ref) {
            fprintf(stderr, "FAIL %s: poisoned %llu vs ref %llu\n", what, read_pz(),
                    (unsigned long long)pz_ref);
            g_fail++;
        }
    }
    /* dequantize the reference chunk into every dtype, a prefix too */
    CK(cudaMemcpy(d_c, hc, cb, cudaMemcpyHostToDevice));
    const int dts[3] = {ZK_FP32, ZK_FP16, ZK_BF16};
    for (int t = 0; t < 3; t++) {
        uint64_t n_out = t == 2 ? n - n / 3 : n;
        size_t oes = zk_dtype_size(dts[t]);
        zk_dequantize_ref(hc, n, n_out, bits, block, hy, dts[t]);
        snprintf(what, sizeof what, "dequantize int%d B=%u n=%llu n_out=%llu -> %s %s", bits, block,
                 (unsigned long long)n, (unsigned long long)n_out, dt_name(dts[t]), dist_name[d]);
        for (int r = 0; r < 2; r++) {
            CK(cudaMemset(d_y, poisons[r], n * 4 + GUARD + oes));
            CK(zk_dequantize_cuda(d_c, n, n_out, bits, block, d_y + off * oes, dts[t], 0));
            CK(cudaDeviceSynchronize());
            uint8_t *exp = malloc(n_out * oes + off * oes);
            ASSERT(exp);
            memset(exp, poisons[r], off * oes);
            memcpy(exp + off * oes, hy, n_out * oes);
            int ok = compare(what, exp, d_y, (n_out + off) * oes, poisons[r]);
            free(exp);
            if (!ok)
                break;
        }
    }
    free(hx);
    free(hc);
    free(hy);
}

/* Quantizes k random chunks of `piece` elements with the reference (host),
 * laid at stride `stride` bytes; returns the host buffer. */
static uint8_t *make_chunks(int k, uint64_t piece, int bits, uint32_t block, uint64_t stride, int d)
{
    uint8_t *h = calloc((size_t)k, stride);
    float *x = malloc(piece * 4 + 4);
    ASSERT(h && x);
    for (int j = 0; j < k; j++) {
        fill(x, ZK_FP32, piece, d, block);
        zk_quantize_ref(x, ZK_FP32, piece, piece, bits, block, h + (uint64_t)j * stride);
    }
    free(x);
    return h;
}

static void case_reduce(int bits, uint32_t block, uint64_t piece, int k, int d)
{
    uint64_t cb = zk_chunk_bytes(piece, bits, block);
    uint64_t stride = cb + (k % 2 ? ZK_ALIGN : 0); /* a stride larger than the chunk */
    uint8_t *hin = make_chunks(k, piece, bits, block, stride, d);
    uint8_t *hout = malloc(cb), *hy = malloc(piece * 4 + 16);
    ASSERT(hout && hy);
    uint64_t pz_ref = zk_reduce_requant_ref(hin, stride, k, piece, bits, block, hout);
    ensure(&d_x, &cap_x, (uint64_t)k * stride);
    ensure(&d_c, &cap_c, cb);
    ensure(&d_y, &cap_y, piece * 4);
    CK(cudaMemcpy(d_x, hin, (uint64_t)k * stride, cudaMemcpyHostToDevice));
    char what[160];
    snprintf(what, sizeof what, "reduce_requant int%d B=%u piece=%llu k=%d %s", bits, block,
             (unsigned long long)piece, k, dist_name[d]);
    const int poisons[2] = {POISON_A, POISON_B};
    for (int r = 0; r < 2; r++) {
        CK(cudaMemset(d_c, poisons[r], cb + GUARD));
        CK(cudaMemset(d_pz, 0, sizeof *d_pz));
        CK(zk_reduce_requant_cuda(d_x, stride, k, piece, bits, block, d_c, d_pz, 0));
        CK(cudaDeviceSynchronize());
        if (!compare(what, hout, d_c, cb, poisons[r]))
            break;
        if (read_pz() != pz_ref) {
            fprintf(stderr, "FAIL %s: poisoned %llu vs ref %llu\n", what, read_pz(),
                    (unsigned long long)pz_ref);
            g_fail++;
        }
    }
    const int dts[3] = {ZK_FP32, ZK_BF16, ZK_FP16};
    for (int t = 0; t < 3; t++) {
        int op = t == 1 ? ZK_MEAN : ZK_SUM;
        uint64_t count = t == 2 ? piece - piece / 5 : piece;
        size_t oes = zk_dtype_size(dts[t]);
        float div = (float)k;
        zk_reduce_out_ref(hin, stride, k, piece, bits, block, count, op, div, hy, dts[t]);
        snprintf(what, sizeof what, "reduce_out int%d B=%u piece=%llu k=%d count=%llu %s %s %s",
                 bits, block, (unsigned long long)piece, k, (unsigned long long)count,
                 dt_name(dts[t]), op == ZK_MEAN ? "mean" : "sum", dist_name[d]);
        for (int r = 0; r < 2; r++) {
            CK(cudaMemset(d_y, poisons[r], piece * 4 + GUARD));
            CK(zk_reduce_out_cuda(d_x, stride, k, piece, bits, block, count, op, div, d_y, dts[t],
                                  0));
            CK(cudaDeviceSynchronize());
            if (!compare(what, hy, d_y, count * oes, poisons[r]))
                break;
        }
    }
    free(hin);
    free(hout);
    free(hy);
}

static void case_qgz(int dtype, int bits, uint32_t block, uint64_t n, int nodes, int local,
                     int stages, int d)
{
    struct zk_qgz_geom g;
    ASSERT_EQ(zk_qgz_geom_init(&g, n, nodes, local, stages, bits, block), 0);
    size_t es = zk_dtype_size(dtype);
    uint64_t w = (uint64_t)nodes * (uint64_t)local, total = (uint64_t)stages * w * g.piece_bytes;
    uint8_t *hx = malloc(n * es + 1), *hout = malloc(total + 1);
    ASSERT(hx && hout);
    fill(hx, dtype, n, d, block);
    uint64_t pz_ref = zk_qgz_reorder_quantize_ref(hx, dtype, &g, hout);
    ensure(&d_x, &cap_x, n * es);
    ensure(&d_c, &cap_c, total);
    CK(cudaMemcpy(d_x, hx, n * es, cudaMemcpyHostToDevice));
    char what[200];
    snprintf(what, sizeof what, "qgz_reorder %s int%d B=%u n=%llu N=%d G=%d S=%d %s",
             dt_name(dtype), bits, block, (unsigned long long)n, nodes, local, stages,
             dist_name[d]);
    const int poisons[2] = {POISON_A, POISON_B};
    for (int r = 0; r < 2; r++) {
        CK(cudaMemset(d_c, poisons[r], total + GUARD));
        CK(cudaMemset(d_pz, 0, sizeof *d_pz));
        CK(zk_qgz_reorder_quantize_cuda(d_x, dtype, &g, d_c, d_pz, 0));
        CK(cudaDeviceSynchronize());
        if (!compare(what, hout, d_c, total, poisons[r]))
            break;
        if (read_pz() != pz_ref) {
            fprintf(stderr, "FAIL %s: poisoned %llu vs ref %llu\n", what, read_pz(),
                    (unsigned long long)pz_ref);
            g_fail++;
        }
    }
    /* one stage on its own */
    int k = stages - 1;
    uint64_t sb = w * g.piece_bytes;
    snprintf(what + strlen(what), sizeof what - strlen(what), " stage %d", k);
    CK(cudaMemset(d_c, POISON_A, sb + GUARD));
    CK(zk_qgz_reorder_quantize_stage_cuda(d_x, dtype, &g, k, d_c, NULL, 0));
    CK(cudaDeviceSynchronize());
    compare(what, hout + (uint64_t)k * sb, d_c, sb, POISON_A);
    free(hx);
    free(hout);
}

static void case_sum(int dtype, int out_dtype, uint64_t count, int k, int d)
{
    size_t es = zk_dtype_size(dtype), oes = zk_dtype_size(out_dtype);
    uint64_t stride = count + 3; /* element stride: slices not 16-byte aligned */
    uint8_t *hx = malloc((uint64_t)k * stride * es), *hy = malloc(count * 4 + 16);
    ASSERT(hx && hy);
    fill(hx, dtype, (uint64_t)k * stride, d, 256);
    int op = k % 2 ? ZK_MEAN : ZK_SUM;
    zk_sum_ref(hx, stride, k, count, dtype, op, (float)k, hy, out_dtype);
    ensure(&d_x, &cap_x, (uint64_t)k * stride * es);
    ensure(&d_y, &cap_y, count * 4);
    CK(cudaMemcpy(d_x, hx, (uint64_t)k * stride * es, cudaMemcpyHostToDevice));
    char what[160];
    snprintf(what, sizeof what, "sum %s->%s count=%llu k=%d %s %s", dt_name(dtype),
             dt_name(out_dtype), (unsigned long long)count, k, op == ZK_MEAN ? "mean" : "sum",
             dist_name[d]);
    const int poisons[2] = {POISON_A, POISON_B};
    for (int r = 0; r < 2; r++) {
        CK(cudaMemset(d_y, poisons[r], count * oes + GUARD));
        CK(zk_sum_cuda(d_x, stride, k, count, dtype, op, (float)k, d_y, out_dtype, 0));
        CK(cudaDeviceSynchronize());
        if (!compare(what, hy, d_y, count * oes, poisons[r]))
            break;
    }
    /* aligned, contiguous slices too (the 16-byte path) */
    zk_sum_ref(hx, count, k, count, dtype, op, (float)k, hy, out_dtype);
    CK(cudaMemset(d_y, POISON_B, count * oes + GUARD));
    CK(zk_sum_cuda(d_x, count, k, count, dtype, op, (float)k, d_y, out_dtype, 0));
    CK(cudaDeviceSynchronize());
    compare(what, hy, d_y, count * oes, POISON_B);
    /* zk_sum_ptrs_cuda: input c is the slice at (k - 1 - c) * stride, so
     * the pointers run against memory order, of mixed alignment;
     * the reference sums the same slices in that order. */
    if (k <= ZK_SUM_MAX_PTRS) {
        uint8_t *hr = malloc((uint64_t)k * stride * es);
        const void *ptrs[ZK_SUM_MAX_PTRS];
        ASSERT(hr);
        for (int c = 0; c < k; c++) {
            memcpy(hr + (uint64_t)c * stride * es, hx + (uint64_t)(k - 1 - c) * stride * es,
                   stride * es);
            ptrs[c] = (const uint8_t *)d_x + (uint64_t)(k - 1 - c) * stride * es;
        }
        zk_sum_ref(hr, stride, k, count, dtype, op, (float)k, hy, out_dtype);
        snprintf(what + strlen(what), sizeof what - strlen(what), " ptrs");
        for (int r = 0; r < 2; r++) {
            CK(cudaMemset(d_y, poisons[r], count * oes + GUARD));
            CK(zk_sum_ptrs_cuda(ptrs, k, count, dtype, op, (float)k, d_y, out_dtype, 0));
            CK(cudaDeviceSynchronize());
            if (!compare(what, hy, d_y, count * oes, poisons[r]))
                break;
        }
        free(hr);
        /* more inputs than the kernel takes, or a null one: refused */
        const void *many[ZK_SUM_MAX_PTRS + 1] = {0};
        for (int c = 0; c <= ZK_SUM_MAX_PTRS; c++)
            many[c] = d_x;
        int too_many = zk_sum_ptrs_cuda(many, ZK_SUM_MAX_PTRS + 1, count, dtype, op, 1.0f, d_y,
                                        out_dtype, 0);
        many[0] = NULL;
        int null_in = zk_sum_ptrs_cuda(many, 1, count, dtype, op, 1.0f, d_y, out_dtype, 0);
        g_checks++;
        if (too_many != (int)cudaErrorInvalidValue || null_in != (int)cudaErrorInvalidValue) {
            fprintf(stderr, "FAIL %s: bad pointer arguments were not refused (%d, %d)\n", what,
                    too_many, null_in);
            g_fail++;
        }
    }
    free(hx);
    free(hy);
}

/* ---- fenced kernels: zk_copy_ptrs_cuda and zk_sum_ptrs_sync_cuda ------ */

#define XS_BLOCK_BYTES (ZK_XSYNC_WORDS * sizeof(uint32_t))

/* Reads word w of every member's flag block; 0 when all equal want. */
static int xs_words_are(const uint8_t *d_flags, int n, int w, uint32_t want)
{
    for (int m = 0; m < n; m++) {
        uint32_t v = 0;
        CK(cudaMemcpy(&v, d_flags + (size_t)m * XS_BLOCK_BYTES + (size_t)w * 4u, 4,
                      cudaMemcpyDeviceToHost));
        if (v != want)
            return 0;
    }
    return 1;
}

/* The zk_xsync of each of n members whose flag blocks lie back to back at
 * d_flags, with the abort and error words at dw (mapped host memory). */
static void xs_group(struct zk_xsync *xs, int n, uint8_t *d_flags, uint32_t *dw)
{
    for (int m = 0; m < n; m++) {
        memset(&xs[m], 0, sizeof xs[m]);
        xs[m].n = n;
        xs[m].me = m;
        for (int i = 0; i < n; i++)
            xs[m].flags[i] = (uint32_t *)(d_flags + (size_t)i * XS_BLOCK_BYTES);
        xs[m].abort = dw;
        xs[m].err = dw + 1;
        xs[m].timeout_ns = 20ull * 1000000000ull;
    }
}

/* Fenced launch gen of every member's zk_copy_ptrs_cuda: member m gathers
 * `bytes` from offset `off` of every member's input into d_cp[m], on its
 * own stream; the last member first, so that the others arrive later. */
static void xs_gather(int n, struct zk_xsync *xs, uint32_t gen, uint8_t *const *d_cp,
                      uint8_t *const *d_in, uint64_t off, uint64_t bytes, const cudaStream_t *st)
{
    for (int m = n - 1; m >= 0; m--) {
        void *dst[ZK_XSYNC_MAX];
        const void *src[ZK_XSYNC_MAX];
        uint64_t len[ZK_XSYNC_MAX];
        for (int i = 0; i < n; i++) {
            dst[i] = d_cp[m] + (uint64_t)i * bytes;
            src[i] = d_in[i] + off;
            len[i] = bytes;
        }
        xs[m].gen = gen;
        CK(zk_copy_ptrs_cuda(dst, src, len, n, &xs[m], st[m]));
    }
}

/* n members, each on a stream of its own (the daemon runs them on their
 * own GPUs), over `rounds` rounds: every member gathers every member's
 * block (copy: `bytes` each, at offset `off` from an aligned base, so
 * both the 16-byte and the byte paths run) and sums its block of every
 * member's input (count elements of dtype into fp32, member order, from
 * `off` rounded down to the dtype's alignment, which the kernel needs). The
 * flag words start just below 2^32 so that the launch numbers wrap. Each
 * output is compared with memcpy's and zk_sum_ref's bytes, poisoned
 * before each round; the CTA counters must be back at 0 and no wait may
 * have given up. Then the ways out: with the abort word raised, a member
 * whose partners never launch still ends, and so does one that times out,
 * setting the error word; neither reads its members' memory (their
 * memory may be gone by then: session 22), so neither writes its output,
 * left poisoned. */
static void case_xsync(int n, uint64_t bytes, uint64_t off, uint64_t count, int dtype, int rounds)
{
    size_t es = zk_dtype_size(dtype);
    uint64_t soff = off - off % es; /* the sum's inputs keep their dtype's alignment */
    uint64_t blk = count * es, in_bytes = off + (uint64_t)n * blk + bytes;
    uint8_t *d_flags = NULL, *d_in[ZK_XSYNC_MAX], *d_cp[ZK_XSYNC_MAX], *d_sm[ZK_XSYNC_MAX];
    uint8_t *h_in[ZK_XSYNC_MAX], *h_cp = malloc((uint64_t)n * bytes + 1), *h_sm = malloc(count * 4 + 16);
    uint8_t *h_cat = malloc((uint64_t)n * blk + 1);
    cudaStream_t st[ZK_XSYNC_MAX];
    uint32_t *hw = NULL, *dw = NULL;
    char what[160];
    ASSERT(h_cp && h_sm && h_cat);
    CK(cudaMalloc((void **)&d_flags, (size_t)n * XS_BLOCK_BYTES));
    CK(cudaHostAlloc((void **)&hw, 2 * sizeof *hw, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&dw, hw, 0));
    hw[0] = hw[1] = 0;
    uint32_t init[ZK_XSYNC_WORDS];
    for (int w = 0; w < ZK_XSYNC_WORDS; w++)
        init[w] = w < 2 * ZK_XSYNC_MAX ? 0xFFFFFFFEu : 0u;
    for (int m = 0; m < n; m++)
        CK(cudaMemcpy(d_flags + (size_t)m * XS_BLOCK_BYTES, init, sizeof init,
                      cudaMemcpyHostToDevice));
    uint32_t gen = 0xFFFFFFFEu;
    for (int m = 0; m < n; m++) {
        h_in[m] = malloc(in_bytes);
        ASSERT(h_in[m]);
        fill(h_in[m], dtype, in_bytes / es, m % D_COUNT, 256);
        CK(cudaMalloc((void **)&d_in[m], in_bytes));
        CK(cudaMalloc((void **)&d_cp[m], (uint64_t)n * bytes + GUARD));
        CK(cudaMalloc((void **)&d_sm[m], count * 4 + GUARD));
        CK(cudaMemcpy(d_in[m], h_in[m], in_bytes, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&st[m], cudaStreamNonBlocking));
    }
    struct zk_xsync xs[ZK_XSYNC_MAX];
    xs_group(xs, n, d_flags, dw);
    snprintf(what, sizeof what, "fenced n=%d copy %llu B +%llu, sum %s count=%llu", n,
             (unsigned long long)bytes, (unsigned long long)off, dt_name(dtype),
             (unsigned long long)count);
    for (int r = 0; r < rounds; r++) {
        int poison = r % 2 ? POISON_B : POISON_A;
        for (int m = 0; m < n; m++) {
            CK(cudaMemset(d_cp[m], poison, (uint64_t)n * bytes + GUARD));
            CK(cudaMemset(d_sm[m], poison, count * 4 + GUARD));
        }
        CK(cudaDeviceSynchronize());
        xs_gather(n, xs, ++gen, d_cp, d_in, off, bytes, st);
        gen++;
        for (int m = 0; m < n; m++) {
            const void *src[ZK_XSYNC_MAX];
            for (int i = 0; i < n; i++)
                src[i] = d_in[i] + soff + (uint64_t)m * blk;
            xs[m].gen = gen;
            CK(zk_sum_ptrs_sync_cuda(src, n, count, dtype, ZK_SUM, 1.0f, d_sm[m], ZK_FP32, &xs[m],
                                     st[m]));
        }
        CK(cudaDeviceSynchronize());
        for (int m = 0; m < n; m++) {
            for (int i = 0; i < n; i++)
                memcpy(h_cp + (uint64_t)i * bytes, h_in[i] + off, bytes);
            if (!compare(what, h_cp, d_cp[m], (uint64_t)n * bytes, poison))
                break;
            for (int i = 0; i < n; i++)
                memcpy(h_cat + (uint64_t)i * blk, h_in[i] + soff + (uint64_t)m * blk, blk);
            zk_sum_ref(h_cat, count, n, count, dtype, ZK_SUM, 1.0f, h_sm, ZK_FP32);
            if (!compare(what, h_sm, d_sm[m], count * 4, poison))
                break;
        }
    }
    g_checks++;
    if (!xs_words_are(d_flags, n, 2 * ZK_XSYNC_MAX, 0) || hw[1] != 0) {
        fprintf(stderr, "FAIL %s: a CTA counter is not back at 0, or a wait gave up (%u)\n", what,
                hw[1]);
        g_fail++;
    }
    if (n >= 2) {
        uint64_t pb = count * 4 > (uint64_t)n * bytes ? count * 4 : (uint64_t)n * bytes;
        uint8_t *h_po = malloc(pb);
        ASSERT(h_po);
        memset(h_po, POISON_B, pb);
        char why[256];
        /* member 0 alone, the abort word raised: it ends, no error, no read */
        hw[0] = 1;
        xs[0].gen = ++gen;
        CK(cudaMemset(d_sm[0], POISON_B, count * 4 + GUARD));
        CK(cudaDeviceSynchronize());
        CK(zk_sum_ptrs_sync_cuda((const void *const *)d_in, n, count, dtype, ZK_SUM, 1.0f,
                                 d_sm[0], ZK_FP32, &xs[0], st[0]));
        CK(cudaStreamSynchronize(st[0]));
        g_checks++;
        if (hw[1] != 0 || !xs_words_are(d_flags, n, 2 * ZK_XSYNC_MAX, 0)) {
            fprintf(stderr, "FAIL %s: an aborted wait said it timed out, or left its counter\n",
                    what);
            g_fail++;
        }
        snprintf(why, sizeof why, "%s: the sum after an abort wrote its output", what);
        compare(why, h_po, d_sm[0], count * 4, POISON_B);
        /* member 0 alone, a 2 ms timeout: it ends and says so, no read */
        hw[0] = 0;
        xs[0].gen = ++gen;
        xs[0].timeout_ns = 2000000ull;
        void *dst[1] = {d_cp[0]};
        const void *src[1] = {d_in[1]};
        uint64_t len[1] = {bytes};
        CK(cudaMemset(d_cp[0], POISON_B, bytes + GUARD));
        CK(cudaDeviceSynchronize());
        CK(zk_copy_ptrs_cuda(dst, src, len, 1, &xs[0], st[0]));
        CK(cudaStreamSynchronize(st[0]));
        g_checks++;
        if (hw[1] != 1) {
            fprintf(stderr, "FAIL %s: a wait past its timeout did not set the error word\n",
                    what);
            g_fail++;
        }
        snprintf(why, sizeof why, "%s: the copy after a timeout wrote its output", what);
        compare(why, h_po, d_cp[0], bytes, POISON_B);
        /* every member, the abort word raised: whether a member's wait gives
         * up or all arrive and its kernel's one look at the word sees it, no
         * CTA reads a member's memory, and no wait says it timed out */
        hw[0] = 1;
        hw[1] = 0;
        xs[0].timeout_ns = xs[1].timeout_ns;
        for (int m = 0; m < n; m++)
            CK(cudaMemset(d_cp[m], POISON_B, (uint64_t)n * bytes + GUARD));
        CK(cudaDeviceSynchronize());
        xs_gather(n, xs, ++gen, d_cp, d_in, off, bytes, st);
        CK(cudaDeviceSynchronize());
        g_checks++;
        if (hw[1] != 0) {
            fprintf(stderr, "FAIL %s: a group launched with the abort word up timed out\n", what);
            g_fail++;
        }
        snprintf(why, sizeof why, "%s: a copy launched with the abort word up wrote its output",
                 what);
        for (int m = 0; m < n; m++)
            if (!compare(why, h_po, d_cp[m], (uint64_t)n * bytes, POISON_B))
                break;
        hw[0] = 0;
        free(h_po);
    }
    /* arguments the entry points refuse */
    struct zk_xsync bad = xs[0];
    bad.me = n;
    void *dst1[1] = {d_cp[0]};
    const void *src1[1] = {d_in[0]};
    uint64_t len1[1] = {bytes};
    int e1 = zk_copy_ptrs_cuda(dst1, src1, len1, 1, &bad, 0);
    int e2 = zk_copy_ptrs_cuda(dst1, src1, len1, ZK_XSYNC_MAX + 1, NULL, 0);
    bad = xs[0];
    int e3 = zk_sum_ptrs_sync_cuda(src1, 1, count, dtype, ZK_SUM, 1.0f, d_sm[0], ZK_FP32,
                                   n == 1 ? NULL : &bad, 0);
    g_checks++;
    if (e1 != (int)cudaErrorInvalidValue || e2 != (int)cudaErrorInvalidValue ||
        (n > 1 && e3 != (int)cudaErrorInvalidValue)) {
        fprintf(stderr, "FAIL %s: bad zk_xsync arguments were not refused (%d %d %d)\n", what, e1,
                e2, e3);
        g_fail++;
    }
    CK(cudaDeviceSynchronize());
    for (int m = 0; m < n; m++) {
        cudaFree(d_in[m]);
        cudaFree(d_cp[m]);
        cudaFree(d_sm[m]);
        cudaStreamDestroy(st[m]);
        free(h_in[m]);
    }
    cudaFree(d_flags);
    cudaFreeHost(hw);
    free(h_cp);
    free(h_sm);
    free(h_cat);
}

/* zk_qdq_ptrs_cuda, the small one-node qwZ: n members on streams of their
 * own, each computing every member's range (count elements of member i,
 * the last one shorter: a tail) from the members' inputs, fenced, over
 * `rounds` rounds with fresh poison; against zk_qdq_ref byte for byte.
 * Inputs cycle through the distributions (NaN and Inf among them); each
 * member counts the poisoned blocks of its own range, and the last CTA's
 * mirror in host memory must equal the device counter. Then the unfenced
 * launch of one member, and the refusals. */
static void case_qdq(int n, uint64_t count, int dtype, int bits, uint32_t block, int rounds)
{
    size_t es = zk_dtype_size(dtype);
    uint64_t cnt[ZK_XSYNC_MAX], total = 0;
    uint8_t *d_flags = NULL, *d_in[ZK_XSYNC_MAX], *d_out[ZK_XSYNC_MAX], *h_in[ZK_XSYNC_MAX];
    unsigned long long *d_cnt = NULL, *h_cnt = NULL, ref_poison[ZK_XSYNC_MAX];
    cudaStream_t st[ZK_XSYNC_MAX];
    uint32_t *hw = NULL, *dw = NULL;
    char what[160];
    for (int m = 0; m < n; m++) {
        cnt[m] = m == n - 1 && count > 1 ? count - count / 3 : count;
        total += cnt[m];
    }
    uint8_t *ref = malloc(total * es + 1);
    ASSERT(ref);
    CK(cudaMalloc((void **)&d_flags, (size_t)n * XS_BLOCK_BYTES));
    CK(cudaMemset(d_flags, 0, (size_t)n * XS_BLOCK_BYTES));
    CK(cudaMalloc((void **)&d_cnt, 2 * (size_t)n * sizeof *d_cnt)); /* counter, last mirrored */
    CK(cudaMemset(d_cnt, 0, 2 * (size_t)n * sizeof *d_cnt));
    CK(cudaHostAlloc((void **)&h_cnt, (size_t)n * sizeof *h_cnt, cudaHostAllocMapped));
    CK(cudaHostAlloc((void **)&hw, 2 * sizeof *hw, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&dw, hw, 0));
    hw[0] = hw[1] = 0;
    uint64_t at = 0;
    for (int m = 0; m < n; m++) {
        h_cnt[m] = 0;
        h_in[m] = malloc(cnt[m] * es + 1);
        ASSERT(h_in[m]);
        fill(h_in[m], dtype, cnt[m], (m + (int)count) % D_COUNT, block);
        ref_poison[m] = zk_qdq_ref(h_in[m], dtype, cnt[m], bits, block, ref + at);
        at += cnt[m] * es;
        CK(cudaMalloc((void **)&d_in[m], cnt[m] * es + 16));
        CK(cudaMalloc((void **)&d_out[m], total * es + GUARD));
        CK(cudaMemcpy(d_in[m], h_in[m], cnt[m] * es, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&st[m], cudaStreamNonBlocking));
    }
    struct zk_xsync xs[ZK_XSYNC_MAX];
    xs_group(xs, n, d_flags, dw);
    snprintf(what, sizeof what, "qdq n=%d count=%llu %s int%d B=%u", n, (unsigned long long)count,
             dt_name(dtype), bits, block);
    uint32_t gen = 0;
    for (int r = 0; r < rounds; r++) {
        int poison = r % 2 ? POISON_B : POISON_A;
        for (int m = 0; m < n; m++)
            CK(cudaMemset(d_out[m], poison, total * es + GUARD));
        CK(cudaDeviceSynchronize());
        gen++;
        for (int m = n - 1; m >= 0; m--) {
            const void *src[ZK_XSYNC_MAX];
            void *dst[ZK_XSYNC_MAX];
            uint64_t off = 0;
            for (int i = 0; i < n; i++) {
                src[i] = d_in[i];
                dst[i] = d_out[m] + off;
                off += cnt[i] * es;
            }
            xs[m].gen = gen;
            CK(zk_qdq_ptrs_cuda(src, cnt, dst, n, dtype, bits, block, m, d_cnt + 2 * m, h_cnt + m,
                                &xs[m], st[m]));
        }
        CK(cudaDeviceSynchronize());
        for (int m = 0; m < n; m++)
            if (!compare(what, ref, d_out[m], total * es, poison))
                break;
    }
    g_checks++;
    for (int m = 0; m < n; m++) {
        unsigned long long dc = 0;
        CK(cudaMemcpy(&dc, d_cnt + 2 * m, sizeof dc, cudaMemcpyDeviceToHost));
        if (dc != ref_poison[m] * (unsigned long long)rounds || h_cnt[m] != dc || hw[1] != 0) {
            fprintf(stderr,
                    "FAIL %s: member %d counted %llu poisoned blocks (mirror %llu), want %llu; "
                    "error word %u\n",
                    what, m, dc, h_cnt[m], ref_poison[m] * (unsigned long long)rounds, hw[1]);
            g_fail++;
            break;
        }
    }
    /* unfenced, member 0 alone, no counting (mine out of range) */
    {
        const void *src[ZK_XSYNC_MAX];
        void *dst[ZK_XSYNC_MAX];
        uint64_t off = 0;
        for (int i = 0; i < n; i++) {
            src[i] = d_in[i];
            dst[i] = d_out[0] + off;
            off += cnt[i] * es;
        }
        CK(cudaMemset(d_out[0], POISON_A, total * es + GUARD));
        CK(zk_qdq_ptrs_cuda(src, cnt, dst, n, dtype, bits, block, -1, d_cnt, NULL, NULL, 0));
        CK(cudaDeviceSynchronize());
        compare(what, ref, d_out[0], total * es, POISON_A);
        int e1 = zk_qdq_ptrs_cuda(src, cnt, dst, n, dtype, bits, block + 1, 0, NULL, NULL, NULL, 0);
        int e2 = zk_qdq_ptrs_cuda(src, cnt, dst, n, dtype, bits, block, 0, d_cnt, h_cnt, NULL, 0);
        int e3 = zk_qdq_ptrs_cuda(src, cnt, dst, ZK_XSYNC_MAX + 1, dtype, bits, block, 0, NULL,
                                  NULL, NULL, 0);
        g_checks++;
        if (e1 != (int)cudaErrorInvalidValue || e2 != (int)cudaErrorInvalidValue ||
            e3 != (int)cudaErrorInvalidValue) {
            fprintf(stderr, "FAIL %s: bad arguments were not refused (%d %d %d)\n", what, e1, e2,
                    e3);
            g_fail++;
        }
    }
    CK(cudaDeviceSynchronize());
    for (int m = 0; m < n; m++) {
        cudaFree(d_in[m]);
        cudaFree(d_out[m]);
        cudaStreamDestroy(st[m]);
        free(h_in[m]);
    }
    cudaFree(d_flags);
    cudaFree(d_cnt);
    cudaFreeHost(h_cnt);
    cudaFreeHost(hw);
    free(ref);
}

/* Plain zk_copy_ptrs_cuda (no fence): ranges of every relative alignment. */
static void case_copy(uint64_t bytes, int k)
{
    uint64_t span = (uint64_t)k * (bytes + 32);
    uint8_t *h = malloc(span), *ref = malloc(span);
    ASSERT(h && ref);
    for (uint64_t i = 0; i < span; i++)
        h[i] = (uint8_t)test_rand64(&g_seed);
    ensure(&d_x, &cap_x, span);
    ensure(&d_y, &cap_y, span);
    CK(cudaMemcpy(d_x, h, span, cudaMemcpyHostToDevice));
    void *dst[ZK_XSYNC_MAX];
    const void *src[ZK_XSYNC_MAX];
    uint64_t len[ZK_XSYNC_MAX];
    /* range i: source at i * (bytes + 32) + i % 17, packed back to back in
     * the output from offset 3 */
    uint64_t at = 3;
    memset(ref, POISON_A, span);
    for (int i = 0; i < k; i++) {
        uint64_t from = (uint64_t)i * (bytes + 32) + (uint64_t)(i % 17);
        src[i] = d_x + from;
        dst[i] = d_y + at;
        len[i] = bytes;
        memcpy(ref + at, h + from, bytes);
        at += bytes;
    }
    char what[96];
    snprintf(what, sizeof what, "copy_ptrs %llu B x %d", (unsigned long long)bytes, k);
    CK(cudaMemset(d_y, POISON_A, span + GUARD));
    CK(zk_copy_ptrs_cuda(dst, src, len, k, NULL, 0));
    CK(cudaDeviceSynchronize());
    compare(what, ref, d_y, at, POISON_A);
    free(h);
    free(ref);
}

static void report(const char *family, long before_checks, long before_fail)
{
    printf("%-16s %6ld byte-compares  %ld failures\n", family, g_checks - before_checks,
           g_fail - before_fail);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("gpu_compare: no GPU, skipped\n");
        return TEST_SKIP;
    }
    if (argc > 1)
        g_seed = strtoull(argv[1], NULL, 0);
    g_quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    /* "fenced": the fenced kernels' section alone ("fenced1": its
     * one-member cases, which also run under compute-sanitizer) */
    int fenced_only = argc > 2 && strncmp(argv[2], "fenced", 6) == 0;
    if (argc > 2 && strcmp(argv[2], "fenced1") == 0)
        g_quick = 1;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gpu_compare: %s (sm_%d%d), seed 0x%llx\n", prop.name, prop.major, prop.minor,
           (unsigned long long)g_seed);
    CK(cudaMalloc((void **)&d_pz, sizeof *d_pz));

    const int dtypes[3] = {ZK_FP32, ZK_FP16, ZK_BF16};
    const uint32_t blocks[] = {32, 64, 96, 128, 256, 512, 1024, 2048, 8192};
    const uint64_t sizes[] = {1, 15, 16, 17, 31, 32, 33, 255, 1000, 4097, 65537, 262147};
    long c0 = g_checks, f0 = g_fail;
    int v = 0;
    if (fenced_only)
        goto fenced;
    for (int t = 0; t < 3; t++)
        for (int bw = 0; bw < 2; bw++)
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
                for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++, v++) {
                    uint64_t n = sizes[s];
                    if (g_quick && n > QUICK_MAX)
                        continue;
                    uint64_t nv = v % 4 == 3 ? n - n / 3 : n;
                    case_quant(dtypes[t], bw ? 4 : 8, blocks[b], n, nv, v % D_COUNT, v % 7 == 5);
                }
    /* one large case per dtype: 2^24 + 5 elements */
    for (int t = 0; t < 3 && !g_quick; t++)
        case_quant(dtypes[t], t == 1 ? 4 : 8, 256, (1u << 24) + 5, (1u << 24) + 5, D_SPECIAL, 0);
    /* int4 -> fp32 chunks of 8 MiB of codes and more dequantize in rounds
     * on sm_90 (quant.cu, dqs_kernel): two rounds of slabs with an odd
     * tail, block 256 and block 2048, and one shorter than its chunk */
    if (!g_quick) {
        case_quant(ZK_FP32, 4, 256, (1u << 26) + 33, (1u << 26) + 33, D_NORMAL, 0);
        case_quant(ZK_FP32, 4, 2048, (1u << 26) + 4097, (1u << 26) + 4097, D_SPECIAL, 0);
        case_quant(ZK_FP32, 4, 32, (3u << 24) + 7, (1u << 24) + 777, D_WIDE, 0);
    }
    report("quant+dequant", c0, f0);

    c0 = g_checks;
    f0 = g_fail;
    const uint64_t pieces[] = {32, 256, 1000, 2048, 65536 + 32, 262144};
    const int ks[] = {1, 2, 3, 4, 5, 8};
    v = 0;
    for (int bw = 0; bw < 2; bw++)
        for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
            for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++, v++)
                if (!g_quick || pieces[p] <= QUICK_MAX)
                    case_reduce(bw ? 4 : 8, blocks[b], pieces[p], ks[v % 6], v % D_COUNT);
    /* large pieces (full set): whole load batches (k = 8), partial ones
     * (k = 3) and a tail block (piece not a multiple of B), with grids of
     * many CTAs */
    for (int bw = 0; bw < 2 && !g_quick; bw++) {
        case_reduce(bw ? 4 : 8, 256, (1u << 22) + 32, 8, bw ? D_SPECIAL : D_NORMAL);
        case_reduce(bw ? 4 : 8, bw ? 32 : 1024, (1u << 21) + 96, 3, D_WIDE);
    }
    report("reduce (2, 4)", c0, f0);

    c0 = g_checks;
    f0 = g_fail;
    const uint64_t qn[] = {1, 100, 4096, 12345, 1 << 20, (1 << 20) + 7};
    const int geo[][3] = {{1, 1, 1}, {1, 2, 1}, {2, 2, 2}, {2, 4, 1}, {3, 2, 3}, {4, 8, 2}};
    const uint32_t qb[] = {32, 256, 2048};
    v = 0;
    for (int t = 0; t < 3; t++)
        for (int bw = 0; bw < 2; bw++)
            for (size_t s = 0; s < sizeof qn / sizeof qn[0]; s++, v++)
                if (!g_quick || qn[s] <= QUICK_MAX)
                    case_qgz(dtypes[t], bw ? 4 : 8, qb[v % 3], qn[s], geo[v % 6][0], geo[v % 6][1],
                             geo[v % 6][2], v % D_COUNT);
    /* large (full set): many CTAs per output piece */
    for (int t = 0; t < 3 && !g_quick; t++)
        case_qgz(dtypes[t], t == 2 ? 4 : 8, t == 1 ? 32 : 256, (1u << 24) + (t == 1 ? 0 : 7), 2, 2,
                 2, t == 0 ? D_SPECIAL : D_NORMAL);
    report("qgz reorder (0)", c0, f0);

    c0 = g_checks;
    f0 = g_fail;
    const uint64_t sc[] = {1, 17, 1000, 65536, 100003};
    v = 0;
    for (int t = 0; t < 3; t++)
        for (int o = 0; o < 3; o++)
            for (size_t s = 0; s < sizeof sc / sizeof sc[0]; s++, v++)
                case_sum(dtypes[t], dtypes[o], sc[s], 1 + v % 5, v % D_COUNT);
    for (int t = 0; t < 3; t++) /* as many inputs as zk_sum_ptrs_cuda takes */
        case_sum(dtypes[t], dtypes[(t + 1) % 3], 65536 + 3, ZK_SUM_MAX_PTRS, t % D_COUNT);
    report("sum (exact)", c0, f0);

fenced:
    c0 = g_checks;
    f0 = g_fail;
    const uint64_t cb[] = {0, 1, 15, 16, 17, 4096, 65536 + 5, 1u << 20};
    for (size_t b = 0; b < sizeof cb / sizeof cb[0]; b++)
        case_copy(cb[b], 1 + (int)(b * 5) % ZK_XSYNC_MAX);
    case_xsync(1, 4096, 0, 1000, ZK_BF16, 3);
    /* one member of 64 and 128 CTAs: the abort look claimed by one CTA and
     * taken by the others, under compute-sanitizer too */
    case_xsync(1, 1u << 20, 0, 1u << 18, ZK_BF16, 2);
    case_qdq(1, 1000, ZK_BF16, 8, 256, 2);
    case_qdq(1, 333, ZK_FP32, 4, 96, 2);
    /* Groups need their members' kernels running side by side, which
     * compute-sanitizer (the quick set's user) does not do: it serialises
     * launches. */
    if (!g_quick) {
        case_xsync(2, 4096, 0, 2048, ZK_BF16, 5);
        case_xsync(2, 1000, 3, 1001, ZK_FP32, 3);
        case_xsync(3, 65536 + 48, 16, 65536 + 1, ZK_FP16, 3);
        case_xsync(ZK_XSYNC_MAX, 1u << 14, 8, 1u << 16, ZK_BF16, 2); /* all resident at once */
        /* 128 CTAs a member: all but one take the abort look from the first */
        case_xsync(2, 1u << 20, 0, 1u << 18, ZK_BF16, 3);
        /* qdq: every dtype and bit width, block sizes of the slot and team
         * kernels, tails, blocks larger than a warp's registers */
        const int qdt[3] = {ZK_BF16, ZK_FP16, ZK_FP32};
        const uint32_t xqb[] = {32, 256, 96, 2048, 8192};
        const uint64_t xqn[] = {2048, 1, 1001, 65536 + 7, 262144};
        int qi = 0;
        for (int t = 0; t < 3; t++)
            for (int w = 0; w < 2; w++)
                for (size_t b = 0; b < sizeof xqb / sizeof xqb[0]; b++, qi++)
                    case_qdq(1 + qi % 3, xqn[qi % 5], qdt[t], w ? 4 : 8, xqb[b], 2);
        case_qdq(ZK_XSYNC_MAX, 4096 + 5, ZK_BF16, 8, 256, 2);
    }
    report("fenced (xsync)", c0, f0); /* copy, sum and qdq */

    printf("gpu_compare: %ld byte-compares, %ld failures: %s\n", g_checks, g_fail,
           g_fail ? "FAIL" : "PASS");
    return g_fail ? 1 : 0;
}
