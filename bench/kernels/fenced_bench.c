/*
 * fenced_bench.c — the GPU side of a small one-node call, without the
 * daemon: two members (GPUs 0 and 1, or two streams of GPU 0 when there is
 * one), each launching one fenced kernel (zk_xsync) that reads the other's
 * memory, as the cuda backend does for a small all-gather
 * (zk_copy_ptrs_cuda), qwZ (zk_qdq_ptrs_cuda) and reduce-scatter
 * (zk_sum_ptrs_sync_cuda). It tells how much of a call's tail is the
 * kernel itself.
 *
 * Two figures per kernel and tensor size, each the median (and p90) over
 * ITERS calls after a warm-up:
 *   call  — host wall time from the first launch to both streams done
 *           (member 1 launched first, then member 0, from one thread;
 *           streams synchronised by spinning);
 *   gpu   — member 0's CUDA-event time around its kernel (its wait for
 *           member 1 included).
 *
 * Usage: fenced_bench [ITERS]   (default 2000)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "zpp_kernels.h"
#include "tests/gpu/cuda_check.h"
#include "zpp_kernels_cuda.h"

#define M 2 /* members */
#define WARMUP 200
#define MAX_BYTES (2u << 20) /* the daemon's fenced calls read up to 1 MiB per GPU */

enum op { OP_COPY, OP_QDQ, OP_SUM, OP_COUNT };
static const char *op_name[OP_COUNT] = {"all-gather (copy)", "qwZ (qdq int8 B=256)",
                                        "reduce-scatter (sum)"};

struct member {
    int dev;
    cudaStream_t st;
    cudaEvent_t e0, e1;
    uint8_t *x, *y;               /* input (MAX_BYTES), output (MAX_BYTES) */
    uint32_t *flags;              /* zk_xsync block */
    unsigned long long *d_poison; /* [0] count, [1] last mirror */
    unsigned long long *h_poison; /* mapped host */
    struct zk_xsync xs;
};

static struct member g_m[M];
static uint32_t g_gen;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Member m's launch of op over a tensor of `bytes` bytes of bf16. */
static void launch(int m, enum op op, uint64_t bytes)
{
    struct member *me = &g_m[m];
    uint64_t shard = bytes / M; /* bytes per member */
    CK(cudaSetDevice(me->dev));
    me->xs.gen = g_gen;
    if (op == OP_COPY) {
        void *dst[M];
        const void *src[M];
        uint64_t len[M];
        for (int i = 0; i < M; i++) {
            dst[i] = me->y + (uint64_t)i * shard;
            src[i] = g_m[i].x;
            len[i] = shard;
        }
        CK(zk_copy_ptrs_cuda(dst, src, len, M, &me->xs, me->st));
    } else if (op == OP_QDQ) {
        const void *src[M];
        void *dst[M];
        uint64_t n[M];
        for (int i = 0; i < M; i++) {
            src[i] = g_m[i].x;
            dst[i] = me->y + (uint64_t)i * shard;
            n[i] = shard / 2;
        }
        CK(zk_qdq_ptrs_cuda(src, n, dst, M, ZK_BF16, 8, 256, m, me->d_poison, me->h_poison,
                            &me->xs, me->st));
    } else {
        const void *src[M];
        for (int i = 0; i < M; i++)
            src[i] = g_m[i].x + (uint64_t)m * shard;
        CK(zk_sum_ptrs_sync_cuda(src, M, shard / 2, ZK_BF16, ZK_SUM, 1.0f, me->y, ZK_BF16,
                                 &me->xs, me->st));
    }
}

static void spin_sync(void)
{
    for (int m = 0; m < M; m++) {
        CK(cudaSetDevice(g_m[m].dev));
        while (cudaStreamQuery(g_m[m].st) == cudaErrorNotReady)
            ;
        CK(cudaStreamQuery(g_m[m].st));
    }
}

static void run(enum op op, uint64_t bytes, int iters)
{
    double *call = malloc(sizeof(double) * (size_t)iters);
    double *gpu = malloc(sizeof(double) * (size_t)iters);
    if (!call || !gpu)
        exit(1);
    for (int it = -WARMUP; it < iters; it++) {
        g_gen++;
        double t0 = now_us();
        CK(cudaSetDevice(g_m[0].dev));
        CK(cudaEventRecord(g_m[0].e0, g_m[0].st));
        launch(1, op, bytes);
        launch(0, op, bytes);
        CK(cudaSetDevice(g_m[0].dev));
        CK(cudaEventRecord(g_m[0].e1, g_m[0].st));
        spin_sync();
        double t1 = now_us();
        if (it >= 0) {
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, g_m[0].e0, g_m[0].e1));
            call[it] = t1 - t0;
            gpu[it] = (double)ms * 1000.0;
        }
    }
    qsort(call, (size_t)iters, sizeof *call, cmp_double);
    qsort(gpu, (size_t)iters, sizeof *gpu, cmp_double);
    printf("%-22s %7llu B   call p50 %6.1f us  p90 %6.1f   gpu p50 %6.1f us  p90 %6.1f\n",
           op_name[op], (unsigned long long)bytes, call[iters / 2], call[iters * 9 / 10],
           gpu[iters / 2], gpu[iters * 9 / 10]);
    free(call);
    free(gpu);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (iters < 10)
        iters = 10;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (ndev < 1) {
        fprintf(stderr, "fenced_bench: no GPU\n");
        return 1;
    }
    for (int m = 0; m < M; m++)
        g_m[m].dev = ndev >= M ? m : 0;
    for (int m = 0; m < M; m++) {
        CK(cudaSetDevice(g_m[m].dev));
        cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceMapHost); /* once per device */
        cudaGetLastError();
        for (int p = 0; p < M; p++)
            if (g_m[p].dev != g_m[m].dev && cudaDeviceEnablePeerAccess(g_m[p].dev, 0) != 0)
                cudaGetLastError(); /* already enabled */
    }
    uint32_t *h_abort = NULL;
    CK(cudaHostAlloc((void **)&h_abort, 2 * sizeof *h_abort, cudaHostAllocMapped |
                                                                  cudaHostAllocPortable));
    h_abort[0] = h_abort[1] = 0;
    uint16_t *hx = malloc(MAX_BYTES);
    if (!hx)
        return 1;
    for (int m = 0; m < M; m++) {
        struct member *me = &g_m[m];
        CK(cudaSetDevice(me->dev));
        CK(cudaStreamCreateWithFlags(&me->st, cudaStreamNonBlocking));
        CK(cudaEventCreate(&me->e0));
        CK(cudaEventCreate(&me->e1));
        CK(cudaMalloc((void **)&me->x, MAX_BYTES));
        CK(cudaMalloc((void **)&me->y, MAX_BYTES));
        CK(cudaMalloc((void **)&me->flags, ZK_XSYNC_WORDS * sizeof(uint32_t)));
        CK(cudaMemset(me->flags, 0, ZK_XSYNC_WORDS * sizeof(uint32_t)));
        CK(cudaMalloc((void **)&me->d_poison, 2 * sizeof(unsigned long long)));
        CK(cudaMemset(me->d_poison, 0, 2 * sizeof(unsigned long long)));
        CK(cudaHostAlloc((void **)&me->h_poison, sizeof *me->h_poison,
                         cudaHostAllocMapped | cudaHostAllocPortable));
        *me->h_poison = 0;
        for (uint32_t i = 0; i < MAX_BYTES / 2; i++)
            hx[i] = (uint16_t)(0x3F80u + ((i * 7u + (uint32_t)m) & 0x7Fu)); /* bf16 in [1, 2) */
        CK(cudaMemcpy(me->x, hx, MAX_BYTES, cudaMemcpyHostToDevice));
    }
    for (int m = 0; m < M; m++) {
        struct zk_xsync *xs = &g_m[m].xs;
        memset(xs, 0, sizeof *xs);
        xs->n = M;
        xs->me = m;
        for (int i = 0; i < M; i++)
            xs->flags[i] = g_m[i].flags;
        xs->abort = h_abort;
        xs->err = h_abort + 1;
        xs->timeout_ns = 2000000000ull;
    }
    char name[2][256] = {"", ""};
    for (int m = 0; m < M; m++) {
        struct cudaDeviceProp p;
        CK(cudaGetDeviceProperties(&p, g_m[m].dev));
        snprintf(name[m], sizeof name[m], "%s", p.name);
    }
    printf("fenced_bench: members on GPU %d (%s) and GPU %d (%s), %d calls per row after %d\n",
           g_m[0].dev, name[0], g_m[1].dev, name[1], iters, WARMUP);
    const uint64_t sizes[] = {4096, 65536, 1u << 20, 2u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int op = 0; op < OP_COUNT; op++)
            run((enum op)op, sizes[s], iters);
    /* the first size again, to see drift */
    for (int op = 0; op < OP_COUNT; op++)
        run((enum op)op, sizes[0], iters);
    if (h_abort[1])
        printf("fenced_bench: a wait gave up (error word %u)\n", h_abort[1]);
    return h_abort[1] ? 1 : 0;
}
