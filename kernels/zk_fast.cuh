/*
 * zk_fast.cuh — the "slot" kernels (v4): the fast path of quantize, qgZ
 * reorder+quantize, reduce+requantize and reduce->output for block sizes B
 * in {32, 64, ..., 2048} (B / 8 = T * NVL with T a power of two <= 32). Other
 * block sizes (96, 160, 8192, ...) keep the team kernels of
 * zk_cuda_common.cuh. Same bytes as the C reference (zk_arith.h), checked by
 * tests/gpu/gpu_compare.c for every block size.
 *
 * Shape. A lane owns "slots" of 8 consecutive elements (16 bytes of bf16,
 * 32 of fp32, 8 bytes of int8 codes, 4 of int4). A block of B elements is
 * B / 8 slots, owned by a team of T lanes (T = min(32, B / 8)), lane i of
 * the team holding slots i, i + T, ... (NVL of them): every warp load/store
 * instruction touches one contiguous span. A warp handles U blocks per team
 * per iteration, all U loads issued before any arithmetic.
 *
 * Per-block work done once, not per element. The absmax is a NaN-propagating
 * float max of |x| (max.NaN.f32, one instruction per element, subnormals
 * kept): NaN/Inf give bits >= 0x7F800000, i.e. a poisoned block, exactly
 * as the reference's integer max of the absolute bits. The block's two
 * divisions (scale = absmax / qmax, inv = qmax / (absmax * pre)) for all U
 * blocks are spread over the team's lanes (one __fdiv_rn per lane when
 * T >= 2U) and inv is broadcast with a shuffle: the same IEEE operations as
 * zk_block_params, computed once per block.
 */
#ifndef ZK_FAST_CUH
#define ZK_FAST_CUH

#include "zk_cuda_common.cuh"

#ifndef ZK_FQ_BYTES
#define ZK_FQ_BYTES 64 /* input bytes a lane has in flight per iteration (quantize) */
#endif
#ifndef ZK_RQ_U
#define ZK_RQ_U 1 /* blocks per team per iteration, reduce+requant */
#endif
#ifndef ZK_RO_U
#define ZK_RO_U 1 /* slots per lane per iteration, reduce->output */
#endif
#ifndef ZK_FAST
#define ZK_FAST 1 /* 0: always the team kernels (for comparison) */
#endif
#ifndef ZK_FQ_MINB
#define ZK_FQ_MINB 0 /* min CTAs per SM of fq_kernel; 0: fq_minb's choice */
#endif
#ifndef ZK_KB
#define ZK_KB 8 /* chunks whose loads are issued together (fused reductions) */
#endif
#define ZK_HUGE_SCALE 0x7B800000u /* 2^120: q * s cannot overflow below this */
#define ZK_RMAGIC4 12582920.0f    /* 1.5 * 2^23 + 8: int4 code + 8 in the low bits */

namespace zk
{

/* Launch parameters of the slot kernels for block size B: T lanes per team,
 * NVL slots per lane per block; ok = 0 when B has no such shape. */
struct fshape {
    int ok, t, nvl;
};
static inline fshape fshape_for(uint32_t block)
{
    fshape f = {0, 0, 0};
    uint32_t slots = block / 8;
    if (!ZK_FAST || block % 8 || (slots & (slots - 1)) || slots < 4 || slots > 256)
        return f;
    f.ok = 1;
    f.t = slots < 32 ? (int)slots : 32;
    f.nvl = (int)slots / f.t;
    return f;
}

__device__ __forceinline__ float max_nan_abs(float m, float x)
{
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(fabsf(x)));
    return r;
}

/* 8 raw elements of a slot (fp32: 8 words; fp16/bf16: 4 words). */
template <int DT> struct slot_raw {
    static constexpr int words = DT == ZK_FP32 ? 8 : 4;
    uint32_t w[words];
};

template <int DT> __device__ __forceinline__ void slot_load(slot_raw<DT> &s, const uint8_t *p)
{
    if (DT == ZK_FP32) {
        uint4 a = __ldcs((const uint4 *)p), b = __ldcs((const uint4 *)p + 1);
        s.w[0] = a.x, s.w[1] = a.y, s.w[2] = a.z, s.w[3] = a.w;
        s.w[4] = b.x, s.w[5] = b.y, s.w[6] = b.z, s.w[7] = b.w;
    } else {
        uint4 a = __ldcs((const uint4 *)p);
        s.w[0] = a.x, s.w[1] = a.y, s.w[2] = a.z, s.w[3] = a.w;
    }
}
/* Element path: elements at index >= valid read as 0. */
template <int DT>
__device__ __forceinline__ void slot_load_slow(slot_raw<DT> &s, const uint8_t *p, uint64_t valid)
{
#pragma unroll
    for (int i = 0; i < slot_raw<DT>::words; i++)
        s.w[i] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        if ((uint64_t)i < valid) {
            if (DT == ZK_FP32)
                s.w[i] = ((const uint32_t *)p)[i];
            else
                s.w[i / 2] |= (uint32_t)((const uint16_t *)p)[i] << (16 * (i % 2));
        }
    }
}
/* Codes of a slot: int8 two words, int4 one. */
template <int BITS> struct slot_codes {
    static constexpr int words = BITS == 8 ? 2 : 1;
    uint32_t w[words];
};
template <int BITS>
__device__ __forceinline__ void codes_load(slot_codes<BITS> &c, const uint8_t *p)
{
    if (BITS == 8) {
        uint2 a = __ldcs((const uint2 *)p);
        c.w[0] = a.x, c.w[1] = a.y;
    } else {
        c.w[0] = __ldcs((const unsigned int *)p);
    }
}
template <int BITS>
__device__ __forceinline__ void codes_store(uint8_t *p, const slot_codes<BITS> &c)
{
    if (BITS == 8)
        __stcs((uint2 *)p, make_uint2(c.w[0], c.w[1]));
    else
        __stcs((unsigned int *)p, c.w[0]);
}
/* (float)q of the 8 codes of a slot, exactly: the biased code u = q + bias
 * is put under the exponent of 2^23 by a byte permute and the bias removed
 * by one exact fp32 add. int4: two masks split the 8 nibbles into two words
 * of 4 bytes each. */
template <int BITS>
__device__ __forceinline__ void codes_float(const slot_codes<BITS> &c, float (&q)[8])
{
    if (BITS == 8) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t w = c.w[i / 4] ^ ZK_I8_BIAS;
            q[i] = __fadd_rn(__uint_as_float(__byte_perm(w, ZK_MAGIC_BITS, 0x7540u | (i % 4))),
                             ZK_I8_UNBIAS);
        }
    } else {
        uint32_t a = c.w[0] ^ ZK_I4_BIAS;
        uint32_t lo = a & 0x0F0F0F0Fu, hi = (a >> 4) & 0x0F0F0F0Fu;
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = __fadd_rn(
                __uint_as_float(__byte_perm(i % 2 ? hi : lo, ZK_MAGIC_BITS, 0x7540u | (i / 2))),
                ZK_I4_UNBIAS);
    }
}

/* Packs the codes of 8 encoded floats (encode with magic 1.5*2^23 for int8,
 * 1.5*2^23 + 8 for int4). int8: the low byte of each float is the two's
 * complement code. int4: the low bits hold u = q + 8 in [1, 15] above the
 * constant 0x4B400000; sum_k f_k * 16^k = sum_k u_k 16^k + K (mod 2^32),
 * and u ^ 8 is q's two's complement nibble. */
template <int BITS> __device__ __forceinline__ slot_codes<BITS> codes_pack(const uint32_t (&b)[8])
{
    slot_codes<BITS> c;
    if (BITS == 8) {
#pragma unroll
        for (int k = 0; k < 2; k++) {
            uint32_t lo = __byte_perm(b[4 * k], b[4 * k + 1], 0x0040u);
            uint32_t hi = __byte_perm(b[4 * k + 2], b[4 * k + 3], 0x0040u);
            c.w[k] = __byte_perm(lo, hi, 0x5410u);
        }
    } else {
        constexpr uint32_t K = 0x4B400000u + (0x4B400000u << 4) + (0x4B400000u << 8) +
                               (0x4B400000u << 12) + (0x4B400000u << 16) + (0x4B400000u << 20) +
                               (0x4B400000u << 24) + (0x4B400000u << 28);
        uint32_t r = b[0];
#pragma unroll
        for (int i = 1; i < 8; i++)
            r += b[i] << (4 * i);
        c.w[0] = (r - K) ^ ZK_I4_BIAS;
    }
    return c;
}

/* The values a team quantizes, as a source with the lane's absmax bits of
 * block u (>= 0x7F800000 when any value is NaN/Inf, else the exact largest
 * |x| bits, as the reference's integer max of the widened absolute bits)
 * and element i of slot j of block u. raw_src keeps the loaded words and
 * widens each element where it is used (no 32 live floats across the
 * block's reduction and divisions); 16-bit inputs take their absmax on the
 * packed words (two 16-bit lanes per VIMNMX: the order of the absolute
 * 16-bit patterns is the order of the values, and any pattern >= the
 * format's Inf is Inf or NaN). */
template <int DT, int U, int NVL> struct raw_src {
    slot_raw<DT> r[U][NVL];
    __device__ __forceinline__ uint32_t absbits(int u) const
    {
        if (DT == ZK_FP32) {
            float a = 0.0f;
#pragma unroll
            for (int j = 0; j < NVL; j++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    a = max_nan_abs(a, __uint_as_float(r[u][j].w[i]));
            return __float_as_uint(a);
        }
        uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < NVL; j++)
#pragma unroll
            for (int w = 0; w < 4; w++)
                m = __vmaxu2(m, r[u][j].w[w] & 0x7FFF7FFFu);
        uint32_t m16 = max(m & 0xFFFFu, m >> 16);
        if (DT == ZK_BF16)
            return m16 >= 0x7F80u ? ZK_F32_EXP_MASK : m16 << 16;
        return m16 >= ZK_F16_INF_BITS
                   ? ZK_F32_EXP_MASK
                   : __float_as_uint(__half2float(__ushort_as_half((unsigned short)m16)));
    }
    __device__ __forceinline__ float get(int u, int j, int i) const
    {
        if (DT == ZK_FP32)
            return __uint_as_float(r[u][j].w[i]);
        uint32_t w = r[u][j].w[i / 2];
        if (DT == ZK_BF16)
            return __uint_as_float(i % 2 ? w & 0xFFFF0000u : w << 16);
        return __half2float(__ushort_as_half((unsigned short)(i % 2 ? w >> 16 : w & 0xFFFFu)));
    }
};
template <int U, int NVL> struct float_src {
    float v[U][NVL][8];
    __device__ __forceinline__ uint32_t absbits(int u) const
    {
        float a = 0.0f;
#pragma unroll
        for (int j = 0; j < NVL; j++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                a = max_nan_abs(a, v[u][j][i]);
        return __float_as_uint(a);
    }
    __device__ __forceinline__ float get(int u, int j, int i) const
    {
        return v[u][j][i];
    }
};

/* Where a team's blocks go. */
struct fdst {
    uint8_t *payload;
    float *scales;
    uint64_t nb, pay_elems;
};

/* The quantization of U blocks by one team: v[u][j] is slot j (position
 * li + j * T) of block blk[u] (inr[u]: block exists). Writes codes, scales
 * and the scale padding after the chunk's last block; returns the number of
 * poisoned blocks seen by this lane (counted once, by the scale writer). */
template <int BITS, int T, int NVL, int U, class Src>
__device__ __forceinline__ int fquant(const Src &src, const uint64_t (&blk)[U],
                                      const bool (&inr)[U], int li, const fdst &d)
{
    constexpr int qmax = BITS == 8 ? 127 : 7;
    constexpr float qm = (float)qmax;
    constexpr int R = (2 * U + T - 1) / T; /* division rounds */
    const int lane = (int)(threadIdx.x % ZK_WARP), tbase = lane - li;
    uint32_t m[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        uint32_t x = src.absbits(u);
        if (T == ZK_WARP) {
            x = __reduce_max_sync(ZK_FULL_MASK, x);
        } else {
#pragma unroll
            for (int o = T / 2; o > 0; o /= 2)
                x = max(x, __shfl_xor_sync(ZK_FULL_MASK, x, o));
        }
        m[u] = x; /* a NaN has bits above Inf's: integer max is right */
    }
    /* job r*T + li: < U the scale of block job, else the inv of block job-U */
    float dres[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int job = r * T + li;
        int u = job % U;
        bool is_inv = job >= U;
        uint32_t mu = m[0];
#pragma unroll
        for (int k = 1; k < U; k++)
            mu = u == k ? m[k] : mu;
        float absmax = __uint_as_float(mu);
        float pre = absmax < ZK_TINY ? ZK_PRESCALE : 1.0f;
        dres[r] = __fdiv_rn(is_inv ? qm : absmax, is_inv ? __fmul_rn(absmax, pre) : qm);
    }
    int poisoned = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int ij = U + u, sj = u;
        float inv = __shfl_sync(ZK_FULL_MASK, dres[ij / T], tbase + ij % T);
        bool poison = m[u] >= ZK_F32_EXP_MASK;
        float absmax = __uint_as_float(m[u]);
        if (m[u] == 0)
            inv = 0.0f;
        const bool tiny = absmax < ZK_TINY;
        if (!inr[u])
            continue;
            /* one slot at a time: encode, pack, store (8 live codes) */
#pragma unroll
        for (int j = 0; j < NVL; j++) {
            uint64_t e = blk[u] * (uint64_t)(T * NVL * 8) + (uint64_t)(li + j * T) * 8;
            if (e >= d.pay_elems)
                continue;
            uint32_t b[8];
            if (tiny) {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    b[i] = __float_as_uint(
                        __fadd_rn(__fmul_rn(__fmul_rn(src.get(u, j, i), ZK_PRESCALE), inv),
                                  BITS == 8 ? ZK_ROUND_MAGIC : ZK_RMAGIC4));
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    b[i] = __float_as_uint(__fadd_rn(__fmul_rn(src.get(u, j, i), inv),
                                                     BITS == 8 ? ZK_ROUND_MAGIC : ZK_RMAGIC4));
            }
            slot_codes<BITS> c = codes_pack<BITS>(b);
            if (poison) {
#pragma unroll
                for (int w = 0; w < slot_codes<BITS>::words; w++)
                    c.w[w] = 0;
            }
            codes_store<BITS>(d.payload + e * BITS / 8, c);
        }
        /* the scale of block u sits in lane sj % T of round sj / T */
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r == sj / T && li == sj % T) {
                d.scales[blk[u]] = poison ? __uint_as_float(ZK_NAN_BITS) : dres[r];
                if (blk[u] == d.nb - 1)
                    for (uint64_t j = d.nb; j % ZK_SCALE_ALIGN != 0; j++)
                        d.scales[j] = 0.0f;
                poisoned += poison;
            }
        }
    }
    return poisoned;
}

/* Quantize (nchunks == 1) or qgZ reorder+quantize (one chunk per output
 * piece, blockIdx.y). */
struct fq_args {
    const uint8_t *x;
    uint8_t *out;
    /* quantize */
    uint64_t n_valid, pay_bytes, nb;
    /* reorder (reorder != 0) */
    int reorder, nodes, local, k0;
    uint64_t n, shard, piece, piece_bytes, nchunks;
    unsigned long long *d_poisoned;
};

/* CTAs per SM the compiler must allow: 4 (64 registers) for full-warp teams
 * with <= 2 slots per lane; measured 72 registers and 78 % of the copy for
 * bf16 B=256 without the cap, 87 % with it. */
constexpr int fq_minb(int dt, int t, int nvl)
{
    return ZK_FQ_MINB > 0 ? ZK_FQ_MINB : t == ZK_WARP && nvl <= 2 ? 4 : 1;
}

template <int DT, int BITS, int T, int NVL, int U>
__global__ void __launch_bounds__(ZK_CTA_THREADS, fq_minb(DT, T, NVL)) fq_kernel(fq_args a)
{
    constexpr int es = dt_traits<DT>::size, B = T * NVL * 8, TPW = ZK_WARP / T;
    constexpr int BPI = TPW * U; /* blocks per warp iteration */
    const int lane = (int)(threadIdx.x % ZK_WARP), li = lane % T, team = lane / T;
    const uint64_t gw = (uint64_t)blockIdx.x * (ZK_CTA_THREADS / ZK_WARP) + threadIdx.x / ZK_WARP;
    const uint64_t wstride = (uint64_t)gridDim.x * (ZK_CTA_THREADS / ZK_WARP);
    int poisoned = 0;
    for (uint64_t c = blockIdx.y; c < a.nchunks; c += gridDim.y) {
        const uint8_t *src;
        uint64_t valid;
        fdst d;
        if (a.reorder) {
            uint64_t w = (uint64_t)a.nodes * (uint64_t)a.local;
            uint64_t p = c % w, stage = (uint64_t)a.k0 + c / w;
            uint64_t s = (p % (uint64_t)a.nodes) * (uint64_t)a.local + p / (uint64_t)a.nodes;
            uint64_t start = s * a.shard;
            valid = 0;
            if (start < a.n) {
                uint64_t in_slice = min(a.n - start, a.shard), off = stage * a.piece;
                valid = off >= in_slice ? 0 : min(in_slice - off, a.piece);
            }
            src = a.x + (valid ? (start + stage * a.piece) * es : 0);
            d.payload = a.out + c * a.piece_bytes;
            d.scales = (float *)(d.payload + a.piece * BITS / 8);
            d.nb = a.piece / B;
            d.pay_elems = a.piece;
        } else {
            src = a.x;
            valid = a.n_valid;
            d.payload = a.out;
            d.scales = (float *)(a.out + a.pay_bytes);
            d.nb = a.nb;
            d.pay_elems = a.pay_bytes * 8 / BITS;
        }
        const bool aligned = ((uintptr_t)src & 15) == 0;
        for (uint64_t it = gw; it * BPI < d.nb; it += wstride) {
            uint64_t blk[U];
            bool inr[U], fast[U];
            raw_src<DT, U, NVL> rs;
            auto &r = rs.r;
#pragma unroll
            for (int u = 0; u < U; u++) {
                blk[u] = it * BPI + (uint64_t)(u * TPW + team);
                inr[u] = blk[u] < d.nb;
                fast[u] = inr[u] && aligned && (blk[u] + 1) * B <= valid;
#pragma unroll
                for (int j = 0; j < NVL; j++) {
                    if (fast[u])
                        slot_load<DT>(r[u][j],
                                      src + (blk[u] * B + (uint64_t)(li + j * T) * 8) * es);
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (!fast[u]) {
#pragma unroll
                    for (int j = 0; j < NVL; j++) {
                        uint64_t e = blk[u] * B + (uint64_t)(li + j * T) * 8;
                        uint64_t vv = inr[u] && e < valid ? valid - e : 0;
                        slot_load_slow<DT>(r[u][j], src + (vv ? e * es : 0), vv);
                    }
                }
            }
            poisoned += fquant<BITS, T, NVL, U>(rs, blk, inr, li, d);
        }
    }
    if (poisoned && a.d_poisoned)
        atomicAdd(a.d_poisoned, (unsigned long long)poisoned);
}

template <int DT, int BITS, int T, int NVL>
void fq_launch(fq_args a, uint64_t nb_per_chunk, cudaStream_t stream)
{
    constexpr int U0 = ZK_FQ_BYTES / (8 * dt_traits<DT>::size * NVL);
    constexpr int U = U0 < 1 ? 1 : U0;
    constexpr int BPI = (ZK_WARP / T) * U;
    uint64_t iters = (nb_per_chunk + BPI - 1) / BPI;
    uint64_t ctas = (iters + ZK_CTA_THREADS / ZK_WARP - 1) / (ZK_CTA_THREADS / ZK_WARP);
    dim3 grid(grid_for(ctas), (unsigned)(a.nchunks < 65535 ? a.nchunks : 65535));
    fq_kernel<DT, BITS, T, NVL, U><<<grid, ZK_CTA_THREADS, 0, stream>>>(a);
}

/* Dispatch on the block shape; returns 0 when the slot kernels do not apply. */
template <int DT, int BITS>
int fq_dispatch(fq_args a, uint32_t block, uint64_t nb_per_chunk, cudaStream_t stream)
{
    fshape f = fshape_for(block);
    if (!f.ok)
        return 0;
#define ZK_FQ(T, NVL)                                                                              \
    if (f.t == T && f.nvl == NVL) {                                                                \
        fq_launch<DT, BITS, T, NVL>(a, nb_per_chunk, stream);                                      \
        return 1;                                                                                  \
    }
    ZK_FQ(4, 1)
    ZK_FQ(8, 1)
    ZK_FQ(16, 1)
    ZK_FQ(32, 1)
    ZK_FQ(32, 2)
    ZK_FQ(32, 4)
    ZK_FQ(32, 8)
#undef ZK_FQ
    return 0;
}

/* ---- fused reductions -------------------------------------------------- */

/* acc[i] = sum over chunks c = 0..k-1 (in order, from +0) of decoded code i
 * of the slot at element e (codes at in + c*stride + e*BITS/8, scale index
 * sb). Issues ZK_KB chunks' loads before any use. *smax gets the max of
 * the absolute scale bits. */
template <int BITS, int U>
__device__ __forceinline__ void fsum(const uint8_t *in, uint64_t stride, int k, uint64_t pay,
                                     const uint64_t (&e)[U], const uint64_t (&sb)[U],
                                     const bool (&ld)[U], float (&acc)[U][8], uint32_t (&smax)[U])
{
    const uint8_t *pc[U];
    const float *ps[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        smax[u] = 0;
        pc[u] = in + e[u] * BITS / 8;
        ps[u] = (const float *)(in + pay) + sb[u];
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[u][i] = 0.0f;
    }
    bool all_ld = true;
#pragma unroll
    for (int u = 0; u < U; u++)
        all_ld = all_ld && ld[u];
    for (int c0 = 0; c0 < k; c0 += ZK_KB) {
        slot_codes<BITS> cd[ZK_KB][U];
        float s[ZK_KB][U];
        if (all_ld && c0 + ZK_KB <= k) {
            /* a whole batch: no per-chunk tests or branches */
#pragma unroll
            for (int b = 0; b < ZK_KB; b++) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    codes_load<BITS>(cd[b][u], pc[u]);
                    s[b][u] = __ldg(ps[u]);
                    pc[u] += stride;
                    ps[u] = (const float *)((const uint8_t *)ps[u] + stride);
                }
            }
#pragma unroll
            for (int b = 0; b < ZK_KB; b++) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    float q[8];
                    codes_float<BITS>(cd[b][u], q);
                    smax[u] = max(smax[u], __float_as_uint(s[b][u]) & ZK_F32_ABS_MASK);
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[u][i] = __fadd_rn(acc[u][i], __fmul_rn(q[i], s[b][u]));
                }
            }
            continue;
        }
        const bool whole = c0 + ZK_KB <= k;
#pragma unroll
        for (int b = 0; b < ZK_KB; b++) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                if ((whole || c0 + b < k) && ld[u]) {
                    codes_load<BITS>(cd[b][u], pc[u]);
                    s[b][u] = __ldg(ps[u]);
                }
                pc[u] += stride;
                ps[u] = (const float *)((const uint8_t *)ps[u] + stride);
            }
        }
#pragma unroll
        for (int b = 0; b < ZK_KB; b++) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                if ((whole || c0 + b < k) && ld[u]) {
                    float q[8];
                    codes_float<BITS>(cd[b][u], q);
                    smax[u] = max(smax[u], __float_as_uint(s[b][u]) & ZK_F32_ABS_MASK);
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[u][i] = __fadd_rn(acc[u][i], __fmul_rn(q[i], s[b][u]));
                }
            }
        }
    }
}

template <int BITS, int T, int NVL, int U>
__global__ void __launch_bounds__(ZK_CTA_THREADS)
    frq_kernel(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, uint64_t pay_bytes,
               uint64_t nb, uint8_t *out, unsigned long long *d_poisoned)
{
    constexpr int B = T * NVL * 8, TPW = ZK_WARP / T, BPI = TPW * U;
    const int lane = (int)(threadIdx.x % ZK_WARP), li = lane % T, team = lane / T;
    const uint64_t gw = (uint64_t)blockIdx.x * (ZK_CTA_THREADS / ZK_WARP) + threadIdx.x / ZK_WARP;
    const uint64_t wstride = (uint64_t)gridDim.x * (ZK_CTA_THREADS / ZK_WARP);
    fdst d;
    d.payload = out;
    d.scales = (float *)(out + pay_bytes);
    d.nb = nb;
    d.pay_elems = pay_bytes * 8 / BITS;
    int poisoned = 0;
    for (uint64_t it = gw; it * BPI < nb; it += wstride) {
        uint64_t blk[U];
        bool inr[U];
        float_src<U, NVL> fs;
        auto &v = fs.v;
#pragma unroll
        for (int u = 0; u < U; u++) {
            blk[u] = it * BPI + (uint64_t)(u * TPW + team);
            inr[u] = blk[u] < nb;
        }
#pragma unroll
        for (int j = 0; j < NVL; j++) {
            uint64_t e[U], sb[U];
            bool ld[U];
            float acc[U][8];
            uint32_t smax[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                e[u] = blk[u] * B + (uint64_t)(li + j * T) * 8;
                sb[u] = blk[u];
                ld[u] = inr[u] && e[u] < d.pay_elems;
            }
            fsum<BITS, U>(in, in_stride, k, pay_bytes, e, sb, ld, acc, smax);
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    v[u][j][i] = ld[u] && e[u] + i < piece ? acc[u][i] : 0.0f;
        }
        poisoned += fquant<BITS, T, NVL, U>(fs, blk, inr, li, d);
    }
    if (poisoned && d_poisoned)
        atomicAdd(d_poisoned, (unsigned long long)poisoned);
}

template <int BITS>
int frq_dispatch(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, uint32_t block,
                 uint64_t pay, uint64_t nb, uint8_t *out, unsigned long long *d_poisoned,
                 cudaStream_t stream)
{
    fshape f = fshape_for(block);
    if (!f.ok)
        return 0;
#define ZK_FR(T, NVL, U)                                                                           \
    if (f.t == T && f.nvl == NVL) {                                                                \
        constexpr int BPI = (ZK_WARP / T) * U;                                                     \
        uint64_t iters = (nb + BPI - 1) / BPI;                                                     \
        uint64_t ctas = (iters + ZK_CTA_THREADS / ZK_WARP - 1) / (ZK_CTA_THREADS / ZK_WARP);       \
        frq_kernel<BITS, T, NVL, U><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(                \
            in, in_stride, k, piece, pay, nb, out, d_poisoned);                                    \
        return 1;                                                                                  \
    }
    ZK_FR(4, 1, ZK_RQ_U)
    ZK_FR(8, 1, ZK_RQ_U)
    ZK_FR(16, 1, ZK_RQ_U)
    ZK_FR(32, 1, ZK_RQ_U)
    ZK_FR(32, 2, 1)
    ZK_FR(32, 4, 1)
    ZK_FR(32, 8, 1)
#undef ZK_FR
    return 0;
}

/* Narrows the 8 values of a slot to ODT and stores them at p (16-byte
 * aligned, all 8 in range). No NaN among v (the caller checked). */
template <int ODT> __device__ __forceinline__ void slot_store_fast(uint8_t *p, const float (&v)[8])
{
    if (ODT == ZK_FP32) {
        __stcs((uint4 *)p, make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                      __float_as_uint(v[2]), __float_as_uint(v[3])));
        __stcs((uint4 *)p + 1, make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]),
                                          __float_as_uint(v[6]), __float_as_uint(v[7])));
    } else {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (ODT == ZK_BF16) {
                __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
                w[i] = *(const uint32_t *)&h;
            } else {
                __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
                w[i] = *(const uint32_t *)&h;
            }
        }
        __stcs((uint4 *)p, make_uint4(w[0], w[1], w[2], w[3]));
    }
}

/* VE values (16 bytes of DT) stored at p, 16-byte aligned, no NaN among v. */
template <int DT, int VE>
__device__ __forceinline__ void store_vec_nonan(uint8_t *p, const float (&v)[VE])
{
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (DT == ZK_FP32) {
            w[i] = __float_as_uint(v[i]);
        } else if (DT == ZK_BF16) {
            __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
            w[i] = *(const uint32_t *)&h;
        } else {
            __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
            w[i] = *(const uint32_t *)&h;
        }
    }
    __stcs((uint4 *)p, make_uint4(w[0], w[1], w[2], w[3]));
}

/* reduce -> output: lane-slots of 8 elements, slot g = ((cta*8 + warp)*U
 * + u)*32 + lane: every warp instruction touches one contiguous span. */
template <int ODT, int BITS, int U>
__global__ void __launch_bounds__(ZK_CTA_THREADS)
    fro_kernel(const uint8_t *in, uint64_t in_stride, int k, uint64_t pay_bytes, int lgb,
               uint64_t count, int mean, float divisor, void *y)
{
    constexpr int oes = dt_traits<ODT>::size;
    const int lane = (int)(threadIdx.x % ZK_WARP);
    const uint64_t gw = (uint64_t)blockIdx.x * (ZK_CTA_THREADS / ZK_WARP) + threadIdx.x / ZK_WARP;
    const uint64_t wstride = (uint64_t)gridDim.x * (ZK_CTA_THREADS / ZK_WARP);
    const uint64_t nslots = (count + 7) / 8;
    const bool yal = ((uintptr_t)y & 15) == 0;
    const bool dok = !mean || ((__float_as_uint(divisor) & ZK_F32_ABS_MASK) < ZK_F32_EXP_MASK &&
                               (__float_as_uint(divisor) & ZK_F32_ABS_MASK) != 0);
    for (uint64_t it = gw; it * (uint64_t)(U * ZK_WARP) < nslots; it += wstride) {
        uint64_t e[U], sb[U];
        bool ld[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            uint64_t g = (it * U + (uint64_t)u) * ZK_WARP + (uint64_t)lane;
            e[u] = g * 8;
            sb[u] = e[u] >> lgb;
            ld[u] = g < nslots;
        }
        float acc[U][8];
        uint32_t smax[U];
        fsum<BITS, U>(in, in_stride, k, pay_bytes, e, sb, ld, acc, smax);
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (!ld[u])
                continue;
            if (mean) {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    acc[u][i] = __fdiv_rn(acc[u][i], divisor);
            }
            uint8_t *p = (uint8_t *)y + e[u] * oes;
            if (yal && dok && smax[u] < ZK_HUGE_SCALE && e[u] + 8 <= count) {
                slot_store_fast<ODT>(p, acc[u]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    if (e[u] + i < count) {
                        if (ODT == ZK_FP32)
                            ((uint32_t *)p)[i] = narrow_bits<ODT>(acc[u][i]);
                        else
                            ((uint16_t *)p)[i] = (uint16_t)narrow_bits<ODT>(acc[u][i]);
                    }
                }
            }
        }
    }
}

template <int ODT, int BITS>
int fro_dispatch(const uint8_t *in, uint64_t in_stride, int k, uint64_t pay, uint32_t block,
                 uint64_t count, int mean, float divisor, void *y, cudaStream_t stream)
{
    if (!ZK_FAST || (block & (block - 1)))
        return 0;
    int lgb = 0;
    while ((1u << lgb) < block)
        lgb++;
    uint64_t nslots = (count + 7) / 8;
    uint64_t iters = (nslots + ZK_RO_U * ZK_WARP - 1) / (ZK_RO_U * ZK_WARP);
    uint64_t ctas = (iters + ZK_CTA_THREADS / ZK_WARP - 1) / (ZK_CTA_THREADS / ZK_WARP);
    fro_kernel<ODT, BITS, ZK_RO_U><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
        in, in_stride, k, pay, lgb, count, mean, divisor, y);
    return 1;
}

} // namespace zk

#endif
