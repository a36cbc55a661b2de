/*
 * test_audit21k_kernels.c — the reference kernels (kernels/quant_ref.c,
 * qgz_ref.c) against an independent oracle written from the text of
 * kernels/zpp_kernels.h, and at the edges of the contract:
 *   - whole chunks (codes, int4 nibble order, odd tails, zero padding,
 *     scales) for every dtype, bit width, many n / n_valid and block sizes,
 *     with zeros, -0, subnormals, FLT_MAX, NaN and +/-Inf in the data;
 *   - dequantize of every prefix, reduce+requantize and reduce -> output
 *     (sum, mean, fp32/bf16/fp16) against acc = fma(q, scale, acc) from +0;
 *   - the NaN/Inf rule through every function (canonical NaN in every
 *     output dtype, counts), mean by 0;
 *   - zero-sized calls with NULL pointers (nothing to read or write: no
 *     UB), and a qgZ geometry whose W does not fit an int.
 * UBSan reports are made fatal below, so a report fails the test even in a
 * build without -fno-sanitize-recover.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zpp_kernels.h"

const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}

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

/* ---- the oracle: the header's words, written independently ------------ */

/* Exact widening, not through the kernels' helpers. */
static float o_widen(const uint8_t *x, int dt, uint64_t i)
{
    if (dt == ZK_FP32) {
        float f;
        memcpy(&f, x + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, x + 2 * i, 2);
    if (dt == ZK_BF16)
        return u2f((uint32_t)h << 16);
    int e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, -24);
    else
        v = ldexp(1024 + m, e - 25);
    return (float)((h & 0x8000) ? -v : v);
}

struct o_params {
    float scale, pre, inv;
    int poisoned;
};

static struct o_params o_block(const float *v, uint64_t len, int qmax)
{
    struct o_params p = {0};
    float absmax = 0.0f;
    for (uint64_t i = 0; i < len; i++) {
        if (isnan(v[i]) || isinf(v[i]))
            p.poisoned = 1;
        else if (fabsf(v[i]) > absmax)
            absmax = fabsf(v[i]);
    }
    if (p.poisoned) {
        p.scale = u2f(ZK_NAN_BITS);
        return p;
    }
    volatile float qm = (float)qmax, a = absmax;
    p.scale = a / qm;
    p.pre = absmax < 0x1p-60f ? 0x1p64f : 1.0f;
    volatile float ap = a * p.pre;
    p.inv = absmax == 0.0f ? 0.0f : qm / ap;
    return p;
}

static int o_code(float x, const struct o_params *p, int qmax)
{
    if (p->poisoned)
        return 0;
    volatile float t = x * p->pre;
    t = t * p->inv;
    double r = nearbyint((double)t); /* default mode: ties to even */
    int q = (int)r;
    return q > qmax ? qmax : q < -qmax ? -qmax : q;
}

/* The chunk of n elements (n_valid read, the rest 0), byte by byte. */
static void o_quantize(const uint8_t *x, int dt, uint64_t n, uint64_t nv, int bits, uint32_t block,
                       uint8_t *out, uint64_t *poisoned)
{
    int qmax = bits == 8 ? 127 : 7;
    uint64_t pay = bits == 8 ? n : (n + 1) / 2;
    pay = (pay + 15) / 16 * 16;
    uint64_t nb = (n + block - 1) / block;
    uint64_t total = pay + (4 * nb + 15) / 16 * 16;
    memset(out, 0, total);
    float *v = malloc(block * sizeof *v);
    ASSERT(v);
    *poisoned = 0;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t len = n - b * block < block ? n - b * block : block;
        for (uint64_t i = 0; i < len; i++)
            v[i] = b * block + i < nv ? o_widen(x, dt, b * block + i) : 0.0f;
        struct o_params p = o_block(v, len, qmax);
        *poisoned += (uint64_t)p.poisoned;
        memcpy(out + pay + 4 * b, &p.scale, 4);
        for (uint64_t i = 0; i < len; i++) {
            int q = o_code(v[i], &p, qmax);
            uint64_t e = b * block + i;
            if (bits == 8)
                out[e] = (uint8_t)(q & 0xFF);
            else
                out[e / 2] |= (uint8_t)((q & 0xF) << (e % 2 ? 4 : 0));
        }
    }
    free(v);
}

/* Code and scale of element e of a chunk of n elements. */
static int o_get(const uint8_t *c, uint64_t n, int bits, uint32_t block, uint64_t e, float *s)
{
    uint64_t pay = bits == 8 ? n : (n + 1) / 2;
    pay = (pay + 15) / 16 * 16;
    memcpy(s, c + pay + 4 * (e / block), 4);
    if (bits == 8)
        return (int8_t)c[e];
    int nib = (c[e / 2] >> (e % 2 ? 4 : 0)) & 0xF;
    return nib >= 8 ? nib - 16 : nib;
}

static uint32_t canon_nan_of(int dt)
{
    return dt == ZK_FP32 ? ZK_NAN_BITS : dt == ZK_FP16 ? 0x7E00u : 0x7FC0u;
}

/* Output element i of y (dtype dt) as bits. */
static uint32_t out_bits(const void *y, int dt, uint64_t i)
{
    if (dt == ZK_FP32) {
        uint32_t u;
        memcpy(&u, (const uint8_t *)y + 4 * i, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)y + 2 * i, 2);
    return h;
}

static uint32_t narrow_bits(float v, int dt)
{
    uint8_t b[4] = {0};
    zk_narrow(v, b, dt, 0);
    return out_bits(b, dt, 0);
}

/* A value of a "kind": normal data of a per-call magnitude plus the edge
 * values the contract names. */
static float draw(uint64_t *s, float mag, int specials)
{
    uint64_t r = test_rand64(s) % 64;
    if (specials) {
        switch (r) {
        case 0:
            return 0.0f;
        case 1:
            return -0.0f;
        case 2:
            return NAN;
        case 3:
            return -INFINITY;
        case 4:
            return INFINITY;
        case 5:
            return u2f(0xFFC00001u); /* negative NaN with a payload */
        case 6:
            return ldexpf((float)(test_rand64(s) % 1000), -149); /* subnormal */
        default:
            break;
        }
    }
    return (float)((2 * test_uniform(s) - 1) * mag);
}

static void fill(uint8_t *x, int dt, uint64_t n, uint64_t *s, float mag, int specials)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = draw(s, mag, specials);
        if (dt == ZK_FP32)
            memcpy(x + 4 * i, &v, 4);
        else if (isnan(v)) { /* keep a NaN payload in 16 bits as well */
            uint16_t h = dt == ZK_FP16 ? 0xFE01u : 0xFF81u;
            memcpy(x + 2 * i, &h, 2);
        } else
            zk_narrow(v, x, dt, i);
    }
}

static const int k_dts[3] = {ZK_FP32, ZK_FP16, ZK_BF16};
static const uint32_t k_blocks[] = {32, 64, 96, 160, 8192};
#define NBLK (sizeof k_blocks / sizeof k_blocks[0])

/* quantize == oracle for whole chunks, and nothing written past the chunk;
 * dequantize of every prefix == q * scale narrowed. */
static void test_quantize_dequantize_vs_oracle(void)
{
    uint64_t seed = 21;
    const float mags[] = {3.0f, 1e-38f, 1e-42f, FLT_MAX, 65504.0f};
    for (uint64_t n = 1; n <= 200; n += (n < 70 ? 1 : 13))
        for (int w = 0; w < 2; w++)
            for (int t = 0; t < 3; t++)
                for (size_t bi = 0; bi < NBLK; bi++) {
                    int bits = w ? 4 : 8, dt = k_dts[t];
                    uint32_t block = k_blocks[bi];
                    size_t es = zk_dtype_size(dt);
                    uint64_t nv = (n * 7 + bi) % (n + 1); /* 0..n */
                    int specials = (int)((n + bi) % 3 == 0);
                    float mag = mags[(n + (uint64_t)t) % 5];
                    uint64_t cb = zk_chunk_bytes(n, bits, block);
                    uint8_t *x = malloc(nv * es + 1), *a = malloc(cb + 16), *o = malloc(cb);
                    uint8_t *y = malloc(n * 4 + 8);
                    ASSERT(x && a && o && y);
                    fill(x, dt, nv, &seed, mag, specials);
                    memset(a, 0xCD, cb + 16);
                    uint64_t pa = zk_quantize_ref(x, dt, n, nv, bits, block, a);
                    uint64_t po;
                    o_quantize(x, dt, n, nv, bits, block, o, &po);
                    if (memcmp(a, o, cb) != 0 || pa != po) {
                        for (uint64_t i = 0; i < cb; i++)
                            if (a[i] != o[i]) {
                                fprintf(stderr,
                                        "n=%llu nv=%llu bits=%d dt=%d B=%u: byte %llu got 0x%02x "
                                        "want 0x%02x (poisoned %llu/%llu)\n",
                                        (unsigned long long)n, (unsigned long long)nv, bits, dt,
                                        block, (unsigned long long)i, a[i], o[i],
                                        (unsigned long long)pa, (unsigned long long)po);
                                break;
                            }
                        ASSERT_EQ(pa, po);
                        ASSERT(0);
                    }
                    for (uint64_t i = cb; i < cb + 16; i++)
                        ASSERT_EQ(a[i], 0xCD);
                    /* every prefix, every output dtype */
                    for (int ot = 0; ot < 3; ot++) {
                        int odt = k_dts[ot];
                        size_t oes = zk_dtype_size(odt);
                        uint64_t nout = (n * 5 + (uint64_t)ot) % (n + 1);
                        memset(y, 0xEE, n * 4 + 8);
                        zk_dequantize_ref(a, n, nout, bits, block, y, odt);
                        for (uint64_t e = 0; e < nout; e++) {
                            float s;
                            int q = o_get(a, n, bits, block, e, &s);
                            volatile float d = (float)q * s;
                            uint32_t want = isnan(s) ? canon_nan_of(odt) : narrow_bits(d, odt);
                            ASSERT_EQ(out_bits(y, odt, e), want);
                        }
                        for (uint64_t b = nout * oes; b < n * 4 + 8; b++)
                            ASSERT_EQ(y[b], 0xEE);
                    }
                    /* dequantize past n is clamped to n */
                    memset(y, 0xEE, n * 4 + 8);
                    zk_dequantize_ref(a, n, n + 5, bits, block, y, ZK_FP32);
                    ASSERT_EQ(y[n * 4], 0xEE);
                    free(x);
                    free(a);
                    free(o);
                    free(y);
                }
}

/* int4, odd counts: element 2k low nibble, the last odd element leaves the
 * high nibble 0, and the payload padding after it is 0 (also for a poisoned
 * last block). */
static void test_int4_odd_tail(void)
{
    for (uint64_t n = 1; n < 130; n += 2) {
        float *x = malloc(n * 4);
        ASSERT(x);
        for (uint64_t i = 0; i < n; i++)
            x[i] = i % 32 == 0 ? 7.0f : (float)((int)(i % 15) - 7); /* scale 1 */
        uint64_t lastblk = (n - 1) / 32;
        for (int poison = 0; poison < 2; poison++) {
            if (poison)
                x[n - 1] = NAN;
            uint64_t cb = zk_chunk_bytes(n, 4, 32);
            uint8_t *c = malloc(cb);
            ASSERT(c);
            memset(c, 0xFF, cb);
            ASSERT_EQ(zk_quantize_ref(x, ZK_FP32, n, n, 4, 32, c), (uint64_t)poison);
            for (uint64_t e = 0; e < n; e++) {
                int nib = (c[e / 2] >> (e % 2 ? 4 : 0)) & 0xF;
                int want = poison && e / 32 == lastblk ? 0 : (int)x[e];
                ASSERT_EQ(nib, want & 0xF);
            }
            ASSERT_EQ(c[(n - 1) / 2] >> 4, 0); /* odd tail: high nibble 0 */
            for (uint64_t b = (n + 1) / 2; b < zk_payload_bytes(n, 4); b++)
                ASSERT_EQ(c[b], 0);
            free(c);
        }
        free(x);
    }
}

/* k chunks of `piece` elements at in + j * stride. */
struct chunks {
    uint8_t *buf;
    uint64_t stride, piece;
};

static void make_chunks(struct chunks *ch, int k, uint64_t piece, int bits, uint32_t block,
                        uint64_t *seed, int specials, float mag)
{
    ch->piece = piece;
    ch->stride = zk_chunk_bytes(piece, bits, block) + 16 * (uint64_t)(k % 3); /* gaps */
    ch->buf = malloc(ch->stride * (uint64_t)k + 1);
    ASSERT(ch->buf);
    memset(ch->buf, 0x5A, ch->stride * (uint64_t)k + 1);
    float *x = malloc(piece * 4);
    ASSERT(x);
    for (int j = 0; j < k; j++) {
        fill((uint8_t *)x, ZK_FP32, piece, seed, mag, specials && j == k - 1);
        zk_quantize_ref(x, ZK_FP32, piece, piece, bits, block, ch->buf + (uint64_t)j * ch->stride);
    }
    free(x);
}

/* acc = fma(q_j, s_j, acc), j ascending, from +0. The int4 reduce +
 * requantize (requant != 0) sums the biased codes instead (docs/kernels.md,
 * since session 31): acc = fma(q_j + 8, s_j, acc) and t = t + s_j, both
 * from +0, then fma(t, -8, acc). */
static float o_sum(const struct chunks *ch, int k, int bits, uint32_t block, uint64_t e,
                   int requant)
{
    int biased = requant && bits == 4;
    float acc = 0.0f, t = 0.0f;
    for (int j = 0; j < k; j++) {
        float s;
        int q = o_get(ch->buf + (uint64_t)j * ch->stride, ch->piece, bits, block, e, &s);
        acc = fmaf((float)(biased ? q + 8 : q), s, acc);
        t = t + s;
    }
    return biased ? fmaf(t, -8.0f, acc) : acc;
}

static void test_reductions_vs_oracle(void)
{
    uint64_t seed = 77;
    const uint64_t pieces[] = {32, 96, 160, 256, 8192 + 64};
    const float mags[] = {2.0f, 1e-37f, 1e37f, FLT_MAX};
    for (size_t pi = 0; pi < sizeof pieces / sizeof pieces[0]; pi++)
        for (int w = 0; w < 2; w++)
            for (int k = 0; k <= 5; k++)
                for (int sp = 0; sp < 2; sp++) {
                    int bits = w ? 4 : 8;
                    uint64_t piece = pieces[pi];
                    uint32_t block = piece % 64 == 0 ? 64 : 32;
                    if (piece > 8192)
                        block = 8192;
                    float mag = mags[(pi + (size_t)k) % 4];
                    struct chunks ch;
                    make_chunks(&ch, k, piece, bits, block, &seed, sp, mag);
                    /* reduce + requantize: the oracle's sums, quantized */
                    float *acc = malloc(piece * 4);
                    ASSERT(acc);
                    for (uint64_t e = 0; e < piece; e++)
                        acc[e] = o_sum(&ch, k, bits, block, e, 1);
                    uint64_t cb = zk_chunk_bytes(piece, bits, block);
                    uint8_t *r = malloc(cb + 16), *o = malloc(cb);
                    ASSERT(r && o);
                    memset(r, 0xCD, cb + 16);
                    uint64_t pr =
                        zk_reduce_requant_ref(ch.buf, ch.stride, k, piece, bits, block, r);
                    uint64_t po;
                    o_quantize((const uint8_t *)acc, ZK_FP32, piece, piece, bits, block, o, &po);
                    ASSERT_EQ(pr, po);
                    ASSERT_EQ(memcmp(r, o, cb), 0);
                    for (uint64_t i = cb; i < cb + 16; i++)
                        ASSERT_EQ(r[i], 0xCD);
                    /* reduce -> output, sum and mean (also by 0 and by Inf): the
                     * unbiased sums */
                    for (uint64_t e = 0; e < piece; e++)
                        acc[e] = o_sum(&ch, k, bits, block, e, 0);
                    const float divs[] = {1.0f, 3.0f, 0.0f, INFINITY, 1e-30f};
                    for (int ot = 0; ot < 3; ot++)
                        for (int d = 0; d < 5; d++) {
                            int odt = k_dts[ot], op = d ? ZK_MEAN : ZK_SUM;
                            size_t oes = zk_dtype_size(odt);
                            uint64_t count = piece - (uint64_t)(d * 7 + ot) % piece;
                            uint8_t *y = malloc(piece * 4 + 4);
                            ASSERT(y);
                            memset(y, 0xEE, piece * 4 + 4);
                            zk_reduce_out_ref(ch.buf, ch.stride, k, piece, bits, block, count, op,
                                              divs[d], y, odt);
                            for (uint64_t e = 0; e < count; e++) {
                                volatile float v = acc[e];
                                if (op == ZK_MEAN)
                                    v = v / divs[d];
                                uint32_t want = isnan(v) ? canon_nan_of(odt) : narrow_bits(v, odt);
                                ASSERT_EQ(out_bits(y, odt, e), want);
                            }
                            for (uint64_t b = count * oes; b < piece * 4 + 4; b++)
                                ASSERT_EQ(y[b], 0xEE);
                            free(y);
                        }
                    free(acc);
                    free(r);
                    free(o);
                    free(ch.buf);
                }
}

/* A poisoned input chunk poisons the sum's block (NaN scale, codes 0,
 * counted once per block) and every output element of it is the canonical
 * NaN; mean by 0 of a zero sum is the canonical NaN (x86's 0/0 is the
 * negative default NaN), of a nonzero sum +/-Inf. */
static void test_nan_rules_in_reductions(void)
{
    const uint64_t piece = 96;
    for (int w = 0; w < 2; w++) {
        int bits = w ? 4 : 8;
        float x0[96], x1[96];
        for (int i = 0; i < 96; i++) {
            x0[i] = (float)(i % 5) - 2.0f;
            x1[i] = (float)(i % 3);
        }
        x1[40] = -INFINITY;        /* block 1 of chunk 1 */
        x0[95] = u2f(0x7FA00000u); /* a signalling NaN, block 2 of chunk 0 */
        uint64_t cb = zk_chunk_bytes(piece, bits, 32);
        uint8_t *in = malloc(2 * cb), *r = malloc(cb);
        ASSERT(in && r);
        ASSERT_EQ(zk_quantize_ref(x0, ZK_FP32, piece, piece, bits, 32, in), 1);
        ASSERT_EQ(zk_quantize_ref(x1, ZK_FP32, piece, piece, bits, 32, in + cb), 1);
        ASSERT_EQ(zk_reduce_requant_ref(in, cb, 2, piece, bits, 32, r), 2);
        uint64_t pay = zk_payload_bytes(piece, bits);
        for (int b = 0; b < 3; b++) {
            uint32_t s;
            memcpy(&s, r + pay + 4 * b, 4);
            if (b)
                ASSERT_EQ(s, ZK_NAN_BITS);
            else
                ASSERT(u2f(s) > 0.0f);
        }
        for (uint64_t i = (bits == 8 ? 32 : 16); i < (bits == 8 ? 96u : 48u); i++)
            ASSERT_EQ(r[i], 0);
        for (int t = 0; t < 3; t++) {
            int odt = k_dts[t];
            uint8_t y[96 * 4];
            zk_reduce_out_ref(in, cb, 2, piece, bits, 32, piece, ZK_MEAN, 2.0f, y, odt);
            for (uint64_t e = 32; e < 96; e++)
                ASSERT_EQ(out_bits(y, odt, e), canon_nan_of(odt));
            for (uint64_t e = 0; e < 32; e++)
                ASSERT(!isnan(zk_widen(y, odt, e)));
            /* mean by 0 over block 0 only */
            zk_reduce_out_ref(in, cb, 2, piece, bits, 32, 32, ZK_MEAN, 0.0f, y, odt);
            for (uint64_t e = 0; e < 32; e++) {
                float sum = 0.0f;
                for (int j = 0; j < 2; j++) {
                    float s;
                    int q = o_get(in + (uint64_t)j * cb, piece, bits, 32, e, &s);
                    sum = fmaf((float)q, s, sum);
                }
                if (sum == 0.0f)
                    ASSERT_EQ(out_bits(y, odt, e), canon_nan_of(odt));
                else
                    ASSERT_EQ(out_bits(y, odt, e),
                              narrow_bits(sum > 0 ? INFINITY : -INFINITY, odt));
            }
        }
        free(in);
        free(r);
    }
    /* the exact sum: Inf - Inf is the canonical NaN, mean by 0 of 0 too */
    float x[2 * 4] = {INFINITY, 1.0f, 0.0f, u2f(0xFFC00001u), -INFINITY, 2.0f, 0.0f, 1.0f};
    for (int t = 0; t < 3; t++) {
        int odt = k_dts[t];
        uint8_t y[16];
        zk_sum_ref(x, 4, 2, 4, ZK_FP32, ZK_SUM, 1.0f, y, odt);
        ASSERT_EQ(out_bits(y, odt, 0), canon_nan_of(odt));
        ASSERT_EQ(out_bits(y, odt, 1), narrow_bits(3.0f, odt));
        ASSERT_EQ(out_bits(y, odt, 3), canon_nan_of(odt));
        zk_sum_ref(x, 4, 2, 4, ZK_FP32, ZK_MEAN, 0.0f, y, odt);
        ASSERT_EQ(out_bits(y, odt, 2), canon_nan_of(odt));
        ASSERT_EQ(out_bits(y, odt, 1), narrow_bits(INFINITY, odt));
    }
}

/* qgZ step 0 with NaN/Inf in 16-bit inputs: the poisoned pieces' blocks
 * are NaN, counted once each, in the right place; qdq agrees. */
static void test_qgz_reorder_poison(void)
{
    struct zk_qgz_geom g;
    ASSERT_EQ(zk_qgz_geom_init(&g, 999, 2, 2, 2, 4, 32), 0); /* shard 250, piece 128 */
    uint16_t *x = malloc(999 * 2);
    ASSERT(x);
    for (int i = 0; i < 999; i++)
        zk_narrow((float)(i % 11) - 5.0f, x, ZK_BF16, (uint64_t)i);
    x[250 + 130] = 0x7F80; /* +Inf: slice 1, stage 1, block 0 */
    x[998] = 0xFFC1;       /* NaN: slice 3, stage 1 (piece 128..249), element 120 -> block 3 */
    uint64_t total = (uint64_t)g.stages * 4 * g.piece_bytes;
    uint8_t *out = malloc(total);
    ASSERT(out);
    ASSERT_EQ(zk_qgz_reorder_quantize_ref(x, ZK_BF16, &g, out), 2);
    /* slice 1 sits at position p with slice_at(p) == 1 */
    for (int p = 0; p < 4; p++) {
        int s = zk_qgz_slice_at(&g, p);
        const uint8_t *c = out + (uint64_t)(4 + p) * g.piece_bytes; /* stage 1 */
        for (uint64_t b = 0; b < 4; b++) {
            uint32_t sc;
            memcpy(&sc, c + zk_payload_bytes(g.piece, 4) + 4 * b, 4);
            int bad = (s == 1 && b == 0) || (s == 3 && b == 3);
            if (bad)
                ASSERT_EQ(sc, ZK_NAN_BITS);
            else
                ASSERT(sc != ZK_NAN_BITS);
        }
    }
    uint16_t y[999];
    ASSERT_EQ(zk_qdq_ref(x, ZK_BF16, 999, 4, 32, y), 2);
    ASSERT_EQ(y[998], 0x7FC0);
    free(x);
    free(out);
}

/* Zero-sized calls: nothing to read or write, so NULL pointers must do. */
static void test_zero_sized_calls_touch_nothing(void)
{
    ASSERT_EQ(zk_quantize_ref(NULL, ZK_FP32, 0, 0, 8, 32, NULL), 0);
    ASSERT_EQ(zk_quantize_ref(NULL, ZK_BF16, 0, 0, 4, 256, NULL), 0);
    zk_dequantize_ref(NULL, 0, 0, 8, 32, NULL, ZK_FP32);
    zk_dequantize_ref(NULL, 0, 7, 4, 32, NULL, ZK_BF16); /* n_out clamped to n = 0 */
    ASSERT_EQ(zk_qdq_ref(NULL, ZK_FP16, 0, 4, 32, NULL), 0);
    ASSERT_EQ(zk_reduce_requant_ref(NULL, 0, 3, 0, 4, 32, NULL), 0);
    ASSERT_EQ(zk_reduce_requant_ref(NULL, 0, 0, 0, 8, 32, NULL), 0);
    zk_reduce_out_ref(NULL, 0, 2, 0, 4, 32, 0, ZK_MEAN, 0.0f, NULL, ZK_BF16);
    zk_sum_ref(NULL, 0, 2, 0, ZK_FP32, ZK_MEAN, 0.0f, NULL, ZK_FP32);
    struct zk_qgz_geom g;
    ASSERT_EQ(zk_qgz_geom_init(&g, 0, 2, 4, 3, 4, 32), 0);
    ASSERT_EQ(g.piece_bytes, 0);
    ASSERT_EQ(zk_qgz_reorder_quantize_ref(NULL, ZK_BF16, &g, NULL), 0);
    ASSERT_EQ(zk_qgz_reorder_quantize_stage_ref(NULL, ZK_BF16, &g, 2, NULL), 0);
    /* W = N * G past INT_MAX: the geometry accepts it (all sizes 64-bit) */
    ASSERT_EQ(zk_qgz_geom_init(&g, 0, 46341, 46341, 1, 8, 32), 0);
    ASSERT_EQ(zk_qgz_reorder_quantize_stage_ref(NULL, ZK_FP32, &g, 0, NULL), 0);
    ASSERT_EQ(zk_qgz_reorder_quantize_ref(NULL, ZK_FP32, &g, NULL), 0);
    /* a zero-sized chunk at a real pointer writes nothing */
    uint8_t guard[16];
    memset(guard, 0x77, sizeof guard);
    ASSERT_EQ(zk_quantize_ref(guard, ZK_FP32, 0, 0, 8, 32, guard), 0);
    ASSERT_EQ(zk_reduce_requant_ref(guard, 0, 1, 0, 8, 32, guard), 0);
    for (size_t i = 0; i < sizeof guard; i++)
        ASSERT_EQ(guard[i], 0x77);
}

/* The edges of the block parameters, as the header defines them. */
static void test_block_param_edges(void)
{
    for (int w = 0; w < 2; w++) {
        int bits = w ? 4 : 8, qmax = bits == 8 ? 127 : 7;
        /* FLT_MAX: a finite block, not poisoned; scale = FLT_MAX / qmax */
        float x[32] = {0};
        x[0] = FLT_MAX;
        x[1] = -FLT_MAX;
        uint8_t c[64];
        ASSERT_EQ(zk_quantize_ref(x, ZK_FP32, 32, 32, bits, 32, c), 0);
        float s;
        memcpy(&s, c + zk_payload_bytes(32, bits), 4);
        volatile float fm = FLT_MAX, qm = (float)qmax;
        ASSERT_EQ(f2u(s), f2u(fm / qm));
        /* the smallest subnormal alone: its scale rounds to 0, codes +-qmax */
        float t[32] = {0};
        t[5] = -0x1p-149f;
        ASSERT_EQ(zk_quantize_ref(t, ZK_FP32, 32, 32, bits, 32, c), 0);
        memcpy(&s, c + zk_payload_bytes(32, bits), 4);
        ASSERT_EQ(f2u(s), 0u);
        int q = bits == 8 ? (int8_t)c[5] : ((c[2] >> 4) & 0xF) - 16;
        ASSERT_EQ(q, -qmax);
        /* -0 only: an all-zero block, scale +0 */
        memset(t, 0, sizeof t);
        t[3] = -0.0f;
        ASSERT_EQ(zk_quantize_ref(t, ZK_FP32, 32, 32, bits, 32, c), 0);
        memcpy(&s, c + zk_payload_bytes(32, bits), 4);
        ASSERT_EQ(f2u(s), 0u);
        for (uint64_t i = 0; i < zk_payload_bytes(32, bits); i++)
            ASSERT_EQ(c[i], 0);
    }
}

int main(void)
{
    test_zero_sized_calls_touch_nothing();
    test_block_param_edges();
    test_int4_odd_tail();
    test_quantize_dequantize_vs_oracle();
    test_reductions_vs_oracle();
    test_nan_rules_in_reductions();
    test_qgz_reorder_poison();
    printf("test_audit21k_kernels: ok\n");
    return 0;
}
