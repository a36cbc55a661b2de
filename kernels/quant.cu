/*
 * quant.cu — CUDA block quantization: quantize (fp32/fp16/bf16 -> int8/int4
 * chunk), dequantize (chunk -> fp32/fp16/bf16) and the exact k-way sum of the
 * unquantized reduce-scatter. Byte-identical to kernels/quant_ref.c (the
 * arithmetic is zk_arith.h on both sides); launch contract in
 * zpp_kernels_cuda.h. One pass over memory: every input byte is read once,
 * every output byte written once, 16 bytes per access on the fast path.
 */
#include "zk_cuda_common.cuh"

using namespace zk;

namespace {

/* One team of B/16 threads per block of B elements. */
template <int DT, int BITS>
__global__ void __launch_bounds__(ZK_MAX_TEAM)
    quantize_kernel(const void *x, uint64_t n_valid, uint32_t block, uint8_t *out,
                    uint64_t pay_bytes, uint64_t nb, unsigned long long *d_poisoned)
{
    __shared__ team_smem sm;
    constexpr int es = dt_traits<DT>::size;
    int team = (int)(block / ZK_VEC), tpc = (int)blockDim.x / team;
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
        uint64_t first = b * block + (uint64_t)lane * ZK_VEC;
        uint64_t valid = active && first < n_valid ? n_valid - first : 0;
        float v[ZK_VEC];
        load16<DT>((const uint8_t *)x + (valid ? first * es : 0), valid, v);
        d.jb = b;
        d.first = b * block;
        if (quant_team<BITS>(v, active, lane, team, tix, d, sm, parity) && d_poisoned)
            atomicAdd(d_poisoned, 1ull);
    }
}

/* One thread per 16 output elements. */
template <int DT, int BITS>
__global__ void __launch_bounds__(ZK_CTA_THREADS)
    dequantize_kernel(const uint8_t *in, uint64_t pay_bytes, uint64_t n_out, uint32_t block,
                      void *y)
{
    constexpr int es = dt_traits<DT>::size;
    const float *scales = (const float *)(in + pay_bytes);
    uint64_t nvec = (n_out + ZK_VEC - 1) / ZK_VEC;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nvec; t += stride) {
        uint64_t e0 = t * ZK_VEC;
        raw16 r = load_codes<BITS>(in, e0 * BITS / 8);
        float s = __ldg(scales + e0 / block);
        float v[ZK_VEC];
        decode16<BITS>(r, s, ZK_VEC, v);
        store16<DT>((uint8_t *)y + e0 * es, n_out - e0, v);
    }
}

template <int DT, int ODT>
__global__ void __launch_bounds__(ZK_CTA_THREADS)
    sum_kernel(const void *x, uint64_t stride_elems, int k, uint64_t count, int mean,
               float divisor, void *y)
{
    constexpr int es = dt_traits<DT>::size, oes = dt_traits<ODT>::size;
    uint64_t nvec = (count + ZK_VEC - 1) / ZK_VEC;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nvec; t += stride) {
        uint64_t e0 = t * ZK_VEC;
        float acc[ZK_VEC], v[ZK_VEC];
#pragma unroll
        for (int i = 0; i < ZK_VEC; i++)
            acc[i] = 0.0f;
        for (int j = 0; j < k; j++) {
            load16<DT>((const uint8_t *)x + ((uint64_t)j * stride_elems + e0) * es, count - e0, v);
#pragma unroll
            for (int i = 0; i < ZK_VEC; i++)
                acc[i] = zk_fadd(acc[i], v[i]);
        }
        if (mean) {
#pragma unroll
            for (int i = 0; i < ZK_VEC; i++)
                acc[i] = zk_fdiv(acc[i], divisor);
        }
        store16<ODT>((uint8_t *)y + e0 * oes, count - e0, acc);
    }
}

int dtype_ok(int dt)
{
    return dt == ZK_FP32 || dt == ZK_FP16 || dt == ZK_BF16;
}
int aligned(const void *p)
{
    return ((uintptr_t)p & (ZK_ALIGN - 1)) == 0;
}
int launch_status(void)
{
    return (int)cudaGetLastError();
}

template <int DT, int BITS>
void launch_quantize(const void *x, uint64_t n, uint64_t n_valid, uint32_t block, uint8_t *out,
                     unsigned long long *d_poisoned, cudaStream_t stream)
{
    qshape sh = qshape_for(block);
    uint64_t nb = zk_num_blocks(n, block);
    uint64_t groups = (nb + (uint64_t)sh.tpc - 1) / (uint64_t)sh.tpc;
    quantize_kernel<DT, BITS><<<grid_for(groups), sh.threads, 0, stream>>>(
        x, n_valid, block, out, zk_payload_bytes(n, BITS), nb, d_poisoned);
}

template <int DT, int BITS>
void launch_dequantize(const uint8_t *in, uint64_t n, uint64_t n_out, uint32_t block, void *y,
                       cudaStream_t stream)
{
    uint64_t nvec = (n_out + ZK_VEC - 1) / ZK_VEC;
    uint64_t ctas = (nvec + ZK_CTA_THREADS - 1) / ZK_CTA_THREADS;
    dequantize_kernel<DT, BITS><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
        in, zk_payload_bytes(n, BITS), n_out, block, y);
}

template <int DT, int ODT>
void launch_sum(const void *x, uint64_t stride_elems, int k, uint64_t count, int op,
                float divisor, void *y, cudaStream_t stream)
{
    uint64_t nvec = (count + ZK_VEC - 1) / ZK_VEC;
    uint64_t ctas = (nvec + ZK_CTA_THREADS - 1) / ZK_CTA_THREADS;
    sum_kernel<DT, ODT><<<grid_for(ctas), ZK_CTA_THREADS, 0, stream>>>(
        x, stride_elems, k, count, op == ZK_MEAN, divisor, y);
}

template <int DT>
void launch_sum_out(int out_dtype, const void *x, uint64_t stride_elems, int k, uint64_t count,
                    int op, float divisor, void *y, cudaStream_t stream)
{
    if (out_dtype == ZK_FP32)
        launch_sum<DT, ZK_FP32>(x, stride_elems, k, count, op, divisor, y, stream);
    else if (out_dtype == ZK_FP16)
        launch_sum<DT, ZK_FP16>(x, stride_elems, k, count, op, divisor, y, stream);
    else
        launch_sum<DT, ZK_BF16>(x, stride_elems, k, count, op, divisor, y, stream);
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
    if (!zk_params_ok(bits, block) || !dtype_ok(dtype) ||
        (n_out && (!in || !aligned(in) || !y)))
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

extern "C" int zk_sum_cuda(const void *x, uint64_t stride_elems, int k, uint64_t count, int dtype,
                           int op, float divisor, void *y, int out_dtype, cudaStream_t stream)
{
    if (!dtype_ok(dtype) || !dtype_ok(out_dtype) || k < 1 || (op != ZK_SUM && op != ZK_MEAN) ||
        (count && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    if (count == 0)
        return 0;
    if (dtype == ZK_FP32)
        launch_sum_out<ZK_FP32>(out_dtype, x, stride_elems, k, count, op, divisor, y, stream);
    else if (dtype == ZK_FP16)
        launch_sum_out<ZK_FP16>(out_dtype, x, stride_elems, k, count, op, divisor, y, stream);
    else
        launch_sum_out<ZK_BF16>(out_dtype, x, stride_elems, k, count, op, divisor, y, stream);
    return launch_status();
}
