/*
 * zk_cuda_common.cuh — device building blocks shared by quant.cu and qgz.cu:
 * vector loads and stores of fp32/fp16/bf16 and of packed codes, the exact
 * integer<->float conversions of codes, and the team-wide quantization of one
 * block (absmax reduction, parameters, codes, scale). The arithmetic of
 * record is zk_arith.h, shared with the C reference; where this file takes a
 * faster route it gives the same bits (see code_float and encode_bits).
 *
 * The fast path for block sizes 32..2048 is the "slot" kernels of
 * zk_fast.cuh; the team kernels below serve the other block sizes (96, 160,
 * ..., 8192) and builds with -DZK_FAST=0.
 *
 * Access patterns. Kernels that quantize (quantize, qgZ reorder, fused
 * reduce+requantize) give each block of B elements a team of threads; a
 * thread owns ZK_NV 16-byte vectors of elements, by default contiguous
 * (ZK_CONTIG: 64 bytes of input per thread, 16-byte loads, the codes of a
 * thread stored with 16-byte stores). The flat decoding kernels
 * (dequantize, exact sum) give vector j of thread t of a CTA the position
 * j * 256 + t of the CTA's tile, so each warp instruction touches one
 * contiguous span; reduce_out gives a thread 16 contiguous elements (16-byte
 * code loads, one scale per chunk). Every thread has several independent
 * loads in flight before it uses any. Internal to kernels/.
 */
#ifndef ZK_CUDA_COMMON_CUH
#define ZK_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "zk_arith.h"
#include "zpp_kernels.h"
#include "zpp_kernels_cuda.h"

/* Tuning knobs (tests/gpu/run_gpu.sh builds variants with -D to compare
 * them; the defaults are the version measured in
 * bench/results/kernels-2026-11-22-h200.txt, docs/performance.md). */
#ifndef ZK_NV
#define ZK_NV 4 /* vectors per thread, quantizing kernels */
#endif
#ifndef ZK_CONTIG
#define ZK_CONTIG 1 /* quantizing kernels: a thread's vectors adjacent */
#endif
#ifndef ZK_DQ_NV
#define ZK_DQ_NV 2 /* vectors per thread, dequantize and sum */
#endif
#ifndef ZK_OUT_NV
#define ZK_OUT_NV 1 /* 16-code vectors per thread in reduce_out */
#endif
#ifndef ZK_SUM_BATCH
#define ZK_SUM_BATCH 4 /* chunks whose loads are issued together */
#endif
#ifndef ZK_FAST_NARROW
#define ZK_FAST_NARROW 1 /* paired hardware cvt to fp16/bf16, NaN fixed up */
#endif
#ifndef ZK_MINB
#define ZK_MINB 1 /* min 256-thread CTAs per SM (caps registers) */
#endif
#define ZK_VEC_BYTES 16 /* bytes of elements per vector */
#define ZK_WARP 32
#define ZK_FULL_MASK 0xFFFFFFFFu
#define ZK_CTA_THREADS 256                       /* threads per CTA, unless a team is larger */
#define ZK_MIN_EPT (4 * (ZK_NV < 4 ? ZK_NV : 4)) /* fewest elements per thread */
#define ZK_MAX_TEAM (ZK_BLOCK_MAX / ZK_MIN_EPT)  /* 512 threads */
#define ZK_MAX_WARPS (ZK_MAX_TEAM / ZK_WARP)     /* per CTA */
#define ZK_MAX_TEAMS ZK_CTA_THREADS              /* teams per CTA (team of 1) */
#define ZK_MINB_TEAM                                                                               \
    (ZK_MINB * ZK_CTA_THREADS / ZK_MAX_TEAM > 0 ? ZK_MINB * ZK_CTA_THREADS / ZK_MAX_TEAM : 1)
#define ZK_LB_TEAM __launch_bounds__(ZK_MAX_TEAM, ZK_MINB_TEAM)
#define ZK_LB_FLAT __launch_bounds__(ZK_CTA_THREADS, ZK_MINB)
#define ZK_GRID_CAP (1u << 30)         /* CTAs per launch; larger work loops */
#define ZK_SCALE_ALIGN (ZK_ALIGN / 4u) /* scales per 16-byte padding unit */

/* Exact int <-> float of small integers through the fp32 adder: for
 * 0 <= u < 2^22, the float with bits MAGIC_BITS | u is 2^23 + u exactly; for
 * |v| < 2^22, v + ROUND_MAGIC rounds v to the nearest even integer q and
 * holds q's two's complement in its low bits. Full-rate FADD/PRMT/LOP3 in
 * place of the quarter-rate I2F/F2I; same values as (float)q and rint. */
#define ZK_MAGIC_BITS 0x4B000000u  /* 2^23 */
#define ZK_ROUND_MAGIC 12582912.0f /* 1.5 * 2^23 */
#define ZK_I8_BIAS 0x80808080u     /* flips int8 codes to u = q + 128 */
#define ZK_I4_BIAS 0x88888888u     /* flips int4 codes to u = q + 8 */
#define ZK_I8_UNBIAS -8388736.0f   /* -(2^23 + 128) */
#define ZK_I4_UNBIAS -8388616.0f   /* -(2^23 + 8) */

namespace zk
{

template <int DT> struct dt_traits;
template <> struct dt_traits<ZK_FP32> {
    static constexpr int size = 4;
};
template <> struct dt_traits<ZK_FP16> {
    static constexpr int size = 2;
};
template <> struct dt_traits<ZK_BF16> {
    static constexpr int size = 2;
};

/* ---- raw loads and stores of 2, 4, 8 or 16 bytes ------------------------ */

#ifndef ZK_ST_CS
#define ZK_ST_CS 0 /* 1: output stores streaming (st.global.cs); 0: write-back */
#endif

#ifndef ZK_LD_CS
#define ZK_LD_CS 0 /* 1: every input load evict-first (ld.global.cs); 0: see zk_load_in */
#endif

/* An input load, evict-first (ld.global.cs). */
template <typename T> __device__ __forceinline__ T zk_load_cs(const T *p)
{
    return __ldcs(p);
}

/* An input load of 8 or 16 bytes per lane: default caching (unless
 * ZK_LD_CS). On an H200 evict-first loads held quantize at 92-94 % of the
 * copy and default ones ran it at 99.8-101 %; reorder+quantize, the exact
 * sum and the int8 reductions gained 1-4 points. Loads of 2 or 4 bytes per
 * lane (dequantize's int4 codes, or int8 codes into fp32) and the int4
 * vector reductions' loads stay evict-first: those ran 0.5-4 points slower
 * with default caching (bench/results/kernels-2026-11-23-s13/). */
template <typename T> __device__ __forceinline__ T zk_load_in(const T *p)
{
    static_assert(sizeof(T) >= 8, "loads narrower than 8 bytes use zk_load_cs");
#if ZK_LD_CS
    return __ldcs(p);
#else
    return *p;
#endif
}

/* Every store of a kernel's output goes through here (ZK_ST_CS). Stores
 * are write-back: a warp's store of 8 or 16 bytes per lane at a stride
 * covers part of each 32-byte sector, and the lines it leaves in L2 are
 * completed by the next store before they go to memory. Evict-first (.cs) stores
 * sent part-written sectors out: quantize at B = 32 ran 88.9 % of the copy
 * with them and 93.0 % without on an H200, 94.9 and 97.3 % on an H100;
 * no kernel was slower without (bench/results/kernels-2026-11-23-s13/). */
template <typename T> __device__ __forceinline__ void zk_store_out(T *p, T v)
{
#if ZK_ST_CS
    __stcs(p, v);
#else
    *p = v;
#endif
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* sm_90: the bulk copy engine stores `bytes` (a multiple of 16) of the
 * CTA's shared memory at src to global dst; the calling thread waits only
 * until the engine has read src (src is then free again), not until the
 * writes land. The callers order the CTA's shared-memory writes first
 * (fence.proxy.async + a barrier). */
__device__ __forceinline__ void zk_bulk_store(void *dst, const void *src, uint32_t bytes)
{
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(src);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n\t"
                 "cp.async.bulk.commit_group;\n\t"
                 "cp.async.bulk.wait_group.read 0;" ::"l"(dst),
                 "r"(s), "r"(bytes)
                 : "memory");
}
#endif

struct raw16 {
    uint32_t w[4];
};

template <int BYTES> __device__ __forceinline__ raw16 load_raw(const void *p)
{
    raw16 r = {{0, 0, 0, 0}};
    if (BYTES == 16) {
        uint4 u = zk_load_in((const uint4 *)p);
        r.w[0] = u.x;
        r.w[1] = u.y;
        r.w[2] = u.z;
        r.w[3] = u.w;
    } else if (BYTES == 8) {
        uint2 u = zk_load_in((const uint2 *)p);
        r.w[0] = u.x;
        r.w[1] = u.y;
    } else if (BYTES == 4) {
        r.w[0] = zk_load_cs((const unsigned int *)p);
    } else {
        r.w[0] = zk_load_cs((const unsigned short *)p);
    }
    return r;
}

/* load_raw's vector from shared memory (or any plain pointer). */
template <int BYTES> __device__ __forceinline__ raw16 load_raw_shared(const void *p)
{
    raw16 r = {{0, 0, 0, 0}};
    if (BYTES == 16) {
        const uint4 u = *(const uint4 *)p;
        r.w[0] = u.x, r.w[1] = u.y, r.w[2] = u.z, r.w[3] = u.w;
    } else if (BYTES == 8) {
        const uint2 u = *(const uint2 *)p;
        r.w[0] = u.x, r.w[1] = u.y;
    } else if (BYTES == 4) {
        r.w[0] = *(const uint32_t *)p;
    } else {
        r.w[0] = *(const uint16_t *)p;
    }
    return r;
}

template <int BYTES> __device__ __forceinline__ void store_raw(void *p, const raw16 &r)
{
    if (BYTES == 16)
        zk_store_out((uint4 *)p, make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]));
    else if (BYTES == 8)
        zk_store_out((uint2 *)p, make_uint2(r.w[0], r.w[1]));
    else if (BYTES == 4)
        zk_store_out((unsigned int *)p, r.w[0]);
    else
        zk_store_out((unsigned short *)p, (unsigned short)r.w[0]);
}

/* ---- element vectors ---------------------------------------------------- */

template <int DT> __device__ __forceinline__ float widen_bits(uint32_t h)
{
    return DT == ZK_FP16 ? zk_f16_to_f32((uint16_t)h) : zk_bf16_to_f32((uint16_t)h);
}

template <int DT> __device__ __forceinline__ float widen1(const void *p, uint64_t i)
{
    if (DT == ZK_FP32)
        return ((const float *)p)[i];
    return widen_bits<DT>(((const uint16_t *)p)[i]);
}

/* Raw VE elements at p, one access when in range and aligned; *slow is set
 * when the element path must be taken (finish with widen_vec). */
template <int DT, int VE>
__device__ __forceinline__ raw16 load_elems_raw(const void *p, uint64_t valid, bool *slow)
{
    constexpr int bytes = VE * dt_traits<DT>::size;
    *slow = !(valid >= (uint64_t)VE && ((uintptr_t)p & (bytes - 1)) == 0);
    if (*slow)
        return raw16{{0, 0, 0, 0}};
    return load_raw<bytes>(p);
}

/* Widens a raw vector (or, on the slow path, reads element by element). */
template <int DT, int VE>
__device__ __forceinline__ void widen_vec(const raw16 &r, bool slow, const void *p, uint64_t valid,
                                          float v[VE])
{
    if (slow) {
#pragma unroll
        for (int i = 0; i < VE; i++)
            v[i] = (uint64_t)i < valid ? widen1<DT>(p, i) : 0.0f;
        return;
    }
#pragma unroll
    for (int i = 0; i < VE; i++) {
        if (DT == ZK_FP32)
            v[i] = __uint_as_float(r.w[i]);
        else
            v[i] = widen_bits<DT>(i % 2 ? r.w[i / 2] >> 16 : r.w[i / 2] & 0xFFFFu);
    }
}

template <int DT> __device__ __forceinline__ uint32_t narrow_bits(float f)
{
    if (DT == ZK_FP32)
        return __float_as_uint(zk_canon_f32(f));
    return DT == ZK_FP16 ? zk_f32_to_f16(f) : zk_f32_to_bf16(f);
}

/* Two 16-bit results packed (a low). The fast path is the hardware's paired
 * round-to-nearest-even conversion (IEEE: subnormals kept, overflow to Inf);
 * a NaN takes the exact path, which writes the canonical NaN. */
template <int DT> __device__ __forceinline__ uint32_t narrow_pair(float a, float b)
{
#if ZK_FAST_NARROW
    if (!(a != a) && !(b != b)) {
        if (DT == ZK_BF16) {
            __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
            return *(const uint32_t *)&h;
        }
        __half2 h = __floats2half2_rn(a, b);
        return *(const uint32_t *)&h;
    }
#endif
    return narrow_bits<DT>(a) | narrow_bits<DT>(b) << 16;
}

/* Stores elements [0, min(count, N)) of v at p, narrowed to DT: 16-byte
 * stores (or one of N * size bytes) when all N are in range and aligned. */
template <int DT, int N>
__device__ __forceinline__ void store_elems(void *p, uint64_t count, const float (&v)[N])
{
    constexpr int es = dt_traits<DT>::size, bytes = N * es;
    constexpr int chunk = bytes < ZK_VEC_BYTES ? bytes : ZK_VEC_BYTES;
    if (count >= (uint64_t)N && ((uintptr_t)p & (chunk - 1)) == 0) {
        uint32_t w[bytes / 4];
#pragma unroll
        for (int i = 0; i < bytes / 4; i++)
            w[i] = DT == ZK_FP32 ? narrow_bits<DT>(v[i]) : narrow_pair<DT>(v[2 * i], v[2 * i + 1]);
#pragma unroll
        for (int c = 0; c < bytes / chunk; c++) {
            raw16 r = {{0, 0, 0, 0}};
#pragma unroll
            for (int i = 0; i < chunk / 4; i++)
                r.w[i] = w[c * chunk / 4 + i];
            store_raw<chunk>((uint8_t *)p + c * chunk, r);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < N; i++) {
        if ((uint64_t)i < count) {
            if (DT == ZK_FP32)
                ((uint32_t *)p)[i] = narrow_bits<DT>(v[i]);
            else
                ((uint16_t *)p)[i] = (uint16_t)narrow_bits<DT>(v[i]);
        }
    }
}

/* ---- codes -------------------------------------------------------------- */

/* Loads the VE codes of elements [e, e + VE) of a payload (e a multiple of
 * VE; VE * BITS / 8 bytes), biased so each code reads as unsigned q + qbias. */
template <int BITS, int VE>
__device__ __forceinline__ raw16 load_codes(const uint8_t *payload, uint64_t e)
{
    raw16 r = load_raw<VE * BITS / 8>(payload + e * BITS / 8);
#pragma unroll
    for (int i = 0; i < 4; i++)
        r.w[i] ^= BITS == 8 ? ZK_I8_BIAS : ZK_I4_BIAS;
    return r;
}

/* (float)q of code i of a biased raw vector, exactly. */
template <int BITS> __device__ __forceinline__ float code_float(const raw16 &r, int i)
{
    uint32_t bits;
    if (BITS == 8)
        bits = __byte_perm(r.w[i / 4], ZK_MAGIC_BITS, 0x7540u | (uint32_t)(i % 4));
    else
        bits = ((r.w[i / 8] >> (4 * (i % 8))) & 0xFu) | ZK_MAGIC_BITS;
    return zk_fadd(__uint_as_float(bits), BITS == 8 ? ZK_I8_UNBIAS : ZK_I4_UNBIAS);
}

/* acc[i] += code i times s, one fused multiply-add (elements at index >=
 * valid keep acc). */
template <int BITS, int VE>
__device__ __forceinline__ void accumulate(const raw16 &r, float s, uint64_t valid, float acc[VE])
{
#pragma unroll
    for (int i = 0; i < VE; i++)
        if ((uint64_t)i < valid)
            acc[i] = zk_accum_f(acc[i], code_float<BITS>(r, i), s);
}

/* Bits of the float whose low bits hold the code of xs (= x * pre, exact)
 * times inv: the fp32 adder rounds to the nearest even integer, as rint
 * does. No clamp is needed: |x| <= absmax gives |xs * inv| <= qmax(1+2^-24)^2
 * < qmax + 1/2, so the reference's clamp never changes a code. */
__device__ __forceinline__ uint32_t encode_bits(float xs, float inv)
{
    return __float_as_uint(zk_fadd(zk_fmul(xs, inv), ZK_ROUND_MAGIC));
}

/* Packs VE codes (low bits of b[i]) into VE * BITS / 8 bytes. */
template <int BITS, int VE> __device__ __forceinline__ raw16 pack_codes(const uint32_t b[VE])
{
    raw16 r = {{0, 0, 0, 0}};
    if (BITS == 8) {
#pragma unroll
        for (int i = 0; i < VE; i += 4) {
            uint32_t lo = __byte_perm(b[i], b[i + 1], 0x0040u);
            uint32_t hi = __byte_perm(b[i + 2], b[i + 3], 0x0040u);
            r.w[i / 4] = __byte_perm(lo, hi, 0x5410u);
        }
    } else {
#pragma unroll
        for (int i = 0; i < VE; i++)
            r.w[i / 8] |= (b[i] & 0xFu) << (4 * (i % 8));
    }
    return r;
}

/* acc[j][i] = sum over chunks c = 0..k-1 (in that order, from +0) of the
 * decoded element e[j] + i of chunk in + c * stride (payload bytes pay, block
 * size block); elements at index >= valid[j] stay 0. Issues the loads of
 * ZK_SUM_BATCH chunks (NV vectors each) before using any. */
template <int BITS, int VE, int NV>
__device__ __forceinline__ void sum_chunks(const uint8_t *in, uint64_t stride, int k, uint64_t pay,
                                           uint32_t block, const uint64_t (&e)[NV],
                                           const uint64_t (&valid)[NV], float (&acc)[NV][VE])
{
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int i = 0; i < VE; i++)
            acc[j][i] = 0.0f;
    uint64_t sidx[NV];
#pragma unroll
    for (int j = 0; j < NV; j++)
        sidx[j] = e[j] / block;
    for (int c0 = 0; c0 < k; c0 += ZK_SUM_BATCH) {
        raw16 r[ZK_SUM_BATCH][NV];
        float s[ZK_SUM_BATCH][NV];
#pragma unroll
        for (int b = 0; b < ZK_SUM_BATCH; b++) {
            const uint8_t *c = in + (uint64_t)(c0 + b) * stride;
#pragma unroll
            for (int j = 0; j < NV; j++) {
                if (c0 + b < k && valid[j] > 0) {
                    r[b][j] = load_codes<BITS, VE>(c, e[j]);
                    s[b][j] = __ldg((const float *)(c + pay) + sidx[j]);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < ZK_SUM_BATCH; b++)
#pragma unroll
            for (int j = 0; j < NV; j++)
                if (c0 + b < k && valid[j] > 0)
                    accumulate<BITS, VE>(r[b][j], s[b][j], valid[j], acc[j]);
    }
}

#if ZK_B4
/* ZK_B4 (zk_arith.h): sum_chunks for the int4 reduce+requantize of the
 * team kernel (block sizes the vector kernel does not serve), element by
 * element with the reference's helpers: over the biased codes (load_codes
 * flips each nibble to u = q + 8), the bias taken off at the end. Element
 * e[j] + i is nibble i % 8 of its code word (e[j] is a multiple of VE). */
template <int VE, int NV>
__device__ __forceinline__ void sum_chunks_b4(const uint8_t *in, uint64_t stride, int k,
                                              uint64_t pay, uint32_t block, const uint64_t (&e)[NV],
                                              const uint64_t (&valid)[NV], float (&acc)[NV][VE])
{
    static_assert(VE % 8 == 0, "a vector is whole code words");
    struct zk_b4_bias bias[NV];
#pragma unroll
    for (int j = 0; j < NV; j++) {
        bias[j].t = 0.0f;
#pragma unroll
        for (int i = 0; i < VE; i++)
            acc[j][i] = 0.0f;
    }
    for (int c = 0; c < k; c++) {
        const uint8_t *ch = in + (uint64_t)c * stride;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            if (valid[j] == 0)
                continue;
            const raw16 r = load_codes<4, VE>(ch, e[j]);
            const float s = __ldg((const float *)(ch + pay) + e[j] / block);
#pragma unroll
            for (int i = 0; i < VE; i++)
                if ((uint64_t)i < valid[j])
                    acc[j][i] = zk_b4_step(acc[j][i], (int)((r.w[i / 8] >> (4 * (i % 8))) & 0xFu),
                                           s, i % 8);
            zk_b4_bias_add(&bias[j], s);
        }
    }
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int i = 0; i < VE; i++)
            if ((uint64_t)i < valid[j])
                acc[j][i] = zk_b4_unbias(acc[j][i], &bias[j], i % 8);
}
#endif

/* ---- the team quantization of one block --------------------------------- */

/* Where one team writes its block. */
struct qdst {
    uint8_t *payload;   /* the chunk's payload */
    float *scales;      /* the chunk's scales */
    uint64_t jb;        /* block index inside the chunk */
    uint64_t first;     /* element index of the block inside the chunk */
    uint64_t pay_elems; /* payload bytes * 8 / bits: codes that exist or pad */
    uint64_t nb;        /* blocks in the chunk */
};

/* Shared scratch of the team reductions, double-buffered by iteration
 * parity so that the barriers of one iteration suffice. */
struct team_smem {
    uint32_t warp_max[2][ZK_MAX_WARPS]; /* teams of whole warps */
    uint32_t team_max[2][ZK_MAX_TEAMS]; /* teams of any other size */
};

/* Team-wide max of m over the `team` consecutive threads of team `tix`.
 * Must be called by every thread of the CTA (it may synchronise the CTA).
 * Three shapes:
 *  - a power of two <= 32 threads: xor shuffles inside the warp;
 *  - a multiple of 32: warp max, then the team's warps through shared memory;
 *  - anything else (B = 96, 160, ...: teams straddle warps): shared-memory
 *    atomicMax per team, two barriers. */
__device__ __forceinline__ uint32_t team_max(uint32_t m, int team, int tix, team_smem &sm,
                                             int parity)
{
    if (team <= ZK_WARP && (team & (team - 1)) == 0) {
        for (int o = team / 2; o > 0; o /= 2)
            m = max(m, __shfl_xor_sync(ZK_FULL_MASK, m, o));
        return m;
    }
    if (team % ZK_WARP == 0) {
        m = __reduce_max_sync(ZK_FULL_MASK, m);
        int warp = threadIdx.x / ZK_WARP, nw = team / ZK_WARP, first = warp / nw * nw;
        if (threadIdx.x % ZK_WARP == 0)
            sm.warp_max[parity][warp] = m;
        __syncthreads();
        m = 0;
        for (int j = 0; j < nw; j++)
            m = max(m, sm.warp_max[parity][first + j]);
        return m;
    }
    if ((int)threadIdx.x % team == 0)
        sm.team_max[parity][tix] = 0;
    __syncthreads();
    atomicMax(&sm.team_max[parity][tix], m);
    __syncthreads();
    return sm.team_max[parity][tix];
}

/* Element offset, inside its block, of vector j of lane `lane`: adjacent
 * vectors (CONTIG) or vectors strided by the team. */
template <bool CONTIG, int VE, int NV>
__device__ __forceinline__ uint64_t vec_pos(int lane, int j, int team)
{
    return (uint64_t)(CONTIG ? lane * NV + j : lane + j * team) * VE;
}

/* Quantizes one block: this thread (lane `lane` of a team of `team`) holds
 * vectors j = 0..NV-1 of VE values (vector j at vec_pos). Writes its codes
 * and (lane 0) the scale and, for the chunk's last block, the zero padding
 * after the scales. Returns 1 on lane 0 of a poisoned block. */
template <int BITS, int VE, int NV, bool CONTIG>
__device__ __forceinline__ int quant_team(const float (&v)[NV][VE], int active, int lane, int team,
                                          int tix, const qdst &d, team_smem &sm, int parity)
{
    constexpr int qmax = BITS == 8 ? 127 : 7;
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int i = 0; i < VE; i++)
            m = max(m, __float_as_uint(v[j][i]) & ZK_F32_ABS_MASK);
    m = team_max(m, team, tix, sm, parity);
    if (!active)
        return 0;
    struct zk_bparams p = zk_block_params(m, qmax);
    uint32_t b[NV][VE];
    if (p.poisoned) {
#pragma unroll
        for (int j = 0; j < NV; j++)
#pragma unroll
            for (int i = 0; i < VE; i++)
                b[j][i] = 0;
    } else if (p.pre == 1.0f) { /* x * 1 is x: skip the multiply */
#pragma unroll
        for (int j = 0; j < NV; j++)
#pragma unroll
            for (int i = 0; i < VE; i++)
                b[j][i] = encode_bits(v[j][i], p.inv);
    } else {
#pragma unroll
        for (int j = 0; j < NV; j++)
#pragma unroll
            for (int i = 0; i < VE; i++)
                b[j][i] = encode_bits(zk_fmul(v[j][i], p.pre), p.inv);
    }
    if (CONTIG) {
        /* the thread's NV * VE codes are adjacent: store them 16 bytes at a time */
        constexpr int total = NV * VE, per16 = ZK_VEC_BYTES * 8 / BITS;
        constexpr int g = total < per16 ? total : per16;
        const uint32_t *flat = &b[0][0];
        uint64_t e0 = d.first + vec_pos<true, VE, NV>(lane, 0, team);
#pragma unroll
        for (int c = 0; c < total / g; c++) {
            uint64_t e = e0 + (uint64_t)c * g;
            if (e < d.pay_elems) {
                uint32_t bb[g];
#pragma unroll
                for (int i = 0; i < g; i++)
                    bb[i] = flat[c * g + i];
                store_raw<g * BITS / 8>(d.payload + e * BITS / 8, pack_codes<BITS, g>(bb));
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < NV; j++) {
            uint64_t e = d.first + vec_pos<false, VE, NV>(lane, j, team);
            if (e < d.pay_elems)
                store_raw<VE * BITS / 8>(d.payload + e * BITS / 8, pack_codes<BITS, VE>(b[j]));
        }
    }
    if (lane == 0) {
        d.scales[d.jb] = p.scale;
        if (d.jb == d.nb - 1)
            for (uint64_t j = d.nb; j % ZK_SCALE_ALIGN != 0; j++)
                d.scales[j] = 0.0f;
    }
    return lane == 0 && p.poisoned;
}

/* Launch shape of a quantizing kernel: teams of block / ept threads. */
struct qshape {
    int team;    /* threads per block of B elements */
    int threads; /* threads per CTA */
    int tpc;     /* teams per CTA */
};
static inline qshape qshape_for(uint32_t block, int ept)
{
    qshape s;
    s.team = (int)(block / (uint32_t)ept);
    s.tpc = s.team >= ZK_CTA_THREADS ? 1 : ZK_CTA_THREADS / s.team;
    s.threads = s.tpc * s.team; /* whole teams only */
    return s;
}
static inline unsigned grid_for(uint64_t units)
{
    return (unsigned)(units < ZK_GRID_CAP ? units : ZK_GRID_CAP);
}

/* The entry points' checks (zpp_kernels_cuda.h): a dtype the kernels
 * take, a pointer aligned to ZK_ALIGN, and the launch's own error. */
static inline int dtype_ok(int dt)
{
    return dt == ZK_FP32 || dt == ZK_FP16 || dt == ZK_BF16;
}
static inline int aligned(const void *p)
{
    return ((uintptr_t)p & (ZK_ALIGN - 1)) == 0;
}
static inline int launch_status(void)
{
    return (int)cudaGetLastError();
}

} // namespace zk

#endif
