/*
 * quant.cu — CUDA block quantization: quantize (fp32/fp16/bf16 -> int8/int4
 * chunk) and dequantize (chunk -> fp32/fp16/bf16); the exact k-way sum of the
 * unquantized reduce-scatter is in sum.cu. Byte-identical to kernels/quant_ref.c (the
 * arithmetic is zk_arith.h on both sides); launch contract in
 * zpp_kernels_cuda.h. One pass over memory: every input byte is read once,
 * every output byte written once, 16 bytes per access on the fast path.
 */
#include "zk_fast.cuh"

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
                /* q * s (|q| <= 128) is NaN only when s is not finite */
                if ((__float_as_uint(s[j]) & ZK_F32_ABS_MASK) < ZK_F32_EXP_MASK)
                    store_vec_nonan<DT, VE>(py + j * STEP * es, v);
                else
                    store_elems<DT, VE>(py + j * STEP * es, VE, v);
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
            uint8_t *p = (uint8_t *)y + e * es;
            if ((__float_as_uint(s[j]) & ZK_F32_ABS_MASK) < ZK_F32_EXP_MASK &&
                n_out - e >= (uint64_t)VE && yal)
                store_vec_nonan<DT, VE>(p, v);
            else
                store_elems<DT, VE>(p, n_out - e, v);
        }
    }
}

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
