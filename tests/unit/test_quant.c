/*
 * test_quant.c — the reference block quantizer (kernels/quant_ref.c) against
 * the contract in zpp_kernels.h: exact fp16/bf16 conversions (known bit
 * patterns, every 16-bit value round-tripping, an independent oracle where
 * the compiler has _Float16), round-trip error bounds for int8/int4 and
 * block sizes 32..8192, tails, n_valid padding, all-zero blocks, the
 * NaN/Inf poisoning rule, int4 packing, the prescale of subnormal blocks,
 * the chunk layout (zero padding), the exact k-way sum, and the accuracy
 * figures asserted by issue 9 (Gaussian data, block 256).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zpp_kernels.h"

#define BITS_COUNT 2
static const int k_bits[BITS_COUNT] = {8, 4};
static const uint32_t k_blocks[] = {32, 64, 96, 128, 256, 512, 1024, 2048, 8192};
#define NBLOCKS (sizeof k_blocks / sizeof k_blocks[0])
#define ACC_N (1u << 20)    /* elements for the accuracy figures */
#define ACC_INT8_MAX 0.0075 /* issue 9: int8 rel L2 err, block 256 */
#define ACC_INT4_MAX 0.13   /* issue 9: int4 rel L2 err, block 256 */
#define ACC_BLOCK 256u

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t narrow16(float v, int dtype)
{
    uint16_t h;
    zk_narrow(v, &h, dtype, 0);
    return h;
}
static double gauss(uint64_t *s)
{
    double u1 = test_uniform(s), u2 = test_uniform(s);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static float chunk_scale(const uint8_t *c, uint64_t n, int bits, uint64_t b)
{
    float s;
    memcpy(&s, c + zk_payload_bytes(n, bits) + 4 * b, 4);
    return s;
}

static void test_narrow_known_patterns(void)
{
    ASSERT_EQ(narrow16(1.0f, ZK_FP16), 0x3C00);
    ASSERT_EQ(narrow16(-2.0f, ZK_FP16), 0xC000);
    ASSERT_EQ(narrow16(65504.0f, ZK_FP16), 0x7BFF);
    ASSERT_EQ(narrow16(65519.99f, ZK_FP16), 0x7BFF);
    ASSERT_EQ(narrow16(65520.0f, ZK_FP16), 0x7C00); /* tie to even: Inf */
    ASSERT_EQ(narrow16(1e30f, ZK_FP16), 0x7C00);
    ASSERT_EQ(narrow16(-INFINITY, ZK_FP16), 0xFC00);
    ASSERT_EQ(narrow16(-0.0f, ZK_FP16), 0x8000);
    ASSERT_EQ(narrow16(0x1p-24f, ZK_FP16), 0x0001); /* smallest subnormal */
    ASSERT_EQ(narrow16(0x1p-25f, ZK_FP16), 0x0000); /* tie to even: 0 */
    ASSERT_EQ(narrow16(0x1.000002p-25f, ZK_FP16), 0x0001);
    ASSERT_EQ(narrow16(0x1.8p-24f, ZK_FP16), 0x0002);   /* 1.5 ulp: tie to 2 */
    ASSERT_EQ(narrow16(0x1.4p-23f, ZK_FP16), 0x0002);   /* 2.5 ulp: tie to 2 */
    ASSERT_EQ(narrow16(0x1.ff8p-15f, ZK_FP16), 0x03FF); /* largest subnormal */
    ASSERT_EQ(narrow16(0x1.ffcp-15f, ZK_FP16), 0x0400); /* tie: up to the normal */
    ASSERT_EQ(narrow16(0x1p-14f, ZK_FP16), 0x0400);
    ASSERT_EQ(narrow16(1.0f + 0x1p-10f, ZK_FP16), 0x3C01);
    ASSERT_EQ(narrow16(1.0f + 0x1p-11f, ZK_FP16), 0x3C00);
    ASSERT_EQ(narrow16(1.0f + 0x3p-11f, ZK_FP16), 0x3C02);
    ASSERT_EQ(narrow16(u2f(0xFFC12345u), ZK_FP16), 0x7E00); /* any NaN: canonical */
    ASSERT_EQ(narrow16(u2f(0x7F800001u), ZK_FP16), 0x7E00);
    ASSERT_EQ(narrow16(0x1p-149f, ZK_FP16), 0x0000); /* fp32 subnormal */

    ASSERT_EQ(narrow16(1.0f, ZK_BF16), 0x3F80);
    ASSERT_EQ(narrow16(1.0f + 0x1p-8f, ZK_BF16), 0x3F80); /* tie to even */
    ASSERT_EQ(narrow16(1.0f + 0x3p-8f, ZK_BF16), 0x3F82);
    ASSERT_EQ(narrow16(1.0f + 0x1p-7f, ZK_BF16), 0x3F81);
    ASSERT_EQ(narrow16(u2f(0x7F7FFFFFu), ZK_BF16), 0x7F80); /* FLT_MAX overflows */
    ASSERT_EQ(narrow16(u2f(0x7F7F7FFFu), ZK_BF16), 0x7F7F);
    ASSERT_EQ(narrow16(u2f(0xFFC12345u), ZK_BF16), 0x7FC0);
    ASSERT_EQ(narrow16(-INFINITY, ZK_BF16), 0xFF80);
    ASSERT_EQ(narrow16(0x1p-149f, ZK_BF16), 0x0000); /* subnormal tie to even */
    ASSERT_EQ(narrow16(0x1p-133f, ZK_BF16), 0x0001); /* smallest bf16 subnormal */

    float f;
    zk_narrow(u2f(0xFF812345u), &f, ZK_FP32, 0);
    ASSERT_EQ(f2u(f), ZK_NAN_BITS);
    zk_narrow(-0.0f, &f, ZK_FP32, 0);
    ASSERT_EQ(f2u(f), 0x80000000u);
}

/* Every 16-bit pattern widens exactly and narrows back to itself. */
static void test_widen_narrow_round_trip_all_16bit(void)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t b = (uint16_t)h;
        int f16nan = (b & 0x7C00) == 0x7C00 && (b & 0x3FF);
        int bfnan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
        ASSERT_EQ(narrow16(zk_widen(&b, ZK_FP16, 0), ZK_FP16), f16nan ? 0x7E00 : b);
        ASSERT_EQ(narrow16(zk_widen(&b, ZK_BF16, 0), ZK_BF16), bfnan ? 0x7FC0 : b);
        ASSERT_EQ(f2u(zk_widen(&b, ZK_BF16, 0)), h << 16);
    }
    uint16_t one = 0x3C00, sub = 0x0001, maxh = 0x7BFF;
    ASSERT(zk_widen(&one, ZK_FP16, 0) == 1.0f);
    ASSERT(zk_widen(&sub, ZK_FP16, 0) == 0x1p-24f);
    ASSERT(zk_widen(&maxh, ZK_FP16, 0) == 65504.0f);
}

/* Random fp32 values against the compiler's own binary16 conversion. */
static void test_narrow_fp16_oracle(void)
{
#ifdef __FLT16_MAX__
    uint64_t s = 11;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)test_rand64(&s);
        /* concentrate on the binary16 range and its edges */
        if (i & 1)
            u = (u & 0x807FFFFFu) | ((0x60u + (uint32_t)(test_rand64(&s) % 0x38u)) << 23);
        float f = u2f(u);
        if (isnan(f))
            continue;
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        if (narrow16(f, ZK_FP16) != hb) {
            fprintf(stderr, "fp16 narrow of %a (0x%08x): got 0x%04x want 0x%04x\n", (double)f, u,
                    narrow16(f, ZK_FP16), hb);
            exit(1);
        }
    }
#endif
}

/* Round-trip error <= scale/2 per element (plus the rounding of q*scale),
 * for every bit width, block size, dtype and a tail. */
static void test_round_trip_error_bounds(void)
{
    uint64_t seed = 1;
    const int dtypes[] = {ZK_FP32, ZK_FP16, ZK_BF16};
    for (size_t bi = 0; bi < NBLOCKS; bi++) {
        uint32_t block = k_blocks[bi];
        uint64_t n = 3 * (uint64_t)block + 17; /* a short tail block */
        for (int w = 0; w < BITS_COUNT; w++) {
            int bits = k_bits[w];
            for (int d = 0; d < 3; d++) {
                int dt = dtypes[d];
                size_t es = zk_dtype_size(dt);
                uint8_t *x = malloc(n * es);
                float *xf = malloc(n * 4), *y = malloc(n * 4);
                uint8_t *c = malloc(zk_chunk_bytes(n, bits, block));
                ASSERT(x && xf && y && c);
                for (uint64_t i = 0; i < n; i++) {
                    /* magnitudes differ per block */
                    float v = (float)(gauss(&seed) * pow(10.0, (double)(i / block % 5) - 2));
                    zk_narrow(v, x, dt, i);
                    xf[i] = zk_widen(x, dt, i);
                }
                ASSERT_EQ(zk_quantize_ref(x, dt, n, n, bits, block, c), 0);
                zk_dequantize_ref(c, n, n, bits, block, y, ZK_FP32);
                for (uint64_t b = 0; b < zk_num_blocks(n, block); b++) {
                    float amax = 0;
                    uint64_t end = (b + 1) * block < n ? (b + 1) * block : n;
                    for (uint64_t i = b * block; i < end; i++)
                        amax = fabsf(xf[i]) > amax ? fabsf(xf[i]) : amax;
                    float sc = chunk_scale(c, n, bits, b);
                    ASSERT(sc == amax / (float)zk_qmax(bits));
                    for (uint64_t i = b * block; i < end; i++)
                        ASSERT_DBL_LE(fabs((double)y[i] - xf[i]), sc * (0.5 + 1e-4) + 1e-30);
                }
                free(x);
                free(xf);
                free(y);
                free(c);
            }
        }
    }
}

static void test_all_zero_block_has_scale_zero(void)
{
    for (int w = 0; w < BITS_COUNT; w++) {
        int bits = k_bits[w];
        uint64_t n = 100;
        float x[100] = {0};
        x[0] = -0.0f;
        x[70] = 3.0f; /* block 2 (64..95) is not zero, blocks 0,1,3 are */
        uint8_t c[256];
        memset(c, 0xAB, sizeof c);
        ASSERT_EQ(zk_quantize_ref(x, ZK_FP32, n, n, bits, 32, c), 0);
        ASSERT_EQ(f2u(chunk_scale(c, n, bits, 0)), 0);
        ASSERT_EQ(f2u(chunk_scale(c, n, bits, 1)), 0);
        ASSERT(chunk_scale(c, n, bits, 2) == 3.0f / (float)zk_qmax(bits));
        ASSERT_EQ(f2u(chunk_scale(c, n, bits, 3)), 0);
        float y[100];
        zk_dequantize_ref(c, n, n, bits, 32, y, ZK_FP32);
        for (int i = 0; i < 100; i++)
            ASSERT(f2u(y[i]) == (i == 70 ? f2u(3.0f) : 0u));
    }
}

/* The whole chunk is written: payload padding and scale padding are 0. */
static void test_chunk_layout_and_padding(void)
{
    ASSERT_EQ(zk_payload_bytes(33, 8), 48);
    ASSERT_EQ(zk_payload_bytes(33, 4), 32);
    ASSERT_EQ(zk_chunk_bytes(33, 8, 32), 48 + 16);
    ASSERT_EQ(zk_chunk_bytes(256, 8, 256), 256 + 16);
    ASSERT_EQ(zk_chunk_bytes(1024, 4, 32), 512 + 128);
    for (int w = 0; w < BITS_COUNT; w++) {
        int bits = k_bits[w];
        uint64_t n = 33;
        float x[33];
        for (int i = 0; i < 33; i++)
            x[i] = (float)(i + 1);
        uint64_t cb = zk_chunk_bytes(n, bits, 32);
        uint8_t c[128];
        memset(c, 0xEE, sizeof c);
        zk_quantize_ref(x, ZK_FP32, n, n, bits, 32, c);
        uint64_t used = bits == 8 ? 33 : 17, pay = zk_payload_bytes(n, bits);
        for (uint64_t i = used; i < pay; i++)
            ASSERT_EQ(c[i], 0);
        for (uint64_t i = pay + 8; i < cb; i++)
            ASSERT_EQ(c[i], 0);
        ASSERT_EQ(c[cb], 0xEE); /* nothing past the chunk */
    }
}

/* Elements past n_valid count as 0 and are never read. */
static void test_n_valid_padding(void)
{
    uint64_t seed = 5;
    for (int w = 0; w < BITS_COUNT; w++) {
        int bits = k_bits[w];
        uint64_t n = 512, nv = 300;
        float *x = malloc(nv * 4), *xz = calloc(n, 4);
        ASSERT(x && xz);
        for (uint64_t i = 0; i < nv; i++)
            xz[i] = x[i] = (float)gauss(&seed);
        uint64_t cb = zk_chunk_bytes(n, bits, 128);
        uint8_t *a = malloc(cb), *b = malloc(cb);
        ASSERT(a && b);
        zk_quantize_ref(x, ZK_FP32, n, nv, bits, 128, a); /* ASan: x has nv elements */
        zk_quantize_ref(xz, ZK_FP32, n, n, bits, 128, b);
        ASSERT_EQ(memcmp(a, b, cb), 0);
        ASSERT_EQ(f2u(chunk_scale(a, n, bits, 3)), 0); /* 384..511: all padding */
        /* dequantize only a prefix */
        float y[512];
        memset(y, 0x7F, sizeof y);
        zk_dequantize_ref(a, n, 77, bits, 128, y, ZK_FP32);
        ASSERT_EQ(f2u(y[77]), 0x7F7F7F7Fu);
        free(x);
        free(xz);
        free(a);
        free(b);
    }
}

/* A block with NaN or Inf: scale = canonical NaN, codes 0, decodes to NaN in
 * every element; other blocks are untouched; the count is returned. */
static void test_nan_inf_poison_whole_block(void)
{
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int w = 0; w < BITS_COUNT; w++) {
        for (int k = 0; k < 3; k++) {
            int bits = k_bits[w];
            uint64_t n = 96;
            float x[96];
            for (int i = 0; i < 96; i++)
                x[i] = (float)(i % 7) - 3.0f;
            x[40] = bad[k];
            x[95] = u2f(0xFFC00001u); /* a negative NaN with a payload in block 2 */
            uint8_t c[256];
            ASSERT_EQ(zk_quantize_ref(x, ZK_FP32, n, n, bits, 32, c), 2);
            ASSERT_EQ(f2u(chunk_scale(c, n, bits, 1)), ZK_NAN_BITS);
            ASSERT_EQ(f2u(chunk_scale(c, n, bits, 2)), ZK_NAN_BITS);
            ASSERT(chunk_scale(c, n, bits, 0) == 3.0f / (float)zk_qmax(bits));
            uint64_t lo = bits == 8 ? 32 : 16, hi = bits == 8 ? 96 : 48;
            for (uint64_t i = lo; i < hi; i++)
                ASSERT_EQ(c[i], 0);
            float y[96];
            uint16_t h[96], bf[96];
            zk_dequantize_ref(c, n, n, bits, 32, y, ZK_FP32);
            zk_dequantize_ref(c, n, n, bits, 32, h, ZK_FP16);
            zk_dequantize_ref(c, n, n, bits, 32, bf, ZK_BF16);
            for (int i = 32; i < 96; i++) {
                ASSERT_EQ(f2u(y[i]), ZK_NAN_BITS);
                ASSERT_EQ(h[i], 0x7E00);
                ASSERT_EQ(bf[i], 0x7FC0);
            }
            for (int i = 0; i < 32; i++)
                ASSERT_DBL_LE(fabsf(y[i] - x[i]), 0.51f * 3.0f / (float)zk_qmax(bits));
        }
    }
    /* the largest finite value is not poison */
    float big[32] = {0};
    big[3] = u2f(0x7F7FFFFFu);
    big[4] = -u2f(0x7F7FFFFFu);
    uint8_t c[64];
    ASSERT_EQ(zk_quantize_ref(big, ZK_FP32, 32, 32, 8, 32, c), 0);
    ASSERT_EQ((int8_t)c[3], 127);
    ASSERT_EQ((int8_t)c[4], -127);
}

/* Element 2k in the low nibble, 2k+1 in the high one, two's complement; an
 * odd tail leaves the high nibble 0. */
static void test_int4_packing(void)
{
    float x[33] = {0};
    x[0] = 7;
    x[1] = -7;
    x[2] = 0;
    x[3] = 3;
    x[4] = -1;
    x[5] = 1;
    x[32] = 5; /* block 1, one element */
    uint8_t c[64];
    ASSERT_EQ(zk_quantize_ref(x, ZK_FP32, 33, 33, 4, 32, c), 0);
    ASSERT_EQ(c[0], 0x97); /* 7 | (-7 = 0x9) << 4 */
    ASSERT_EQ(c[1], 0x30);
    ASSERT_EQ(c[2], 0x1F);
    ASSERT_EQ(c[3], 0x00);
    ASSERT_EQ(c[16], 0x07); /* 5 -> code 7, high nibble 0 */
    ASSERT(chunk_scale(c, 33, 4, 0) == 1.0f);
    ASSERT(chunk_scale(c, 33, 4, 1) == 5.0f / 7.0f);
    /* round to nearest even on the codes: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2 */
    float r[32] = {0};
    r[0] = 7;
    r[1] = 0.5f;
    r[2] = 1.5f;
    r[3] = -2.5f;
    ASSERT_EQ(zk_quantize_ref(r, ZK_FP32, 32, 32, 4, 32, c), 0);
    ASSERT_EQ(c[0], 0x07);
    ASSERT_EQ(c[1], 0xE2);
}

/* Blocks of fp32 subnormals quantize to the same codes as the block scaled
 * by 2^100 (the prescale keeps inv finite and exact). */
static void test_prescale_subnormal_blocks(void)
{
    uint64_t seed = 9;
    for (int w = 0; w < BITS_COUNT; w++) {
        int bits = k_bits[w];
        float tiny[64], big[64];
        for (int i = 0; i < 64; i++) {
            int m = (int)(test_rand64(&seed) % 2001) - 1000;
            tiny[i] = ldexpf((float)m, -140);
            big[i] = ldexpf((float)m, -40);
        }
        uint8_t a[128], b[128];
        ASSERT_EQ(zk_quantize_ref(tiny, ZK_FP32, 64, 64, bits, 64, a), 0);
        ASSERT_EQ(zk_quantize_ref(big, ZK_FP32, 64, 64, bits, 64, b), 0);
        ASSERT_EQ(memcmp(a, b, zk_payload_bytes(64, bits)), 0);
        int nonzero = 0;
        for (uint64_t i = 0; i < zk_payload_bytes(64, bits); i++)
            nonzero += a[i] != 0;
        ASSERT_GT(nonzero, 10);
        ASSERT(chunk_scale(a, 64, bits, 0) > 0.0f);
    }
    /* a block whose only value is the smallest subnormal */
    float s[32] = {0};
    s[7] = -0x1p-149f;
    uint8_t c[64];
    zk_quantize_ref(s, ZK_FP32, 32, 32, 8, 32, c);
    ASSERT_EQ((int8_t)c[7], -127);
}

/* fp16 and bf16 inputs are read as themselves (bf16 never through fp16). */
static void test_bf16_read_directly(void)
{
    uint16_t x[32] = {0};
    x[0] = 0x7F00; /* bf16 1.7e38: no fp16 could hold it */
    x[1] = 0xFF00;
    x[2] = 0x7E80;
    uint8_t c[64];
    ASSERT_EQ(zk_quantize_ref(x, ZK_BF16, 32, 32, 8, 32, c), 0);
    ASSERT_EQ((int8_t)c[0], 127);
    ASSERT_EQ((int8_t)c[1], -127);
    ASSERT_EQ((int8_t)c[2], 64); /* 63.5 rounds to even */
    uint16_t y[32];
    zk_dequantize_ref(c, 32, 32, 8, 32, y, ZK_BF16);
    ASSERT_EQ(y[0], 0x7F00);
    ASSERT_EQ(y[1], 0xFF00);
}

static void test_sum_ref_exact_and_mean(void)
{
    float x[3 * 5];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 5; i++)
            x[j * 5 + i] = (float)(j + 1) * (float)(i + 1);
    float y[5];
    zk_sum_ref(x, 5, 3, 5, ZK_FP32, ZK_SUM, 1.0f, y, ZK_FP32);
    for (int i = 0; i < 5; i++)
        ASSERT(y[i] == 6.0f * (float)(i + 1));
    uint16_t yb[5];
    zk_sum_ref(x, 5, 3, 5, ZK_FP32, ZK_MEAN, 3.0f, yb, ZK_BF16);
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(yb[i], narrow16(2.0f * (float)(i + 1), ZK_BF16));
    x[5 + 2] = NAN;
    zk_sum_ref(x, 5, 3, 5, ZK_FP32, ZK_SUM, 1.0f, y, ZK_FP32);
    ASSERT_EQ(f2u(y[2]), ZK_NAN_BITS);
}

/* Issue 9's accuracy figures: asserted at block 256, printed for all. */
static void test_accuracy_gaussian(void)
{
    float *x = malloc(ACC_N * 4), *y = malloc(ACC_N * 4);
    uint8_t *c = malloc(zk_chunk_bytes(ACC_N, 8, 32));
    ASSERT(x && y && c);
    uint64_t seed = 42;
    double ref2 = 0;
    for (uint32_t i = 0; i < ACC_N; i++) {
        x[i] = (float)gauss(&seed);
        ref2 += (double)x[i] * x[i];
    }
    printf("block  int8 rel L2   int4 rel L2   (Gaussian, %u elements)\n", ACC_N);
    for (size_t bi = 0; bi < NBLOCKS; bi++) {
        double err[BITS_COUNT];
        for (int w = 0; w < BITS_COUNT; w++) {
            zk_quantize_ref(x, ZK_FP32, ACC_N, ACC_N, k_bits[w], k_blocks[bi], c);
            zk_dequantize_ref(c, ACC_N, ACC_N, k_bits[w], k_blocks[bi], y, ZK_FP32);
            double e2 = 0;
            for (uint32_t i = 0; i < ACC_N; i++)
                e2 += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            err[w] = sqrt(e2 / ref2);
        }
        printf("%5u  %10.4f%%  %10.3f%%\n", k_blocks[bi], 100 * err[0], 100 * err[1]);
        if (k_blocks[bi] == ACC_BLOCK) {
            ASSERT_DBL_LE(err[0], ACC_INT8_MAX);
            ASSERT_DBL_LE(err[1], ACC_INT4_MAX);
        }
    }
    free(x);
    free(y);
    free(c);
}

/* zk_qdq_ref gives the bytes of quantize then dequantize, for every
 * dtype, bit width and block size, tails and n_valid < n, with exact
 * zeros, subnormal blocks, NaN and Inf in the data; and the same count of
 * poisoned blocks. */
static void test_qdq_equals_quantize_dequantize(void)
{
    uint64_t seed = 11;
    const int dts[3] = {ZK_FP32, ZK_FP16, ZK_BF16};
    const uint64_t sizes[] = {1, 31, 32, 33, 257, 1000, 4097};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int t = 0; t < 3; t++)
            for (int w = 0; w < BITS_COUNT; w++)
                for (size_t bi = 0; bi < NBLOCKS; bi++) {
                    int dt = dts[t], bits = k_bits[w];
                    uint32_t block = k_blocks[bi];
                    uint64_t nv = sizes[si], n = nv + (si % 3) * 40; /* n >= n_valid */
                    size_t es = zk_dtype_size(dt);
                    uint8_t *x = malloc(nv * es), *c = malloc(zk_chunk_bytes(n, bits, block));
                    uint8_t *y1 = malloc(nv * es), *y2 = malloc(nv * es);
                    ASSERT(x && c && y1 && y2);
                    for (uint64_t i = 0; i < nv; i++) {
                        float v = (float)gauss(&seed) * (si % 2 ? 1e-30f : 3.0f);
                        uint64_t r = test_rand64(&seed) % 64;
                        v = r == 0 ? 0.0f : r == 1 ? NAN : r == 2 ? -INFINITY : v;
                        if (dt == ZK_FP32)
                            memcpy(x + i * 4, &v, 4);
                        else
                            zk_narrow(v, x, dt, i);
                    }
                    uint64_t p1 = zk_quantize_ref(x, dt, n, nv, bits, block, c);
                    zk_dequantize_ref(c, n, nv, bits, block, y1, dt);
                    uint64_t p2 = zk_qdq_ref(x, dt, nv, bits, block, y2);
                    ASSERT_EQ(p1, p2);
                    ASSERT_EQ(memcmp(y1, y2, nv * es), 0);
                    free(x);
                    free(c);
                    free(y1);
                    free(y2);
                }
}

int main(void)
{
    test_narrow_known_patterns();
    test_widen_narrow_round_trip_all_16bit();
    test_narrow_fp16_oracle();
    test_round_trip_error_bounds();
    test_all_zero_block_has_scale_zero();
    test_chunk_layout_and_padding();
    test_n_valid_padding();
    test_nan_inf_poison_whole_block();
    test_int4_packing();
    test_prescale_subnormal_blocks();
    test_bf16_read_directly();
    test_sum_ref_exact_and_mean();
    test_accuracy_gaussian();
    test_qdq_equals_quantize_dequantize();
    printf("test_quant: ok\n");
    return 0;
}
