/*
 * quant.cu — CUDA block quantization: quantize (fp32/fp16/bf16 -> int8/int4
 * chunk) and dequantize (chunk -> fp32/fp16/bf16); the exact k-way sum of the
 * unquantized reduce-scatter is in sum.cu. Byte-identical to kernels/quant_ref.c (the
 * arithmetic is zk_arith.h on both sides); launch contract in
 * zpp_kernels_cuda.h. One pass over memory: every input byte is read once,
 * every output byte written once, 16 bytes per access on the fast path.
 */
#include "zk_dqs_plan.h"
#include "zk_fast.cuh"
#include <atomic>

using namespace zk;

namespace
{

/* Elements of DT in one 16-byte vector, and per thread. */
template <int DT> struct shape {
    static constexpr int es = dt_traits<DT>::size;
    static constexpr int ve = ZK_VEC_BYTES / es;
    static constexpr int ept = ve * ZK_NV;
};

/* One team of B / ept threads per block of B elements. */
template <int DT, int BITS>
__global__ void ZK_LB_TEAM quantize_kernel(const void *x, uint64_t n_valid, uint32_t block,
                                           uint8_t *out, uint64_t pay_bytes, uint64_t nb,
                                           unsigned long long *d_poisoned)
{
    __shared__ team_smem sm;
    constexpr int es = shape<DT>::es, VE = shape<DT>::ve;
    int team = (int)(block / shape<DT>::ept), tpc = (int)blockDim.x / team;
    int lane = (int)threadIdx.x % team, tix = (int)threadIdx.x / team;
    uint64_t ngroups = (nb + (uint64_t)tpc - 1) / (uint64_t)tpc;
    qdst d;
    d.payload = out;
    d.scales = (float *)(out + pay_bytes);
    d.pay_elems = pay_bytes * 8 / BITS;
    d.nb = nb;
    int parity = 0;
    for (uint64_t grp = blockIdx.x; grp < ngroups; grp += gridDim.x, parity ^= 1) {
        uint64_t b = grp * (uint64_t)tpc + (uint64_t)tix;
        int active = b < nb;
        const uint8_t *src[ZK_NV];
        uint64_t valid[ZK_NV];
        raw16 r[ZK_NV];
        bool slow[ZK_NV];
#pragma unroll
        for (int j = 0; j < ZK_NV; j++) {
            uint64_t first = b * block + vec_pos<ZK_CONTIG, VE, ZK_NV>(lane, j, team);
            valid[j] = active && first < n_valid ? n_valid - first : 0;
            src[j] = (const uint8_t *)x + (valid[j] ? first * es : 0);
            r[j] = load_elems_raw<DT, VE>(src[j], valid[j], &slow[j]);
        }
        float v[ZK_NV][VE];
#pragma unroll
        for (int j = 0; j < ZK_NV; j++)
            widen_vec<DT, VE>(r[j], slow[j], src[j], valid[j], v[j]);
        d.jb = b;
        d.first = b * block;
        if (quant_team<BITS, VE, ZK_NV, ZK_CONTIG>(v, active, lane, team, tix, d, sm, parity) &&
            d_poisoned)
            atomicAdd(d_poisoned, 1ull);
    }
}

/* Stores the VE values v decoded with scale s at p, left elements before
 * the output's end: as one vector when that is safe (q * s with |q| <= 128
 * is NaN only when s is not finite, so a finite s needs no NaN fix-ups; a
 * whole vector; p 16-aligned where the caller says so), else element by
 * element. */
template <int DT, int VE>
__device__ __forceinline__ void dq_store(uint8_t *p, const float (&v)[VE], float s, uint64_t left,
                                         bool aligned)
{
    if ((__float_as_uint(s) & ZK_F32_ABS_MASK) < ZK_F32_EXP_MASK && left >= (uint64_t)VE && aligned)
        store_vec_nonan<DT, VE>(p, v);
    else
        store_elems<DT, VE>(p, left, v);
}

/* Flat: a CTA owns tiles of ZK_CTA_THREADS * ZK_DQ_NV output vectors; thread t
 * takes vectors t, t + 256, ... of a tile (coalesced). */
template <int DT, int BITS>
__global__ void ZK_LB_FLAT dequantize_kernel(const uint8_t *in, uint64_t pay_bytes, uint64_t n_out,
                                             uint32_t block, void *y)
{
    constexpr int es = shape<DT>::es, VE = shape<DT>::ve;
    constexpr uint64_t tile_vecs = (uint64_t)ZK_CTA_THREADS * ZK_DQ_NV;
    const float *scales = (const float *)(in + pay_bytes);
    uint64_t nvec = (n_out + VE - 1) / VE, tiles = (nvec + tile_vecs - 1) / tile_vecs;
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        raw16 r[ZK_DQ_NV];
        float s[ZK_DQ_NV];
        uint64_t e[ZK_DQ_NV];
#pragma unroll
        for (int j = 0; j < ZK_DQ_NV; j++) {
            e[j] = (tile * tile_vecs + (uint64_t)j * ZK_CTA_THREADS + threadIdx.x) * VE;
            if (e[j] < n_out) {
                r[j] = load_codes<BITS, VE>(in, e[j]);
                s[j] = __ldg(scales + e[j] / block);
            }
        }
#pragma unroll
        for (int j = 0; j < ZK_DQ_NV; j++) {
            if (e[j] < n_out) {
                float v[VE];
                if (VE == 8 && BITS == 4) {
                    /* the 8 nibbles split by two masks, one permute each */
                    slot_codes<4> c;
                    c.w[0] = r[j].w[0] ^ ZK_I4_BIAS; /* undo load_codes' bias */
                    float q[8];
                    codes_float<4>(c, q);
#pragma unroll
                    for (int i = 0; i < VE; i++)
                        v[i] = zk_decode_f(q[i % 8], s[j]);
                } else {
#pragma unroll
                    for (int i = 0; i < VE; i++)
                        v[i] = zk_decode_f(code_float<BITS>(r[j], i), s[j]);
                }
                uint8_t *p = (uint8_t *)y + e[j] * es;
                /* q * s (|q| <= 128) is NaN only when s is not finite: one check
                 * per vector, then the paired conversions without NaN fix-ups */
                if ((__float_as_uint(s[j]) & ZK_F32_ABS_MASK) < ZK_F32_EXP_MASK &&
                    n_out - e[j] >= (uint64_t)VE && ((uintptr_t)p & 15) == 0)
                    store_vec_nonan<DT, VE>(p, v);
                else
                    store_elems<DT, VE>(p, n_out - e[j], v);
            }
        }
    }
}

#ifndef ZK_DQX
#define ZK_DQX 1 /* 1: dequantize power-of-two block sizes through dqx_kernel */
#endif
#ifndef ZK_DQX_TMA
/* 1: on sm_90 and later, dqx_kernel writes each whole tile to shared memory
 * and the bulk copy engine stores it (cp.async.bulk), instead of 16-byte
 * stores per thread: the write-heavy shapes gain about a point of the copy
 * on an H100 (int4 -> fp32 93.4 -> 94.3 %, kernels-2026-11-23-s16/). Off
 * with evict-first stores, which the bulk copy does not take. */
#define ZK_DQX_TMA (!ZK_ST_CS)
#endif
#if ZK_DQX_TMA && ZK_ST_CS
#error "ZK_DQX_TMA stages through shared memory with plain stores: not with ZK_ST_CS"
#endif
#if ZK_DQX_TMA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ZK_DQX_BULK 1 /* this pass's code has the bulk copy engine */
#else
#define ZK_DQX_BULK 0
#endif
#ifndef ZK_DQS
/* sm_90: which dequantize shapes go in rounds of reads, then writes
 * (dqs_kernel): 1 fp32 from int4 only, 0 none, 2 every shape (to measure).
 * Session 17 (kernels-2026-11-23-s17/): fp32 from int4 ran 94.2-94.7 ->
 * 96.2-96.4 % of the copy on an H100 (98.6-98.7 % at 1 GiB) and 90.8-91.0
 * -> 91.1-91.8 % on an H200; every other shape lost 5-21 points. */
#define ZK_DQS 1
#endif
#ifndef ZK_DQS_SMEM
#define ZK_DQS_SMEM (200u << 10) /* shared bytes per CTA: a slab's codes and scales */
#endif
#ifndef ZK_DQS_MIN
#define ZK_DQS_MIN (8u << 20) /* the smallest chunk (code bytes) that goes in rounds */
#endif
#ifndef ZK_DQX_NV
#define ZK_DQX_NV 2 /* vectors per thread and tile, dqx_kernel (2: 93-95 % of the copy on
                     * an H200, kernels-2026-11-22-h200-fqx.txt) */
#endif

/* dequantize_kernel's layout and arithmetic with less per-vector work: the
 * scale index is e >> lgb (dequantize_kernel divides 64-bit e by the block
 * size for every vector: ~20 of its ~75 instructions per 8 bf16 outputs), a
 * tile wholly in range with an aligned output takes one branch and constant
 * offsets from one pointer, and int4 codes into 16-bit outputs decode two
 * per HADD2 (codes_float4h). Same operations on the same values. */
/* The NV vectors of one thread (raw codes r, scales s) decoded into v. */
template <int BITS, int VE>
__device__ __forceinline__ void dqx_decode(raw16 r, float s, float (&v)[VE])
{
    if (VE == 8 && BITS == 4) {
        float q[8];
        codes_float4h(r.w[0], q);
#pragma unroll
        for (int i = 0; i < VE; i++)
            v[i] = zk_decode_f(q[i % 8], s);
    } else {
#pragma unroll
        for (int w = 0; w < 4; w++)
            r.w[w] ^= BITS == 8 ? ZK_I8_BIAS : ZK_I4_BIAS;
#pragma unroll
        for (int i = 0; i < VE; i++)
            v[i] = zk_decode_f(code_float<BITS>(r, i), s);
    }
}

template <int DT, int BITS, int NV>
__global__ void ZK_LB_FLAT dqx_kernel(const uint8_t *in, uint64_t pay_bytes, uint64_t n_out,
                                      int lgb, void *y)
{
    constexpr int es = shape<DT>::es, VE = shape<DT>::ve, CB = VE * BITS / 8;
    constexpr int STEP = ZK_CTA_THREADS * VE; /* elements between a thread's vectors */
    constexpr uint64_t tile_vecs = (uint64_t)ZK_CTA_THREADS * NV;
    const float *scales = (const float *)(in + pay_bytes);
    const uint64_t nvec = (n_out + VE - 1) / VE, tiles = (nvec + tile_vecs - 1) / tile_vecs;
    const bool yal = ((uintptr_t)y & 15) == 0;
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint64_t e0 = (tile * tile_vecs + threadIdx.x) * VE;
        raw16 r[NV];
        float s[NV];
        if (yal && (tile + 1) * tile_vecs * VE <= n_out) {
            /* the whole tile: constant offsets, no tests */
            const uint8_t *pc = in + e0 * BITS / 8;
#pragma unroll
            for (int j = 0; j < NV; j++) {
                r[j] = load_raw<CB>(pc + j * STEP * BITS / 8);
                s[j] = __ldg(scales + ((e0 + (uint64_t)j * STEP) >> lgb));
            }
            uint8_t *py = (uint8_t *)y + e0 * es;
#if ZK_DQX_BULK
            /* the tile's VE * es = 16-byte vectors, in the tile's order */
            __shared__ __align__(128) uint4 stile[ZK_CTA_THREADS * NV];
            py = (uint8_t *)&stile[threadIdx.x];
#endif
#pragma unroll
            for (int j = 0; j < NV; j++) {
                float v[VE];
                dqx_decode<BITS, VE>(r[j], s[j], v);
                dq_store<DT, VE>(py + j * STEP * es, v, s[j], VE, true);
            }
#if ZK_DQX_BULK
            static_assert(VE * es == 16, "one 16-byte vector per thread and j");
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncthreads();
            /* thread 0 waits until the copy engine has read the tile (the
             * buffer is then free), not until its writes land: waiting for
             * those held each CTA for a write's latency (84-89 % of the
             * copy on an H100 for the fp32 shapes) */
            if (threadIdx.x == 0) {
                uint8_t *dst = (uint8_t *)y + tile * tile_vecs * VE * es;
                zk_bulk_store(dst, stile, (uint32_t)sizeof stile);
            }
            __syncthreads();
#endif
            continue;
        }
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const uint64_t e = e0 + (uint64_t)j * STEP;
            if (e < n_out) {
                r[j] = load_raw<CB>(in + e * BITS / 8);
                s[j] = __ldg(scales + (e >> lgb));
            }
        }
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const uint64_t e = e0 + (uint64_t)j * STEP;
            if (e >= n_out)
                continue;
            float v[VE];
            dqx_decode<BITS, VE>(r[j], s[j], v);
            dq_store<DT, VE>((uint8_t *)y + e * es, v, s[j], n_out - e, yal);
        }
    }
}

#if ZK_DQS
/* Dequantize in rounds, one launch per round: each CTA (one per SM) has the
 * bulk copy engine read a whole slab of codes and its scales into shared
 * memory, and only then decodes and writes. DRAM so sees each round's
 * reads as one burst and then only writes, which it serves faster than the
 * same traffic interleaved (kernel_bench's "reads, then writes" rows: 1:8
 * at 97-100 % of the copy, against 89-94 % interleaved). Rounds are
 * separate launches, so no CTA waits for another: the grid needs no
 * co-residency. Same arithmetic as dqx_kernel. */
#define ZK_DQS_THREADS 512
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Bulk copy of bytes (a multiple of 16) at g into shared s, counted on the
 * mbarrier at shared mb. */
__device__ __forceinline__ void dqs_bulk_load(uint32_t s, const void *g, uint32_t bytes, uint32_t mb)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
                 "[%3];" ::"r"(s),
                 "l"(g), "r"(bytes), "r"(mb)
                 : "memory");
}
#endif
/* CTA b of a round dequantizes elements [e_base + b * slab_e, + slab_e)
 * (clipped to n_out): zk_dqs_plan.h has the arithmetic, and
 * tests/unit/test_dqs_plan.c its checks. */
template <int DT, int BITS>
__global__ void __launch_bounds__(ZK_DQS_THREADS, 1)
    dqs_kernel(const uint8_t *in, uint64_t pay_bytes, uint64_t n_out, int lgb, void *y,
               uint64_t e_base, uint64_t slab_e)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int es = shape<DT>::es, VE = shape<DT>::ve, CB = VE * BITS / 8;
    extern __shared__ __align__(128) uint8_t dsm[];
    __shared__ __align__(8) uint64_t mbar;
    zk_dqs_cta part;
    if (!zk_dqs_cta_part(n_out, pay_bytes, BITS, lgb, e_base, slab_e, blockIdx.x, &part))
        return;
    const uint64_t e_lo = part.e_lo, e_hi = part.e_hi, b_lo = part.b_lo;
    const uint32_t s_off = (uint32_t)part.s_off;
    const uint32_t mb = (uint32_t)__cvta_generic_to_shared(&mbar);
    if (threadIdx.x == 0) {
        const uint32_t sm0 = (uint32_t)__cvta_generic_to_shared(dsm);
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(mb));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mb),
                     "r"((uint32_t)(part.c_bytes + part.s_bytes))
                     : "memory");
        dqs_bulk_load(sm0, in + part.c_lo, (uint32_t)part.c_bytes, mb);
        dqs_bulk_load(sm0 + s_off, in + pay_bytes + b_lo * 4, (uint32_t)part.s_bytes, mb);
    }
    __syncthreads(); /* the barrier is initialised before anyone waits on it */
    asm volatile("{\n .reg .pred p;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n"
                 " @!p bra W;\n}" ::"r"(mb)
                 : "memory");
    const float *ssc = (const float *)(dsm + s_off);
    const uint64_t nv = (e_hi - e_lo + VE - 1) / VE;
#pragma unroll 4
    for (uint64_t v = threadIdx.x; v < nv; v += ZK_DQS_THREADS) {
        const uint64_t e = e_lo + v * VE;
        const float sc = ssc[(e >> lgb) - b_lo];
        float val[VE];
        dqx_decode<BITS, VE>(load_raw_shared<CB>(dsm + v * CB), sc, val);
        dq_store<DT, VE>((uint8_t *)y + e * es, val, sc, n_out - e, true);
    }
#else
    __trap(); /* dqs_ready() lets no launch reach code built before sm_90 */
#endif
}

/* Per device and instantiation, looked up once: the SM count when
 * dqs_kernel<DT, BITS> can run there (its code built for sm_90 or later,
 * its shared memory granted), else 0. Racing first calls compute the same
 * value. */
#define ZK_DQS_DEVICES 64
template <int DT, int BITS> int dqs_ready()
{
    static std::atomic<int> state[ZK_DQS_DEVICES]; /* 0 unknown, -1 no, else SMs */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= ZK_DQS_DEVICES)
        return 0;
    int st = state[dev].load(std::memory_order_relaxed);
    if (st == 0) {
        int major = 0, sms = 0;
        cudaFuncAttributes fa;
        st = -1;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaFuncGetAttributes(&fa, dqs_kernel<DT, BITS>) != cudaSuccess)
            (void)cudaGetLastError(); /* a refusal here is an answer, not the caller's error */
        else if (major >= 9 && sms > 0 && fa.binaryVersion >= 90) {
            if (cudaFuncSetAttribute(dqs_kernel<DT, BITS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)ZK_DQS_SMEM) == cudaSuccess)
                st = sms;
            else
                (void)cudaGetLastError();
        }
        state[dev].store(st, std::memory_order_relaxed);
    }
    return st > 0 ? st : 0;
}

/* Launches the rounds of dqs_kernel; 0 when it does not apply (see
 * dqs_ready, an unaligned output, or fewer than ZK_DQS_MIN code bytes). */
template <int DT, int BITS>
int launch_dqs(const uint8_t *in, uint64_t n, uint64_t n_out, int lgb, void *y, cudaStream_t stream)
{
    if (((uintptr_t)y & 15) || n_out * BITS / 8 < ZK_DQS_MIN)
        return 0;
    int sms = dqs_ready<DT, BITS>();
    if (sms == 0)
        return 0;
#ifdef ZK_DQS_SMS
    sms = sms < ZK_DQS_SMS ? sms : ZK_DQS_SMS; /* byte-compare builds: many rounds at small sizes */
#endif
    const uint64_t slab_max = zk_dqs_slab_max(BITS, lgb, ZK_DQS_SMEM); /* elements */
    if (slab_max == 0)
        return 0;
    for (uint64_t base = 0; base < n_out; base += slab_max * (uint64_t)sms) {
        unsigned ctas;
        const uint64_t slab = zk_dqs_round_slab(n_out, base, slab_max, sms, lgb, &ctas);
        dqs_kernel<DT, BITS><<<ctas, ZK_DQS_THREADS, ZK_DQS_SMEM, stream>>>(
            in, zk_payload_bytes(n, BITS), n_out, lgb, y, base, slab);
    }
    return 1;
}
#endif

template <int DT, int BITS>
void launch_quantize(const void *x, uint64_t n, uint64_t n_valid, uint32_t block, uint8_t *out,
                     unsigned long long *d_poisoned, cudaStream_t stream)
{
    uint64_t nb = zk_num_blocks(n, block);
    fq_args a = {};
    a.x = (const uint8_t *)x;
    a.out = out;
    a.n_valid = n_valid;
    a.pay_bytes = zk_payload_bytes(n, BITS);
    a.nb = nb;
    a.nchunks = 1;
    a.d_poisoned = d_poisoned;
    if (fqx_dispatch<DT, BITS, false>(a, block, nb, stream))
        return;
    qshape sh = qshape_for(block, shape<DT>::ept);
    uint64_t groups = (nb + (uint64_t)sh.tpc - 1) / (uint64_t)sh.tpc;
    quantize_kernel<DT, BITS><<<grid_for(groups), sh.threads, 0, stream>>>(
        x, n_valid, block, out, zk_payload_bytes(n, BITS), nb, d_poisoned);
}

template <int DT, int BITS>
void launch_dequantize(const uint8_t *in, uint64_t n, uint64_t n_out, uint32_t block, void *y,
                       cudaStream_t stream)
{
    uint64_t nvec = (n_out + shape<DT>::ve - 1) / shape<DT>::ve;
#if ZK_DQX
    if ((block & (block - 1)) == 0) {
        int lgb = 0;
        while ((1u << lgb) < block)
            lgb++;
#if ZK_DQS
        if constexpr (ZK_DQS == 2 || (DT == ZK_FP32 && BITS == 4)) {
            if (launch_dqs<DT, BITS>(in, n, n_out, lgb, y, stream))
                return;
        }
#endif
        uint64_t xctas = (nvec + ZK_CTA_THREADS * ZK_DQX_NV - 1) / (ZK_CTA_THREADS * ZK_DQX_NV);
        dqx_kernel<DT, BITS, ZK_DQX_NV><<<grid_for(xctas), ZK_CTA_THREADS, 0, stream>>>(
            in, zk_payload_bytes(n, BITS), n_out, lgb, y);
        return;
    }
#endif
    uint64_t ctas = (nvec + ZK_CTA_THREADS * ZK_DQ_NV - 1) / (ZK_CTA_THREADS * ZK_DQ_NV);
    dequantize_kernel<DT, BITS><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
        in, zk_payload_bytes(n, BITS), n_out, block, y);
}

} // namespace

extern "C" int zk_quantize_cuda(const void *x, int dtype, uint64_t n, uint64_t n_valid, int bits,
                                uint32_t block, uint8_t *out, unsigned long long *d_poisoned,
                                cudaStream_t stream)
{
    if (!zk_params_ok(bits, block) || !dtype_ok(dtype) || (n && (!out || !aligned(out))) ||
        (n_valid && !x))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    if (n_valid > n)
        n_valid = n;
#define ZK_Q(DT, B) launch_quantize<DT, B>(x, n, n_valid, block, out, d_poisoned, stream)
    if (bits == 8) {
        if (dtype == ZK_FP32)
            ZK_Q(ZK_FP32, 8);
        else if (dtype == ZK_FP16)
            ZK_Q(ZK_FP16, 8);
        else
            ZK_Q(ZK_BF16, 8);
    } else {
        if (dtype == ZK_FP32)
            ZK_Q(ZK_FP32, 4);
        else if (dtype == ZK_FP16)
            ZK_Q(ZK_FP16, 4);
        else
            ZK_Q(ZK_BF16, 4);
    }
#undef ZK_Q
    return launch_status();
}

extern "C" int zk_dequantize_cuda(const uint8_t *in, uint64_t n, uint64_t n_out, int bits,
                                  uint32_t block, void *y, int dtype, cudaStream_t stream)
{
    if (n_out > n)
        n_out = n;
    if (!zk_params_ok(bits, block) || !dtype_ok(dtype) || (n_out && (!in || !aligned(in) || !y)))
        return (int)cudaErrorInvalidValue;
    if (n_out == 0)
        return 0;
#define ZK_D(DT, B) launch_dequantize<DT, B>(in, n, n_out, block, y, stream)
    if (bits == 8) {
        if (dtype == ZK_FP32)
            ZK_D(ZK_FP32, 8);
        else if (dtype == ZK_FP16)
            ZK_D(ZK_FP16, 8);
        else
            ZK_D(ZK_BF16, 8);
    } else {
        if (dtype == ZK_FP32)
            ZK_D(ZK_FP32, 4);
        else if (dtype == ZK_FP16)
            ZK_D(ZK_FP16, 4);
        else
            ZK_D(ZK_BF16, 4);
    }
#undef ZK_D
    return launch_status();
}
