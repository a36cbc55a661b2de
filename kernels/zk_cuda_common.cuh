/*
 * zk_cuda_common.cuh — device building blocks shared by quant.cu and qgz.cu:
 * 16-element vector loads and stores of fp32/fp16/bf16 (16-byte accesses
 * where aligned and in range, element accesses elsewhere), code packing, and
 * the team-wide quantization of one block (absmax reduction, parameters,
 * codes, scale). The per-element arithmetic comes from zk_arith.h, which the
 * C reference shares, so both paths give the same bits. Internal to
 * kernels/.
 */
#ifndef ZK_CUDA_COMMON_CUH
#define ZK_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "zk_arith.h"
#include "zpp_kernels.h"
#include "zpp_kernels_cuda.h"

#define ZK_VEC 16                   /* elements per thread (ZK_CUDA_VEC) */
#define ZK_WARP 32
#define ZK_FULL_MASK 0xFFFFFFFFu
#define ZK_CTA_THREADS 256          /* threads per CTA, unless a team is larger */
#define ZK_MAX_TEAM (ZK_BLOCK_MAX / ZK_VEC)        /* 512 threads */
#define ZK_MAX_WARPS (ZK_MAX_TEAM / ZK_WARP)       /* per CTA */
#define ZK_GRID_CAP (1u << 30)      /* CTAs per launch; larger work loops */
#define ZK_SCALE_ALIGN (ZK_ALIGN / 4u) /* scales per 16-byte padding unit */

namespace zk {

/* ---- element vectors --------------------------------------------------- */

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

template <int DT> __device__ __forceinline__ float widen1(const void *p, uint64_t i)
{
    if (DT == ZK_FP32)
        return __ldcs((const float *)p + i);
    uint16_t h = __ldcs((const unsigned short *)p + i);
    return DT == ZK_FP16 ? zk_f16_to_f32(h) : zk_bf16_to_f32(h);
}

/* Loads elements [0, 16) at p: those at index >= valid read as 0. */
template <int DT>
__device__ __forceinline__ void load16(const void *p, uint64_t valid, float v[ZK_VEC])
{
    constexpr int es = dt_traits<DT>::size;
    if (valid >= ZK_VEC && ((uintptr_t)p & (ZK_ALIGN - 1)) == 0) {
        constexpr int nv = ZK_VEC * es / 16;
        uint4 r[nv];
#pragma unroll
        for (int i = 0; i < nv; i++)
            r[i] = __ldcs((const uint4 *)p + i);
        if (DT == ZK_FP32) {
#pragma unroll
            for (int i = 0; i < nv; i++) {
                v[4 * i + 0] = __uint_as_float(r[i].x);
                v[4 * i + 1] = __uint_as_float(r[i].y);
                v[4 * i + 2] = __uint_as_float(r[i].z);
                v[4 * i + 3] = __uint_as_float(r[i].w);
            }
        } else {
#pragma unroll
            for (int i = 0; i < nv; i++) {
                uint32_t w[4] = {r[i].x, r[i].y, r[i].z, r[i].w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    uint16_t lo = (uint16_t)(w[j] & 0xFFFFu), hi = (uint16_t)(w[j] >> 16);
                    v[8 * i + 2 * j] = DT == ZK_FP16 ? zk_f16_to_f32(lo) : zk_bf16_to_f32(lo);
                    v[8 * i + 2 * j + 1] = DT == ZK_FP16 ? zk_f16_to_f32(hi) : zk_bf16_to_f32(hi);
                }
            }
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < ZK_VEC; i++)
        v[i] = (uint64_t)i < valid ? widen1<DT>(p, i) : 0.0f;
}

template <int DT> __device__ __forceinline__ uint16_t narrow16(float f)
{
    return DT == ZK_FP16 ? zk_f32_to_f16(f) : zk_f32_to_bf16(f);
}

/* Stores elements [0, min(count, 16)) of v at p, narrowed to DT. */
template <int DT>
__device__ __forceinline__ void store16(void *p, uint64_t count, const float v[ZK_VEC])
{
    constexpr int es = dt_traits<DT>::size;
    if (count >= ZK_VEC && ((uintptr_t)p & (ZK_ALIGN - 1)) == 0) {
        constexpr int nv = ZK_VEC * es / 16;
        uint4 r[nv];
        if (DT == ZK_FP32) {
#pragma unroll
            for (int i = 0; i < nv; i++) {
                r[i].x = __float_as_uint(zk_canon_f32(v[4 * i + 0]));
                r[i].y = __float_as_uint(zk_canon_f32(v[4 * i + 1]));
                r[i].z = __float_as_uint(zk_canon_f32(v[4 * i + 2]));
                r[i].w = __float_as_uint(zk_canon_f32(v[4 * i + 3]));
            }
        } else {
#pragma unroll
            for (int i = 0; i < nv; i++) {
                uint32_t w[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    w[j] = (uint32_t)narrow16<DT>(v[8 * i + 2 * j]) |
                           (uint32_t)narrow16<DT>(v[8 * i + 2 * j + 1]) << 16;
                r[i] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
#pragma unroll
        for (int i = 0; i < nv; i++)
            __stcs((uint4 *)p + i, r[i]);
        return;
    }
#pragma unroll
    for (int i = 0; i < ZK_VEC; i++) {
        if ((uint64_t)i < count) {
            if (DT == ZK_FP32)
                ((float *)p)[i] = zk_canon_f32(v[i]);
            else
                ((uint16_t *)p)[i] = narrow16<DT>(v[i]);
        }
    }
}

/* ---- codes -------------------------------------------------------------- */

/* Bytes of payload holding 16 codes. */
template <int BITS> struct code_traits {
    static constexpr int bytes = ZK_VEC * BITS / 8;
};

/* 16 codes as loaded: 16 bytes for int8, 8 bytes for int4 (w[2..3] unused). */
struct raw16 {
    uint32_t w[4];
};

/* Loads the 16 codes that start at payload byte offset `off` (aligned to
 * their size: element offsets are multiples of 16). */
template <int BITS>
__device__ __forceinline__ raw16 load_codes(const uint8_t *payload, uint64_t off)
{
    raw16 r;
    if (BITS == 8) {
        uint4 u = __ldcs((const uint4 *)(payload + off));
        r.w[0] = u.x;
        r.w[1] = u.y;
        r.w[2] = u.z;
        r.w[3] = u.w;
    } else {
        uint2 u = __ldcs((const uint2 *)(payload + off));
        r.w[0] = u.x;
        r.w[1] = u.y;
        r.w[2] = 0;
        r.w[3] = 0;
    }
    return r;
}

/* Code i of a raw vector, sign-extended. */
template <int BITS> __device__ __forceinline__ int code_at(const raw16 &r, int i)
{
    if (BITS == 8)
        return ((int)(r.w[i / 4] << (24 - 8 * (i % 4)))) >> 24;
    return ((int)(r.w[i / 8] << (28 - 4 * (i % 8)))) >> 28;
}

/* v[i] = decoded code i with block scale s; elements at index >= valid
 * become 0 (their codes are padding, and a poisoned scale must not leak
 * into them). */
template <int BITS>
__device__ __forceinline__ void decode16(const raw16 &r, float s, uint64_t valid, float v[ZK_VEC])
{
#pragma unroll
    for (int i = 0; i < ZK_VEC; i++)
        v[i] = (uint64_t)i < valid ? zk_decode(code_at<BITS>(r, i), s) : 0.0f;
}

/* acc[i] += decoded code i (elements at index >= valid add +0). */
template <int BITS>
__device__ __forceinline__ void accumulate16(const raw16 &r, float s, uint64_t valid,
                                             float acc[ZK_VEC])
{
#pragma unroll
    for (int i = 0; i < ZK_VEC; i++)
        if ((uint64_t)i < valid)
            acc[i] = zk_fadd(acc[i], zk_decode(code_at<BITS>(r, i), s));
}

/* acc = sum over j = 0..k-1 (in that order, from +0) of the decoded 16
 * elements at element offset e0 of the chunks in + j * stride (payload
 * bytes pay, block size block). Issues up to ZK_SUM_BATCH chunks' loads
 * before using them. */
#define ZK_SUM_BATCH 4
template <int BITS>
__device__ __forceinline__ void sum_chunks16(const uint8_t *in, uint64_t stride, int k,
                                             uint64_t pay, uint32_t block, uint64_t e0,
                                             uint64_t valid, float acc[ZK_VEC])
{
#pragma unroll
    for (int i = 0; i < ZK_VEC; i++)
        acc[i] = 0.0f;
    uint64_t boff = pay + (e0 / block) * sizeof(float), coff = e0 * BITS / 8;
    for (int j0 = 0; j0 < k; j0 += ZK_SUM_BATCH) {
        raw16 r[ZK_SUM_BATCH];
        float s[ZK_SUM_BATCH];
#pragma unroll
        for (int b = 0; b < ZK_SUM_BATCH; b++) {
            if (j0 + b < k) {
                const uint8_t *c = in + (uint64_t)(j0 + b) * stride;
                r[b] = load_codes<BITS>(c, coff);
                s[b] = __ldg((const float *)(c + boff));
            }
        }
#pragma unroll
        for (int b = 0; b < ZK_SUM_BATCH; b++)
            if (j0 + b < k)
                accumulate16<BITS>(r[b], s[b], valid, acc);
    }
}

/* Packs and stores 16 codes at payload byte offset off. */
template <int BITS>
__device__ __forceinline__ void store_codes(uint8_t *payload, uint64_t off, const int q[ZK_VEC])
{
    if (BITS == 8) {
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int i = 0; i < ZK_VEC; i++)
            w[i / 4] |= ((uint32_t)q[i] & 0xFFu) << (8 * (i % 4));
        __stcs((uint4 *)(payload + off), make_uint4(w[0], w[1], w[2], w[3]));
    } else {
        uint32_t w[2] = {0, 0};
#pragma unroll
        for (int i = 0; i < ZK_VEC; i++)
            w[i / 8] |= ((uint32_t)q[i] & 0xFu) << (4 * (i % 8));
        __stcs((uint2 *)(payload + off), make_uint2(w[0], w[1]));
    }
}

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
 * parity so that one barrier per iteration suffices. */
#define ZK_MAX_TEAMS (ZK_CTA_THREADS / 2) /* teams per CTA at most (B = 32) */
struct team_smem {
    uint32_t warp_max[2][ZK_MAX_WARPS]; /* teams of whole warps */
    uint32_t team_max[2][ZK_MAX_TEAMS]; /* teams of any other size */
};

/* Team-wide max of m over the `team` consecutive threads of team `tix`.
 * Must be called by every thread of the CTA (it may synchronise the CTA);
 * parity alternates between calls. Three shapes:
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

/* Quantizes the block whose 16 values of this thread are v (lane `lane` of
 * the team), writes codes and (lane 0) the scale and, for the chunk's last
 * block, the zero padding after the scales. Returns 1 on lane 0 of a
 * poisoned block. */
template <int BITS>
__device__ __forceinline__ int quant_team(const float v[ZK_VEC], int active, int lane, int team,
                                          int tix, const qdst &d, team_smem &sm, int parity)
{
    constexpr int qmax = BITS == 8 ? 127 : 7;
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < ZK_VEC; i++)
        m = max(m, __float_as_uint(v[i]) & ZK_F32_ABS_MASK);
    m = team_max(m, team, tix, sm, parity);
    if (!active)
        return 0;
    struct zk_bparams p = zk_block_params(m, qmax);
    uint64_t e0 = d.first + (uint64_t)lane * ZK_VEC;
    if (e0 < d.pay_elems) {
        int q[ZK_VEC];
#pragma unroll
        for (int i = 0; i < ZK_VEC; i++)
            q[i] = p.poisoned ? 0 : zk_encode(v[i], &p, qmax);
        store_codes<BITS>(d.payload, e0 * BITS / 8, q);
    }
    if (lane == 0) {
        d.scales[d.jb] = p.scale;
        if (d.jb == d.nb - 1)
            for (uint64_t j = d.nb; j % ZK_SCALE_ALIGN != 0; j++)
                d.scales[j] = 0.0f;
    }
    return lane == 0 && p.poisoned;
}

/* Launch shape of a quantizing kernel for block size B. */
struct qshape {
    int team;    /* threads per block of B elements */
    int threads; /* threads per CTA */
    int tpc;     /* teams per CTA */
};
static inline qshape qshape_for(uint32_t block)
{
    qshape s;
    s.team = (int)(block / ZK_VEC);
    s.tpc = s.team >= ZK_CTA_THREADS ? 1 : ZK_CTA_THREADS / s.team;
    s.threads = s.tpc * s.team; /* whole teams only */
    return s;
}
static inline unsigned grid_for(uint64_t units)
{
    return (unsigned)(units < ZK_GRID_CAP ? units : ZK_GRID_CAP);
}

} // namespace zk

#endif
