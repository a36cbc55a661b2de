/*
 * traffic.h — kernel_bench's traffic rows (bench/kernels/traffic.cu): a
 * dequantize's mix of reads and writes moved with no arithmetic.
 */
#ifndef ZKB_TRAFFIC_H
#define ZKB_TRAFFIC_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a mix is moved. */
enum zkb_form {
    ZKB_LOAD2 = 2,         /* each CTA reads 16 bytes per thread as 2-byte loads, then writes */
    ZKB_LOAD4 = 4,         /* ... as 4-byte loads */
    ZKB_LOAD8 = 8,         /* ... as 8-byte loads */
    ZKB_LOAD16 = 16,       /* ... as one 16-byte load */
    ZKB_BULK = 17,         /* one 16-byte load, the CTA's writes as one bulk copy (sm_90 only) */
    ZKB_APART = 18,        /* reading CTAs and writing CTAs apart: no store waits for a load */
    ZKB_PHASED = 19,       /* two kernels: all the reads, then all the writes */
    ZKB_AHEAD = 20,        /* spans read ahead into L2 (evict-last), then read 16B/lane */
    ZKB_AHEAD_NORMAL = 21, /* the same, read ahead with normal eviction */
};

/* Reads in_bytes (a multiple of 4096) from in and writes ratio (2, 4 or 8)
 * times as many to out, in the given form. cudaErrorInvalidValue for any
 * other ratio or form, or more than 2^31 - 1 CTAs. */
int zkb_traffic_cuda(const void *in, uint64_t in_bytes, void *out, enum zkb_form form, int ratio,
                     cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
