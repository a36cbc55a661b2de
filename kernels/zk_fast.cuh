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
 *
 * Vector kernels (ZK_RQ4, ZK_RO4, ZK_RQ8, ZK_RO8 > 1). The int4 slot
 * reductions are bound by instruction issue, not memory: per code and chunk
 * PRMT, FADD (unbias) and the sum's FFMA (one FMUL and one FADD before
 * 2026-11-23) plus the unpacking, and per 4 bytes of codes a lane the
 * addressing, loads and the per-block work. frv/frov give a
 * lane S adjacent slots per chunk (one load of S * bits bytes), decode int4
 * codes two per HADD2 (codes_float4h) and spread the per-block shuffles,
 * divisions and stores over S times the codes: the same IEEE operations in
 * the same order, so the same bytes. Defaults from one H200 run of the
 * variants (bench/results/kernels-2026-11-22-h200-vec.txt): int4
 * reduce+requant 40 -> 63 % of the copy, int4 reduce->bf16 61 -> 81 %, int8
 * reduce+requant 69 -> 74 %; int8 reduce->output keeps the slot kernel
 * (ZK_RO8 = 2 measured slower into fp32). With the sum as one FFMA per
 * code and 4 CTAs per SM for int8 (bench/results/kernels-2026-11-23-h200-fma/):
 * int8 reduce+requant 91 %, int4 70 %, int4 reduce->bf16 86 %.
 *
 * L2 prefetch (ZK_VPF). The int4 vector kernels issue a batch of ZK_VKB
 * chunks' loads, then its arithmetic; the next batch's lines are
 * prefetched into L2 as the batch's loads go out, so its loads wait for L2,
 * not HBM, and hold no registers meanwhile. On an H100 int4
 * reduce+requant went 86 -> 93 % of the copy and int4 reduce->bf16 94 ->
 * 95 %; on an H200 1-2 % faster, int8 reduce+requant 5 % slower (so int4
 * only); a looping grid with the next iteration prefetched was slower on
 * both (bench/results/kernels-2026-11-23-s12/).
 */
#ifndef ZK_FAST_CUH
#define ZK_FAST_CUH

#include "zk_cuda_common.cuh"

#ifndef ZK_RQ_U
#define ZK_RQ_U 1 /* blocks per team per iteration, reduce+requant */
#endif
#ifndef ZK_RO_U
#define ZK_RO_U 1 /* slots per lane per iteration, reduce->output */
#endif
#ifndef ZK_FAST
#define ZK_FAST 1 /* 0: always the team kernels (for comparison) */
#endif
#ifndef ZK_KB
#define ZK_KB 8 /* chunks whose loads are issued together (fused reductions) */
#endif
/* Fused reductions with wider lanes (the "vector" kernels, frv/frov below):
 * S slots of 8 codes per lane and chunk, one load of S * bits bytes. 1: the
 * slot kernels (one slot, 4 bytes of int4 codes per lane and chunk). */
#ifndef ZK_RQ4
#define ZK_RQ4 4 /* int4 reduce+requant: 1, 2, 4 or 8 slots per lane (8: 32 bytes per chunk,
                   * with ZK_VMINB=2 for its registers) */
#endif
#ifndef ZK_RO4
#define ZK_RO4 4 /* int4 reduce->output (16-bit outputs only): 1, 2 or 4 */
#endif
#ifndef ZK_RQ8
#define ZK_RQ8 2 /* int8 reduce+requant: 1 or 2 */
#endif
#ifndef ZK_RO8
#define ZK_RO8 1 /* int8 reduce->output: 1 or 2 */
#endif
#ifndef ZK_VKB
#define ZK_VKB 4 /* chunks whose loads are issued together (vector kernels) */
#endif
#ifndef ZK_VLEAN
#define ZK_VLEAN 1 /* int4 vector kernels: the next batch's prefetch unrolled when whole (with
                    * codes_pack's 8-instruction int4 form: int4 reduce+requant 72.1 -> 73.0 % of
                    * the copy on an H200, 93.4 -> 94.0 % on an H100, kernels-2026-11-23-s18/) */
#endif
#ifndef ZK_VK8
#define ZK_VK8 1 /* int4 reduce+requant: a build of the vector kernel for k = 8 chunks */
#endif
#ifndef ZK_VPF
#define ZK_VPF 1 /* int4 vector kernels: batches whose lines are prefetched into L2 ahead (0: off) */
#endif
#ifndef ZK_ROSTAGE
#define ZK_ROSTAGE 1 /* reduce->output, vector kernel: 1 stores a warp's outputs through shared
                      * memory, so that each store instruction writes one contiguous span */
#endif
#ifndef ZK_RO4F
#define ZK_RO4F 1 /* 1: int4 reduce->fp32 through the vector kernel too (ZK_RO4 slots); with
                   * ZK_ROSTAGE 92 -> 97 % of the copy on an H100 (kernels-2026-11-23-s16/),
                   * without it 59 % */
#endif
#ifndef ZK_ROMINB
#define ZK_ROMINB 4 /* min CTAs per SM of the slot kernel reduce->output (0: no bound; 4: 64
                     * registers, int8 -> bf16 87 -> 96 % of the copy on an H200,
                     * kernels-2026-11-23-s16/; 5 spills) */
#endif
#ifndef ZK_VMINB
#define ZK_VMINB 3 /* min CTAs per SM of the vector kernels (NV = 1; 3: 80 registers) */
#endif
#ifndef ZK_VMINB8
#define ZK_VMINB8 4 /* the same for int8 reduce+requant (4: 64 registers, no spill) */
#endif
#ifndef ZK_FQX_BYTES
#define ZK_FQX_BYTES 64 /* fqx: input bytes per lane and block (slots per lane), and in flight */
#endif
#ifndef ZK_FQX_TMIN
#define ZK_FQX_TMIN 2 /* fqx: fewest lanes per block (2: a lane pair reads whole sectors) */
#endif
#ifndef ZK_FQX_ITERS
#define ZK_FQX_ITERS 1 /* fqx: warp iterations per warp (grid / ITERS: setup shared) */
#endif
#ifndef ZK_FQX_MINB
#define ZK_FQX_MINB 4 /* fqx: min CTAs per SM when a lane holds <= 16 words (4: 64 registers) */
#endif
#define ZK_HUGE_SCALE 0x7B800000u /* 2^120: q * s cannot overflow below this */
#define ZK_TINY_BITS 0x21800000u  /* bits of ZK_TINY = 2^-60 */
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
/* max_nan_abs(... max_nan_abs(0, v[0]) ..., v[N - 1]) in a tree of depth
 * log2 N instead of a chain of N: max.NaN is associative and gives the
 * canonical NaN whatever its inputs, so the bits are the chain's. In
 * fquantv a chain of 32 held the int4 reduce+requantize's warps about 5
 * cycles a link; the tree gained it 0.2-1.1 points on an H200
 * (bench/results/kernels-2026-11-29-s32/, calls 2, 4 and 6). */
template <int N> __device__ __forceinline__ float absmax_tree(const float *v)
{
    static_assert(N >= 2 && (N & (N - 1)) == 0, "a power of two");
    if constexpr (N == 2)
        return max_nan_abs(fabsf(v[0]), v[1]);
    else
        return max_nan_abs(absmax_tree<N / 2>(v), absmax_tree<N / 2>(v + N / 2));
}

/* 8 raw elements of a slot (fp32: 8 words; fp16/bf16: 4 words). */
template <int DT> struct slot_raw {
    static constexpr int words = DT == ZK_FP32 ? 8 : 4;
    uint32_t w[words];
};

template <int DT> __device__ __forceinline__ void slot_load(slot_raw<DT> &s, const uint8_t *p)
{
    if (DT == ZK_FP32) {
        uint4 a = zk_load_in((const uint4 *)p), b = zk_load_in((const uint4 *)p + 1);
        s.w[0] = a.x, s.w[1] = a.y, s.w[2] = a.z, s.w[3] = a.w;
        s.w[4] = b.x, s.w[5] = b.y, s.w[6] = b.z, s.w[7] = b.w;
    } else {
        uint4 a = zk_load_in((const uint4 *)p);
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
        uint2 a = zk_load_in((const uint2 *)p);
        c.w[0] = a.x, c.w[1] = a.y;
    } else {
        c.w[0] = zk_load_cs((const unsigned int *)p);
    }
}
template <int BITS>
__device__ __forceinline__ void codes_store(uint8_t *p, const slot_codes<BITS> &c)
{
    if (BITS == 8)
        zk_store_out((uint2 *)p, make_uint2(c.w[0], c.w[1]));
    else
        zk_store_out((unsigned int *)p, c.w[0]);
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
 * 1.5*2^23 + 8 for int4), each word ANDed with keep (0 for a poisoned
 * block, whose floats are not codes). int8: the low byte of each float is
 * the two's complement code. int4: each float is 0x4B400000 + u with
 * u = q + 8 in [1, 15] (nothing in bits 4-7), so the low byte of
 * b[2i] + (b[2i+1] << 4) is u_2i | u_2i+1 << 4; two byte permutes gather
 * the four low bytes and one LOP3 flips each u to q's two's complement
 * nibble and applies keep: 8 instructions per 8 codes (10 with session
 * 17's shift-and-add sum, kernels-2026-11-23-s18/). */
template <int BITS>
__device__ __forceinline__ slot_codes<BITS> codes_pack(const uint32_t (&b)[8], uint32_t keep = ~0u)
{
    slot_codes<BITS> c;
    if (BITS == 8) {
#pragma unroll
        for (int k = 0; k < 2; k++) {
            uint32_t lo = __byte_perm(b[4 * k], b[4 * k + 1], 0x0040u);
            uint32_t hi = __byte_perm(b[4 * k + 2], b[4 * k + 3], 0x0040u);
            c.w[k] = __byte_perm(lo, hi, 0x5410u) & keep;
        }
    } else {
        const uint32_t p0 = b[0] + (b[1] << 4), p1 = b[2] + (b[3] << 4);
        const uint32_t p2 = b[4] + (b[5] << 4), p3 = b[6] + (b[7] << 4);
        const uint32_t w =
            __byte_perm(__byte_perm(p0, p1, 0x0040u), __byte_perm(p2, p3, 0x0040u), 0x5410u);
        c.w[0] = (w ^ ZK_I4_BIAS) & keep;
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

/* The whole output as one chunk: nb blocks, codes then scales. */
template <int BITS>
__device__ __forceinline__ fdst fdst_whole(uint8_t *out, uint64_t pay_bytes, uint64_t nb)
{
    fdst d;
    d.payload = out;
    d.scales = (float *)(out + pay_bytes);
    d.nb = nb;
    d.pay_elems = pay_bytes * 8 / BITS;
    return d;
}

/* qgZ reorder: how many elements of piece `stage` of the slice that
 * starts at element `start` (shard elements long) lie in the input. */
__device__ __forceinline__ uint64_t piece_valid(uint64_t n, uint64_t shard, uint64_t piece,
                                                uint64_t start, uint64_t stage)
{
    if (start >= n)
        return 0;
    uint64_t in_slice = min(n - start, shard), off = stage * piece;
    return off >= in_slice ? 0 : min(in_slice - off, piece);
}

/* qgZ reorder: chunk c of the output, one piece of B-element blocks. */
template <int BITS, int B>
__device__ __forceinline__ fdst fdst_piece(uint8_t *out, uint64_t piece, uint64_t piece_bytes,
                                           uint64_t c)
{
    fdst d;
    d.payload = out + c * piece_bytes;
    d.scales = (float *)(d.payload + piece * BITS / 8);
    d.nb = piece / B;
    d.pay_elems = piece;
    return d;
}

/* The maximum of x over a team of T lanes inside one warp (T a power of two;
 * team_max of zk_cuda_common.cuh serves any team), on every lane of it: the blocks' absmax bits (a NaN has bits above
 * Inf's, so the integer maximum is right). */
template <int T> __device__ __forceinline__ uint32_t lanes_max(uint32_t x)
{
    if constexpr (T == ZK_WARP) {
        return __reduce_max_sync(ZK_FULL_MASK, x);
    } else {
#pragma unroll
        for (int o = T / 2; o > 0; o /= 2)
            x = max(x, __shfl_xor_sync(ZK_FULL_MASK, x, o));
        return x;
    }
}

/* A team of T lanes computes the 2U divisions of U blocks in rounds: job
 * r*T + li is, below U, the scale (absmax / qmax) of block job, else the
 * inverse (qmax / (absmax * pre)) of block job - U. Returns the result of
 * lane li's job in round r, and the absmax bits of its block in *mu. */
template <int U, int T>
__device__ __forceinline__ float team_div(const uint32_t (&m)[U], int r, int li, float qm,
                                          uint32_t *mu_out)
{
    const int job = r * T + li, u = job % U;
    const bool is_inv = job >= U;
    uint32_t mu = m[0];
#pragma unroll
    for (int k = 1; k < U; k++)
        mu = u == k ? m[k] : mu;
    const float absmax = __uint_as_float(mu);
    const float pre = absmax < ZK_TINY ? ZK_PRESCALE : 1.0f;
    *mu_out = mu;
    return __fdiv_rn(is_inv ? qm : absmax, is_inv ? __fmul_rn(absmax, pre) : qm);
}

/* Block blk's scale (NaN when poisoned), and zeros after the chunk's last
 * scale up to ZK_SCALE_ALIGN. */
__device__ __forceinline__ void store_scale(const fdst &d, uint64_t blk, bool poison, float scale)
{
    d.scales[blk] = poison ? __uint_as_float(ZK_NAN_BITS) : scale;
    if (blk == d.nb - 1)
        for (uint64_t j = d.nb; j % ZK_SCALE_ALIGN != 0; j++)
            d.scales[j] = 0.0f;
}

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
    for (int u = 0; u < U; u++)
        m[u] = lanes_max<T>(src.absbits(u));
    float dres[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        uint32_t mu;
        dres[r] = team_div<U, T>(m, r, li, qm, &mu);
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
            codes_store<BITS>(d.payload + e * BITS / 8, codes_pack<BITS>(b, poison ? 0u : ~0u));
        }
        /* the scale of block u sits in lane sj % T of round sj / T */
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r == sj / T && li == sj % T) {
                store_scale(d, blk[u], poison, dres[r]);
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
    /* reorder (fqx's RO) */
    int nodes, local, k0;
    uint64_t n, shard, piece, piece_bytes, nchunks;
    unsigned long long *d_poisoned;
};

/* ---- quantize and qgZ reorder+quantize (fqx) ------------------------------ */

/* Why the first slot quantizer (fq_kernel, removed once fqx measured faster:
 * bench/results/kernels-2026-11-22-h200-fqx.txt) was bound by instruction
 * issue on an H200 at small B (SASS,
 * bf16 -> int8, one warp iteration): B = 256 (T = 32, U = 4 blocks of one
 * slot per lane) issues ~485 instructions for 32 elements a lane, ~15 an
 * element, of which ~4.5 are the arithmetic (widen, FMUL, FADD, 3/4 PRMT,
 * absmax). The rest is per block and per slot: REDUX, the inv shuffle, the
 * tiny and poison tests and selects, a 64-bit bounds test, address and
 * branch per 8 codes, per-block scale-writer tests; per iteration the
 * kernel arguments and, for qgZ, two 64-bit divisions per chunk (~100
 * instructions). B = 32 (T = 4): ~17 an element. B = 2048 (8 slots of one
 * block a lane, ~9 an element) reaches 98 % of the copy.
 *
 * fqx gives a lane ZK_FQX_BYTES of one block (a team of T = B / 8 / NS
 * lanes, lane li holding slots li + j * T: whole sectors per warp access),
 * so the per-block work is shared by NS slots, and splits each warp
 * iteration in two: when all its BPI blocks are full and aligned (every
 * iteration but a chunk's last), loads and stores go at constant offsets
 * from one pointer with no bounds tests, and a block takes one team-uniform
 * branch: "special" (NaN/Inf, or tiny and nonzero: rare) or the plain
 * encode FADD(FMUL(x, inv), magic), codes packed and stored. An all-zero
 * block takes the plain encode with inv = 0, which gives the reference's
 * codes 0. Partial iterations run fquant. Same IEEE operations, same
 * bytes. 16-bit absmax: the signed and the unsigned 16x2 max of the raw
 * words (one VIMNMX per word and half) give max |x| without masking each
 * word (see fqx_lane_max). qgZ: chunk -> slice by multiply-high division
 * (fdiv32), once per chunk; ZK_FQX_ITERS > 1 shares that and the other
 * per-warp setup (~140 instructions for qgZ, ~45 for quantize) among
 * several iterations. SASS of the full-iteration path, sm_90, per element:
 * bf16 -> int8 B = 256 ~9.3 (130 of the 299 a lane issues are the
 * arithmetic of its 32 elements), B = 32 ~10, bf16 -> int4 B = 256 ~9.7,
 * qgZ bf16 -> int8 ~12 with one iteration per warp. */

/* n / d for 32-bit n and a divisor fixed per launch: with m = floor(2^32 /
 * d) (2^32 - 1 for d = 1), umulhi(n, m) is the quotient or one less; one
 * correction step. */
struct fdiv32 {
    uint32_t d, m;
};
static inline fdiv32 fdiv32_for(uint32_t d)
{
    fdiv32 f;
    f.d = d;
    f.m = d <= 1 ? 0xFFFFFFFFu : (uint32_t)((1ull << 32) / d);
    return f;
}
__device__ __forceinline__ uint32_t fdiv32_div(const fdiv32 &f, uint32_t n, uint32_t &rem)
{
    uint32_t q = __umulhi(n, f.m), r = n - q * f.d;
    if (r >= f.d) {
        q++;
        r -= f.d;
    }
    rem = r;
    return q;
}

struct fqx_args {
    const uint8_t *x;
    uint8_t *out;
    uint64_t n_valid, pay_bytes, nb;       /* quantize */
    uint64_t n, shard, piece, piece_bytes; /* reorder */
    uint32_t local, k0, nchunks;
    fdiv32 w, nodes;
    unsigned long long *d_poisoned;
};

/* This lane's absmax of NS slots: fp32 bits (max.NaN: >= Inf's bits for
 * NaN/Inf), or for fp16/bf16 the largest absolute 16-bit pattern. For 16-bit
 * words, the signed max P and the unsigned max N of the raw patterns (per
 * half) give max |x| = max(P & 0x7FFF, N & 0x7FFF): if any x >= 0, P is the
 * largest non-negative pattern; if any x < 0, N is 0x8000 | the largest
 * negative magnitude (else N = P); if all x < 0, P is a negative pattern
 * (two's complement order = magnitude order there). */
template <int DT, int NS>
__device__ __forceinline__ uint32_t fqx_lane_max(const slot_raw<DT> (&r)[NS])
{
    if (DT == ZK_FP32) {
        float a0 = 0.0f, a1 = 0.0f; /* two chains */
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int i = 0; i < 8; i += 2) {
                a0 = max_nan_abs(a0, __uint_as_float(r[j].w[i]));
                a1 = max_nan_abs(a1, __uint_as_float(r[j].w[i + 1]));
            }
        return __float_as_uint(max_nan_abs(a0, a1));
    }
    uint32_t p = r[0].w[0], n = r[0].w[0];
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
        for (int w = j == 0 ? 1 : 0; w < 4; w++) {
            p = __vmaxs2(p, r[j].w[w]);
            n = __vmaxu2(n, r[j].w[w]);
        }
    const uint32_t a = __vmaxu2(p & 0x7FFF7FFFu, n & 0x7FFF7FFFu);
    return max(a & 0xFFFFu, a >> 16);
}

/* fp32 bits of the absmax from fqx_lane_max's value: >= ZK_F32_EXP_MASK
 * for a poisoned block, else the exact largest |x|. */
template <int DT> __device__ __forceinline__ uint32_t fqx_widen_max(uint32_t m)
{
    if (DT == ZK_FP32)
        return m;
    if (DT == ZK_BF16)
        return m << 16; /* 0x7F80.. (Inf, NaN) -> >= 0x7F800000 */
    return m >= ZK_F16_INF_BITS
               ? ZK_F32_EXP_MASK
               : __float_as_uint(__half2float(__ushort_as_half((unsigned short)m)));
}

/* The quantization of the BPI full blocks of a warp iteration (first block
 * b0; this lane's team holds blocks b0 + u * TPW + team, its slots j at
 * li + j * T): fquant's arithmetic without bounds tests. Returns the
 * poisoned blocks counted by this lane (the scale writer). */
template <int DT, int BITS, int T, int NS, int U>
__device__ __forceinline__ int fqx_quant(const raw_src<DT, U, NS> &src, uint64_t b0, int li,
                                         int team, const fdst &d)
{
    constexpr int qmax = BITS == 8 ? 127 : 7, TPW = ZK_WARP / T, B = T * NS * 8;
    constexpr float qm = (float)qmax, magic = BITS == 8 ? ZK_ROUND_MAGIC : ZK_RMAGIC4;
    constexpr int R = (2 * U + T - 1) / T; /* division rounds */
    const int lane = (int)(threadIdx.x % ZK_WARP), tbase = lane - li;
    uint32_t m[U];
#pragma unroll
    for (int u = 0; u < U; u++)
        m[u] = fqx_widen_max<DT>(lanes_max<T>(fqx_lane_max<DT, NS>(src.r[u])));
    float dres[R];
    uint32_t mr[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        dres[r] = team_div<U, T>(m, r, li, qm, &mr[r]);
    uint8_t *const pc = d.payload + ((b0 + (uint64_t)team) * B + (uint64_t)li * 8) * BITS / 8;
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int ij = U + u;
        float inv = __shfl_sync(ZK_FULL_MASK, dres[ij / T], tbase + ij % T);
        const uint32_t mu = m[u];
        if (mu == 0)
            inv = 0.0f; /* all zero: x * 0 + magic is code 0, as the reference's */
        uint8_t *const pu = pc + (uint64_t)u * TPW * B * BITS / 8;
        if (mu < ZK_F32_EXP_MASK && (mu == 0 || mu >= ZK_TINY_BITS)) {
#pragma unroll
            for (int j = 0; j < NS; j++) {
                uint32_t b[8];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    b[i] = __float_as_uint(__fadd_rn(__fmul_rn(src.get(u, j, i), inv), magic));
                codes_store<BITS>(pu + j * T * 8 * BITS / 8, codes_pack<BITS>(b));
            }
        } else {
            /* poisoned (codes 0) or tiny and nonzero (x * 2^64 first) */
            const bool poison = mu >= ZK_F32_EXP_MASK;
#pragma unroll
            for (int j = 0; j < NS; j++) {
                uint32_t b[8];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    b[i] = __float_as_uint(
                        __fadd_rn(__fmul_rn(__fmul_rn(src.get(u, j, i), ZK_PRESCALE), inv), magic));
                codes_store<BITS>(pu + j * T * 8 * BITS / 8,
                                  codes_pack<BITS>(b, poison ? 0u : ~0u));
            }
        }
    }
    int poisoned = 0;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int job = r * T + li;
        if (job < U) {
            const uint64_t blk = b0 + (uint64_t)job * TPW + (uint64_t)team;
            const bool poison = mr[r] >= ZK_F32_EXP_MASK;
            store_scale(d, blk, poison, dres[r]);
            poisoned += poison;
        }
    }
    return poisoned;
}

/* Lanes per block and slots per lane of fqx for DT and SLOTS = B / 8. */
template <int DT> constexpr int fqx_t(int slots)
{
    int ns = ZK_FQX_BYTES / (8 * dt_traits<DT>::size);
    int t = slots / (ns < 1 ? 1 : ns);
    t = t < ZK_FQX_TMIN ? ZK_FQX_TMIN : t;
    t = t > ZK_WARP ? ZK_WARP : t;
    return t > slots ? slots : t;
}
constexpr int fqx_minb(int words)
{
    return words <= 16 ? ZK_FQX_MINB : words <= 32 ? 2 : 1;
}

/* Quantize (RO = false: one chunk) or qgZ reorder+quantize (RO: chunk c of
 * a.nchunks, position c % W of stage k0 + c / W), U blocks of B = T * NS * 8
 * per team and warp iteration. */
template <int DT, int BITS, int T, int NS, int U, bool RO>
__global__ void __launch_bounds__(ZK_CTA_THREADS, fqx_minb((DT == ZK_FP32 ? 8 : 4) * NS * U))
    fqx_kernel(fqx_args a)
{
    constexpr int es = dt_traits<DT>::size, B = T * NS * 8, TPW = ZK_WARP / T;
    constexpr int BPI = TPW * U; /* blocks per warp iteration */
    const int lane = (int)(threadIdx.x % ZK_WARP), li = lane % T, team = lane / T;
    const uint64_t gw = (uint64_t)blockIdx.x * (ZK_CTA_THREADS / ZK_WARP) + threadIdx.x / ZK_WARP;
    const uint64_t wstride = (uint64_t)gridDim.x * (ZK_CTA_THREADS / ZK_WARP);
    const uint32_t nchunks = RO ? a.nchunks : 1u;
    int poisoned = 0;
    for (uint32_t c = RO ? blockIdx.y : 0u; c < nchunks; c += gridDim.y) {
        const uint8_t *src;
        uint64_t valid;
        fdst d;
        if (RO) {
            uint32_t p, nd;
            const uint32_t q = fdiv32_div(a.w, c, p);
            const uint32_t i = fdiv32_div(a.nodes, p, nd);
            const uint64_t s = (uint64_t)nd * a.local + i, stage = (uint64_t)a.k0 + q;
            const uint64_t start = s * a.shard;
            valid = piece_valid(a.n, a.shard, a.piece, start, stage);
            src = a.x + (valid ? (start + stage * a.piece) * es : 0);
            d = fdst_piece<BITS, B>(a.out, a.piece, a.piece_bytes, (uint64_t)c);
        } else {
            src = a.x;
            valid = a.n_valid;
            d = fdst_whole<BITS>(a.out, a.pay_bytes, a.nb);
        }
        const bool aligned = ((uintptr_t)src & 15) == 0;
        for (uint64_t it = gw; it * BPI < d.nb; it += wstride) {
            const uint64_t b0 = it * BPI;
            raw_src<DT, U, NS> rs;
            auto &r = rs.r;
            if (aligned && (b0 + BPI) * B <= valid) {
                const uint8_t *p = src + ((b0 + (uint64_t)team) * B + (uint64_t)li * 8) * es;
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int j = 0; j < NS; j++)
                        slot_load<DT>(r[u][j], p + (u * TPW * B + j * T * 8) * es);
                poisoned += fqx_quant<DT, BITS, T, NS, U>(rs, b0, li, team, d);
                continue;
            }
            /* a chunk's last iteration, or an unaligned source: per-block bounds */
            uint64_t blk[U];
            bool inr[U], fast[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                blk[u] = b0 + (uint64_t)(u * TPW + team);
                inr[u] = blk[u] < d.nb;
                fast[u] = inr[u] && aligned && (blk[u] + 1) * B <= valid;
#pragma unroll
                for (int j = 0; j < NS; j++) {
                    uint64_t e = blk[u] * B + (uint64_t)(li + j * T) * 8;
                    if (fast[u]) {
                        slot_load<DT>(r[u][j], src + e * es);
                    } else {
                        uint64_t vv = inr[u] && e < valid ? valid - e : 0;
                        slot_load_slow<DT>(r[u][j], src + (vv ? e * es : 0), vv);
                    }
                }
            }
            poisoned += fquant<BITS, T, NS, U>(rs, blk, inr, li, d);
        }
    }
    if (poisoned && a.d_poisoned)
        atomicAdd(a.d_poisoned, (unsigned long long)poisoned);
}

template <int DT, int BITS, int T, int NS, bool RO>
void fqx_launch(const fqx_args &a, uint64_t nb_per_chunk, cudaStream_t stream)
{
    constexpr int U0 = ZK_FQX_BYTES / (8 * dt_traits<DT>::size * NS);
    constexpr int U = U0 < 1 ? 1 : U0;
    constexpr int BPI = (ZK_WARP / T) * U;
    constexpr uint64_t WPG = (uint64_t)(ZK_CTA_THREADS / ZK_WARP) * ZK_FQX_ITERS;
    uint64_t iters = (nb_per_chunk + BPI - 1) / BPI;
    uint64_t ctas = (iters + WPG - 1) / WPG;
    dim3 grid(grid_for(ctas), RO ? (unsigned)(a.nchunks < 65535 ? a.nchunks : 65535) : 1u);
    fqx_kernel<DT, BITS, T, NS, U, RO><<<grid, ZK_CTA_THREADS, 0, stream>>>(a);
}

/* Quantize (RO = false) or reorder+quantize (RO) of the fq_args a through
 * fqx_kernel; returns 0 when it does not apply (block shape, or more than
 * 2^32 - 1 chunks or positions). */
template <int DT, int BITS, bool RO>
int fqx_dispatch(const fq_args &a, uint32_t block, uint64_t nb_per_chunk, cudaStream_t stream)
{
    if (!fshape_for(block).ok)
        return 0;
    fqx_args x = {};
    x.x = a.x;
    x.out = a.out;
    x.n_valid = a.n_valid;
    x.pay_bytes = a.pay_bytes;
    x.nb = a.nb;
    x.d_poisoned = a.d_poisoned;
    if (RO) {
        uint64_t w = (uint64_t)a.nodes * (uint64_t)a.local;
        if (a.nchunks > 0xFFFFFFFFull || w > 0xFFFFFFFFull || a.k0 < 0)
            return 0;
        x.n = a.n;
        x.shard = a.shard;
        x.piece = a.piece;
        x.piece_bytes = a.piece_bytes;
        x.local = (uint32_t)a.local;
        x.k0 = (uint32_t)a.k0;
        x.nchunks = (uint32_t)a.nchunks;
        x.w = fdiv32_for((uint32_t)w);
        x.nodes = fdiv32_for((uint32_t)a.nodes);
    }
    const uint32_t slots = block / 8;
#define ZK_FQX_SL(S)                                                                               \
    if (slots == S) {                                                                              \
        constexpr int T = fqx_t<DT>(S);                                                            \
        fqx_launch<DT, BITS, T, S / T, RO>(x, nb_per_chunk, stream);                               \
        return 1;                                                                                  \
    }
    ZK_FQX_SL(4)
    ZK_FQX_SL(8)
    ZK_FQX_SL(16)
    ZK_FQX_SL(32)
    ZK_FQX_SL(64)
    ZK_FQX_SL(128)
    ZK_FQX_SL(256)
#undef ZK_FQX_SL
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
                        acc[u][i] = __fmaf_rn(q[i], s[b][u], acc[u][i]);
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
                        acc[u][i] = __fmaf_rn(q[i], s[b][u], acc[u][i]);
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
    fdst d = fdst_whole<BITS>(out, pay_bytes, nb);
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

/* ---- vector kernels: S slots per lane and chunk ------------------------ */

/* The fused reductions with wider lanes (knobs ZK_RQ4, ZK_RQ8; ZK_RO4 and
 * ZK_RO8 below). A lane owns "vectors" of E = 8 * S adjacent elements, whose
 * codes (S * BITS bytes) come in one load per chunk, with one scale load: an
 * int4 slot kernel has 4 bytes per lane and chunk in flight, a vector of
 * S = 4 has 16, with the per-chunk addressing and the per-block shuffles and
 * divisions spread over 4 times the codes. The arithmetic is that of fsum and
 * fquant, code for code. */
template <int BITS, int S> struct vcodes {
    static constexpr int words = S * BITS / 4;
    static_assert(words == 1 || words == 2 || words == 4 || words == 8,
                  "a vector is 4, 8, 16 or 32 bytes");
    uint32_t w[words];
};
/* int8 vectors load with default caching (zk_load_in), int4 ones
 * evict-first: the int4 vector reductions ran 72 -> 68 % of the copy on an
 * H200 with default caching, int8 reduce+requantize 91 -> 92 %. */
template <int BITS, int S>
__device__ __forceinline__ void vcodes_load(vcodes<BITS, S> &c, const uint8_t *p)
{
    if constexpr (vcodes<BITS, S>::words == 8) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 *q = (const uint4 *)p + h;
            uint4 a = BITS == 8 ? zk_load_in(q) : zk_load_cs(q);
            c.w[4 * h] = a.x, c.w[4 * h + 1] = a.y, c.w[4 * h + 2] = a.z, c.w[4 * h + 3] = a.w;
        }
    } else if constexpr (vcodes<BITS, S>::words == 4) {
        uint4 a = BITS == 8 ? zk_load_in((const uint4 *)p) : zk_load_cs((const uint4 *)p);
        c.w[0] = a.x, c.w[1] = a.y, c.w[2] = a.z, c.w[3] = a.w;
    } else if constexpr (vcodes<BITS, S>::words == 2) {
        uint2 a = BITS == 8 ? zk_load_in((const uint2 *)p) : zk_load_cs((const uint2 *)p);
        c.w[0] = a.x, c.w[1] = a.y;
    } else {
        c.w[0] = zk_load_cs((const unsigned int *)p);
    }
}
template <int BITS, int S>
__device__ __forceinline__ void vcodes_store(uint8_t *p, const vcodes<BITS, S> &c)
{
    if constexpr (vcodes<BITS, S>::words == 8) {
        zk_store_out((uint4 *)p, make_uint4(c.w[0], c.w[1], c.w[2], c.w[3]));
        zk_store_out((uint4 *)p + 1, make_uint4(c.w[4], c.w[5], c.w[6], c.w[7]));
    } else if constexpr (vcodes<BITS, S>::words == 4)
        zk_store_out((uint4 *)p, make_uint4(c.w[0], c.w[1], c.w[2], c.w[3]));
    else if constexpr (vcodes<BITS, S>::words == 2)
        zk_store_out((uint2 *)p, make_uint2(c.w[0], c.w[1]));
    else
        zk_store_out((unsigned int *)p, c.w[0]);
}
/* Slot g (codes 8g .. 8g + 7) of a vector. */
template <int BITS, int S>
__device__ __forceinline__ slot_codes<BITS> vcodes_slot(const vcodes<BITS, S> &c, int g)
{
    slot_codes<BITS> s;
#pragma unroll
    for (int w = 0; w < slot_codes<BITS>::words; w++)
        s.w[w] = c.w[g * slot_codes<BITS>::words + w];
    return s;
}

/* (float)q of the 8 int4 codes of word c, exactly, through half pairs: a
 * nibble at bits 0-3 of a 16-bit half under the exponent of 1024 reads as
 * 1024 + u, at bits 4-7 under that of 64 as 64 + u (u = q + 8: the bias is
 * one more bit of the XOR constant). One LOP3 makes two such halves from c
 * (or c >> 8); one HADD2 subtracts both biases (exact: the results are
 * small integers); one HADD2.F32 per code widens. 17 instructions for 8
 * codes against codes_float's 20. */
template <uint32_t M> __device__ __forceinline__ uint32_t and_xor(uint32_t a, uint32_t k)
{
    uint32_t r; /* (a & M) ^ k in one LOP3, k in a register */
    asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(a), "n"(M), "r"(k));
    return r;
}
__device__ __forceinline__ void codes_float4h(uint32_t c, float (&q)[8])
{
    const uint32_t c8 = c >> 8;
    const uint32_t w[4] = {
        and_xor<0x00F0000Fu>(c, 0x54806408u), and_xor<0x000F00F0u>(c, 0x64085480u),
        and_xor<0x00F0000Fu>(c8, 0x54806408u), and_xor<0x000F00F0u>(c8, 0x64085480u)};
    __half2 h[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        /* halves (-1032, -72) for w[0], w[2]; (-72, -1032) for w[1], w[3] */
        const uint32_t bias = r % 2 ? 0xE408D480u : 0xD480E408u;
        h[r] = __hadd2(*(const __half2 *)&w[r], *(const __half2 *)&bias);
    }
    q[0] = __low2float(h[0]), q[5] = __high2float(h[0]);
    q[1] = __low2float(h[1]), q[4] = __high2float(h[1]);
    q[2] = __low2float(h[2]), q[7] = __high2float(h[2]);
    q[3] = __low2float(h[3]), q[6] = __high2float(h[3]);
}

/* acc[8g .. 8g + 7] += the decoded codes of slot g of one chunk's vector cd
 * with scale s. */
template <int BITS, int S>
__device__ __forceinline__ void vaccum(const vcodes<BITS, S> &cd, int g, float s,
                                       float (&acc)[8 * S])
{
    float q[8];
    if constexpr (BITS == 4)
        codes_float4h(cd.w[g], q);
    else
        codes_float<BITS>(vcodes_slot<BITS, S>(cd, g), q);
#pragma unroll
    for (int i = 0; i < 8; i++)
        acc[8 * g + i] = __fmaf_rn(q[i], s, acc[8 * g + i]);
}

/* A hint: the 128-byte line of global address p towards L2. */
__device__ __forceinline__ void l2_prefetch(const void *p)
{
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/* The next batch's codes and scales (the ZK_VPF batches after chunk c0 +
 * ZK_VKB - 1, pc and ps at the first of them) towards L2 while this one's
 * loads and arithmetic run: no registers held. */
__device__ __forceinline__ void next_batch_to_l2(const uint8_t *pc, const uint8_t *ps,
                                                 uint64_t stride, int c0, int k)
{
    const int c1 = c0 + ZK_VKB, c2 = min(k, c1 + ZK_VPF * ZK_VKB);
    if (ZK_VLEAN && c2 == c1 + ZK_VKB) {
#pragma unroll
        for (int b = 0; b < ZK_VKB; b++) {
            l2_prefetch(pc + b * stride);
            l2_prefetch(ps + b * stride);
        }
    } else {
        for (int c = c1; c < c2; c++) {
            l2_prefetch(pc + (uint64_t)(c - c1) * stride);
            l2_prefetch(ps + (uint64_t)(c - c1) * stride);
        }
    }
}

/* acc[i] = sum over chunks c = 0..k-1 (in order, from +0) of decoded code i
 * of the vector at element e (codes at in + c*stride + e*BITS/8, all in the
 * block of scale index sb). Issues ZK_VKB chunks' loads before any use.
 * *smax gets the max of the absolute scale bits. A lane with !ld loads
 * nothing and keeps acc at 0.
 *
 * ZK_VLEAN (since session 18): when the next batch is whole, its prefetch
 * is unrolled, one pointer step per chunk, instead of a loop over chunk
 * indices with a 64-bit multiply each (68 of int4 reduce+requantize's 1301
 * instructions per warp on an H200, kernels-2026-11-23-s18/; the unrolled
 * form about 28). A lane with !ld running no chunk, instead of returning,
 * would save zeroing acc twice but spills at 80 registers. */
template <int BITS, int S>
__device__ __forceinline__ void vbatch_accum(const vcodes<BITS, S> (&cd)[ZK_VKB],
                                             const float (&s)[ZK_VKB], int nb, float (&acc)[8 * S],
                                             uint32_t &smax)
{
#pragma unroll
    for (int b = 0; b < ZK_VKB; b++) {
        if (b < nb) {
            smax = max(smax, __float_as_uint(s[b]) & ZK_F32_ABS_MASK);
#pragma unroll
            for (int g = 0; g < S; g++)
                vaccum<BITS, S>(cd[b], g, s[b], acc);
        }
    }
}
template <int BITS, int S>
__device__ __forceinline__ void fsumv(const uint8_t *in, uint64_t stride, int k, uint64_t pay,
                                      uint64_t e, uint64_t sb, bool ld, float (&acc)[8 * S],
                                      uint32_t &smax)
{
    smax = 0;
#pragma unroll
    for (int i = 0; i < 8 * S; i++)
        acc[i] = 0.0f;
    if (!ld)
        return;
    const uint8_t *pc = in + e * BITS / 8;
    const uint8_t *ps = in + pay + sb * sizeof(float);
    for (int c0 = 0; c0 < k; c0 += ZK_VKB) {
        vcodes<BITS, S> cd[ZK_VKB];
        float s[ZK_VKB];
        if (c0 + ZK_VKB <= k) {
            /* a whole batch: no per-chunk tests or branches */
#pragma unroll
            for (int b = 0; b < ZK_VKB; b++)
                vcodes_load<BITS, S>(cd[b], pc + b * stride);
#pragma unroll
            for (int b = 0; b < ZK_VKB; b++)
                s[b] = __ldg((const float *)(ps + b * stride));
            pc += ZK_VKB * stride;
            ps += ZK_VKB * stride;
            if (ZK_VPF && BITS == 4) /* (int8 measured slower with it on an H200) */
                next_batch_to_l2(pc, ps, stride, c0, k);
            vbatch_accum<BITS, S>(cd, s, ZK_VKB, acc, smax);
            continue;
        }
#pragma unroll
        for (int b = 0; b < ZK_VKB; b++) {
            if (c0 + b < k) {
                vcodes_load<BITS, S>(cd[b], pc);
                s[b] = __ldg((const float *)ps);
            }
            pc += stride;
            ps += stride;
        }
        vbatch_accum<BITS, S>(cd, s, k - c0, acc, smax);
    }
}

#if ZK_B4
/* ---- ZK_B4: int4 reduce+requantize over biased codes ------------------- */

/* The sums of ZK_B4 (zk_arith.h, the arithmetic of record) for frv_kernel
 * and frt_kernel: per chunk and 8 codes (one word c of a vector), fewer
 * instructions than codes_float4h's SHF, 4 LOP3, 4 HADD2, 8 HADD2.F32 and
 * 8 FFMA: one SHF (c >> 8) and one LOP3 per two codes make fp16 subnormals
 * u * 2^-24 (codes 0, 2, 4, 6: nibble bits 0-3 of a half) and u * 2^-20
 * (codes 1, 3, 5, 7: bits 4-7), the flip q -> u = q ^ 8 in the same LOP3;
 * one HADD2.F32 widens each exactly; fma(u * 2^-24, s * 2^24, acc) is
 * fma(u, s, acc) bit for bit while |s| < 2^104. SHF + 4 LOP3 + 8 HADD2.F32
 * + 8 FFMA = 21. Per chunk: t += s (FADD) and the multipliers (2 FMUL).
 * With ZK_B4G = 1, scales at or above the limit (ZK_B4_FAST_MAX, where
 * s * 2^24 would overflow) send the vector through a second pass
 * (fsumv_b4). A NaN scale that passes the test gives NaN on both paths (a
 * poisoned block either way). The bias comes off after the last chunk: one
 * FFMA per element. */
struct b4_mul {
    float s24, s20; /* s * 2^24, s * 2^20 */
};
__device__ __forceinline__ b4_mul b4_mul_for(float s)
{
    b4_mul m;
    m.s24 = __fmul_rn(s, 0x1p24f);
    m.s20 = __fmul_rn(s, 0x1p20f);
    return m;
}
/* (a ^ k) & M in one LOP3, k in a register. */
template <uint32_t M> __device__ __forceinline__ uint32_t xor_and(uint32_t a, uint32_t k)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0x48;" : "=r"(r) : "r"(a), "n"(M), "r"(k));
    return r;
}
/* The fast form's factors of the 8 codes of word c, exactly: u * 2^-24
 * (codes 0, 2, 4, 6) or u * 2^-20 (1, 3, 5, 7), one LOP3 per two codes from
 * c or c >> 8 ((c ^ 0x88888888) & mask: u in bits 0-3 or 4-7 of both
 * halves, exponent 0: fp16 subnormals), one HADD2.F32 per code. */
__device__ __forceinline__ void b4_codes(uint32_t c, float (&q)[8])
{
    const uint32_t c8 = c >> 8, k = ZK_I4_BIAS;
    /* halves of w[r]: codes r (low) and r + 4 (high) */
    const uint32_t w[4] = {xor_and<0x000F000Fu>(c, k), xor_and<0x00F000F0u>(c, k),
                           xor_and<0x000F000Fu>(c8, k), xor_and<0x00F000F0u>(c8, k)};
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const __half2 h = *(const __half2 *)&w[r];
        q[r] = __low2float(h);
        q[r + 4] = __high2float(h);
    }
}
/* The multiplier of code i in the fast form (m from b4_mul_for). */
__device__ __forceinline__ float b4_mul_of(const b4_mul &m, int i)
{
    return i % 2 ? m.s20 : m.s24;
}
/* acc[8g .. 8g + 7] of the fast form for word c (the chunk's multipliers m). */
template <int S>
__device__ __forceinline__ void b4_word_fast(uint32_t c, const b4_mul &m, float (&acc)[8 * S],
                                             int g)
{
    float q[8];
    b4_codes(c, q);
#pragma unroll
    for (int i = 0; i < 8; i++)
        acc[8 * g + i] = __fmaf_rn(q[i], b4_mul_of(m, i), acc[8 * g + i]);
}
/* One chunk (vector cd, scale s) with the reference's own steps
 * (zk_b4_step, zk_b4_bias_add): fsumv_b4's rare second pass. */
template <int S>
__device__ __forceinline__ void b4_chunk(const vcodes<4, S> &cd, float s, float (&acc)[8 * S],
                                         zk_b4_bias &bias)
{
    zk_b4_bias_add(&bias, s);
#pragma unroll
    for (int g = 0; g < S; g++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[8 * g + i] =
                zk_b4_step(acc[8 * g + i], (int)((cd.w[g] >> (4 * i) & 0xFu) ^ 8u), s, i);
}

/* The bias off the N sums of a lane's vector (zk_b4_unbias). */
template <int N> __device__ __forceinline__ void b4_unbias(const zk_b4_bias &bias, float (&acc)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        acc[i] = __fmaf_rn(bias.t, -8.0f, acc[i]);
}

/* fsumv for int4 reduce+requantize under ZK_B4: the same loads, L2
 * prefetch and batches, every chunk in the fast form. ZK_B4G = 1: a scale
 * at or above the limit (a batch's largest |s|: 3 FMNMX and a FSETP; a
 * NaN may pass, harmlessly) sets a predicate, and the vector's sums are
 * then made again chunk by chunk with the reference's steps (b4_chunk).
 * That rare pass is after the batch loop, and the fast form runs
 * unconditionally in it: a branch around the fast form, or an exact form
 * beside it, cost the any-k kernel 3 registers over its 80 (spills).
 * ZK_B4G = 0: no test, no second pass (the fast form is the contract). */
template <int S>
__device__ __forceinline__ void fsumv_b4(const uint8_t *in, uint64_t stride, int k, uint64_t pay,
                                         uint64_t e, uint64_t sb, bool ld, float (&acc)[8 * S])
{
#pragma unroll
    for (int i = 0; i < 8 * S; i++)
        acc[i] = 0.0f;
    if (!ld)
        return;
    zk_b4_bias bias = {0.0f};
    bool again = false;
    const uint8_t *pc = in + e / 2;
    const uint8_t *ps = in + pay + sb * sizeof(float);
    for (int c0 = 0; c0 < k; c0 += ZK_VKB) {
        vcodes<4, S> cd[ZK_VKB];
        float s[ZK_VKB];
        if (c0 + ZK_VKB <= k) {
            /* a whole batch: no per-chunk tests or branches */
#pragma unroll
            for (int b = 0; b < ZK_VKB; b++)
                vcodes_load<4, S>(cd[b], pc + b * stride);
#pragma unroll
            for (int b = 0; b < ZK_VKB; b++)
                s[b] = __ldg((const float *)(ps + b * stride));
            pc += ZK_VKB * stride;
            ps += ZK_VKB * stride;
            if (ZK_VPF)
                next_batch_to_l2(pc, ps, stride, c0, k);
            if (ZK_B4G) {
                float m = fabsf(s[0]);
#pragma unroll
                for (int b = 1; b < ZK_VKB; b++)
                    m = fmaxf(m, fabsf(s[b]));
                again = again || !(m < ZK_B4_FAST_MAX);
            }
#pragma unroll
            for (int b = 0; b < ZK_VKB; b++) {
                bias.t = __fadd_rn(bias.t, s[b]);
                const b4_mul mb = b4_mul_for(s[b]);
#pragma unroll
                for (int g = 0; g < S; g++)
                    b4_word_fast<S>(cd[b].w[g], mb, acc, g);
            }
            continue;
        }
#pragma unroll
        for (int b = 0; b < ZK_VKB; b++) {
            if (c0 + b < k) {
                vcodes_load<4, S>(cd[b], pc);
                s[b] = __ldg((const float *)ps);
            }
            pc += stride;
            ps += stride;
        }
#pragma unroll
        for (int b = 0; b < ZK_VKB; b++) {
            if (c0 + b < k) {
                if (ZK_B4G)
                    again = again || !(fabsf(s[b]) < ZK_B4_FAST_MAX);
                bias.t = __fadd_rn(bias.t, s[b]);
                const b4_mul mb = b4_mul_for(s[b]);
#pragma unroll
                for (int g = 0; g < S; g++)
                    b4_word_fast<S>(cd[b].w[g], mb, acc, g);
            }
        }
    }
    if (ZK_B4G && again) {
        /* the rare pass: from chunk 0 again (the loop stepped ZK_VKB
         * chunks a batch), one chunk at a time */
#pragma unroll
        for (int i = 0; i < 8 * S; i++)
            acc[i] = 0.0f;
        bias.t = 0.0f;
        const uint64_t back = (uint64_t)((k + ZK_VKB - 1) / ZK_VKB * ZK_VKB) * stride;
        pc -= back;
        ps -= back;
#pragma unroll 1
        for (int c = 0; c < k; c++) {
            vcodes<4, S> cd;
            vcodes_load<4, S>(cd, pc);
            b4_chunk<S>(cd, __ldg((const float *)ps), acc, bias);
            pc += stride;
            ps += stride;
        }
    }
    b4_unbias<8 * S>(bias, acc);
}
#endif /* ZK_B4 */

/* The quantization of one block by a team of T lanes, lane li holding its
 * vectors j = 0..NV-1 (E values each, at element (li + j * T) * E of block
 * blk) in v[j]: fquant's arithmetic for U = 1 (lane 0 of the team divides
 * for the scale, lane 1 for inv; a team of one lane does both), one store
 * of S * BITS bytes per vector. Returns the poisoned blocks counted by this
 * lane (lane 0 of the team, which writes the scale). */
template <int BITS, int S, int T, int NV>
__device__ __forceinline__ int fquantv(const float (&v)[NV][8 * S], uint64_t blk, bool inr, int li,
                                       const fdst &d)
{
    constexpr int qmax = BITS == 8 ? 127 : 7, E = 8 * S, B = T * NV * E;
    constexpr float qm = (float)qmax;
    const int lane = (int)(threadIdx.x % ZK_WARP), tbase = lane - li;
    float a = absmax_tree<E>(v[0]);
#pragma unroll
    for (int j = 1; j < NV; j++)
        a = max_nan_abs(a, absmax_tree<E>(v[j]));
    const uint32_t m = lanes_max<T>(__float_as_uint(a));
    const float absmax = __uint_as_float(m); /* a NaN has bits above Inf's */
    const bool poison = m >= ZK_F32_EXP_MASK, tiny = absmax < ZK_TINY;
    const float pre = tiny ? ZK_PRESCALE : 1.0f;
    float scale, inv;
    if (T == 1) {
        scale = __fdiv_rn(absmax, qm);
        inv = __fdiv_rn(qm, __fmul_rn(absmax, pre));
    } else {
        const bool is_inv = li == 1;
        scale = __fdiv_rn(is_inv ? qm : absmax, is_inv ? __fmul_rn(absmax, pre) : qm);
        inv = __shfl_sync(ZK_FULL_MASK, scale, tbase + 1);
    }
    if (m == 0)
        inv = 0.0f;
    if (!inr)
        return 0;
    /* the encoded floats of a vector, then its codes: one branch on tiny
     * per vector (uniform over the team) */
    constexpr float magic = BITS == 8 ? ZK_ROUND_MAGIC : ZK_RMAGIC4;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const uint64_t e = blk * B + (uint64_t)((li + j * T) * E);
        if (e >= d.pay_elems)
            continue;
        uint32_t b[E];
        if (tiny) {
#pragma unroll
            for (int i = 0; i < E; i++)
                b[i] = __float_as_uint(
                    __fadd_rn(__fmul_rn(__fmul_rn(v[j][i], ZK_PRESCALE), inv), magic));
        } else {
#pragma unroll
            for (int i = 0; i < E; i++)
                b[i] = __float_as_uint(__fadd_rn(__fmul_rn(v[j][i], inv), magic));
        }
        vcodes<BITS, S> c;
#pragma unroll
        for (int g = 0; g < S; g++) {
            uint32_t bg[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                bg[i] = b[8 * g + i];
            const slot_codes<BITS> sc = codes_pack<BITS>(bg, poison ? 0u : ~0u);
#pragma unroll
            for (int w = 0; w < slot_codes<BITS>::words; w++)
                c.w[g * slot_codes<BITS>::words + w] = sc.w[w];
        }
        vcodes_store<BITS, S>(d.payload + e * BITS / 8, c);
    }
    if (li != 0)
        return 0;
    store_scale(d, blk, poison, scale);
    return poison;
}

/* Reduce+requantize with vectors: team t of a warp (T lanes) takes block
 * it * (32 / T) + t; lane li its vectors li + j * T. KC > 0: built for
 * k == KC chunks (ZK_VK8: int4 with 8, a node of 8 GPUs), whose sums the
 * compiler starts at the first chunk's FFMA instead of zeroing them before
 * a loop of unknown length; the same arithmetic. */
template <int BITS, int S, int T, int NV, int KC = 0>
__global__ void __launch_bounds__(ZK_CTA_THREADS, NV != 1 ? 1 : BITS == 8 ? ZK_VMINB8 : ZK_VMINB)
    frv_kernel(const uint8_t *in, uint64_t in_stride, int k_arg, uint64_t piece,
               uint64_t pay_bytes, uint64_t nb, uint8_t *out, unsigned long long *d_poisoned)
{
    const int k = KC ? KC : k_arg;
    constexpr int E = 8 * S, B = T * NV * E, TPW = ZK_WARP / T;
    const int lane = (int)(threadIdx.x % ZK_WARP), li = lane % T, team = lane / T;
    const uint64_t gw = (uint64_t)blockIdx.x * (ZK_CTA_THREADS / ZK_WARP) + threadIdx.x / ZK_WARP;
    const uint64_t wstride = (uint64_t)gridDim.x * (ZK_CTA_THREADS / ZK_WARP);
    fdst d = fdst_whole<BITS>(out, pay_bytes, nb);
    int poisoned = 0;
    for (uint64_t it = gw; it * TPW < nb; it += wstride) {
        const uint64_t blk = it * TPW + (uint64_t)team;
        const bool inr = blk < nb;
        float v[NV][E];
#pragma unroll
        for (int j = 0; j < NV; j++) {
            /* the vector lies in the payload or past it, never across */
            const uint64_t e = blk * B + (uint64_t)((li + j * T) * E);
            uint32_t smax;
#if ZK_B4
            /* ZK_B4: int4 sums over the biased codes (zk_arith.h) */
            if constexpr (BITS == 4)
                fsumv_b4<S>(in, in_stride, k, pay_bytes, e, blk, inr && e < d.pay_elems, v[j]);
            else
                fsumv<BITS, S>(in, in_stride, k, pay_bytes, e, blk, inr && e < d.pay_elems, v[j],
                               smax);
#else
            fsumv<BITS, S>(in, in_stride, k, pay_bytes, e, blk, inr && e < d.pay_elems, v[j], smax);
#endif
            if (e + E > piece) {
                /* the tail of the last block reads as 0 */
#pragma unroll
                for (int i = 0; i < E; i++)
                    if (e + i >= piece)
                        v[j][i] = 0.0f;
            }
        }
        poisoned += fquantv<BITS, S, T, NV>(v, blk, inr, li, d);
    }
    if (poisoned && d_poisoned)
        atomicAdd(d_poisoned, (unsigned long long)poisoned);
}

/* Launches frv_kernel<BITS, S, T, NV> when (t, nv) is its shape. */
template <int BITS, int S, int T, int NV>
int frv_try(int t, int nv, const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
            uint64_t pay, uint64_t nb, uint8_t *out, unsigned long long *d_poisoned,
            cudaStream_t stream)
{
    constexpr int B = T * NV * 8 * S, TPW = ZK_WARP / T;
    if constexpr (B >= (int)ZK_BLOCK_ALIGN && B <= 2048) {
        if (t == T && nv == NV) {
            uint64_t iters = (nb + TPW - 1) / TPW;
            uint64_t ctas = (iters + ZK_CTA_THREADS / ZK_WARP - 1) / (ZK_CTA_THREADS / ZK_WARP);
            if constexpr (ZK_VK8 != 0 && BITS == 4) {
                if (k == 8) {
                    frv_kernel<BITS, S, T, NV, 8><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
                        in, in_stride, k, piece, pay, nb, out, d_poisoned);
                    return 1;
                }
            }
            frv_kernel<BITS, S, T, NV><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
                in, in_stride, k, piece, pay, nb, out, d_poisoned);
            return 1;
        }
    }
    return 0;
}

/* Dispatch on the block shape (B / (8 * S) vectors, a power of two, at
 * most 32 lanes by NV vectors); returns 0 when the vector kernels do not
 * apply. */
template <int BITS, int S>
int frv_dispatch(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, uint32_t block,
                 uint64_t pay, uint64_t nb, uint8_t *out, unsigned long long *d_poisoned,
                 cudaStream_t stream)
{
    const uint32_t vecs = block / (8 * S);
    if (!ZK_FAST || block % (8 * S) || vecs == 0 || (vecs & (vecs - 1)) || block > 2048)
        return 0;
    const int t = vecs < ZK_WARP ? (int)vecs : ZK_WARP, nv = (int)vecs / t;
#define ZK_FV(T, NV)                                                                               \
    frv_try<BITS, S, T, NV>(t, nv, in, in_stride, k, piece, pay, nb, out, d_poisoned, stream)
    return ZK_FV(1, 1) || ZK_FV(2, 1) || ZK_FV(4, 1) || ZK_FV(8, 1) || ZK_FV(16, 1) ||
           ZK_FV(32, 1) || ZK_FV(32, 2) || ZK_FV(32, 4) || ZK_FV(32, 8);
#undef ZK_FV
}

template <int BITS>
int frq_dispatch(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, uint32_t block,
                 uint64_t pay, uint64_t nb, uint8_t *out, unsigned long long *d_poisoned,
                 cudaStream_t stream)
{
    if constexpr (BITS == 4 && ZK_RQ4 > 1) {
        if (frv_dispatch<4, ZK_RQ4>(in, in_stride, k, piece, block, pay, nb, out, d_poisoned,
                                    stream))
            return 1;
    }
    if constexpr (BITS == 8 && ZK_RQ8 > 1) {
        if (frv_dispatch<8, ZK_RQ8>(in, in_stride, k, piece, block, pay, nb, out, d_poisoned,
                                    stream))
            return 1;
    }
#if ZK_B4
    if constexpr (BITS == 4)
        return 0; /* ZK_B4: the team kernel where frv does not (frq_kernel keeps the default) */
#endif
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
        zk_store_out((uint4 *)p, make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                      __float_as_uint(v[2]), __float_as_uint(v[3])));
        zk_store_out((uint4 *)p + 1, make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]),
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
        zk_store_out((uint4 *)p, make_uint4(w[0], w[1], w[2], w[3]));
    }
}

/* VE values (16 bytes of DT) narrowed into w, no NaN among v. */
template <int DT, int VE>
__device__ __forceinline__ void pack_vec_nonan(const float (&v)[VE], uint32_t (&w)[4])
{
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
}

/* VE values (16 bytes of DT) stored at p, 16-byte aligned, no NaN among v. */
template <int DT, int VE>
__device__ __forceinline__ void store_vec_nonan(uint8_t *p, const float (&v)[VE])
{
    uint32_t w[4];
    pack_vec_nonan<DT, VE>(v, w);
    zk_store_out((uint4 *)p, make_uint4(w[0], w[1], w[2], w[3]));
}

/* reduce -> output: lane-slots of 8 elements, slot g = ((cta*8 + warp)*U
 * + u)*32 + lane: every warp instruction touches one contiguous span. */
#if ZK_ROMINB > 0
#define ZK_LB_RO __launch_bounds__(ZK_CTA_THREADS, ZK_ROMINB)
#else
#define ZK_LB_RO __launch_bounds__(ZK_CTA_THREADS)
#endif
template <int ODT, int BITS, int U>
__global__ void ZK_LB_RO
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

/* The E outputs of every lane of a warp (lane l's at elements l * E ..
 * l * E + E - 1 of the warp's span at w, 16-byte aligned, none NaN),
 * narrowed to ODT and stored through shared memory: each lane writes its V
 * 16-byte words there (word j at l * V + (j ^ swz(l)), so that no two
 * lanes of a quarter warp share a bank), then stores words t, t + 32, ... of
 * the span, so that every store instruction of the warp writes 512
 * contiguous bytes instead of 16 bytes every E * size bytes. */
/* stage_store's slot of lane l's word j (V words per lane). */
__host__ __device__ constexpr int stage_slot(int V, int l, int j)
{
    return l * V + (j ^ ((l / (8 / V)) & (V - 1)));
}
/* Whether stage_slot is one-to-one and, for the writes (word j of lanes
 * 8q .. 8q + 7) and the reads (words i * 32 + 8q .. + 7 of the span), hits
 * 8 different 16-byte bank groups in every quarter warp. */
__host__ __device__ constexpr bool stage_slots_ok(int V)
{
    bool seen[ZK_WARP * 8] = {};
    for (int l = 0; l < ZK_WARP; l++)
        for (int j = 0; j < V; j++) {
            const int s = stage_slot(V, l, j);
            if (seen[s])
                return false;
            seen[s] = true;
        }
    for (int i = 0; i < V; i++)
        for (int q = 0; q < ZK_WARP / 8; q++) {
            int wmask = 0, rmask = 0;
            for (int t = 8 * q; t < 8 * q + 8; t++) {
                wmask |= 1 << (stage_slot(V, t, i) % 8);
                const int u = i * ZK_WARP + t;
                rmask |= 1 << (stage_slot(V, u / V, u % V) % 8);
            }
            if (wmask != 0xFF || rmask != 0xFF)
                return false;
        }
    return true;
}

template <int ODT, int E>
__device__ __forceinline__ void stage_store(uint8_t *w, const float (&acc)[E], int lane)
{
    constexpr int V = E * dt_traits<ODT>::size / 16, WPC = ZK_CTA_THREADS / ZK_WARP;
    static_assert(V == 2 || V == 4 || V == 8, "2, 4 or 8 words per lane");
    static_assert(stage_slots_ok(V), "the swizzle is one-to-one and free of bank conflicts");
    __shared__ uint4 buf[WPC][ZK_WARP * V];
    uint4 *b = buf[threadIdx.x / ZK_WARP];
#pragma unroll
    for (int j = 0; j < V; j++) {
        constexpr int VE = 16 / dt_traits<ODT>::size;
        float v[VE];
#pragma unroll
        for (int i = 0; i < VE; i++)
            v[i] = acc[j * VE + i];
        uint32_t x[4];
        pack_vec_nonan<ODT, VE>(v, x);
        b[stage_slot(V, lane, j)] = make_uint4(x[0], x[1], x[2], x[3]);
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int u = i * ZK_WARP + lane;
        zk_store_out((uint4 *)w + u, b[stage_slot(V, u / V, u % V)]);
    }
    __syncwarp();
}

/* reduce -> output with vectors of E = 8 * S elements (ZK_RO4, ZK_RO8):
 * vector g = (cta*8 + warp)*32 + lane, one code load and one scale load per
 * chunk; the arithmetic and the stores of fro_kernel. */
template <int ODT, int BITS, int S>
__global__ void __launch_bounds__(ZK_CTA_THREADS, ZK_VMINB)
    frov_kernel(const uint8_t *in, uint64_t in_stride, int k, uint64_t pay_bytes, int lgb,
                uint64_t count, int mean, float divisor, void *y)
{
    constexpr int E = 8 * S, oes = dt_traits<ODT>::size;
    const int lane = (int)(threadIdx.x % ZK_WARP);
    const uint64_t gw = (uint64_t)blockIdx.x * (ZK_CTA_THREADS / ZK_WARP) + threadIdx.x / ZK_WARP;
    const uint64_t wstride = (uint64_t)gridDim.x * (ZK_CTA_THREADS / ZK_WARP);
    const uint64_t nvec = (count + E - 1) / E;
    const bool yal = ((uintptr_t)y & 15) == 0;
    const bool dok = !mean || ((__float_as_uint(divisor) & ZK_F32_ABS_MASK) < ZK_F32_EXP_MASK &&
                               (__float_as_uint(divisor) & ZK_F32_ABS_MASK) != 0);
    for (uint64_t it = gw; it * ZK_WARP < nvec; it += wstride) {
        /* e < count <= the payload's codes, a multiple of E: the whole vector is in it */
        const uint64_t g = it * ZK_WARP + (uint64_t)lane, e = g * E;
        const bool ld = g < nvec;
        float acc[E];
        uint32_t smax;
        fsumv<BITS, S>(in, in_stride, k, pay_bytes, e, e >> lgb, ld, acc, smax);
        if (!ZK_ROSTAGE && !ld)
            continue;
        if (mean) {
#pragma unroll
            for (int i = 0; i < E; i++)
                acc[i] = __fdiv_rn(acc[i], divisor);
        }
        uint8_t *p = (uint8_t *)y + e * oes;
        const bool fast = ld && yal && dok && smax < ZK_HUGE_SCALE && e + E <= count;
        if constexpr (ZK_ROSTAGE) {
            /* every lane is here: the warp stores together or not at all */
            if (__all_sync(ZK_FULL_MASK, fast)) {
                stage_store<ODT, E>((uint8_t *)y + (it * ZK_WARP) * E * oes, acc, lane);
                continue;
            }
            if (!ld)
                continue;
        }
        if (fast) {
#pragma unroll
            for (int s8 = 0; s8 < S; s8++) {
                float w[8];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    w[i] = acc[8 * s8 + i];
                slot_store_fast<ODT>(p + 8 * s8 * oes, w);
            }
        } else {
#pragma unroll
            for (int i = 0; i < E; i++) {
                if (e + i < count) {
                    if (ODT == ZK_FP32)
                        ((uint32_t *)p)[i] = narrow_bits<ODT>(acc[i]);
                    else
                        ((uint16_t *)p)[i] = (uint16_t)narrow_bits<ODT>(acc[i]);
                }
            }
        }
    }
}

template <int ODT, int BITS, int S>
void frov_launch(const uint8_t *in, uint64_t in_stride, int k, uint64_t pay, int lgb,
                 uint64_t count, int mean, float divisor, void *y, cudaStream_t stream)
{
    uint64_t nvec = (count + 8 * S - 1) / (8 * S);
    uint64_t iters = (nvec + ZK_WARP - 1) / ZK_WARP;
    uint64_t ctas = (iters + ZK_CTA_THREADS / ZK_WARP - 1) / (ZK_CTA_THREADS / ZK_WARP);
    frov_kernel<ODT, BITS, S><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
        in, in_stride, k, pay, lgb, count, mean, divisor, y);
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
    /* int4 into bf16/fp16 only: into fp32 the vector kernel measured slower
     * (H200: 52 % of the copy against 79 %; bf16 81 % against 61 %). */
    if constexpr (BITS == 4 && ZK_RO4 > 1 && (ODT != ZK_FP32 || ZK_RO4F)) {
        frov_launch<ODT, 4, ZK_RO4>(in, in_stride, k, pay, lgb, count, mean, divisor, y, stream);
        return 1;
    }
    if constexpr (BITS == 8 && ZK_RO8 > 1) {
        frov_launch<ODT, 8, ZK_RO8>(in, in_stride, k, pay, lgb, count, mean, divisor, y, stream);
        return 1;
    }
    uint64_t nslots = (count + 7) / 8;
    uint64_t iters = (nslots + ZK_RO_U * ZK_WARP - 1) / (ZK_RO_U * ZK_WARP);
    uint64_t ctas = (iters + ZK_CTA_THREADS / ZK_WARP - 1) / (ZK_CTA_THREADS / ZK_WARP);
    fro_kernel<ODT, BITS, ZK_RO_U><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
        in, in_stride, k, pay, lgb, count, mean, divisor, y);
    return 1;
}

} // namespace zk

#endif
