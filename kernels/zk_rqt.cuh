/*
 * zk_rqt.cuh — int4 reduce+requantize fed by the bulk copy engine (sm_90),
 * behind ZK_RQT (on since session 31, with ZK_B4's biased sums: 80 % of the
 * copy on an H200 against frv_kernel's 73 %; either change alone lost:
 * bench/results/kernels-2026-11-29-s31/).
 *
 * frv_kernel's warps load their own codes (one 16-byte load per lane and
 * chunk, batches of ZK_VKB chunks, the next batch prefetched into L2) and
 * wait for them: on an H200 the kernel is held by instruction issue and
 * load latency together (bench/results/kernels-2026-11-29-s28/, ncu). Here
 * one producer warp per CTA has the copy engine bring each tile's codes and
 * scales of all k chunks into shared memory, NS tiles ahead, and the
 * consumer warps read them from there: no load latency in their path, no
 * prefetch or address arithmetic in their instructions. Same lanes, same
 * arithmetic as frv_kernel (vaccum, fquantv), so the same bytes.
 *
 * A tile is RQT_WC warps x 1024 elements (each lane 32, S = 4); a block of
 * B = 32 * T elements is T lanes (T <= 32, one vector per lane: B <= 1024).
 *
 * With ZK_B4 (zk_arith.h) the consumers sum the biased codes as
 * frv_kernel's fsumv_b4 does (b4_mul_for, b4_word_fast: the fast form;
 * ZK_B4G = 1: a scale at or above ZK_B4_FAST_MAX sends the lane's vector
 * through a second pass with the reference's steps, b4_chunk, from the same
 * shared stage, before the warp releases it), so the bytes of the B4 C
 * reference. Blocks and inputs frt_kernel does not take (k > ZK_RQT_KMAX,
 * a block above 1024, below sm_90) go to frq_dispatch as before: frv_kernel
 * or the team kernel, under the same ZK_B4 contract.
 */
#ifndef ZK_RQT_CUH
#define ZK_RQT_CUH

#include <atomic>

#include "zk_fast.cuh"

#ifndef ZK_RQT
#define ZK_RQT 1 /* since session 31, with ZK_B4 = 1: 79.7-80.1 % of the copy on an H200 against 73 % */
#endif
#ifndef ZK_RQT_NS
#define ZK_RQT_NS 2 /* tiles in flight per CTA (3 with 2 CTAs per SM: half a point slower) */
#endif
#ifndef ZK_RQT_WC
#define ZK_RQT_WC 8 /* consumer warps per CTA */
#endif
#ifndef ZK_RQT_MINB
#define ZK_RQT_MINB 3 /* CTAs per SM the registers must allow (72 registers, no spill) */
#endif
#define ZK_RQT_KMAX 8 /* the most chunks a tile's stage holds */

namespace zk
{

constexpr int kRqtTileElems = ZK_RQT_WC * 1024;
constexpr uint32_t kRqtCodeBytes = kRqtTileElems / 2; /* per chunk and tile */

/* Shared bytes of one stage for k chunks with tb blocks per tile: each
 * chunk's codes, then each chunk's scales (16-byte padded). */
__host__ __device__ inline uint32_t rqt_scale_bytes(uint32_t tb)
{
    return (tb * 4u + 15u) & ~15u;
}
__host__ __device__ inline uint32_t rqt_stage_bytes(int k, uint32_t tb)
{
    return (uint32_t)k * (kRqtCodeBytes + rqt_scale_bytes(tb));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void rqt_wait(uint32_t mb, uint32_t parity)
{
    asm volatile("{\n .reg .pred p;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra W;\n}" ::"r"(mb),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void rqt_copy(uint32_t s, const void *g, uint32_t bytes, uint32_t mb)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
                 "[%3];" ::"r"(s),
                 "l"(g), "r"(bytes), "r"(mb)
                 : "memory");
}
#endif

/* The 32 codes of a lane's vector of one chunk at shared p (16 bytes). */
__device__ __forceinline__ vcodes<4, 4> rqt_codes(const uint8_t *p)
{
    const uint4 a = *(const uint4 *)p;
    vcodes<4, 4> cd;
    cd.w[0] = a.x, cd.w[1] = a.y, cd.w[2] = a.z, cd.w[3] = a.w;
    return cd;
}
/* acc += the 32 codes of one chunk at shared p, scale sv. */
__device__ __forceinline__ void rqt_chunk(const uint8_t *p, float sv, float (&acc)[32])
{
    const vcodes<4, 4> cd = rqt_codes(p);
#pragma unroll
    for (int g = 0; g < 4; g++)
        vaccum<4, 4>(cd, g, sv, acc);
}

#if ZK_B4
/* ZK_B4: acc += the fast form of the 32 biased codes of one chunk at
 * shared p (16 bytes), scale sv (fsumv_b4's step for one chunk); bias.t
 * gets sv, m (ZK_B4G) the largest |sv| so far (FMNMX: a NaN passes, as in
 * fsumv_b4, and gives NaN on both paths). */
__device__ __forceinline__ void rqt_chunk_b4(const uint8_t *p, float sv, float (&acc)[32],
                                             zk_b4_bias &bias, float &m)
{
    const uint4 a = *(const uint4 *)p;
    if (ZK_B4G)
        m = fmaxf(m, fabsf(sv));
    bias.t = __fadd_rn(bias.t, sv);
    const b4_mul mb = b4_mul_for(sv);
    b4_word_fast<4>(a.x, mb, acc, 0);
    b4_word_fast<4>(a.y, mb, acc, 1);
    b4_word_fast<4>(a.z, mb, acc, 2);
    b4_word_fast<4>(a.w, mb, acc, 3);
}
/* ZK_B4: the end of a lane's sums: with ZK_B4G, when a scale reached the
 * fast form's limit (m), the sums again from chunk 0 with the reference's
 * steps (b4_chunk; the stage is still the warp's), then the bias off
 * (fsumv_b4's tail). sc: the lane's codes of chunk 0, ss its scale of
 * chunk 0, sstride floats between chunks' scales. */
__device__ __forceinline__ void rqt_finish_b4(const uint8_t *sc, const float *ss, uint32_t sstride,
                                              int k, float m, float (&acc)[32], zk_b4_bias &bias)
{
    if (ZK_B4G && !(m < ZK_B4_FAST_MAX)) {
#pragma unroll
        for (int i = 0; i < 32; i++)
            acc[i] = 0.0f;
        bias.t = 0.0f;
#pragma unroll 1
        for (int c = 0; c < k; c++)
            b4_chunk<4>(rqt_codes(sc + c * kRqtCodeBytes), ss[c * sstride], acc, bias);
    }
    b4_unbias<32>(bias, acc);
}
#endif

template <int T, int KC>
__global__ void __launch_bounds__((ZK_RQT_WC + 1) * ZK_WARP, ZK_RQT_MINB)
    frt_kernel(const uint8_t *in, uint64_t in_stride, int k_arg, uint64_t piece, uint64_t pay_bytes,
               uint64_t nb, uint8_t *out, unsigned long long *d_poisoned)
{
    /* KC > 0: built for k == KC chunks (ZK_VK8's case), the chunk loop
     * unrolled so that its shared loads are issued ahead of the arithmetic */
    const int k = KC ? KC : k_arg;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int S = 4, E = 32, B = T * E, TPW = ZK_WARP / T, TB = ZK_RQT_WC * TPW;
    constexpr uint32_t SB = (TB * 4u + 15u) & ~15u;
    extern __shared__ __align__(128) uint8_t rsm[];
    __shared__ __align__(8) uint64_t full[ZK_RQT_NS], empty[ZK_RQT_NS];
    const int warp = (int)(threadIdx.x / ZK_WARP), lane = (int)(threadIdx.x % ZK_WARP);
    const uint32_t stage = (uint32_t)k * (kRqtCodeBytes + SB);
    const uint64_t tiles = (nb + TB - 1) / TB;
    const uint32_t sm0 = (uint32_t)__cvta_generic_to_shared(rsm);
    if (threadIdx.x == 0) {
        for (int s = 0; s < ZK_RQT_NS; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(
                (uint32_t)__cvta_generic_to_shared(&full[s])));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(
                             (uint32_t)__cvta_generic_to_shared(&empty[s])),
                         "r"(ZK_RQT_WC));
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == ZK_RQT_WC) {
        /* the producer: one lane issues every copy */
        if (lane != 0)
            return;
        uint32_t i = 0;
        for (uint64_t t = blockIdx.x; t < tiles; t += gridDim.x, i++) {
            const uint32_t s = i % ZK_RQT_NS;
            const uint32_t mf = (uint32_t)__cvta_generic_to_shared(&full[s]);
            rqt_wait((uint32_t)__cvta_generic_to_shared(&empty[s]), ((i / ZK_RQT_NS) & 1u) ^ 1u);
            const uint64_t coff = t * (uint64_t)kRqtCodeBytes, blk0 = t * TB;
            const uint32_t cb = (uint32_t)min((uint64_t)kRqtCodeBytes, pay_bytes - coff);
            const uint32_t sb = (uint32_t)(((min(nb, blk0 + TB) - blk0) * 4 + 15) & ~15ull);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mf),
                         "r"((uint32_t)k * (cb + sb))
                         : "memory");
            const uint32_t base = sm0 + s * stage;
            for (int c = 0; c < k; c++) {
                const uint8_t *g = in + (uint64_t)c * in_stride;
                rqt_copy(base + c * kRqtCodeBytes, g + coff, cb, mf);
                rqt_copy(base + k * kRqtCodeBytes + c * SB, g + pay_bytes + blk0 * 4, sb, mf);
            }
        }
        return;
    }
    /* the consumers: warp w of a tile takes its blocks w * TPW .. + TPW - 1,
     * lane li of team `team` its vector li of block team (frv_kernel's
     * lanes for NV = 1) */
    const int li = lane % T, team = lane / T;
    fdst d = fdst_whole<4>(out, pay_bytes, nb);
    int poisoned = 0;
    uint32_t i = 0;
    for (uint64_t t = blockIdx.x; t < tiles; t += gridDim.x, i++) {
        const uint32_t s = i % ZK_RQT_NS;
        const uint64_t blk = t * TB + (uint64_t)(warp * TPW + team);
        const bool inr = blk < nb;
        const uint64_t e = blk * B + (uint64_t)li * E;
        const bool ld = inr && e < d.pay_elems;
        float v[1][E];
#pragma unroll
        for (int x = 0; x < E; x++)
            v[0][x] = 0.0f;
        rqt_wait((uint32_t)__cvta_generic_to_shared(&full[s]), (i / ZK_RQT_NS) & 1u);
        if (ld) {
            const uint8_t *sc = rsm + s * stage + (warp * 1024 + team * B + li * E) / 2;
            const float *ss = (const float *)(rsm + s * stage + k * kRqtCodeBytes) +
                              (warp * TPW + team);
#if ZK_B4
            /* ZK_B4: the biased sums (zk_arith.h), as fsumv_b4 */
            zk_b4_bias bias = {0.0f};
            float m = 0.0f;
            if constexpr (KC > 0) {
#pragma unroll
                for (int c = 0; c < KC; c++)
                    rqt_chunk_b4(sc + c * kRqtCodeBytes, ss[c * (SB / 4)], v[0], bias, m);
            } else {
#pragma unroll 2
                for (int c = 0; c < k; c++)
                    rqt_chunk_b4(sc + c * kRqtCodeBytes, ss[c * (SB / 4)], v[0], bias, m);
            }
            rqt_finish_b4(sc, ss, SB / 4, k, m, v[0], bias);
#else
            if constexpr (KC > 0) {
#pragma unroll
                for (int c = 0; c < KC; c++)
                    rqt_chunk(sc + c * kRqtCodeBytes, ss[c * (SB / 4)], v[0]);
            } else {
#pragma unroll 2
                for (int c = 0; c < k; c++)
                    rqt_chunk(sc + c * kRqtCodeBytes, ss[c * (SB / 4)], v[0]);
            }
#endif
        }
        __syncwarp();
        if (lane == 0)
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
                             (uint32_t)__cvta_generic_to_shared(&empty[s]))
                         : "memory");
        if (e + E > piece) {
            /* the tail of the last block reads as 0 */
#pragma unroll
            for (int x = 0; x < E; x++)
                if (e + x >= piece)
                    v[0][x] = 0.0f;
        }
        poisoned += fquantv<4, S, T, 1>(v, blk, inr, li, d);
    }
    if (poisoned && d_poisoned)
        atomicAdd(d_poisoned, (unsigned long long)poisoned);
#else
    (void)k;
    __trap(); /* rqt_ready() lets no launch reach code built before sm_90 */
#endif
}

/* The most dynamic shared memory frt_kernel<T, *> may take on this device, set
 * once (the largest stage count times the largest stage), and the number of
 * SMs; 0 when it cannot run here (no sm_90 code, or the attribute refused). */
#define ZK_RQT_DEVICES 64
template <int T> int rqt_ready()
{
    static std::atomic<int> state[ZK_RQT_DEVICES]; /* 0 unknown, -1 no, else SMs */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= ZK_RQT_DEVICES)
        return 0;
    int st = state[dev].load(std::memory_order_relaxed);
    if (st == 0) {
        int major = 0, sms = 0;
        cudaFuncAttributes fa;
        st = -1;
        constexpr uint32_t tb = ZK_RQT_WC * (ZK_WARP / T);
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaFuncGetAttributes(&fa, frt_kernel<T, 0>) != cudaSuccess)
            (void)cudaGetLastError();
        else if (major >= 9 && sms > 0 && fa.binaryVersion >= 90) {
            const int mx = (int)(ZK_RQT_NS * rqt_stage_bytes(ZK_RQT_KMAX, tb));
            if (cudaFuncSetAttribute(frt_kernel<T, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     mx) == cudaSuccess &&
                cudaFuncSetAttribute(frt_kernel<T, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     mx) == cudaSuccess)
                st = sms;
            else
                (void)cudaGetLastError();
        }
        state[dev].store(st, std::memory_order_relaxed);
    }
    return st > 0 ? st : 0;
}

/* Launches frt_kernel<T> when it applies: int4, k <= ZK_RQT_KMAX, a block
 * of 32 * T elements (T a power of two up to 32), 16-aligned chunks (the
 * entry point checked in, out and in_stride). 0 otherwise. */
template <int T>
int rqt_try(int t, const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, uint64_t pay,
            uint64_t nb, uint8_t *out, unsigned long long *d_poisoned, cudaStream_t stream)
{
    if (t != T)
        return 0;
    const int sms = rqt_ready<T>();
    if (sms == 0)
        return 0;
    constexpr uint32_t tb = ZK_RQT_WC * (ZK_WARP / T);
    const uint32_t smem = ZK_RQT_NS * rqt_stage_bytes(k, tb);
    const uint64_t tiles = (nb + tb - 1) / tb;
    /* CTAs per SM the shared memory allows (228 KiB on sm_90, 1 KiB each
     * kept by the driver) */
    const uint64_t per_sm = (uint64_t)(227u << 10) / (smem + 1024u);
    const uint64_t grid = min(tiles, (uint64_t)sms * (per_sm ? per_sm : 1));
    if (k == 8)
        frt_kernel<T, 8><<<(unsigned)grid, (ZK_RQT_WC + 1) * ZK_WARP, smem, stream>>>(
            in, in_stride, k, piece, pay, nb, out, d_poisoned);
    else
        frt_kernel<T, 0><<<(unsigned)grid, (ZK_RQT_WC + 1) * ZK_WARP, smem, stream>>>(
            in, in_stride, k, piece, pay, nb, out, d_poisoned);
    return 1;
}

inline int rqt_dispatch(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
                        uint32_t block, uint64_t pay, uint64_t nb, uint8_t *out,
                        unsigned long long *d_poisoned, cudaStream_t stream)
{
#if ZK_RQT
    if (k > ZK_RQT_KMAX || block % 32 || block > 1024 || (block & (block - 1)))
        return 0;
    const int t = (int)(block / 32);
#define ZK_RT(T) rqt_try<T>(t, in, in_stride, k, piece, pay, nb, out, d_poisoned, stream)
    return ZK_RT(1) || ZK_RT(2) || ZK_RT(4) || ZK_RT(8) || ZK_RT(16) || ZK_RT(32);
#undef ZK_RT
#else
    (void)in, (void)in_stride, (void)k, (void)piece, (void)block, (void)pay, (void)nb, (void)out;
    (void)d_poisoned, (void)stream;
    return 0;
#endif
}

} // namespace zk

#endif
