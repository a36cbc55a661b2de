/*
 * traffic.cu — kernel_bench's traffic rows: kernels that move the bytes of
 * a write-heavy dequantize (one byte read for every `ratio` written) and do
 * no arithmetic, so that a dequantize row can be set against what its mix
 * of reads and writes alone gets on this GPU. The forms (traffic.h):
 *   - traffic_kernel: a CTA of 256 threads reads 16 bytes per thread as
 *     16 / LB loads of LB bytes (each warp instruction one span of 32 * LB
 *     bytes, the shape of dequantize's code loads), then writes 16 * ratio
 *     bytes per thread as 16-byte stores, each warp instruction one
 *     512-byte span; or, BULK, stores them with one bulk copy from shared
 *     memory, as dequantize does on sm_90 (ZK_DQX_TMA). What it stores
 *     mixes every loaded byte, so that no load is dead.
 *   - split_kernel: the same mix with reading and writing CTAs apart, so
 *     that no store waits for a load: if it runs no faster, the mix itself
 *     sets the rate.
 *   - phase_kernel: all the reads, then (a second kernel) all the writes.
 *   - AHEAD: spans of 16 MiB read, each read ahead into L2 by a kernel of
 *     prefetches (read_ahead_kernel below), then moved by
 *     traffic_kernel, as a prototype dequantize did (bench/results/kernels-2026-11-29-s30/).
 * Bench code, not a kernel of the library: no reference, no byte-compare.
 */
#include "traffic.h"

#include "zk_cuda_common.cuh"

namespace
{

constexpr int kThreads = 256;

/* Reads [a, a + na) ahead into L2: one thread per 128-byte line, a
 * prefetch each (the kernel ends once they are issued, not when the lines
 * arrive). LAST: the lines are kept ahead of others (evict-last), so that
 * the writes of the kernel that then reads them do not push them out. */
template <bool LAST>
__global__ void __launch_bounds__(kThreads) read_ahead_kernel(const uint8_t *a, uint64_t na)
{
    const uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x;
    if (i * 128 >= na)
        return;
    const uint8_t *p = a + i * 128;
    if (LAST)
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p));
    else
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/* Reads 16 bytes of in for thread i and keeps the load alive: it writes
 * them to out only in a case random data never meets. */
__device__ __forceinline__ void read_sink(const uint8_t *in, uint64_t i, uint4 *out)
{
    const uint4 v = ((const uint4 *)in)[i];
    if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9E3779B1u && v.x == 0x7F4A7C15u)
        out[threadIdx.x] = v;
}

template <int LB, int RATIO, bool BULK>
__global__ void __launch_bounds__(kThreads) traffic_kernel(const uint8_t *in, uint4 *out)
{
    constexpr int U = 16 / LB; /* loads per thread */
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
        for (int s = 0; s < RATIO; s++)
            out[(tile * RATIO + s) * kThreads + threadIdx.x] =
                make_uint4(acc, acc + s, acc ^ s, ~acc);
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        __shared__ __align__(128) uint4 st[RATIO * kThreads];
#pragma unroll
        for (int s = 0; s < RATIO; s++)
            st[s * kThreads + threadIdx.x] = make_uint4(acc, acc + s, acc ^ s, ~acc);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (threadIdx.x == 0)
            zk::zk_bulk_store(out + tile * RATIO * kThreads, st, (uint32_t)sizeof st);
#else
        __trap(); /* no bulk copy engine before sm_90: kernel_bench does not ask */
#endif
    }
}

/* Of every RATIO + 1 CTAs one only reads a 4 KiB tile, the others only
 * write one each. */
template <int RATIO>
__global__ void __launch_bounds__(kThreads) split_kernel(const uint8_t *in, uint4 *out)
{
    const uint64_t b = blockIdx.x, t = b / (RATIO + 1), k = b % (RATIO + 1);
    if (k == 0)
        read_sink(in, t * kThreads + threadIdx.x, out);
    else
        out[(t * RATIO + k - 1) * kThreads + threadIdx.x] =
            make_uint4((uint32_t)b, threadIdx.x, 0, ~0u);
}

/* 4 KiB per CTA, only read (READ) or only written. */
template <bool READ>
__global__ void __launch_bounds__(kThreads) phase_kernel(const uint8_t *in, uint4 *out)
{
    const uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x;
    if (READ)
        read_sink(in, i, out);
    else
        out[i] = make_uint4((uint32_t)blockIdx.x, threadIdx.x, 0, ~0u);
}

/* One mix (RATIO) in one form; tiles: 4 KiB tiles read. */
template <int RATIO>
cudaError_t launch_mix(const uint8_t *in, unsigned tiles, uint4 *out, zkb_form form,
                       cudaStream_t st)
{
    switch (form) {
    case ZKB_LOAD2:
        traffic_kernel<2, RATIO, false><<<tiles, kThreads, 0, st>>>(in, out);
        break;
    case ZKB_LOAD4:
        traffic_kernel<4, RATIO, false><<<tiles, kThreads, 0, st>>>(in, out);
        break;
    case ZKB_LOAD8:
        traffic_kernel<8, RATIO, false><<<tiles, kThreads, 0, st>>>(in, out);
        break;
    case ZKB_LOAD16:
        traffic_kernel<16, RATIO, false><<<tiles, kThreads, 0, st>>>(in, out);
        break;
    case ZKB_BULK:
        traffic_kernel<16, RATIO, true><<<tiles, kThreads, 0, st>>>(in, out);
        break;
    case ZKB_APART:
        split_kernel<RATIO><<<tiles * (RATIO + 1), kThreads, 0, st>>>(in, out);
        break;
    case ZKB_AHEAD:
    case ZKB_AHEAD_NORMAL:
        /* spans of 16 MiB read: read ahead into L2, then the plain mix */
        for (unsigned t0 = 0; t0 < tiles; t0 += 4096) {
            const unsigned nt = tiles - t0 < 4096 ? tiles - t0 : 4096;
            const uint8_t *span = in + (uint64_t)t0 * 4096; /* 4 KiB tiles, 128-aligned */
            if (form == ZKB_AHEAD)
                read_ahead_kernel<true><<<(nt * 32 + kThreads - 1) / kThreads, kThreads, 0, st>>>(
                    span, (uint64_t)nt * 4096);
            else
                read_ahead_kernel<false><<<(nt * 32 + kThreads - 1) / kThreads, kThreads, 0, st>>>(
                    span, (uint64_t)nt * 4096);
            traffic_kernel<16, RATIO, false><<<nt, kThreads, 0, st>>>(
                in + (uint64_t)t0 * 4096, out + (uint64_t)t0 * RATIO * kThreads);
        }
        break;
    case ZKB_PHASED:
        phase_kernel<true><<<tiles, kThreads, 0, st>>>(in, out);
        phase_kernel<false><<<tiles * RATIO, kThreads, 0, st>>>(in, out);
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

} // namespace

extern "C" int zkb_traffic_cuda(const void *in, uint64_t in_bytes, void *out, zkb_form form,
                                int ratio, cudaStream_t st)
{
    const uint64_t tiles = in_bytes / (16u * kThreads);
    /* the most CTAs a form launches: tiles * (ratio + 1) */
    if (in_bytes % (16u * kThreads) || ratio < 0 || tiles * (uint64_t)(ratio + 1) > 0x7fffffffu)
        return (int)cudaErrorInvalidValue;
    const auto *i = (const uint8_t *)in;
    auto *o = (uint4 *)out;
    switch (ratio) {
    case 2:
        return (int)launch_mix<2>(i, (unsigned)tiles, o, form, st);
    case 4:
        return (int)launch_mix<4>(i, (unsigned)tiles, o, form, st);
    case 8:
        return (int)launch_mix<8>(i, (unsigned)tiles, o, form, st);
    default:
        return (int)cudaErrorInvalidValue;
    }
}
