/*
 * l2aside.c — session 35's probe: does a persisting L2 set-aside taken by
 * one process slow another process's copies on the same GPU?
 *   l2aside probe         copies 256 MiB 30 times (after 5 untimed), prints
 *                         this context's set-aside limit and the median TB/s
 *   l2aside set SECONDS   takes the device's largest set-aside, copies as
 *                         probe does, then holds the context SECONDS
 *   l2aside setlines SECONDS  the same, and also marks 32 MiB persisting
 *                         (a stream access-policy window over one copy)
 * Build: gcc -O2 -I/usr/local/cuda/include l2aside.c -L/usr/local/cuda/lib64 -lcudart
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double copy_tbs(void *dst, void *src, size_t bytes, cudaStream_t st)
{
    cudaEvent_t a, b;
    double t[30];
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++)
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    for (int i = 0; i < 30; i++) {
        float ms;
        CK(cudaEventRecord(a, st));
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        t[i] = 2.0 * (double)bytes / (ms * 1e-3) / 1e12;
    }
    qsort(t, 30, sizeof t[0], cmp);
    return t[15];
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "probe";
    const int hold = argc > 2 ? atoi(argv[2]) : 0;
    const size_t bytes = 256u << 20;
    void *x, *y;
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    CK(cudaMalloc(&x, bytes));
    CK(cudaMalloc(&y, bytes));
    CK(cudaMemset(x, 1, bytes));
    int mx = 0;
    CK(cudaDeviceGetAttribute(&mx, cudaDevAttrMaxPersistingL2CacheSize, 0));
    if (strncmp(mode, "set", 3) == 0)
        CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, (size_t)mx));
    if (strcmp(mode, "setlines") == 0) {
        cudaStreamAttrValue v;
        memset(&v, 0, sizeof v);
        v.accessPolicyWindow.base_ptr = x;
        v.accessPolicyWindow.num_bytes = 32u << 20;
        v.accessPolicyWindow.hitRatio = 1.0f;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
        v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        CK(cudaStreamSetAttribute(st, cudaStreamAttributeAccessPolicyWindow, &v));
        CK(cudaMemcpyAsync(y, x, 32u << 20, cudaMemcpyDeviceToDevice, st));
        memset(&v, 0, sizeof v);
        CK(cudaStreamSetAttribute(st, cudaStreamAttributeAccessPolicyWindow, &v));
        CK(cudaStreamSynchronize(st));
    }
    size_t lim = 0;
    CK(cudaDeviceGetLimit(&lim, cudaLimitPersistingL2CacheSize));
    printf("l2aside %s: pid %d, largest set-aside %.1f MiB, this context's %.1f MiB, copy %.3f TB/s\n",
           mode, (int)getpid(), mx / 1048576.0, lim / 1048576.0, copy_tbs(y, x, bytes, st));
    fflush(stdout);
    if (hold > 0)
        sleep((unsigned)hold);
    return 0;
}
