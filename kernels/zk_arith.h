/*
 * zk_arith.h — the scalar arithmetic of block quantization, written once and
 * compiled twice: by the C compiler for the reference kernels (*_ref.c, built
 * with -ffp-contract=off) and by nvcc for the CUDA kernels (*.cu, built with
 * --fmad=false). Every floating-point step goes through zk_fmul/zk_fadd/
 * zk_fdiv/zk_fma, which are the IEEE round-to-nearest-even operations on
 * both sides (__fmul_rn and friends on the device, fmaf in C: a correctly
 * rounded fused multiply-add, never one the compiler chose), so both paths
 * produce the same bits. Internal to kernels/: not part of the public contract, which is
 * zpp_kernels.h.
 */
#ifndef ZK_ARITH_H
#define ZK_ARITH_H

#include <stdint.h>
#include <string.h>

#include "zpp_kernels.h"

#include <math.h>
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define ZK_HD __host__ __device__ __forceinline__
#else
#define ZK_HD static inline
#endif

#define ZK_F32_ABS_MASK 0x7FFFFFFFu
#define ZK_F32_EXP_MASK 0x7F800000u /* absolute bits >= this: Inf or NaN */
#define ZK_F32_SIGN_MASK 0x80000000u
#define ZK_F16_NAN_BITS 0x7E00u
#define ZK_BF16_NAN_BITS 0x7FC0u
#define ZK_F16_INF_BITS 0x7C00u
#define ZK_F16_SIGN_MASK 0x8000u

ZK_HD uint32_t zk_f2u(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}
ZK_HD float zk_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* IEEE binary32 operations, round to nearest even, never contracted. */
ZK_HD float zk_fmul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
ZK_HD float zk_fadd(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
/* a * b + c rounded once (IEEE fusedMultiplyAdd): only where the contract
 * (zpp_kernels.h) says so, the accumulation of the fused reductions. */
ZK_HD float zk_fma(float a, float b, float c)
{
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}
ZK_HD float zk_fdiv(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
/* Round to nearest even to an int; |v| is small (<= qmax + 1) here. */
ZK_HD int zk_rne(float v)
{
#ifdef __CUDA_ARCH__
    return __float2int_rn(v);
#else
    return (int)rintf(v);
#endif
}

/* ---- conversions -------------------------------------------------------- */

/* Any NaN becomes the canonical quiet NaN; everything else is unchanged. */
ZK_HD float zk_canon_f32(float v)
{
    return (zk_f2u(v) & ZK_F32_ABS_MASK) > ZK_F32_EXP_MASK ? zk_u2f(ZK_NAN_BITS) : v;
}

/* binary16 bits -> fp32, exact. */
ZK_HD float zk_f16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    uint32_t sign = (uint32_t)(h & ZK_F16_SIGN_MASK) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    uint32_t u;
    if (exp == 0x1Fu) {
        u = sign | ZK_F32_EXP_MASK | (man << 13);
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
    } else if (man == 0) {
        u = sign;
    } else {
        /* subnormal: man * 2^-24 is a normal fp32, computed exactly */
        float f = (float)man * 0x1p-24f;
        u = sign | zk_f2u(f);
    }
    return zk_u2f(u);
#endif
}

/* fp32 -> binary16 bits, round to nearest even, overflow to Inf, subnormals
 * kept, NaN -> 0x7E00. */
ZK_HD uint16_t zk_f32_to_f16(float f)
{
#ifdef __CUDA_ARCH__
    if ((__float_as_uint(f) & ZK_F32_ABS_MASK) > ZK_F32_EXP_MASK)
        return ZK_F16_NAN_BITS;
    return __half_as_ushort(__float2half_rn(f));
#else
    uint32_t u = zk_f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & ZK_F16_SIGN_MASK);
    uint32_t a = u & ZK_F32_ABS_MASK;
    if (a > ZK_F32_EXP_MASK)
        return ZK_F16_NAN_BITS;
    if (a >= 0x477FF000u) /* >= 65520: rounds to Inf (ties to even go up) */
        return (uint16_t)(sign | ZK_F16_INF_BITS);
    if (a >= 0x38800000u) { /* normal binary16 range, >= 2^-14 */
        uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (a <= 0x33000000u) /* <= 2^-25: rounds to zero (the tie goes to even 0) */
        return sign;
    /* subnormal binary16: units of 2^-24 */
    uint32_t e = a >> 23, man = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
#endif
}

ZK_HD float zk_bf16_to_f32(uint16_t b)
{
    return zk_u2f((uint32_t)b << 16);
}

/* fp32 -> bf16 bits, round to nearest even, NaN -> 0x7FC0. */
ZK_HD uint16_t zk_f32_to_bf16(float f)
{
    uint32_t u = zk_f2u(f);
    if ((u & ZK_F32_ABS_MASK) > ZK_F32_EXP_MASK)
        return ZK_BF16_NAN_BITS;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* ---- block quantization ------------------------------------------------- */

/* Per-block parameters derived from the block's largest absolute bit
 * pattern (max over elements of bits & 0x7FFFFFFF: for non-negative floats
 * integer order is float order, and any NaN/Inf compares >= Inf). */
struct zk_bparams {
    float scale; /* written to the chunk */
    float pre;   /* exact power of two applied before inv */
    float inv;   /* qmax / (absmax * pre), 0 for an all-zero block */
    int poisoned;
};

ZK_HD struct zk_bparams zk_block_params(uint32_t maxbits, int qmax)
{
    struct zk_bparams p;
    float qm = (float)qmax;
    if (maxbits >= ZK_F32_EXP_MASK) {
        p.scale = zk_u2f(ZK_NAN_BITS);
        p.pre = 1.0f;
        p.inv = 0.0f;
        p.poisoned = 1;
        return p;
    }
    float absmax = zk_u2f(maxbits);
    p.poisoned = 0;
    p.scale = zk_fdiv(absmax, qm);
    p.pre = absmax < ZK_TINY ? ZK_PRESCALE : 1.0f;
    p.inv = maxbits == 0 ? 0.0f : zk_fdiv(qm, zk_fmul(absmax, p.pre));
    return p;
}

/* Code of one (finite) element of a block with parameters p. */
ZK_HD int zk_encode(float x, const struct zk_bparams *p, int qmax)
{
    int q = zk_rne(zk_fmul(zk_fmul(x, p->pre), p->inv));
    return q > qmax ? qmax : q < -qmax ? -qmax : q;
}

/* Decoded value of code q (given as the exact float (float)q) with block
 * scale s (NaN for a poisoned block). */
ZK_HD float zk_decode_f(float q, float s)
{
    return zk_fmul(q, s);
}
ZK_HD float zk_decode(int q, float s)
{
    return zk_decode_f((float)q, s);
}

/* The fused reductions' step: acc plus code q (the exact float (float)q)
 * times scale s, rounded once. */
ZK_HD float zk_accum_f(float acc, float q, float s)
{
    return zk_fma(q, s, acc);
}

/* Signed value of nibble j (0 = low) of byte b. */
ZK_HD int zk_nibble(uint8_t b, int j)
{
    int v = (b >> (4 * j)) & 0xF;
    return v >= 8 ? v - 16 : v;
}

/* ---- ZK_B4: the int4 reduce+requantize's biased sums (default 1 since
 * session 31; 0 restores acc = fma(q, scale, acc) for it too) ---
 *
 * Changes the sum of zk_reduce_requant_{ref,cuda} for 4-bit codes only
 * (int8, and zk_reduce_out_*, keep acc = fma(q, scale, acc)). Built with the
 * same -DZK_B4=n on both sides (tests/gpu/run_gpu.sh's ZK_VARIANTS passes a
 * variant's -D flags to the C reference too). Per element, over chunks
 * j = 0..k-1 in order, with u = q + 8 in [0, 15] the biased code, s the
 * chunk's scale for the element's block, and i = element index % 8 (the
 * nibble of the code in its 32-bit word):
 *
 *   acc = fma(u, s, acc) from +0; t = t + s from +0; sum = fma(t, -8, acc).
 *   (The GPU reads u as an fp16 subnormal u * 2^-24 or u * 2^-20 and adds
 *   fma(u * 2^-24, s * 2^24, acc): the same bits while |s| < 2^104.)
 * ZK_B4G (default 1) = 0 drops the guard, for timing what it costs: the
 *   GPU's fast form becomes the contract, acc = fma(u * 2^-24, fl(s * 2^24),
 *   acc) for even i, fma(u * 2^-20, fl(s * 2^20), acc) for odd i
 *   (fma(u, s, acc) while |s| < 2^104; a larger scale overflows s * 2^24 to
 *   Inf and poisons the block).
 * A NaN or Inf scale poisons the block in every variant, as it does today
 * (its elements come out NaN or Inf, so the requantization marks it).
 * The biased sums reach further than the unbiased ones (up to 15 k max|s|
 * plus the bias): a block can overflow, and so be poisoned, where the
 * default sum is finite, only when its scales reach ~2^124 / k.
 * The requantization of the sums is unchanged. Helpers below are the
 * arithmetic of record; the CUDA fast paths give the same bits.
 * (Session 31 also measured u put by one LOP3 into an fp32 mantissa whose
 * exponent carried the code's position, a contract of its own: no faster;
 * bench/results/kernels-2026-11-29-s31/b4.patch has it.) */
#ifndef ZK_B4
#define ZK_B4 1 /* the contract since session 31 */
#endif
#ifndef ZK_B4G
#define ZK_B4G 1 /* 1: huge scales take a second pass with the reference's steps (GPU); 0: not */
#endif
#if ZK_B4 != 0 && ZK_B4 != 1
#error "ZK_B4 must be 0 or 1"
#endif
#if ZK_B4
#define ZK_B4_FAST_MAX 0x1p104f /* the GPU's fast form: s * 2^24 finite below this */
/* One chunk's step for the biased code u of nibble i with scale s. */
ZK_HD float zk_b4_step(float acc, int u, float s, int i)
{
#if !ZK_B4G
    float e = i % 2 ? 0x1p20f : 0x1p24f; /* u / e exact: 2^-24 or 2^-20 units */
    return zk_fma(zk_fdiv((float)u, e), zk_fmul(s, e), acc);
#else
    (void)i;
    return zk_fma((float)u, s, acc);
#endif
}
/* The sum of the chunks' scales the bias is made of. */
struct zk_b4_bias {
    float t;
};
ZK_HD void zk_b4_bias_add(struct zk_b4_bias *b, float s)
{
    b->t = zk_fadd(b->t, s);
}
/* The sum of element i (mod 8) from its biased accumulator. */
ZK_HD float zk_b4_unbias(float acc, const struct zk_b4_bias *b, int i)
{
    (void)i;
    return zk_fma(b->t, -8.0f, acc);
}
#endif /* ZK_B4 */

#endif
