/*
 * zpp_bench.c — zpp-bench: zppd's collectives against the in-process NCCL
 * baseline a user would otherwise write, measured in the same client
 * processes (one per GPU), the same run, the same streams.
 *
 *   zpp-bench -s SOCK [-w 2] [-n 1] [-m MAX_MIB] [-q]
 *
 * For each tensor size (bf16 bytes of the full tensor, 4 KiB .. 1 GiB):
 *   NCCL bf16 all-gather and reduce-scatter (ncclAllGather /
 *   ncclReduceScatter on a communicator of the client processes);
 *   zppd qwZ (int8, block 256), plain all-gather, hpZ gather (of a key kept
 *   by a qwZ), plain reduce-scatter, qgZ (default choice, and forced int4).
 * Throughput: `iters` calls back to back on one stream (zppd: the
 * stream-ordered async API: zpp_collective_async + zpp_wait_stream), timed
 * with CUDA events around the loop; time per call = elapsed / iters.
 * Latency (4 KiB): each call followed by cuStreamSynchronize, wall clock
 * per call, p50 and p90 over the samples; daemon overhead = zppd p50 minus
 * NCCL p50 of the same collective.
 * Also: the time from the first Hello to the first finished collective
 * (job formation and communicator creation included).
 * Rank 0 prints the table; "speedup" = NCCL time / zppd time of the
 * baseline named in the row.
 */
#include <getopt.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_testlib.h"
#include "zpp.h"
#include "zpp_cuda.h"

#define LAT_SAMPLES 2000
#define LAT_WARMUP 200

struct bopts {
    const char *sock;
    int world, nodes, quick;
    uint64_t max_bytes;
    int idpipe[2];
};

static const uint64_t SIZES[] = {4096,      65536,      1u << 20,   16u << 20,
                                 64u << 20, 256u << 20, 512u << 20, 1024u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

enum { B_NCCL_AG, B_NCCL_RS, B_QWZ, B_AG, B_HPZ, B_RS, B_QGZ, B_QGZ_Q, B_N };
static const char *BNAME[B_N] = {
    "nccl_allgather_bf16", "nccl_reduce_scatter_bf16", "zppd_qwz_int8",    "zppd_allgather_bf16",
    "zppd_hpz_gather",     "zppd_reduce_scatter_bf16", "zppd_qgz_default", "zppd_qgz_int4_forced"};

struct ctx {
    int rank, W;
    CUstream st;
    ncclComm_t comm;
    zpp_conn *zc;
    CUdeviceptr in, out;
    uint64_t zin, zout, oin, oout;
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The daemon's own time for the last zppd call (CollectiveReply.elapsed_us:
 * from the last rank's submission to the reply, i.e. matching plus
 * enqueueing on the cuda backend). */
static uint64_t g_last_elapsed_us;
#define PIPE_DEPTH 4

/* Submits one zppd call of kind k ordered after c->st; *id for the wait. */
static int submit(struct ctx *c, int k, uint64_t count, const char *key, uint64_t *id);

/* Enqueues one call of kind k on c->st. 0 or an error. */
static int one(struct ctx *c, int k, uint64_t count, const char *key)
{
    if (k != B_NCCL_AG && k != B_NCCL_RS) {
        uint64_t id = 0;
        zpp_result res;
        int rc = submit(c, k, count, key, &id);
        if (rc)
            return rc;
        rc = zpp_wait_stream(c->zc, id, c->st, &res);
        if (!rc)
            g_last_elapsed_us = res.elapsed_us;
        return rc;
    }
    return submit(c, k, count, key, NULL);
}

/* Pipelined: keeps up to `depth` calls submitted ahead of the waits, as a
 * training loop that prefetches does. ms per call. */
static double pipelined(struct ctx *c, int k, uint64_t count, const char *key, int iters,
                        int depth)
{
    uint64_t ids[16];
    CUevent a, b;
    float ms = 0;
    if (depth > 16)
        depth = 16;
    cuEventCreate(&a, CU_EVENT_DEFAULT);
    cuEventCreate(&b, CU_EVENT_DEFAULT);
    cuStreamSynchronize(c->st);
    cuEventRecord(a, c->st);
    for (int i = 0; i < iters + depth; i++) {
        if (i >= depth && zpp_wait_stream(c->zc, ids[(i - depth) % depth], c->st, NULL))
            return -1;
        if (i < iters && submit(c, k, count, key, &ids[i % depth]))
            return -1;
    }
    cuEventRecord(b, c->st);
    cuEventSynchronize(b);
    cuEventElapsedTime(&ms, a, b);
    cuEventDestroy(a);
    cuEventDestroy(b);
    return ms / iters;
}

static int submit(struct ctx *c, int k, uint64_t count, const char *key, uint64_t *out_id)
{
    uint64_t shard = count / (uint64_t)c->W;
    if (k == B_NCCL_AG)
        return ncclAllGather((void *)c->in, (void *)c->out, shard, ncclBfloat16, c->comm,
                             (cudaStream_t)c->st);
    if (k == B_NCCL_RS)
        return ncclReduceScatter((void *)c->in, (void *)c->out, shard, ncclBfloat16, ncclSum,
                                 c->comm, (cudaStream_t)c->st);
    zpp_coll call;
    static const int ops[B_N] = {0,
                                 0,
                                 ZPP_OP_QWZ_ALLGATHER,
                                 ZPP_OP_ALLGATHER,
                                 ZPP_OP_HPZ_GATHER,
                                 ZPP_OP_REDUCE_SCATTER,
                                 ZPP_OP_QGZ_REDUCE_SCATTER,
                                 ZPP_OP_QGZ_REDUCE_SCATTER};
    zpp_coll_init(&call, ops[k], ZPP_BF16, count);
    call.input = (zpp_bufref){c->zin, c->oin};
    call.output = (zpp_bufref){c->zout, c->oout};
    call.bits = k == B_QGZ_Q || k == B_QGZ ? 4 : 8;
    if (k == B_QGZ_Q)
        call.flags = ZPP_FLAG_FORCE_QUANT;
    if (k == B_HPZ)
        call.hpz_key = key;
    return zpp_collective_async(c->zc, &call, c->st, out_id);
}

static int keep_key(struct ctx *c, uint64_t count, const char *key)
{
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_QWZ_ALLGATHER, ZPP_BF16, count);
    call.input = (zpp_bufref){c->zin, c->oin};
    call.output = (zpp_bufref){c->zout, c->oout};
    call.hpz_key = key;
    uint64_t id;
    int rc = zpp_collective_async(c->zc, &call, c->st, &id);
    return rc ? rc : zpp_wait_stream(c->zc, id, c->st, NULL);
}

static int drop_key(struct ctx *c, const char *key)
{
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_HPZ_INVALIDATE, 0, 0);
    call.hpz_key = key;
    return zpp_collective(c->zc, &call, NULL);
}

/* ms per call over iters back-to-back calls. */
static double throughput(struct ctx *c, int k, uint64_t count, const char *key, int iters)
{
    CUevent a, b;
    float ms = 0;
    for (int i = 0; i < 3; i++)
        if (one(c, k, count, key))
            return -1;
    cuEventCreate(&a, CU_EVENT_DEFAULT);
    cuEventCreate(&b, CU_EVENT_DEFAULT);
    cuStreamSynchronize(c->st);
    cuEventRecord(a, c->st);
    for (int i = 0; i < iters; i++)
        if (one(c, k, count, key))
            return -1;
    cuEventRecord(b, c->st);
    cuEventSynchronize(b);
    cuEventElapsedTime(&ms, a, b);
    cuEventDestroy(a);
    cuEventDestroy(b);
    return ms / iters;
}

/* p50/p90 of the wall time of one synchronised call, and p50 of the
 * daemon's own part of it (elapsed_us on the reply), in us. */
static int latency(struct ctx *c, int k, uint64_t count, double *p50, double *p90, double *d50)
{
    static double s[LAT_SAMPLES], e[LAT_SAMPLES];
    for (int i = 0; i < LAT_WARMUP + LAT_SAMPLES; i++) {
        double t0 = cut_now_us();
        g_last_elapsed_us = 0;
        if (one(c, k, count, NULL) || cuStreamSynchronize(c->st) != CUDA_SUCCESS)
            return -1;
        if (i >= LAT_WARMUP) {
            s[i - LAT_WARMUP] = cut_now_us() - t0;
            e[i - LAT_WARMUP] = (double)g_last_elapsed_us;
        }
    }
    qsort(s, LAT_SAMPLES, sizeof s[0], cmp_d);
    qsort(e, LAT_SAMPLES, sizeof e[0], cmp_d);
    *p50 = s[LAT_SAMPLES / 2];
    *p90 = s[LAT_SAMPLES * 9 / 10];
    *d50 = e[LAT_SAMPLES / 2];
    return 0;
}

static int bench_child(int rank, void *arg)
{
    struct bopts *o = arg;
    struct ctx c = {.rank = rank, .W = o->world};
    struct cut_vmm vin, vout;
    char uuid[ZPP_CUDA_UUID_LEN];
    int G = o->world / o->nodes;
    ncclUniqueId id;
    if (cut_ctx(rank, NULL) || cuStreamCreate(&c.st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return 1;
    if (rank == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess)
            return 1;
        for (int r = 1; r < o->world; r++)
            if (write(o->idpipe[1], &id, sizeof id) != (ssize_t)sizeof id)
                return 1;
    } else if (read(o->idpipe[0], &id, sizeof id) != (ssize_t)sizeof id) {
        return 1;
    }
    if (ncclCommInitRank(&c.comm, o->world, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
        return 1;
    }
    uint64_t cap = o->max_bytes + (4u << 20);
    if (cut_vmm_alloc(&vin, rank, cap) || cut_vmm_alloc(&vout, rank, cap))
        return 1;
    c.in = vin.ptr;
    c.out = vout.ptr;
    cuMemsetD8(c.in, 0, vin.size); /* zeros: no non-finite blocks; speed is data-blind */
    cuCtxSynchronize();

    double th0 = cut_now_us();
    if (zpp_connect(o->sock, &c.zc) || zpp_cuda_attach(c.zc, 32) || zpp_cuda_device_uuid(uuid))
        return 1;
    zpp_job_desc jd = {.job_id = "zpp-bench",
                       .rank = (uint32_t)rank,
                       .world_size = (uint32_t)o->world,
                       .local_rank = (uint32_t)(rank % G),
                       .node_count = (uint32_t)o->nodes,
                       .gpu_uuid = uuid};
    if (zpp_hello(c.zc, &jd, NULL)) {
        fprintf(stderr, "rank %d: hello: %s\n", rank, zpp_last_error(c.zc));
        return 1;
    }
    double th1 = cut_now_us();
    if (zpp_register_cuda(c.zc, (void *)vin.ptr, cap, &c.zin, &c.oin) ||
        zpp_register_cuda(c.zc, (void *)vout.ptr, cap, &c.zout, &c.oout)) {
        fprintf(stderr, "rank %d: register: %s\n", rank, zpp_last_error(c.zc));
        return 1;
    }
    double th2 = cut_now_us();
    if (one(&c, B_AG, 2048, NULL) || cuStreamSynchronize(c.st) != CUDA_SUCCESS) {
        fprintf(stderr, "rank %d: first call: %s\n", rank, zpp_last_error(c.zc));
        return 1;
    }
    double th3 = cut_now_us();
    if (rank == 0)
        printf("first Hello -> first finished collective: %.1f ms (hello %.1f ms, register 2 "
               "buffers %.1f ms, first 4 KiB all-gather incl. communicator creation and NCCL "
               "connect %.1f ms)\n",
               (th3 - th0) / 1e3, (th1 - th0) / 1e3, (th2 - th1) / 1e3, (th3 - th2) / 1e3);

    /* small-call latency */
    struct {
        int k;
        double p50, p90, d50;
    } lat[] = {{B_NCCL_AG, 0, 0, 0}, {B_AG, 0, 0, 0}, {B_QWZ, 0, 0, 0}, {B_NCCL_RS, 0, 0, 0},
               {B_RS, 0, 0, 0}};
    for (size_t i = 0; i < sizeof lat / sizeof lat[0]; i++)
        if (latency(&c, lat[i].k, 2048, &lat[i].p50, &lat[i].p90, &lat[i].d50)) {
            fprintf(stderr, "rank %d: latency %s failed: %s\n", rank, BNAME[lat[i].k],
                    zpp_last_error(c.zc));
            return 1;
        }
    if (rank == 0) {
        printf("\nsmall calls (4 KiB tensor, each call then cuStreamSynchronize; %d samples)\n",
               LAT_SAMPLES);
        printf("%-28s %10s %10s %14s\n", "collective", "p50_us", "p90_us", "daemon_p50_us");
        for (size_t i = 0; i < sizeof lat / sizeof lat[0]; i++)
            printf("%-28s %10.1f %10.1f %14.1f\n", BNAME[lat[i].k], lat[i].p50, lat[i].p90,
                   lat[i].d50);
        printf("daemon overhead p50: all-gather %+.1f us, qwZ %+.1f us, reduce-scatter %+.1f us "
               "(zppd p50 - NCCL p50)\n",
               lat[1].p50 - lat[0].p50, lat[2].p50 - lat[0].p50, lat[4].p50 - lat[3].p50);
        printf("\nthroughput (back-to-back calls on one stream; ms per call; speedup = NCCL ms / "
               "zppd ms against the NCCL collective of the same tensor)\n");
        printf("(pipe_ms: the same calls kept %d deep in flight, as a prefetching training loop "
               "submits them)\n", PIPE_DEPTH);
        printf("%-10s %-26s %10s %10s %8s %10s %8s\n", "bytes", "collective", "ms", "nccl_ms",
               "speedup", "pipe_ms", "pipe_x");
    }
    for (size_t si = 0; si < NSIZES; si++) {
        uint64_t bytes = SIZES[si], count = bytes / 2;
        if (bytes > o->max_bytes)
            continue;
        int iters = (int)((4ull << 30) / bytes);
        if (iters > 200)
            iters = 200;
        if (iters < 10)
            iters = 10;
        if (o->quick && iters > 20)
            iters = 20;
        char key[32];
        snprintf(key, sizeof key, "b%llu", (unsigned long long)bytes);
        if (keep_key(&c, count, key)) {
            fprintf(stderr, "rank %d: qwZ with key: %s\n", rank, zpp_last_error(c.zc));
            return 1;
        }
        double t[B_N], tp[B_N];
        for (int k = 0; k < B_N; k++) {
            t[k] = throughput(&c, k, count, key, iters);
            tp[k] = k == B_NCCL_AG || k == B_NCCL_RS ? t[k]
                                                     : pipelined(&c, k, count, key, iters,
                                                                 PIPE_DEPTH);
            if (t[k] < 0 || tp[k] < 0) {
                fprintf(stderr, "rank %d: %s at %llu bytes failed: %s\n", rank, BNAME[k],
                        (unsigned long long)bytes, zpp_last_error(c.zc));
                return 1;
            }
        }
        drop_key(&c, key);
        if (rank == 0) {
            for (int k = 0; k < B_N; k++) {
                double base = k == B_NCCL_RS || k == B_RS || k == B_QGZ || k == B_QGZ_Q
                                  ? t[B_NCCL_RS]
                                  : t[B_NCCL_AG];
                printf("%-10llu %-26s %10.4f %10.4f %8.3f %10.4f %8.3f\n",
                       (unsigned long long)bytes, BNAME[k], t[k], base, base / t[k], tp[k],
                       base / tp[k]);
            }
        }
    }
    zpp_close(c.zc);
    ncclCommDestroy(c.comm);
    cut_vmm_free(&vin);
    cut_vmm_free(&vout);
    return 0;
}

int main(int argc, char **argv)
{
    struct bopts o = {.world = 2, .nodes = 1, .max_bytes = 1ull << 30};
    int ch;
    while ((ch = getopt(argc, argv, "s:w:n:m:q")) != -1) {
        switch (ch) {
        case 's':
            o.sock = optarg;
            break;
        case 'w':
            o.world = atoi(optarg);
            break;
        case 'n':
            o.nodes = atoi(optarg);
            break;
        case 'm':
            o.max_bytes = (uint64_t)atoll(optarg) << 20;
            break;
        case 'q':
            o.quick = 1;
            break;
        default:
            fprintf(stderr, "usage: %s -s SOCK [-w W] [-n N] [-m MAX_MIB] [-q]\n", argv[0]);
            return 2;
        }
    }
    if (!o.sock || o.world < 1 || o.nodes < 1 || o.world % o.nodes)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(o.idpipe))
        return 1;
    printf("zpp-bench: %d client processes (one per GPU), %d node(s) x %d GPU(s), sizes up to "
           "%llu MiB\n",
           o.world, o.nodes, o.world / o.nodes, (unsigned long long)(o.max_bytes >> 20));
    int failed = cut_spawn(o.world, bench_child, &o, -1, 0);
    return failed ? 1 : 0;
}
