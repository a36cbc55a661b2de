/*
 * cuda_check.h — CK(call) for the GPU test and bench programs
 * (tests/gpu/gpu_compare.c, bench/kernels/kernel_bench.c, fenced_bench.c):
 * a CUDA runtime call or a kernel entry (0 = success, else a cudaError_t
 * value) that fails prints where and why and ends the program.
 */
#ifndef ZPP_CUDA_CHECK_H
#define ZPP_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        int e_ = (int)(call);                                                                      \
        if (e_ != 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s -> %d (%s)\n", __FILE__, __LINE__, #call, e_,               \
                    cudaGetErrorString((cudaError_t)e_));                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
