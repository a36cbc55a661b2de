/*
 * qdq.cu — zk_qdq_ptrs_cuda: quantize then dequantize k ranges in one
 * kernel, with no chunk in between. A one-node qwZ's output is, for every
 * member m, dequantize(quantize(member m's shard)); when the GPUs of the
 * node read each other's memory, each GPU can compute it from the members'
 * inputs where they lie, and a small qwZ is then one launch per GPU fenced
 * by a zk_xsync, like the small all-gather (copy.cu). Small calls are what
 * it is for: each warp takes one block at a time, holds up to 8 elements
 * per lane in registers (a block of up to 256 in one read) and reads the
 * rest of larger blocks twice. Launch contract in zpp_kernels_cuda.h.
 */
#include "zk_cuda_common.cuh"
#include "zk_xsync.cuh"

using namespace zk;

namespace
{

#define QDQ_THREADS 256
#define QDQ_WARPS (QDQ_THREADS / ZK_WARP)
#define QDQ_REG 8 /* elements per lane held in registers */
#define QDQ_GRID_CAP 1024u

struct qdq_set {
    const uint8_t *x[ZK_XSYNC_MAX];
    uint8_t *y[ZK_XSYNC_MAX];
    uint64_t n[ZK_XSYNC_MAX];
    uint64_t first_block[ZK_XSYNC_MAX + 1]; /* range i's blocks: [first_block[i], [i + 1]) */
    int k;
};

template <int DT> __device__ __forceinline__ void put1(uint8_t *y, uint64_t i, float v)
{
    if (DT == ZK_FP32)
        ((uint32_t *)y)[i] = narrow_bits<DT>(v);
    else
        ((uint16_t *)y)[i] = (uint16_t)narrow_bits<DT>(v);
}

/* The output of one element of a block with parameters p (zk_qdq_ref). */
__device__ __forceinline__ float qdq1(float v, const zk_bparams &p, int qmax)
{
    return zk_decode(p.poisoned ? 0 : zk_encode(v, &p, qmax), p.scale);
}

template <int DT, int BITS>
__global__ void __launch_bounds__(QDQ_THREADS)
    qdq_kernel(const __grid_constant__ qdq_set qs, uint32_t block, int mine,
               unsigned long long *d_poisoned, unsigned long long *h_poisoned,
               const __grid_constant__ zk_xsync xs)
{
    constexpr int qmax = BITS == 8 ? 127 : 7;
    const bool go = xs_enter(xs);
    const unsigned lane = threadIdx.x % ZK_WARP;
    const uint64_t nw = (uint64_t)gridDim.x * QDQ_WARPS;
    const uint64_t total = go ? qs.first_block[qs.k] : 0;
    for (uint64_t b = (uint64_t)blockIdx.x * QDQ_WARPS + threadIdx.x / ZK_WARP; b < total;
         b += nw) {
        int m = 0;
        while (b >= qs.first_block[m + 1])
            m++;
        uint64_t first = (b - qs.first_block[m]) * block;
        uint32_t len = (uint32_t)min((uint64_t)block, qs.n[m] - first);
        const uint8_t *x = qs.x[m];
        uint8_t *y = qs.y[m];
        float r[QDQ_REG];
        uint32_t maxbits = 0;
#pragma unroll
        for (int u = 0; u < QDQ_REG; u++) {
            uint32_t i = lane + u * ZK_WARP;
            r[u] = i < len ? widen1<DT>(x, first + i) : 0.0f;
            maxbits = max(maxbits, __float_as_uint(r[u]) & ZK_F32_ABS_MASK);
        }
        for (uint32_t i = lane + QDQ_REG * ZK_WARP; i < len; i += ZK_WARP)
            maxbits = max(maxbits, __float_as_uint(widen1<DT>(x, first + i)) & ZK_F32_ABS_MASK);
        maxbits = __reduce_max_sync(ZK_FULL_MASK, maxbits);
        zk_bparams p = zk_block_params(maxbits, qmax);
#pragma unroll
        for (int u = 0; u < QDQ_REG; u++) {
            uint32_t i = lane + u * ZK_WARP;
            if (i < len)
                put1<DT>(y, first + i, qdq1(r[u], p, qmax));
        }
        for (uint32_t i = lane + QDQ_REG * ZK_WARP; i < len; i += ZK_WARP)
            put1<DT>(y, first + i, qdq1(widen1<DT>(x, first + i), p, qmax));
        if (lane == 0 && p.poisoned && m == mine && d_poisoned)
            atomicAdd(d_poisoned, 1ull);
    }
    /* The last CTA mirrors the counter into host memory (every other
     * CTA's count came before its xs_leave counter increment), only when
     * it moved since the last mirror (d_poisoned[1]): a store across PCIe
     * is left out of the common call. */
    if (xs_leave(xs) && h_poisoned) {
        __threadfence();
        unsigned long long v = atomicAdd(d_poisoned, 0ull);
        if (v != d_poisoned[1]) {
            *(volatile unsigned long long *)h_poisoned = v;
            d_poisoned[1] = v;
        }
    }
}

template <int DT>
void launch_dt(int bits, unsigned grid, const qdq_set &qs, uint32_t block, int mine,
               unsigned long long *d, unsigned long long *h, const zk_xsync &xs,
               cudaStream_t stream)
{
    if (bits == 8)
        qdq_kernel<DT, 8><<<grid, QDQ_THREADS, 0, stream>>>(qs, block, mine, d, h, xs);
    else
        qdq_kernel<DT, 4><<<grid, QDQ_THREADS, 0, stream>>>(qs, block, mine, d, h, xs);
}

} // namespace

extern "C" int zk_qdq_ptrs_cuda(const void *const *x, const uint64_t *n, void *const *y, int k,
                                int dtype, int bits, uint32_t block, int mine,
                                unsigned long long *d_poisoned, unsigned long long *h_poisoned,
                                const struct zk_xsync *xs, cudaStream_t stream)
{
    if (k < 0 || k > ZK_XSYNC_MAX || (k && (!x || !n || !y)) || !zk_dtype_size(dtype) ||
        !zk_params_ok(bits, block) || xs_ok(xs) || (h_poisoned && (!xs || !d_poisoned)))
        return (int)cudaErrorInvalidValue;
    qdq_set qs = {};
    uint64_t blocks = 0;
    for (int i = 0; i < k; i++) {
        if (n[i] && (!x[i] || !y[i]))
            return (int)cudaErrorInvalidValue;
        qs.x[i] = (const uint8_t *)x[i];
        qs.y[i] = (uint8_t *)y[i];
        qs.n[i] = n[i];
        qs.first_block[i] = blocks;
        blocks += zk_num_blocks(n[i], block);
    }
    qs.first_block[k] = blocks;
    qs.k = k;
    /* A fenced call launches even with nothing to do: the members wait for it. */
    if (!blocks && !xs)
        return 0;
    uint64_t ctas = (blocks + QDQ_WARPS - 1) / QDQ_WARPS;
    unsigned grid = xs_grid(ctas, QDQ_GRID_CAP, xs);
    zk_xsync none = {};
    const zk_xsync &s = xs ? *xs : none;
    if (dtype == ZK_FP32)
        launch_dt<ZK_FP32>(bits, grid, qs, block, mine, d_poisoned, h_poisoned, s, stream);
    else if (dtype == ZK_FP16)
        launch_dt<ZK_FP16>(bits, grid, qs, block, mine, d_poisoned, h_poisoned, s, stream);
    else
        launch_dt<ZK_BF16>(bits, grid, qs, block, mine, d_poisoned, h_poisoned, s, stream);
    return launch_status();
}
