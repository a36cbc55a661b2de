/*
 * copy.cu — zk_copy_ptrs_cuda: k byte ranges copied in one kernel, the
 * gather of a one-node all-gather or hpZ gather when the GPUs read each
 * other's memory. Small calls are what it is for: one launch per GPU
 * instead of a copy-engine copy per member, and with a zk_xsync no events
 * between the streams (zk_xsync.cuh). Launch contract in
 * zpp_kernels_cuda.h.
 */
#include "zk_cuda_common.cuh"
#include "zk_xsync.cuh"

using namespace zk;

namespace
{

#define CP_THREADS 256
#define CP_UNROLL 4 /* 16-byte loads in flight per thread */
#define CP_GRID_CAP 1024u

struct copy_set {
    uint8_t *dst[ZK_XSYNC_MAX];
    const uint8_t *src[ZK_XSYNC_MAX];
    uint64_t bytes[ZK_XSYNC_MAX];
    int k;
};

/* Bytes [lo, hi) of one range, one byte per thread and step. */
__device__ __forceinline__ void copy_bytes(uint8_t *d, const uint8_t *s, uint64_t lo, uint64_t hi,
                                           uint64_t t, uint64_t nt)
{
    for (uint64_t i = lo + t; i < hi; i += nt)
        d[i] = s[i];
}

__global__ void __launch_bounds__(CP_THREADS)
    copy_kernel(const __grid_constant__ copy_set cs, const __grid_constant__ zk_xsync xs)
{
    const bool go = xs_enter(xs);
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t nt = (uint64_t)gridDim.x * blockDim.x;
    for (int i = 0; go && i < cs.k; i++) {
        uint8_t *d = cs.dst[i];
        const uint8_t *s = cs.src[i];
        uint64_t n = cs.bytes[i], head = n, nv = 0;
        if ((((uintptr_t)d ^ (uintptr_t)s) & 15u) == 0) { /* both reach 16-byte alignment */
            head = (16u - ((uintptr_t)d & 15u)) & 15u;
            if (head > n)
                head = n;
            nv = (n - head) / 16u;
        }
        copy_bytes(d, s, 0, head, t, nt);
        const uint4 *sv = (const uint4 *)(s + head);
        uint4 *dv = (uint4 *)(d + head);
        uint64_t v = t;
        for (; v + (CP_UNROLL - 1) * nt < nv; v += CP_UNROLL * nt) {
            uint4 r[CP_UNROLL];
#pragma unroll
            for (int u = 0; u < CP_UNROLL; u++)
                r[u] = sv[v + u * nt];
#pragma unroll
            for (int u = 0; u < CP_UNROLL; u++)
                dv[v + u * nt] = r[u];
        }
        for (; v < nv; v += nt)
            dv[v] = sv[v];
        copy_bytes(d, s, head + nv * 16u, n, t, nt);
    }
    xs_leave(xs);
}

} // namespace

extern "C" int zk_copy_ptrs_cuda(void *const *dst, const void *const *src, const uint64_t *bytes,
                                 int k, const struct zk_xsync *xs, cudaStream_t stream)
{
    if (k < 0 || k > ZK_XSYNC_MAX || (k && (!dst || !src || !bytes)) || xs_ok(xs))
        return (int)cudaErrorInvalidValue;
    copy_set cs = {};
    uint64_t total = 0;
    for (int i = 0; i < k; i++) {
        if (bytes[i] && (!dst[i] || !src[i]))
            return (int)cudaErrorInvalidValue;
        cs.dst[i] = (uint8_t *)dst[i];
        cs.src[i] = (const uint8_t *)src[i];
        cs.bytes[i] = bytes[i];
        total += bytes[i];
    }
    cs.k = k;
    /* A fenced call launches even with nothing to copy: the members wait for it. */
    if (!total && !xs)
        return 0;
    uint64_t per_cta = (uint64_t)CP_THREADS * CP_UNROLL * 16u;
    uint64_t ctas = (total + per_cta - 1) / per_cta;
    unsigned grid = xs_grid(ctas, CP_GRID_CAP, xs);
    copy_kernel<<<grid, CP_THREADS, 0, stream>>>(cs, xs ? *xs : zk_xsync{});
    return launch_status();
}
