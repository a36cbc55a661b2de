/*
 * test_gpu_start.c — what zppd does when its GPUs will not open at start
 * (daemon/gpu_start.h): the host backend only where no GPU is visible, a
 * bounded wait for a GPU that is not ready yet (an MPS server recovering
 * from a client's fault, the fabric manager starting), a failure for
 * anything else; and the wait's arithmetic at its bound.
 */
#include <stdint.h>
#include <stdio.h>

#include "daemon/gpu_start.h"
#include "test.h"

static void test_classes(void)
{
    /* no GPU for us: auto may serve the host backend */
    ASSERT_EQ(gpu_start_classify(GPU_START_NO_DRIVER), GPU_START_NONE);
    ASSERT_EQ(gpu_start_classify(GPU_START_NO_DEVICES), GPU_START_NONE);
    ASSERT_EQ(gpu_start_classify(100), GPU_START_NONE); /* CUDA_ERROR_NO_DEVICE */
    ASSERT_EQ(gpu_start_classify(34), GPU_START_NONE);  /* CUDA_ERROR_STUB_LIBRARY */
    /* there, but not ready yet */
    ASSERT_EQ(gpu_start_classify(807), GPU_START_RETRY); /* MPS_SERVER_NOT_READY */
    ASSERT_EQ(gpu_start_classify(805), GPU_START_RETRY); /* MPS_CONNECTION_FAILED */
    ASSERT_EQ(gpu_start_classify(806), GPU_START_RETRY); /* MPS_RPC_FAILURE */
    ASSERT_EQ(gpu_start_classify(808), GPU_START_RETRY); /* MPS_MAX_CLIENTS_REACHED */
    ASSERT_EQ(gpu_start_classify(809), GPU_START_RETRY); /* MPS_MAX_CONNECTIONS_REACHED */
    ASSERT_EQ(gpu_start_classify(802), GPU_START_RETRY); /* SYSTEM_NOT_READY */
    ASSERT_EQ(gpu_start_classify(46), GPU_START_RETRY);  /* DEVICE_UNAVAILABLE */
    /* GPUs that fail: never quietly the host backend */
    ASSERT_EQ(gpu_start_classify(GPU_START_OTHER), GPU_START_FAIL);
    ASSERT_EQ(gpu_start_classify(2), GPU_START_FAIL);   /* OUT_OF_MEMORY */
    ASSERT_EQ(gpu_start_classify(214), GPU_START_FAIL); /* ECC_UNCORRECTABLE */
    ASSERT_EQ(gpu_start_classify(803), GPU_START_FAIL); /* SYSTEM_DRIVER_MISMATCH */
    ASSERT_EQ(gpu_start_classify(810), GPU_START_FAIL); /* MPS_CLIENT_TERMINATED */
    ASSERT_EQ(gpu_start_classify(999), GPU_START_FAIL); /* UNKNOWN */
    ASSERT_EQ(gpu_start_classify(0), GPU_START_FAIL);   /* no result is no answer */
}

static void test_wait(void)
{
    /* retried while a whole retry period still fits in the wait */
    ASSERT(gpu_start_again(807, 0, 30000));
    ASSERT(gpu_start_again(807, 30000 - GPU_START_RETRY_MS, 30000));
    ASSERT(!gpu_start_again(807, 30000 - GPU_START_RETRY_MS + 1, 30000));
    ASSERT(!gpu_start_again(807, 30000, 30000));
    /* cuda_start_wait_ms = 0: one attempt */
    ASSERT(!gpu_start_again(807, 0, 0));
    /* only the RETRY class waits */
    ASSERT(!gpu_start_again(100, 0, 30000));
    ASSERT(!gpu_start_again(GPU_START_NO_DRIVER, 0, 30000));
    ASSERT(!gpu_start_again(999, 0, 30000));
    /* no overflow at the largest elapsed times */
    ASSERT(!gpu_start_again(807, UINT64_MAX - GPU_START_RETRY_MS, 600000));
    ASSERT(!gpu_start_again(807, UINT64_MAX, 600000));
    ASSERT(!gpu_start_again(807, UINT64_MAX - 1, UINT32_MAX));
}

int main(void)
{
    test_classes();
    test_wait();
    printf("test_gpu_start: ok\n");
    return 0;
}
