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

#endif
