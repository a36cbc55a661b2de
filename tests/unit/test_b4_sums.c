/*
 * test_b4_sums.c — CPU checks of the int4 reduce+requantize's biased sums
 * (ZK_B4, kernels/zk_arith.h; the contract since session 31). Needs no GPU.
 * ctest runs it on the tree's switches; for the others build it against the
 * reference compiled with the same ones, e.g.
 *
 *   for v in 0 1; do gcc -std=c11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter \
 *       -D_GNU_SOURCE -I. -Ikernels -ffp-contract=off -fno-fast-math -DZK_B4=$v \
 *       tests/unit/test_b4_sums.c kernels/quant_ref.c kernels/qgz_ref.c -lm -o /tmp/b4_$v \
 *       && /tmp/b4_$v; done
 *
 * (add -DZK_B4G=0 for the build without the guard). It
 *  1. accuracy: k Gaussian chunks quantized by the reference (as
 *     gpu_compare does), for k = 2, 4, 8 and B = 32, 256, 2048: the share of
 *     output codes and scales that differ from the default contract's output
 *     (zk_reduce_out_ref into fp32, then zk_quantize_ref: in a ZK_B4=0 build
 *     asserted equal to zk_reduce_requant_ref; "ulps": the largest scale
 *     difference in units in the last place), and the relative L2 error
 *     against the fp64 sum of the decoded inputs of the fp32 sums and of the
 *     requantized outputs, default and variant;
 *  2. NaN/Inf: chunks with NaN/Inf blocks (as the quantizer poisons them),
 *     and scales set by hand to NaN, +-Inf and huge values: the variant's
 *     poisoned blocks and count against the default's (they must agree but
 *     for the huge scales the contract names), poisoned blocks canonical;
 *  3. the CUDA formulation: fsumv_b4 of kernels/zk_fast.cuh emulated in C,
 *     bit tricks, batches of ZK_VKB chunks, guard and second pass included,
 *     compared bit for bit with the reference's sums (zk_b4_* helpers) and
 *     the requantized bytes with zk_reduce_requant_ref, on random codes and
 *     scales of every binade, zeros, subnormals, huge, negative, NaN, Inf;
 *     then the same for frt_kernel's consumer (kernels/zk_rqt.cuh, ZK_RQT:
 *     no batches, its own guard) in emu_frt.
 * Exit status 0 when every bit-for-bit check passes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zk_arith.h"
#include "zk_ref_internal.h"
#include "zpp_kernels.h"

#define VKB 4 /* ZK_VKB of zk_fast.cuh: chunks per batch */

static uint64_t g_rng = 0x5EEDB4ull;
static long g_fail;

static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(void)
{
    return (double)(rnd() >> 11) * 0x1p-53;
}
static double gauss(void)
{
    double u1 = unif(), u2 = unif();
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline __attribute__((unused)) float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Same bits, or both NaN (a NaN's payload never reaches an output). */
static inline __attribute__((unused)) int same(float a, float b)
{
    return f2u(a) == f2u(b) || (isnan(a) && isnan(b));
}

static int code_at(const uint8_t *chunk, uint64_t e)
{
    return zk_nibble(chunk[e / 2], (int)(e & 1));
}
static float scale_at(const uint8_t *chunk, uint64_t pay, uint32_t block, uint64_t e)
{
    float s;
    memcpy(&s, chunk + pay + e / block * 4, 4);
    return s;
}

/* The default contract's output: the fp32 sums of zk_reduce_out_ref (which
 * ZK_B4 leaves alone), requantized by zk_quantize_ref. */
static uint64_t default_requant(const uint8_t *in, uint64_t stride, int k, uint64_t piece,
                                uint32_t block, float *sum, uint8_t *out)
{
    zk_reduce_out_ref(in, stride, k, piece, 4, block, piece, ZK_SUM, 1.0f, sum, ZK_FP32);
    return zk_quantize_ref(sum, ZK_FP32, piece, piece, 4, block, out);
}

#if ZK_B4
/* The variant's sums with the reference's helpers (qgz_ref.c's sum_block_b4). */
static void ref_sums(const uint8_t *in, uint64_t stride, int k, uint64_t piece, uint32_t block,
                     float *sum)
{
    uint64_t pay = zk_payload_bytes(piece, 4);
    for (uint64_t first = 0; first < piece; first += block) {
        uint64_t len = piece - first < block ? piece - first : block;
        struct zk_b4_bias b = {0.0f};
        for (uint64_t i = 0; i < len; i++)
            sum[first + i] = 0.0f;
        for (int j = 0; j < k; j++) {
            const uint8_t *c = in + (uint64_t)j * stride;
            float s = scale_at(c, pay, block, first);
            for (uint64_t i = 0; i < len; i++) {
                uint64_t e = first + i;
                sum[e] = zk_b4_step(sum[e], code_at(c, e) + 8, s, (int)(e % 8));
            }
            zk_b4_bias_add(&b, s);
        }
        for (uint64_t i = 0; i < len; i++)
            sum[first + i] = zk_b4_unbias(sum[first + i], &b, (int)((first + i) % 8));
    }
}

/* ---- the CUDA fast path, emulated ---------------------------------------- */

/* lop3 (a ^ k) & M, as the kernels' xor_and */
static inline uint32_t xor_and(uint32_t a, uint32_t m, uint32_t k)
{
    return (a ^ k) & m;
}
/* b4_codes: the fast form's factors of the 8 codes of word c, fp16 halves
 * widened as HADD2.F32 does (exactly, subnormals kept). */
static void emu_codes(uint32_t c, float q[8])
{
    const uint32_t c8 = c >> 8, k = 0x88888888u;
    const uint32_t w[4] = {xor_and(c, 0x000F000Fu, k), xor_and(c, 0x00F000F0u, k),
                           xor_and(c8, 0x000F000Fu, k), xor_and(c8, 0x00F000F0u, k)};
    for (int r = 0; r < 4; r++) {
        q[r] = zk_f16_to_f32((uint16_t)(w[r] & 0xFFFFu));
        q[r + 4] = zk_f16_to_f32((uint16_t)(w[r] >> 16));
    }
}
/* b4_mul_of: the multiplier of code i (the chunk's scale s) */
static float emu_mul(float s, int i)
{
    return i % 2 ? zk_fmul(s, 0x1p20f) : zk_fmul(s, 0x1p24f);
}
static void emu_word_fast(uint32_t c, float s, float *acc)
{
    float q[8];
    emu_codes(c, q);
    for (int i = 0; i < 8; i++)
        acc[i] = zk_fma(q[i], emu_mul(s, i), acc[i]);
}
#define EMU_S 4 /* words per lane's vector (S of the kernels) */

/* Both kernels' rare second pass: the vector summed again from chunk 0
 * with the reference's own steps (zk_b4_step, zk_b4_bias_add). */
static void emu_second_pass(const uint32_t (*w)[EMU_S], const float *s, int k, float *acc,
                            struct zk_b4_bias *bias)
{
    for (int i = 0; i < 8 * EMU_S; i++)
        acc[i] = 0.0f;
    bias->t = 0.0f;
    for (int c = 0; c < k; c++) {
        zk_b4_bias_add(bias, s[c]);
        for (int g = 0; g < EMU_S; g++)
            for (int i = 0; i < 8; i++)
                acc[8 * g + i] = zk_b4_step(acc[8 * g + i],
                                            (int)((w[c][g] >> (4 * i) & 0xFu) ^ 8u), s[c], i);
    }
}

/* The bias off the sums (b4_unbias in the kernels). */
static void emu_unbias(const struct zk_b4_bias *bias, float *acc)
{
    for (int i = 0; i < 8 * EMU_S; i++)
        acc[i] = zk_fma(bias->t, -8.0f, acc[i]);
}

/* fsumv_b4 for one vector of S words (8S elements; the first a multiple
 * of 8): w[j][g] is word g of chunk j, s[j] its scale. */
static void emu_fsumv(const uint32_t (*w)[EMU_S], const float *s, int k, float *acc)
{
    struct zk_b4_bias bias = {0.0f};
    int again = 0;
    for (int i = 0; i < 8 * EMU_S; i++)
        acc[i] = 0.0f;
    for (int c0 = 0; c0 < k; c0 += VKB) {
        if (c0 + VKB <= k) {
            if (ZK_B4G) {
                float m = fabsf(s[c0]); /* fmaxf drops a NaN, as the GPU's FMNMX */
                for (int b = 1; b < VKB; b++)
                    m = fmaxf(m, fabsf(s[c0 + b]));
                again = again || !(m < ZK_B4_FAST_MAX);
            }
            for (int b = 0; b < VKB; b++) {
                bias.t = zk_fadd(bias.t, s[c0 + b]);
                for (int g = 0; g < EMU_S; g++)
                    emu_word_fast(w[c0 + b][g], s[c0 + b], acc + 8 * g);
            }
            continue;
        }
        for (int b = 0; b < VKB; b++) {
            if (c0 + b < k) {
                if (ZK_B4G)
                    again = again || !(fabsf(s[c0 + b]) < ZK_B4_FAST_MAX);
                bias.t = zk_fadd(bias.t, s[c0 + b]);
                for (int g = 0; g < EMU_S; g++)
                    emu_word_fast(w[c0 + b][g], s[c0 + b], acc + 8 * g);
            }
        }
    }
    if (ZK_B4G && again) {
        emu_second_pass(w, s, k, acc, &bias);
    }
    emu_unbias(&bias, acc);
}

/* frt_kernel's consumer (kernels/zk_rqt.cuh, ZK_RQT: rqt_chunk_b4 and
 * rqt_finish_b4) for one vector: the same fast form chunk by chunk from
 * shared memory, no batches; the guard a running max of |s| from +0 over
 * every chunk (fmaxf: a NaN passes), the second pass from chunk 0. */
static void emu_frt(const uint32_t (*w)[EMU_S], const float *s, int k, float *acc)
{
    struct zk_b4_bias bias = {0.0f};
    float m = 0.0f;
    for (int i = 0; i < 8 * EMU_S; i++)
        acc[i] = 0.0f;
    for (int c = 0; c < k; c++) {
        if (ZK_B4G)
            m = fmaxf(m, fabsf(s[c]));
        bias.t = zk_fadd(bias.t, s[c]);
        for (int g = 0; g < EMU_S; g++)
            emu_word_fast(w[c][g], s[c], acc + 8 * g);
    }
    if (ZK_B4G && !(m < ZK_B4_FAST_MAX)) {
        emu_second_pass(w, s, k, acc, &bias);
    }
    emu_unbias(&bias, acc);
}
/* The kernel checks 3 and 3b emulate: 0 frv_kernel (fsumv_b4), 1
 * frt_kernel (ZK_RQT). */
static int g_frt;
static const char *emu_name(void)
{
    return g_frt ? "frt_kernel (ZK_RQT)" : "frv_kernel";
}
static void emu_sum(const uint32_t (*w)[EMU_S], const float *s, int k, float *acc)
{
    if (g_frt)
        emu_frt(w, s, k, acc);
    else
        emu_fsumv(w, s, k, acc);
}

/* A scale for the emulation test: every binade, and the edges. */
static float wild_scale(void)
{
    static const uint32_t edges[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x6F7FFFFFu,
        0x6F800000u, 0x6F800001u, 0x737FFFFFu, 0x73800000u, 0x73800001u, 0x757FFFFFu,
        0x75800000u, 0x7B800000u, 0x7E000000u, 0x7F7FFFFFu, 0x7F800000u, 0xFF800000u,
        0x7FC00000u, 0x7FA00001u, 0xFFC00000u, 0xBF800000u, 0x3D800000u, 0x21800000u};
    uint64_t r = rnd();
    switch (r % 8) {
    case 0:
        return u2f(edges[(r >> 8) % (sizeof edges / sizeof edges[0])]);
    case 1: /* any bits */
        return u2f((uint32_t)(r >> 16));
    case 2: /* around the guard's limit, 2^104: 2^94 .. 2^106 */
        return u2f(0x6E800000u + (uint32_t)(r >> 40) % 0x06000000u);
    default: /* ordinary: 2^-30 .. 2^10, sometimes negative */
        return (r >> 20) % 16 == 0 ? -(float)ldexp(unif() + 0.5, (int)((r >> 8) % 41) - 30)
                                   : (float)ldexp(unif() + 0.5, (int)((r >> 8) % 41) - 30);
    }
}

/* 3. the emulation against the reference, on vectors of 32 elements. */
static void check_emulation(void)
{
    enum { KMAX = 13, E = 8 * EMU_S };
    long vecs = 0, bad = 0, poisoned_cases = 0, again_cases = 0;
    for (int t = 0; t < 400000; t++) {
        int k = 1 + (int)(rnd() % KMAX);
        uint32_t w[KMAX][EMU_S];
        float s[KMAX];
        int mode = (int)(rnd() % 4); /* 0: ordinary scales; 1: one wild; 2: all wild; 3: zeros */
        for (int j = 0; j < k; j++) {
            for (int g = 0; g < EMU_S; g++)
                w[j][g] = mode == 3 && j % 2 ? 0x88888888u /* all codes -8: u = 0 */
                                             : (uint32_t)rnd();
            s[j] = mode == 2 ? wild_scale() : (float)ldexp(unif() + 0.5, (int)(rnd() % 41) - 30);
            if (mode == 3 && rnd() % 2)
                s[j] = 0.0f;
        }
        if (mode == 1)
            s[rnd() % (uint64_t)k] = wild_scale();
        /* the reference's sums of the same codes and scales */
        float want[E], got[E];
        struct zk_b4_bias b = {0.0f};
        for (int i = 0; i < E; i++)
            want[i] = 0.0f;
        for (int j = 0; j < k; j++) {
            for (int i = 0; i < E; i++) {
                int nib = (int)(w[j][i / 8] >> (4 * (i % 8)) & 0xFu);
                int q = nib >= 8 ? nib - 16 : nib;
                want[i] = zk_b4_step(want[i], q + 8, s[j], i % 8);
            }
            zk_b4_bias_add(&b, s[j]);
        }
        for (int i = 0; i < E; i++)
            want[i] = zk_b4_unbias(want[i], &b, i % 8);
        emu_sum((const uint32_t(*)[EMU_S])w, s, k, got);
        vecs++;
        int ok = 1, fin = 1;
        for (int i = 0; i < E; i++) {
            ok = ok && same(want[i], got[i]);
            fin = fin && isfinite(want[i]);
        }
        poisoned_cases += !fin;
        for (int j = 0; j < k; j++)
            if (!(fabsf(s[j]) < ZK_B4_FAST_MAX)) {
                again_cases++;
                break;
            }
        if (!ok) {
            if (bad++ < 5) {
                for (int i = 0; i < E; i++)
                    if (!same(want[i], got[i])) {
                        fprintf(stderr, "FAIL emulation k=%d elem %d: ref %08x gpu-emu %08x\n", k,
                                i, f2u(want[i]), f2u(got[i]));
                        break;
                    }
            }
        }
    }
    g_fail += bad;
    printf("3. CUDA formulation emulated (%s): %ld vectors of 32 (k = 1..%d), %ld with a scale "
           "past the fast form's limit, %ld with a non-finite sum; %ld differ bit for bit from the "
           "reference: %s\n",
           emu_name(), vecs, KMAX, again_cases, poisoned_cases, bad, bad ? "FAIL" : "ok");
}

/* 3b. the same through whole chunks: emulated sums requantized with the
 * reference's block quantizer, byte for byte against zk_reduce_requant_ref
 * (tails, odd k, every block size of the vector kernel). */
static void check_emulation_chunks(void)
{
    const uint32_t blocks[] = {32, 64, 256, 2048};
    long cases = 0, bad = 0;
    for (int t = 0; t < 60; t++) {
        uint32_t block = blocks[t % 4];
        int k = 1 + t % 9;
        uint64_t piece = block * (1 + rnd() % 6) - (t % 3 ? 0 : 32 * (rnd() % (block / 32)));
        if (piece == 0)
            piece = 32;
        uint64_t pay = zk_payload_bytes(piece, 4), cb = zk_chunk_bytes(piece, 4, block);
        uint64_t nb = zk_num_blocks(piece, block);
        uint8_t *in = calloc((size_t)k, cb), *want = malloc(cb), *got = calloc(1, cb);
        float *sum = malloc(((piece + 31) / 32 * 32) * sizeof *sum);
        for (int j = 0; j < k; j++) {
            uint8_t *c = in + (uint64_t)j * cb;
            for (uint64_t i = 0; i < pay; i++)
                c[i] = (uint8_t)rnd();
            for (uint64_t b = 0; b < nb; b++) {
                float s = t % 2 ? wild_scale() : (float)ldexp(unif() + 0.5, (int)(rnd() % 21) - 10);
                memcpy(c + pay + b * 4, &s, 4);
            }
        }
        uint64_t pz_ref = zk_reduce_requant_ref(in, cb, k, piece, 4, block, want);
        /* the kernel: vectors of 32 codes (16 bytes: 4 words) per chunk, all
         * in one block; elements past the piece read as 0 before the
         * requantization */
        for (uint64_t e = 0; e < (pay * 2 + 31) / 32 * 32 && e < piece; e += 32) {
            uint32_t w[16][EMU_S];
            float s[16];
            for (int j = 0; j < k; j++) {
                for (int g = 0; g < EMU_S; g++) {
                    uint32_t x = 0;
                    for (int byte = 0; byte < 4; byte++) {
                        uint64_t at = e / 2 + (uint64_t)(4 * g + byte);
                        x |= (uint32_t)(at < pay ? in[(uint64_t)j * cb + at] : 0) << (8 * byte);
                    }
                    w[j][g] = x;
                }
                s[j] = scale_at(in + (uint64_t)j * cb, pay, block, e);
            }
            float acc[8 * EMU_S];
            emu_sum((const uint32_t(*)[EMU_S])w, s, k, acc);
            for (int i = 0; i < 8 * EMU_S && e + (uint64_t)i < piece; i++)
                sum[e + (uint64_t)i] = acc[i];
        }
        uint64_t pz = 0;
        memset(got, 0, cb);
        for (uint64_t first = 0, b = 0; first < piece; first += block, b++) {
            uint64_t len = piece - first < block ? piece - first : block;
            float sc;
            pz += (uint64_t)zk_ref_quant_block(sum + first, (uint32_t)len, 4, got, first, &sc);
            memcpy(got + pay + b * 4, &sc, 4);
        }
        cases++;
        if (memcmp(want, got, cb) != 0 || pz != pz_ref) {
            if (bad++ < 5)
                fprintf(stderr,
                        "FAIL emulated chunk B=%u piece=%llu k=%d (poisoned %llu vs %llu)\n", block,
                        (unsigned long long)piece, k, (unsigned long long)pz,
                        (unsigned long long)pz_ref);
        }
        free(in);
        free(want);
        free(got);
        free(sum);
    }
    g_fail += bad;
    printf("3b. emulated kernel (%s), requantized: %ld chunks byte for byte against "
           "zk_reduce_requant_ref, %ld differ: %s\n",
           emu_name(), cases, bad, bad ? "FAIL" : "ok");
}
#endif /* ZK_B4 */

/* Quantizes k chunks of n values drawn by gen (the reference). */
static uint8_t *make_chunks(int k, uint64_t piece, uint32_t block, uint64_t stride,
                            double (*gen)(uint64_t i, uint32_t block))
{
    uint8_t *h = calloc((size_t)k, stride);
    float *x = malloc(piece * sizeof *x);
    for (int j = 0; j < k; j++) {
        for (uint64_t i = 0; i < piece; i++)
            x[i] = (float)gen(i, block);
        zk_quantize_ref(x, ZK_FP32, piece, piece, 4, block, h + (uint64_t)j * stride);
    }
    free(x);
    return h;
}
static double gen_gauss(uint64_t i, uint32_t block)
{
    (void)i, (void)block;
    return gauss();
}
static double gen_special(uint64_t i, uint32_t block)
{
    /* a tenth of the blocks hold one NaN or Inf, the rest Gaussian of one
     * of three magnitudes */
    uint64_t b = i / block;
    double u = unif();
    if (b % 10 == 3 && u < 0.02)
        return b % 20 == 3 ? NAN : (b % 40 == 13 ? -INFINITY : INFINITY);
    return gauss() * (b % 3 == 0 ? 1e-30 : b % 3 == 1 ? 1.0 : 1e20);
}

static double rel_l2(const double *exact, const float *y, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = (double)y[i] - exact[i];
        num += d * d;
        den += exact[i] * exact[i];
    }
    return den > 0 ? sqrt(num / den) : 0;
}

/* 1. accuracy on Gaussian chunks */
static void check_accuracy(void)
{
    const int ks[] = {2, 4, 8};
    const uint32_t bs[] = {32, 256, 2048};
    printf("1. accuracy, Gaussian inputs (each chunk its own N(0,1) draw), %s:\n",
           ZK_B4 == 0 ? "ZK_B4=0 (the default: variant == default asserted)" : "ZK_B4=1");
    printf("   %2s %5s %8s | %9s %9s %4s | %11s %11s | %11s %11s\n", "k", "B", "elements",
           "codes !=", "scales !=", "ulps", "sum L2 def", "sum L2 var", "out L2 def", "out L2 var");
    for (size_t a = 0; a < 3; a++)
        for (size_t c = 0; c < 3; c++) {
            int k = ks[a];
            uint32_t block = bs[c];
            uint64_t piece = 1u << 20; /* 2^20 elements: 512 blocks of 2048 */
            uint64_t cb = zk_chunk_bytes(piece, 4, block), pay = zk_payload_bytes(piece, 4);
            uint64_t nb = zk_num_blocks(piece, block);
            uint8_t *in = make_chunks(k, piece, block, cb, gen_gauss);
            uint8_t *def = malloc(cb), *var = malloc(cb);
            float *sdef = malloc(piece * 4), *svar = malloc(piece * 4);
            float *ydef = malloc(piece * 4), *yvar = malloc(piece * 4);
            double *exact = malloc(piece * 8);
            default_requant(in, cb, k, piece, block, sdef, def);
            zk_reduce_requant_ref(in, cb, k, piece, 4, block, var);
            for (uint64_t e = 0; e < piece; e++) {
                double x = 0;
                for (int j = 0; j < k; j++) {
                    const uint8_t *ch = in + (uint64_t)j * cb;
                    x += (double)code_at(ch, e) * (double)scale_at(ch, pay, block, e);
                }
                exact[e] = x;
            }
#if ZK_B4
            ref_sums(in, cb, k, piece, block, svar);
            {
                /* the helpers' sums requantize to zk_reduce_requant_ref's bytes */
                uint8_t *chk = malloc(cb);
                zk_quantize_ref(svar, ZK_FP32, piece, piece, 4, block, chk);
                if (memcmp(chk, var, cb) != 0) {
                    fprintf(stderr, "FAIL: helper sums do not requantize to the reference's\n");
                    g_fail++;
                }
                free(chk);
            }
#else
            memcpy(svar, sdef, piece * 4);
            if (memcmp(def, var, cb) != 0) {
                fprintf(stderr, "FAIL: default composite != zk_reduce_requant_ref\n");
                g_fail++;
            }
#endif
            uint64_t dc = 0, ds = 0;
            long ulps = 0; /* the largest scale difference, in units in the last place */
            for (uint64_t e = 0; e < piece; e++)
                dc += code_at(def, e) != code_at(var, e);
            for (uint64_t b = 0; b < nb; b++) {
                long d = (long)f2u(scale_at(def, pay, block, b * block)) -
                         (long)f2u(scale_at(var, pay, block, b * block));
                ds += d != 0;
                ulps = labs(d) > ulps ? labs(d) : ulps;
            }
            zk_dequantize_ref(def, piece, piece, 4, block, ydef, ZK_FP32);
            zk_dequantize_ref(var, piece, piece, 4, block, yvar, ZK_FP32);
            printf("   %2d %5u %8llu | %8.4f%% %8.4f%% %4ld | %11.3e %11.3e | %11.4e %11.4e\n", k,
                   block, (unsigned long long)piece, 100.0 * (double)dc / (double)piece,
                   100.0 * (double)ds / (double)nb, ulps, rel_l2(exact, sdef, piece),
                   rel_l2(exact, svar, piece), rel_l2(exact, ydef, piece),
                   rel_l2(exact, yvar, piece));
            free(in);
            free(def);
            free(var);
            free(sdef);
            free(svar);
            free(ydef);
            free(yvar);
            free(exact);
        }
}

/* 2. NaN/Inf: poisoned blocks as the default's; hand-set scales */
static void check_special(void)
{
    long blocks = 0, mism = 0, noncanon = 0, huge_diff = 0;
    uint64_t pz_def_all = 0, pz_var_all = 0;
    for (int t = 0; t < 24; t++) {
        int k = 1 + t % 8;
        uint32_t block = t % 3 == 0 ? 32 : t % 3 == 1 ? 256 : 96;
        uint64_t piece = block * 40 + (t % 2 ? 0 : 7);
        uint64_t cb = zk_chunk_bytes(piece, 4, block), pay = zk_payload_bytes(piece, 4);
        uint64_t nb = zk_num_blocks(piece, block);
        uint8_t *in = make_chunks(k, piece, block, cb, gen_special);
        /* hand-set scales in some blocks of some chunks: NaN, +-Inf, huge
         * (2^100, 2^110, FLT_MAX / 7: past the fast forms' limits), 0 */
        int *huge = calloc(nb, sizeof *huge);
        for (uint64_t b = 0; b < nb; b++) {
            if (b % 7 != 5)
                continue;
            int j = (int)(rnd() % (uint64_t)k);
            static const uint32_t sp[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x71800000u,
                                          0x76800000u, 0x7E124925u, 0x00000000u, 0x7FA00001u};
            uint32_t bits = sp[(b / 7 + (uint64_t)t) % 8];
            memcpy(in + (uint64_t)j * cb + pay + b * 4, &bits, 4);
            huge[b] = bits == 0x71800000u || bits == 0x76800000u || bits == 0x7E124925u;
        }
        uint8_t *def = malloc(cb), *var = malloc(cb);
        float *sdef = malloc(piece * 4);
        uint64_t pz_def = default_requant(in, cb, k, piece, block, sdef, def);
        uint64_t pz_var = zk_reduce_requant_ref(in, cb, k, piece, 4, block, var);
        pz_def_all += pz_def;
        pz_var_all += pz_var;
        for (uint64_t b = 0; b < nb; b++) {
            float sd = scale_at(def, pay, block, b * block),
                  sv = scale_at(var, pay, block, b * block);
            int pd = isnan(sd), pv = isnan(sv);
            blocks++;
            if (pv && f2u(sv) != ZK_NAN_BITS)
                noncanon++;
            if (pv) { /* codes 0 */
                uint64_t len = piece - b * block < block ? piece - b * block : block;
                for (uint64_t i = 0; i < len; i++)
                    if (code_at(var, b * block + i) != 0) {
                        noncanon++;
                        break;
                    }
            }
            if (pd != pv) {
                if (huge[b])
                    huge_diff++; /* allowed: the contract's huge-scale edge */
                else
                    mism++;
            }
        }
        free(in);
        free(def);
        free(var);
        free(sdef);
        free(huge);
    }
    long bad = mism + noncanon;
    g_fail += bad;
    printf("2. NaN/Inf: %ld blocks, poisoned %llu (default) / %llu (variant); %ld poisoned "
           "differently (not a hand-set huge scale), %ld non-canonical poisoned blocks, %ld "
           "differ at a hand-set huge scale (2^100, 2^110, FLT_MAX/7): %s\n",
           blocks, (unsigned long long)pz_def_all, (unsigned long long)pz_var_all, mism, noncanon,
           huge_diff, bad ? "FAIL" : "ok");
}

int main(void)
{
    printf("b4_check: ZK_B4=%d ZK_B4G=%d\n", ZK_B4, ZK_B4G);
    check_accuracy();
    check_special();
#if ZK_B4
    for (g_frt = 0; g_frt < 2; g_frt++) {
        check_emulation();
        check_emulation_chunks();
    }
#endif
    printf("b4_check: %s\n", g_fail ? "FAIL" : "PASS");
    return g_fail ? 1 : 0;
}
