/*
 * sum.cu — the exact k-way sum of the unquantized reduce-scatter:
 * zk_sum_cuda (the k inputs at a stride, e.g. an all-to-all's staging) and
 * zk_sum_ptrs_cuda (the k inputs as separate pointers: the daemon's
 * one-node reduce-scatter passes each member's block where it lies, on that
 * member's GPU, so the kernel reads the peers' memory over NVLink directly,
 * one pass and no copy into staging). One kernel serves both, templated on
 * where input c lies. The arithmetic is zk_sum_ref's (fp32 sum in the
 * inputs' order, then the optional divide), the bytes those of the host
 * backend. One pass over memory, 16 bytes per access on the fast path.
 * Launch contract in zpp_kernels_cuda.h.
 */
#include "zk_cuda_common.cuh"
#include "zk_xsync.cuh"

using namespace zk;

namespace
{

/* Where input c lies: at a stride from the first, */
struct sum_strided {
    const uint8_t *x;
    uint64_t stride_bytes;
    __device__ const uint8_t *at(int c) const { return x + (uint64_t)c * stride_bytes; }
};
/* or at its own pointer, read by the threads from the kernel's parameter
 * space (__grid_constant__: no copy into local memory). */
struct sum_ptrs {
    const uint8_t *p[ZK_SUM_MAX_PTRS];
    __device__ const uint8_t *at(int c) const { return p[c]; }
};

/* XS: fenced by xs (zk_xsync.cuh); compiled out of the unfenced kernels,
 * which keep their registers. */
template <int DT, int ODT, class SRC, bool XS>
__global__ void ZK_LB_FLAT sum_kernel(const __grid_constant__ SRC src, int k, uint64_t count,
                                      int mean, float divisor, void *y,
                                      const __grid_constant__ zk_xsync xs)
{
    constexpr int es = dt_traits<DT>::size, oes = dt_traits<ODT>::size;
    constexpr int VE = ZK_VEC_BYTES / (es > oes ? es : oes);
    constexpr uint64_t tile_vecs = (uint64_t)ZK_CTA_THREADS * ZK_DQ_NV;
    uint64_t nvec = (count + VE - 1) / VE, tiles = (nvec + tile_vecs - 1) / tile_vecs;
    if (XS && !xs_enter(xs))
        tiles = 0; /* no member's memory may be read */
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        uint64_t e[ZK_DQ_NV];
        float acc[ZK_DQ_NV][VE];
#pragma unroll
        for (int j = 0; j < ZK_DQ_NV; j++) {
            e[j] = (tile * tile_vecs + (uint64_t)j * ZK_CTA_THREADS + threadIdx.x) * VE;
#pragma unroll
            for (int i = 0; i < VE; i++)
                acc[j][i] = 0.0f;
        }
        for (int c = 0; c < k; c++) {
            const uint8_t *base = src.at(c);
            raw16 r[ZK_DQ_NV];
            bool slow[ZK_DQ_NV];
#pragma unroll
            for (int j = 0; j < ZK_DQ_NV; j++) {
                uint64_t valid = e[j] < count ? count - e[j] : 0;
                r[j] = load_elems_raw<DT, VE>(base + e[j] * es, valid, &slow[j]);
            }
#pragma unroll
            for (int j = 0; j < ZK_DQ_NV; j++) {
                uint64_t valid = e[j] < count ? count - e[j] : 0;
                float v[VE];
                widen_vec<DT, VE>(r[j], slow[j], base + e[j] * es, valid, v);
#pragma unroll
                for (int i = 0; i < VE; i++)
                    acc[j][i] = zk_fadd(acc[j][i], v[i]);
            }
        }
#pragma unroll
        for (int j = 0; j < ZK_DQ_NV; j++) {
            if (e[j] >= count)
                continue;
            if (mean) {
#pragma unroll
                for (int i = 0; i < VE; i++)
                    acc[j][i] = zk_fdiv(acc[j][i], divisor);
            }
            store_elems<ODT, VE>((uint8_t *)y + e[j] * oes, count - e[j], acc[j]);
        }
    }
    if (XS)
        xs_leave(xs);
}

template <int DT, int ODT, class SRC>
void launch(const SRC &src, int k, uint64_t count, int op, float divisor, void *y,
            const zk_xsync &xs, cudaStream_t stream)
{
    constexpr int ve =
        ZK_VEC_BYTES /
        (dt_traits<DT>::size > dt_traits<ODT>::size ? dt_traits<DT>::size : dt_traits<ODT>::size);
    uint64_t nvec = (count + ve - 1) / ve;
    uint64_t ctas = (nvec + ZK_CTA_THREADS * ZK_DQ_NV - 1) / (ZK_CTA_THREADS * ZK_DQ_NV);
    unsigned grid = xs_grid(ctas, ZK_GRID_CAP, xs.n); /* the kernel loops over its tiles */
    if (xs.n)
        sum_kernel<DT, ODT, SRC, true><<<grid, ZK_CTA_THREADS, 0, stream>>>(
            src, k, count, op == ZK_MEAN, divisor, y, xs);
    else
        sum_kernel<DT, ODT, SRC, false><<<grid, ZK_CTA_THREADS, 0, stream>>>(
            src, k, count, op == ZK_MEAN, divisor, y, xs);
}

template <int DT, class SRC>
void launch_out(int out_dtype, const SRC &src, int k, uint64_t count, int op, float divisor,
                void *y, const zk_xsync &xs, cudaStream_t stream)
{
    if (out_dtype == ZK_FP32)
        launch<DT, ZK_FP32>(src, k, count, op, divisor, y, xs, stream);
    else if (out_dtype == ZK_FP16)
        launch<DT, ZK_FP16>(src, k, count, op, divisor, y, xs, stream);
    else
        launch<DT, ZK_BF16>(src, k, count, op, divisor, y, xs, stream);
}

template <class SRC>
void launch_in(int dtype, int out_dtype, const SRC &src, int k, uint64_t count, int op,
               float divisor, void *y, const zk_xsync &xs, cudaStream_t stream)
{
    if (dtype == ZK_FP32)
        launch_out<ZK_FP32>(out_dtype, src, k, count, op, divisor, y, xs, stream);
    else if (dtype == ZK_FP16)
        launch_out<ZK_FP16>(out_dtype, src, k, count, op, divisor, y, xs, stream);
    else
        launch_out<ZK_BF16>(out_dtype, src, k, count, op, divisor, y, xs, stream);
}

} // namespace

extern "C" int zk_sum_cuda(const void *x, uint64_t stride_elems, int k, uint64_t count, int dtype,
                           int op, float divisor, void *y, int out_dtype, cudaStream_t stream)
{
    if (!dtype_ok(dtype) || !dtype_ok(out_dtype) || k < 1 || (op != ZK_SUM && op != ZK_MEAN) ||
        (count && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    if (count == 0)
        return 0;
    sum_strided src = {(const uint8_t *)x, stride_elems * zk_dtype_size(dtype)};
    launch_in(dtype, out_dtype, src, k, count, op, divisor, y, zk_xsync{}, stream);
    return launch_status();
}

extern "C" int zk_sum_ptrs_sync_cuda(const void *const *x, int k, uint64_t count, int dtype,
                                     int op, float divisor, void *y, int out_dtype,
                                     const struct zk_xsync *xs, cudaStream_t stream)
{
    if (!dtype_ok(dtype) || !dtype_ok(out_dtype) || k < 1 || k > ZK_SUM_MAX_PTRS ||
        (op != ZK_SUM && op != ZK_MEAN) || (count && (!x || !y)) || xs_ok(xs) ||
        (xs && xs->n != k))
        return (int)cudaErrorInvalidValue;
    /* A fenced call launches even when count == 0: the members wait for it. */
    if (count == 0 && !xs)
        return 0;
    sum_ptrs src = {};
    for (int c = 0; c < k; c++) {
        if (!x[c])
            return (int)cudaErrorInvalidValue;
        src.p[c] = (const uint8_t *)x[c];
    }
    launch_in(dtype, out_dtype, src, k, count, op, divisor, y, xs ? *xs : zk_xsync{}, stream);
    return launch_status();
}

extern "C" int zk_sum_ptrs_cuda(const void *const *x, int k, uint64_t count, int dtype, int op,
                                float divisor, void *y, int out_dtype, cudaStream_t stream)
{
    return zk_sum_ptrs_sync_cuda(x, k, count, dtype, op, divisor, y, out_dtype, NULL, stream);
}
