/*
 * traffic.cu — kernel_bench's traffic rows: a kernel that moves the bytes
 * of a write-heavy dequantize (one byte read for every `ratio` written) and
 * does no arithmetic, so that a dequantize row can be set against what its
 * mix of reads and writes alone gets on this GPU.
 *
 * A CTA of 256 threads reads 16 bytes per thread, as `16 / lb` loads of lb
 * bytes (each warp instruction one span of 32 * lb bytes, the shape of
 * dequantize's code loads), and writes 16 * ratio bytes per thread as
 * 16-byte stores, each warp instruction one 512-byte span. What it stores
 * mixes every loaded byte, so that no load is dead. A second form stores
 * each CTA's bytes with one bulk copy from shared memory, as dequantize does
 * on sm_90 (ZK_DQX_TMA). A third (split_kernel) moves the same mix with
 * reading and writing CTAs apart, so that no store waits for a load: if it
 * runs no faster, the mix itself sets the rate. A fourth (phase_kernel)
 * reads everything first and then writes, as two kernels. Bench code, not a kernel of
 * the library: it has no reference and no byte-compare.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>

namespace
{

constexpr int kThreads = 256;

template <int LB, int RATIO, bool BULK>
__global__ void __launch_bounds__(kThreads) traffic_kernel(const uint8_t *in, uint4 *out)
{
    constexpr int U = 16 / LB, NS = RATIO; /* loads, 16-byte stores per thread */
    const uint64_t tile = blockIdx.x;
    uint32_t acc = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
        const uint8_t *p = in + (tile * U + u) * kThreads * LB + threadIdx.x * LB;
        if (LB == 16) {
            const uint4 v = *(const uint4 *)p;
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        } else if (LB == 8) {
            const uint2 v = *(const uint2 *)p;
            acc ^= v.x ^ v.y;
        } else if (LB == 4) {
            acc ^= *(const uint32_t *)p;
        } else {
            acc ^= *(const uint16_t *)p;
        }
        acc = acc * 0x9E3779B1u + u;
    }
    if constexpr (!BULK) {
#pragma unroll
        for (int s = 0; s < NS; s++)
            out[(tile * NS + s) * kThreads + threadIdx.x] = make_uint4(acc, acc + s, acc ^ s, ~acc);
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        /* the tile through shared memory, stored by the bulk copy engine */
        __shared__ __align__(128) uint4 st[NS * kThreads];
#pragma unroll
        for (int s = 0; s < NS; s++)
            st[s * kThreads + threadIdx.x] = make_uint4(acc, acc + s, acc ^ s, ~acc);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (threadIdx.x == 0)
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n\t"
                         "cp.async.bulk.commit_group;\n\t"
                         "cp.async.bulk.wait_group.read 0;" ::"l"(out + tile * NS * kThreads),
                         "r"((uint32_t)__cvta_generic_to_shared(st)), "r"((uint32_t)sizeof st)
                         : "memory");
#else
        __trap(); /* no bulk copy engine: zkb_traffic_cuda refuses lb -16 before sm_90 */
#endif
    }
}

/* The same mix with no read -> write dependency: of every RATIO + 1 CTAs
 * one only reads a 4 KiB tile and the others only write one each, so that
 * DRAM sees the mix while no store waits for a load. */
template <int RATIO> __global__ void __launch_bounds__(kThreads) split_kernel(const uint8_t *in, uint4 *out)
{
    const uint64_t b = blockIdx.x, t = b / (RATIO + 1), k = b % (RATIO + 1);
    if (k == 0) {
        const uint4 v = ((const uint4 *)in)[t * kThreads + threadIdx.x];
        if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9E3779B1u && v.x == 0x7F4A7C15u) /* never, in practice */
            out[threadIdx.x] = v;
        return;
    }
    out[(t * RATIO + k - 1) * kThreads + threadIdx.x] = make_uint4((uint32_t)b, threadIdx.x, 0, ~0u);
}

/* The mix in two phases: a kernel that only reads (READ), then one that only
 * writes, each 4 KiB per CTA: what the mix would cost if DRAM saw all its
 * reads as one burst and then only writes. */
template <bool READ> __global__ void __launch_bounds__(kThreads) phase_kernel(const uint8_t *in, uint4 *out)
{
    const uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x;
    if (READ) {
        const uint4 v = ((const uint4 *)in)[i];
        if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9E3779B1u && v.x == 0x7F4A7C15u) /* never, in practice */
            out[threadIdx.x] = v;
        return;
    }
    out[i] = make_uint4((uint32_t)blockIdx.x, threadIdx.x, 0, ~0u);
}

template <int LB, bool BULK>
cudaError_t launch_lb(const void *in, uint64_t in_bytes, void *out, int ratio, cudaStream_t st)
{
    const uint64_t tiles = in_bytes / (16u * kThreads);
    const auto *i = (const uint8_t *)in;
    auto *o = (uint4 *)out;
    switch (ratio) {
    case 2:
        traffic_kernel<LB, 2, BULK><<<(unsigned)tiles, kThreads, 0, st>>>(i, o);
        break;
    case 4:
        traffic_kernel<LB, 4, BULK><<<(unsigned)tiles, kThreads, 0, st>>>(i, o);
        break;
    case 8:
        traffic_kernel<LB, 8, BULK><<<(unsigned)tiles, kThreads, 0, st>>>(i, o);
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

} // namespace

/* Reads in_bytes (a multiple of 4096, at most 2^31 tiles) from in, writes
 * ratio * in_bytes to out; lb (2, 4, 8 or 16) bytes per lane and load,
 * ratio 2, 4 or 8; lb -16: 16 bytes per lane, and each CTA's writes go
 * through shared memory to one bulk copy (cp.async.bulk; sm_90 and later,
 * cudaErrorNotSupported before); lb 0: split_kernel, readers and writers in
 * separate CTAs; lb 1: phase_kernel twice, all the reads and then all the
 * writes. */
extern "C" int zkb_traffic_cuda(const void *in, uint64_t in_bytes, void *out, int lb, int ratio,
                                cudaStream_t st)
{
    if (in_bytes % (16u * kThreads) || in_bytes / (16u * kThreads) > 0x7fffffffu)
        return (int)cudaErrorInvalidValue;
    if (lb == 1) { /* phase_kernel: all reads, then all writes */
        const uint64_t tiles = in_bytes / (16u * kThreads);
        if (ratio < 1 || tiles * (uint64_t)ratio > 0x7fffffffu)
            return (int)cudaErrorInvalidValue;
        phase_kernel<true><<<(unsigned)tiles, kThreads, 0, st>>>((const uint8_t *)in, (uint4 *)out);
        phase_kernel<false>
            <<<(unsigned)(tiles * (uint64_t)ratio), kThreads, 0, st>>>((const uint8_t *)in, (uint4 *)out);
        return (int)cudaGetLastError();
    }
    if (lb == 0) { /* split_kernel */
        const uint64_t ctas = in_bytes / (16u * kThreads) * (uint64_t)(ratio + 1);
        if (ctas > 0x7fffffffu)
            return (int)cudaErrorInvalidValue;
        const auto *i = (const uint8_t *)in;
        auto *o = (uint4 *)out;
        switch (ratio) {
        case 2:
            split_kernel<2><<<(unsigned)ctas, kThreads, 0, st>>>(i, o);
            break;
        case 4:
            split_kernel<4><<<(unsigned)ctas, kThreads, 0, st>>>(i, o);
            break;
        case 8:
            split_kernel<8><<<(unsigned)ctas, kThreads, 0, st>>>(i, o);
            break;
        default:
            return (int)cudaErrorInvalidValue;
        }
        return (int)cudaGetLastError();
    }
    if (lb < 0) {
        int dev = 0, major = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            major < 9)
            return (int)cudaErrorNotSupported;
    }
    switch (lb) {
    case 2:
        return (int)launch_lb<2, false>(in, in_bytes, out, ratio, st);
    case 4:
        return (int)launch_lb<4, false>(in, in_bytes, out, ratio, st);
    case 8:
        return (int)launch_lb<8, false>(in, in_bytes, out, ratio, st);
    case 16:
        return (int)launch_lb<16, false>(in, in_bytes, out, ratio, st);
    case -16:
        return (int)launch_lb<16, true>(in, in_bytes, out, ratio, st);
    default:
        return (int)cudaErrorInvalidValue;
    }
}
