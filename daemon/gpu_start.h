/*
 * gpu_start.h — what zppd does when its GPUs will not open at start.
 *
 * Three answers, from the CUDA driver's result of the step that failed:
 *
 * - NONE: this machine has no GPU for us (no driver library, the stub
 *   library, or no device visible). backend = auto then runs the host
 *   backend; backend = cuda refuses to start.
 * - RETRY: the GPU is there but not ready yet: an MPS server recovering
 *   from a client's fatal fault refuses new clients until every client of
 *   that GPU has exited (NVIDIA's MPS guide, "Error containment"), an MPS
 *   control daemon restarting, the fabric manager still starting
 *   (SYSTEM_NOT_READY), a GPU in exclusive-process mode held by another
 *   process. zppd waits up to cuda_start_wait_ms, trying again every
 *   GPU_START_RETRY_MS, instead of exiting at once (systemd would give up
 *   after StartLimitBurst quick failures) or, worse, quietly serving the
 *   host backend on a GPU node.
 * - FAIL: anything else (a driver too old for us or mismatched with its
 *   library, an ECC error, out of memory, ...): zppd exits 1 with the
 *   driver's message, under auto too. A GPU node whose GPUs fail is a
 *   fault to see, not a host node.
 *
 * Plain C on the driver's numeric results (stable ABI values of CUresult),
 * so that tests/unit/test_gpu_start.c checks it on machines without CUDA.
 */
#ifndef ZPPD_GPU_START_H
#define ZPPD_GPU_START_H

#include <stdint.h>

enum gpu_start_class { GPU_START_NONE, GPU_START_RETRY, GPU_START_FAIL };

/* be_cuda_open's report when no driver result applies. */
#define GPU_START_NO_DRIVER (-1)  /* libcuda.so.1 cannot be loaded */
#define GPU_START_NO_DEVICES (-2) /* the driver counts 0 devices */
#define GPU_START_OTHER (-3)      /* a failure of ours (memory, threads) */

#define GPU_START_RETRY_MS 500u

/* CUresult values (cuda.h). */
#define GPU_DRV_STUB_LIBRARY 34
#define GPU_DRV_DEVICE_UNAVAILABLE 46
#define GPU_DRV_NO_DEVICE 100
#define GPU_DRV_SYSTEM_NOT_READY 802
#define GPU_DRV_MPS_CONNECTION_FAILED 805
#define GPU_DRV_MPS_RPC_FAILURE 806
#define GPU_DRV_MPS_SERVER_NOT_READY 807
#define GPU_DRV_MPS_MAX_CLIENTS_REACHED 808
#define GPU_DRV_MPS_MAX_CONNECTIONS_REACHED 809

static inline enum gpu_start_class gpu_start_classify(int r)
{
    switch (r) {
    case GPU_START_NO_DRIVER:
    case GPU_START_NO_DEVICES:
    case GPU_DRV_STUB_LIBRARY:
    case GPU_DRV_NO_DEVICE:
        return GPU_START_NONE;
    case GPU_DRV_DEVICE_UNAVAILABLE:
    case GPU_DRV_SYSTEM_NOT_READY:
    case GPU_DRV_MPS_CONNECTION_FAILED:
    case GPU_DRV_MPS_RPC_FAILURE:
    case GPU_DRV_MPS_SERVER_NOT_READY:
    case GPU_DRV_MPS_MAX_CLIENTS_REACHED:
    case GPU_DRV_MPS_MAX_CONNECTIONS_REACHED:
        return GPU_START_RETRY;
    default:
        return GPU_START_FAIL;
    }
}

/* After an attempt that failed with r, elapsed_ms after the first one,
 * with wait_ms allowed in all: 1 to try again in GPU_START_RETRY_MS, 0 to
 * stop (then gpu_start_classify(r) says how). */
static inline int gpu_start_again(int r, uint64_t elapsed_ms, uint32_t wait_ms)
{
    return gpu_start_classify(r) == GPU_START_RETRY && elapsed_ms <= wait_ms &&
           wait_ms - elapsed_ms >= GPU_START_RETRY_MS;
}

#endif
