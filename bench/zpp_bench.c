/*
 * zpp_bench.c — zpp-bench: zppd's collectives against the in-process NCCL
 * baseline a user would otherwise write, measured in the same client
 * processes (one per rank), the same run, the same streams.
 *
 *   zpp-bench -s SOCK [-w 2] [-n 1] [-m MAX_MIB] [-q]                 one daemon
 *   zpp-bench -s '/tmp/z-{node}.sock' -A LEADER -n N -G G [-g MAP]
 *             [-I HOSTID_PREFIX] [-m MAX_MIB] [-i MAX_ITERS] [-R ROUNDS] N daemons
 *   -b QWZ_BLOCK (both modes): qwZ's block, 256 by default; a larger block
 *   carries fewer scale bytes (0.5 + 2 / block of the tensor's bytes)
 *   -M MIN_MIB (both modes): skip the sizes under it, so that one goal size
 *   can take many -P pairs within one device call
 *
 * One daemon: W = -w ranks, one per GPU, all on the daemon of SOCK.
 * Jobs across daemons (-A given and N > 1): W = N x G ranks (-G, or -w / -n);
 * rank r is on node r / G and talks to the daemon of the socket named by
 * the template with "{node}" replaced by its node (-s); the job's leader is
 * the peer address of node 0's daemon (-A host:port, zpp_job_desc
 * leader_addr). Each rank process sets NCCL_HOSTID=<prefix><node> (-I,
 * default "zpp-node"; "" leaves it alone) before any CUDA or NCCL call, so
 * that the in-process NCCL baseline sees the same N hosts as the daemons
 * (start each daemon with the same NCCL_HOSTID as its node's ranks).
 * GPU of rank r (both modes): element r of -g MAP ("0,1,0,1"), or r % the
 * number of visible GPUs (2 x 1 on GPUs 0,1: ranks 0,1 on 0,1; 2 x 2 on two
 * GPUs: ranks 0..3 on 0,1,0,1).
 *
 * For each tensor size (bf16 bytes of the full tensor, 4 KiB .. 1 GiB):
 *   NCCL bf16 all-gather and reduce-scatter (ncclAllGather /
 *   ncclReduceScatter on a communicator of the client processes);
 *   zppd qwZ (int8, block 256 or -b), plain all-gather, hpZ gather (of a key kept
 *   by a qwZ), plain reduce-scatter, qgZ (default choice, and forced int4);
 *   across daemons also the wire: in-process NCCL moving the bytes qwZ and
 *   qgZ move (an all-gather of half the bytes, an all-to-all of a quarter),
 *   the ceiling the issue measured its goals against; and qwZ done
 *   in-process with the same kernels (quantize, NCCL all-gather of the
 *   codes, dequantize: what a user of kernels/ would write without the
 *   daemon), whose output is checked byte for byte against zppd's before
 *   the timing starts. Across daemons each size runs in -R rounds (default
 *   7), every kind once per round, qwZ and qgZ each right after the NCCL
 *   baseline they are compared with, and a goal's speedup is the median of
 *   the rounds' own ratios: the simulated wire drifts over seconds, and a
 *   zppd time is compared with the NCCL time taken next to it. qwZ's goal
 *   (1.9x, a few percent under the wire's 2x in 2 x 1) is then judged on
 *   -P more samples (default 25): pairs of windows (NCCL AG, qwZ, qwZ,
 *   NCCL AG), so that a linear drift cancels, whose median is printed with
 *   its 95 % interval (bench/stats.h). Across daemons every timed window
 *   follows one untimed call of its kind: a communicator that sat idle
 *   while the others ran starts slower, and the daemon's sits idle
 *   longest (-W N: N untimed calls instead). -D runs the same pairs for the
 *   wire's half all-gather and the in-process qwZ, interleaved with qwZ's,
 *   and prints each one's median and its windows' median times. -S N
 *   runs N pairs of the daemon's work against the same work without it,
 *   (in-process qwZ, qwZ, qwZ, in-process qwZ) and (NCCL AG, zppd AG,
 *   zppd AG, NCCL AG): the daemon's own cost, with no other kind between;
 *   and qwZ's pairs again with the daemon's windows 4 deep (pipelined, as
 *   a prefetching loop submits), which take the hop from one call's done
 *   event to the next call's start off the GPU's path.
 * Throughput: `iters` calls back to back on one stream (zppd: the
 * stream-ordered async API: zpp_collective_async + zpp_wait_stream), timed
 * with CUDA events around the loop; time per call = elapsed / iters.
 * inter/M: the cross-node bytes of one zppd call (zpp_result.bytes_inter,
 * the whole job's) over the tensor's bytes M (ZeRO-3 moves (N-1) M).
 * Latency (4 KiB, one daemon only): each call followed by
 * cuStreamSynchronize, wall clock per call, p50 and p90 over the samples;
 * daemon overhead = zppd p50 minus NCCL p50 of the same collective; for
 * qwZ also against the in-process qwZ (the daemon's own cost: the same
 * work, without the daemon).
 * Across daemons the iteration counts are smaller (a 512 MiB call crosses
 * the simulated wire in ~100+ ms: about 1 minute for sizes up to 1 GiB),
 * pipelining is measured only below 256 MiB, and a summary against the
 * issue's goals closes the output.
 * Also: the time from the first Hello to the first finished collective
 * (job formation and communicator creation included).
 * Rank 0 prints the table and the NCCL_* environment; "speedup" = NCCL
 * time / zppd time of the baseline named in the row.
 */
#include <getopt.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/stats.h"
#include "cu_testlib.h"
#include "zpp.h"
#include "zpp_cuda.h"
#include "zpp_kernels_cuda.h"

/* qwZ's block, zppd's and in-process: DESIGN.md's default, or -b. Set
 * before the rank processes are forked, read by them. */
static uint32_t qwz_block = 256;
#define LAT_SAMPLES 2000
#define LAT_WARMUP 200

struct bopts {
    const char *sock;      /* path, or template with "{node}" */
    const char *leader;    /* node 0's peer address: a job across daemons */
    const char *gpu_map;   /* -g: GPU ordinal per rank, or NULL */
    const char *hostid;    /* NCCL_HOSTID prefix across daemons ("" none) */
    int world, nodes, quick, multi, max_iters, rounds, pairs, diag;
    int share; /* -S: pairs of the daemon's work against the same work in-process */
    int warm; /* -W: untimed calls before every window across daemons */
    uint64_t max_bytes, min_bytes; /* -m, -M: the sizes timed */
    int idpipe[2];
    struct cut_meet *meet; /* the ranks' last meeting, before they leave */
};

static const uint64_t SIZES[] = {4096,      65536,      1u << 20,   16u << 20,
                                 64u << 20, 256u << 20, 512u << 20, 1024u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* B_WIRE_*: what the wire allows, the issue's own yardstick (across
 * daemons only): in-process NCCL moving the bytes qwZ and qgZ move, with no
 * quantization work. B_WIRE_AG: ncclAllGather of half the bytes (int8);
 * B_WIRE_A2A: an all-to-all (ncclSend/ncclRecv to every rank, as
 * torch.distributed.all_to_all_single) of a quarter of the bytes (int4).
 * B_INPROC_QWZ: qwZ in the client process with kernels/ (inproc_qwz). */
enum {
    B_NCCL_AG,
    B_NCCL_RS,
    B_WIRE_AG,
    B_WIRE_A2A,
    B_INPROC_QWZ,
    B_QWZ,
    B_AG,
    B_HPZ,
    B_RS,
    B_QGZ,
    B_QGZ_Q,
    B_N
};
static const char *BNAME[B_N] = {
    "nccl_allgather_bf16", "nccl_reduce_scatter_bf16", "wire_allgather_half", "wire_alltoall_quarter",
    "inproc_qwz_int8",     "zppd_qwz_int8",            "zppd_allgather_bf16", "zppd_hpz_gather",
    "zppd_reduce_scatter_bf16", "zppd_qgz_default",    "zppd_qgz_int4_forced"};

/* The order of one round: the goals' zppd kinds (qwZ, qgZ) each right
 * after the NCCL time they are divided by, so that the wire drifts least
 * between the two. */
static const int ROUND_ORDER[B_N] = {B_NCCL_AG, B_QWZ,      B_INPROC_QWZ, B_WIRE_AG,
                                     B_AG,      B_HPZ,      B_NCCL_RS,    B_QGZ,
                                     B_WIRE_A2A, B_QGZ_Q,   B_RS};

_Static_assert(sizeof ROUND_ORDER / sizeof ROUND_ORDER[0] == B_N, "every kind once a round");

/* In the client process (NCCL, or kernels/ and NCCL), not zppd. */
static int in_process(int k)
{
    return k == B_NCCL_AG || k == B_NCCL_RS || k == B_WIRE_AG || k == B_WIRE_A2A ||
           k == B_INPROC_QWZ;
}

/* Only across daemons: the wire rows. */
static int multi_only(int k)
{
    return k == B_WIRE_AG || k == B_WIRE_A2A;
}

/* Measured against the reduce-scatter (else the all-gather). */
static int rs_based(int k)
{
    return k == B_NCCL_RS || k == B_WIRE_A2A || k == B_RS || k == B_QGZ || k == B_QGZ_Q;
}

struct ctx {
    int rank, W;
    CUstream st;
    ncclComm_t comm;
    zpp_conn *zc;
    CUdeviceptr in, out;
    CUdeviceptr codes; /* inproc_qwz: the W chunks, gathered in place */
    uint64_t zin, zout, oin, oout;
};

#define MAX_ROUNDS 9
/* -P: qwZ's goal pairs at each goal size (default 25 across daemons) */
#define MAX_PAIRS 99
_Static_assert(MAX_PAIRS <= ZB_MAX_SAMPLES && MAX_ROUNDS <= ZB_MAX_SAMPLES, "stats.h's sample cap");

/* The daemon's own time for the last zppd call (CollectiveReply.elapsed_us:
 * from the last rank's submission to the reply, i.e. matching plus
 * enqueueing on the cuda backend), and its whole reply (byte counts). */
static uint64_t g_last_elapsed_us;
static zpp_result g_last_res;
#define PIPE_DEPTH 4

/* Submits one zppd call of kind k ordered after c->st; *id for the wait. */
static int submit(struct ctx *c, int k, uint64_t count, const char *key, uint64_t *id);

/* Enqueues one call of kind k on c->st. 0 or an error. */
static int one(struct ctx *c, int k, uint64_t count, const char *key)
{
    if (!in_process(k)) {
        uint64_t id = 0;
        zpp_result res;
        int rc = submit(c, k, count, key, &id);
        if (rc)
            return rc;
        rc = zpp_wait_stream(c->zc, id, c->st, &res);
        if (!rc) {
            g_last_elapsed_us = res.elapsed_us;
            g_last_res = res;
        }
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

/* pipelined() after `warm` untimed calls of kind k, as throughput() does. */
static double warm_then_pipelined(struct ctx *c, int k, uint64_t count, const char *key, int iters,
                                  int warm)
{
    for (int i = 0; i < warm; i++)
        if (one(c, k, count, key))
            return -1;
    return pipelined(c, k, count, key, iters, PIPE_DEPTH);
}

/* qwZ in the client process, as a user of kernels/ would write it: this
 * rank's shard quantized into its chunk of c->codes, the chunks gathered
 * in place by NCCL, each dequantized into its place of the output. The
 * same chunks and arithmetic as zppd's qwZ, so the same output bytes. */
static int inproc_qwz(struct ctx *c, uint64_t shard)
{
    uint64_t cb = zk_chunk_bytes(shard, 8, qwz_block);
    uint8_t *q = (uint8_t *)c->codes;
    cudaStream_t st = (cudaStream_t)c->st;
    int rc = zk_quantize_cuda((const void *)c->in, ZK_BF16, shard, shard, 8, qwz_block,
                              q + (uint64_t)c->rank * cb, NULL, st);
    if (rc)
        return rc;
    rc = ncclAllGather(q + (uint64_t)c->rank * cb, q, cb, ncclUint8, c->comm, st);
    for (int m = 0; !rc && m < c->W; m++)
        rc = zk_dequantize_cuda(q + (uint64_t)m * cb, shard, shard, 8, qwz_block,
                                (uint8_t *)c->out + (uint64_t)m * shard * 2, ZK_BF16, st);
    return rc;
}

static int submit(struct ctx *c, int k, uint64_t count, const char *key, uint64_t *out_id)
{
    uint64_t shard = count / (uint64_t)c->W;
    if (k == B_INPROC_QWZ)
        return inproc_qwz(c, shard);
    if (k == B_NCCL_AG)
        return ncclAllGather((void *)c->in, (void *)c->out, shard, ncclBfloat16, c->comm,
                             (cudaStream_t)c->st);
    if (k == B_NCCL_RS)
        return ncclReduceScatter((void *)c->in, (void *)c->out, shard, ncclBfloat16, ncclSum,
                                 c->comm, (cudaStream_t)c->st);
    if (k == B_WIRE_AG)
        return ncclAllGather((void *)c->in, (void *)c->out, shard / 2, ncclBfloat16, c->comm,
                             (cudaStream_t)c->st);
    if (k == B_WIRE_A2A) {
        size_t pp = (size_t)(count / 4 / (uint64_t)c->W); /* bf16 elements per peer */
        ncclResult_t r = ncclGroupStart();
        for (int p = 0; p < c->W && r == ncclSuccess; p++) {
            r = ncclSend((const uint16_t *)c->in + (size_t)p * pp, pp, ncclBfloat16, p, c->comm,
                         (cudaStream_t)c->st);
            if (r == ncclSuccess)
                r = ncclRecv((uint16_t *)c->out + (size_t)p * pp, pp, ncclBfloat16, p, c->comm,
                             (cudaStream_t)c->st);
        }
        ncclResult_t e = ncclGroupEnd();
        return r != ncclSuccess ? r : e;
    }
    zpp_coll call;
    static const int ops[B_N] = {0,
                                 0,
                                 0,
                                 0,
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
    if (k == B_QWZ)
        call.block = qwz_block;
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
    call.block = qwz_block;
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

/* A window split at its first call: GPU time from the window's start to
 * the end of call 1, per call after it, and the host time call 1 took to
 * submit and return (-S: a daemon's cost paid once per window or by each
 * call). */
struct split {
    double first_ms, rest_ms, first_host_ms;
};

/* ms per call over iters back-to-back calls, after `warm` calls; with sp,
 * also the window's split (one more event and two clock reads). */
static double throughput_split(struct ctx *c, int k, uint64_t count, const char *key, int iters,
                               int warm, struct split *sp)
{
    CUevent a, b, e1 = NULL;
    float ms = 0, first = 0;
    for (int i = 0; i < warm; i++)
        if (one(c, k, count, key))
            return -1;
    cuEventCreate(&a, CU_EVENT_DEFAULT);
    cuEventCreate(&b, CU_EVENT_DEFAULT);
    if (sp)
        cuEventCreate(&e1, CU_EVENT_DEFAULT);
    cuStreamSynchronize(c->st);
    cuEventRecord(a, c->st);
    for (int i = 0; i < iters; i++) {
        double t0 = sp && i == 0 ? cut_now_us() : 0;
        if (one(c, k, count, key))
            return -1;
        if (sp && i == 0) {
            sp->first_host_ms = (cut_now_us() - t0) / 1000;
            cuEventRecord(e1, c->st);
        }
    }
    cuEventRecord(b, c->st);
    cuEventSynchronize(b);
    cuEventElapsedTime(&ms, a, b);
    if (sp) {
        cuEventElapsedTime(&first, a, e1);
        sp->first_ms = first;
        sp->rest_ms = iters > 1 ? (ms - first) / (iters - 1) : 0;
        cuEventDestroy(e1);
    }
    cuEventDestroy(a);
    cuEventDestroy(b);
    return ms / iters;
}

static double throughput(struct ctx *c, int k, uint64_t count, const char *key, int iters, int warm)
{
    return throughput_split(c, k, count, key, iters, warm, NULL);
}

/* One small call's figures, in us: p50/p90 of the wall time of one
 * synchronised call; p50 of the daemon's own part of it (elapsed_us on the
 * reply); and the call split in two, p50 each: until the call returned
 * (for zppd: request, reply, the stream's wait on the done event; for
 * NCCL: the launch) and from there until the stream was done. */
struct lat_fig {
    double p50, p90, d50, call50, tail50;
};

static int latency(struct ctx *c, int k, uint64_t count, struct lat_fig *f)
{
    static double s[LAT_SAMPLES], e[LAT_SAMPLES], a[LAT_SAMPLES], b[LAT_SAMPLES];
    for (int i = 0; i < LAT_WARMUP + LAT_SAMPLES; i++) {
        double t0 = cut_now_us(), t1;
        g_last_elapsed_us = 0;
        if (one(c, k, count, NULL))
            return -1;
        t1 = cut_now_us();
        if (cuStreamSynchronize(c->st) != CUDA_SUCCESS)
            return -1;
        if (i >= LAT_WARMUP) {
            double t2 = cut_now_us();
            s[i - LAT_WARMUP] = t2 - t0;
            a[i - LAT_WARMUP] = t1 - t0;
            b[i - LAT_WARMUP] = t2 - t1;
            e[i - LAT_WARMUP] = (double)g_last_elapsed_us;
        }
    }
    qsort(s, LAT_SAMPLES, sizeof s[0], zb_cmp_d);
    qsort(e, LAT_SAMPLES, sizeof e[0], zb_cmp_d);
    qsort(a, LAT_SAMPLES, sizeof a[0], zb_cmp_d);
    qsort(b, LAT_SAMPLES, sizeof b[0], zb_cmp_d);
    f->p50 = s[LAT_SAMPLES / 2];
    f->p90 = s[LAT_SAMPLES * 9 / 10];
    f->d50 = e[LAT_SAMPLES / 2];
    f->call50 = a[LAT_SAMPLES / 2];
    f->tail50 = b[LAT_SAMPLES / 2];
    return 0;
}

/* Before any timing: inproc_qwz and zppd's qwZ give the same output
 * bytes on the same random finite input (cut_fill's), each output
 * poisoned first (a 1 MiB tensor, and shards of 3 blocks and a tail).
 * Every rank checks its own output; 0, or 1 after saying where they
 * differ. */
static int check_inproc(struct ctx *c, uint64_t max_shard)
{
    const uint64_t shards[] = {0, 3 * (uint64_t)qwz_block + 40};
    for (size_t t = 0; t < sizeof shards / sizeof shards[0]; t++) {
        uint64_t shard = shards[t] ? shards[t] : (1u << 19) / (uint64_t)c->W;
        uint64_t count = shard * (uint64_t)c->W, bytes = count * 2;
        if (shard > max_shard)
            continue;
        uint16_t *x = malloc(shard * 2);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        int rc = !x || !a || !b;
        if (!rc)
            cut_fill(x, ZPP_BF16, shard, (uint32_t)c->rank, 0, shard);
        if (!rc)
            /* everything on c->st, whose order zppd's calls follow */
            rc = cuMemcpyHtoDAsync(c->in, x, shard * 2, c->st) ||
                 cuMemsetD8Async(c->out, 0xA5, bytes, c->st) ||
                 one(c, B_INPROC_QWZ, count, NULL) || cuStreamSynchronize(c->st) ||
                 cuMemcpyDtoH(a, c->out, bytes) || cuMemsetD8Async(c->out, 0x5A, bytes, c->st) ||
                 one(c, B_QWZ, count, NULL) || cuStreamSynchronize(c->st) ||
                 cuMemcpyDtoH(b, c->out, bytes) || cuMemsetD8Async(c->in, 0, shard * 2, c->st) ||
                 cuStreamSynchronize(c->st);
        uint64_t bad = 0, first = 0;
        for (uint64_t i = 0; !rc && i < bytes; i++)
            if (a[i] != b[i] && bad++ == 0)
                first = i;
        if (rc)
            fprintf(stderr, "rank %d: in-process qwZ check (%llu elements) failed to run: %s\n",
                    c->rank, (unsigned long long)count, zpp_last_error(c->zc));
        else if (bad)
            fprintf(stderr, "rank %d: in-process qwZ and zppd's differ in %llu of %llu bytes "
                    "(first at %llu) for %llu elements\n", c->rank, (unsigned long long)bad,
                    (unsigned long long)bytes, (unsigned long long)first,
                    (unsigned long long)count);
        else if (c->rank == 0)
            printf("in-process qwZ = zppd qwZ, byte for byte: %llu elements (%llu per rank), "
                   "random bf16 ~N(0,1) (cut_fill)\n", (unsigned long long)count,
                   (unsigned long long)shard);
        free(x);
        free(a);
        free(b);
        if (rc || bad)
            return 1;
    }
    return 0;
}

/* Calls per measurement: one daemon, 4 GiB of tensor per kind (10..200);
 * across daemons 6 GiB (3..50), whose calls cross the simulated wire at a
 * few GB/s. -q and -i cap them. Every rank computes the same numbers:
 * the calls of a collective must match across ranks. */
static int iters_for(const struct bopts *o, uint64_t bytes)
{
    int lo = o->multi ? 3 : 10, hi = o->multi ? 50 : 200;
    uint64_t budget = o->multi ? 6ull << 30 : 4ull << 30;
    int iters = (int)(budget / bytes > (uint64_t)hi ? (uint64_t)hi : budget / bytes);
    if (iters < lo)
        iters = lo;
    if (o->quick && iters > (o->multi ? 5 : 20))
        iters = o->multi ? 5 : 20;
    if (o->max_iters > 0 && iters > o->max_iters)
        iters = o->max_iters;
    return iters;
}

/* The goals at 256 MiB - 1 GiB, across daemons (rank 0 prints). */
#define GOAL_MIN (256ull << 20)
struct goal_row {
    uint64_t bytes;
    double qwz_x, qgz_x, hpz_x, qwz_m, hpz_m, qgz_m;
    double qwz_wire, qgz_wire; /* the B_WIRE_* rows' speedups */
    double inproc_x, inproc_share; /* in-process qwZ's speedup; zppd's qwZ speed / its */
    double qwz_lo, qwz_hi, qgz_lo, qgz_hi; /* the speedups' range over the rounds */
    /* qwZ's goal pairs (-P): their median, its 95 % interval (coverage
     * cov, 0 when too few), range, and the rounds' median (qwz_x then
     * holds the pairs') */
    int npairs;
    double qwz_rounds_x, qwzp_lo, qwzp_hi, qwzp_cov, qwzp_min, qwzp_max;
};

static void print_goals(const struct goal_row *g, int n, int rounds, int warm)
{
    if (n == 0) {
        printf("\ngoals: no size of 256 MiB or more was measured (-m)\n");
        return;
    }
    printf("\ngoals (issue 11, 256 MiB - 1 GiB; speedup against NCCL bf16 of the same tensor in "
           "this run; inter/M goals ~0.5, 0, ~0.25)\n");
    printf("(%d rounds, each kind measured once per round in turn, after %d untimed call(s); a "
           "speedup is the median of "
           "the rounds' own ratios, each zppd time over the NCCL time of its round",
           rounds, warm);
    if (g[0].npairs > 0)
        printf("; qwZ's is the median of %d more pairs, below", g[0].npairs);
    printf(")\n");
    printf("%-10s %22s %22s %22s\n", "bytes", "qwZ>=1.9x AG (inter/M)", "qgZ>=3x RS (inter/M)",
           "hpZ>=30x AG (inter/M)");
    for (int i = 0; i < n; i++) {
        char a[32], b[32], c[32];
        snprintf(a, sizeof a, "%.2fx %s (%.3f)", g[i].qwz_x, g[i].qwz_x >= 1.9 ? "MET" : "MISS",
                 g[i].qwz_m);
        snprintf(b, sizeof b, "%.2fx %s (%.3f)", g[i].qgz_x, g[i].qgz_x >= 3.0 ? "MET" : "MISS",
                 g[i].qgz_m);
        snprintf(c, sizeof c, "%.1fx %s (%.3f)", g[i].hpz_x, g[i].hpz_x >= 30.0 ? "MET" : "MISS",
                 g[i].hpz_m);
        printf("%-10llu %22s %22s %22s\n", (unsigned long long)g[i].bytes, a, b, c);
    }
    if (g[0].npairs > 0) {
        printf("\nqwZ's goal pairs: %d per size, each (NCCL AG, qwZ, qwZ, NCCL AG), every window "
               "after %d untimed call(s) of its kind, speedup = the "
               "two NCCL times over the two qwZ times; the median, the sign test's interval for "
               "it (95 %%: the median lies in it with at least the coverage shown), the range; "
               "and the rounds' median for comparison\n",
               g[0].npairs, warm);
        printf("%-10s %10s %20s %10s %18s %12s\n", "bytes", "median", "95% interval", "coverage",
               "min - max", "rounds' x");
        for (int i = 0; i < n; i++) {
            char ci[40] = "-", cov[16] = "-";
            if (g[i].qwzp_cov > 0) {
                snprintf(ci, sizeof ci, "%.3f - %.3fx", g[i].qwzp_lo, g[i].qwzp_hi);
                snprintf(cov, sizeof cov, "%.1f%%", 100 * g[i].qwzp_cov);
            }
            printf("%-10llu %9.3fx %20s %10s %8.2f - %.2fx %11.2fx\n",
                   (unsigned long long)g[i].bytes, g[i].qwz_x, ci, cov, g[i].qwzp_min,
                   g[i].qwzp_max, g[i].qwz_rounds_x);
        }
    }
    printf("\nspeedup over the rounds (min - max)\n%-10s %22s %22s\n", "bytes", "qwZ", "qgZ");
    for (int i = 0; i < n; i++)
        printf("%-10llu %15.2f - %.2fx %15.2f - %.2fx\n", (unsigned long long)g[i].bytes,
               g[i].qwz_lo, g[i].qwz_hi, g[i].qgz_lo, g[i].qgz_hi);
    printf("\nthe wire (in-process NCCL moving the same bytes, no quantization; zppd / wire = "
           "the share of the wire's speedup zppd keeps)\n");
    printf("%-10s %14s %14s %14s %14s\n", "bytes", "AG half x", "qwZ/wire", "A2A quarter x",
           "qgZ/wire");
    for (int i = 0; i < n; i++)
        printf("%-10llu %13.2fx %13.0f%% %13.2fx %13.0f%%\n", (unsigned long long)g[i].bytes,
               g[i].qwz_wire, 100 * g[i].qwz_rounds_x / g[i].qwz_wire, g[i].qgz_wire,
               100 * g[i].qgz_x / g[i].qgz_wire);
    printf("\nqwZ in-process (kernels/ and NCCL in the client, no daemon) against zppd's qwZ\n");
    printf("%-10s %18s %18s %22s\n", "bytes", "in-process qwZ x", "zppd qwZ x",
           "zppd / in-process");
    for (int i = 0; i < n; i++)
        printf("%-10llu %17.2fx %17.2fx %21.0f%%\n", (unsigned long long)g[i].bytes,
               g[i].inproc_x, g[i].qwz_rounds_x, 100 * g[i].inproc_share);
}

/* -S's split of one pair kind's n pairs (sp[window][pair], windows base,
 * kind, kind, base): the medians over the base's windows and over the
 * kind's. */
static void print_split(uint64_t bytes, const char *kind, const char *base,
                        struct split (*sp)[MAX_PAIRS], int n)
{
    double f[2][3]; /* [base, kind][first, host, rest] */
    if (n > ZB_MAX_SAMPLES / 2)
        n = ZB_MAX_SAMPLES / 2;
    for (int w = 0; w < 2; w++) {
        double v[3][ZB_MAX_SAMPLES];
        for (int p = 0; p < n; p++)
            for (int h = 0; h < 2; h++) { /* windows 0 and 3, or 1 and 2 */
                const struct split *x = &sp[w ? 1 + h : 3 * h][p];
                v[0][2 * p + h] = x->first_ms;
                v[1][2 * p + h] = x->first_host_ms;
                v[2][2 * p + h] = x->rest_ms;
            }
        for (int m = 0; m < 3; m++)
            f[w][m] = zb_median(v[m], 2 * n);
    }
    printf("share %-10llu %-22s split, medians: call 1 %.3f ms (host %.3f ms), each later call "
           "%.3f ms; %s: call 1 %.3f ms (host %.3f ms), each later %.3f ms\n",
           (unsigned long long)bytes, kind, f[1][0], f[1][1], f[1][2], base, f[0][0], f[0][1],
           f[0][2]);
}

static int bench_child(int rank, void *arg)
{
    struct bopts *o = arg;
    struct ctx c = {.rank = rank, .W = o->world};
    struct cut_vmm vin, vout;
    char uuid[ZPP_CUDA_UUID_LEN], sock[256];
    int G = o->world / o->nodes, node = rank / G;
    ncclUniqueId id;
    if (o->multi && o->hostid[0]) {
        /* before CUDA and NCCL: NCCL reads it once, at its first use */
        char hid[128];
        snprintf(hid, sizeof hid, "%s%d", o->hostid, node);
        setenv("NCCL_HOSTID", hid, 1);
    }
    if (cut_node_socket(o->sock, node, sock, sizeof sock)) {
        fprintf(stderr, "rank %d: socket path too long\n", rank);
        return 1;
    }
    int dev = cut_rank_device(o->gpu_map, rank);
    if (dev < 0) {
        fprintf(stderr, "rank %d: no GPU for this rank (-g '%s')\n", rank,
                o->gpu_map ? o->gpu_map : "");
        return 1;
    }
    if (cut_ctx(dev, NULL) || cuStreamCreate(&c.st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return 1;
    if (rank == 0) {
        /* Whether this run's processes share the GPU through MPS decides
         * what a zppd call costs (docs/cuda.md, "MPS"): say it. */
        CUdevice cd;
        int mps = -1, have = cuCtxGetDevice(&cd) == CUDA_SUCCESS;
        if (!have || cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, cd) != CUDA_SUCCESS)
            mps = -1;
        /* and which device and when: every figure names its machine */
        char name[128] = "?", when[32] = "?";
        int drv = 0;
        time_t now = time(NULL);
        struct tm tm;
        if (!have || cuDeviceGetName(name, (int)sizeof name, cd) != CUDA_SUCCESS)
            snprintf(name, sizeof name, "?");
        cuDriverGetVersion(&drv);
        if (gmtime_r(&now, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        printf("device: %s (rank 0's GPU %d), CUDA driver API %d.%d, %s\n", name, dev, drv / 1000,
               drv % 1000 / 10, when);
        printf("CUDA MPS on this run's GPUs: %s\n",
               mps > 0 ? "on" : mps == 0 ? "off (time-sliced)" : "unknown");
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
    if (cut_vmm_alloc(&vin, dev, cap) || cut_vmm_alloc(&vout, dev, cap))
        return 1;
    c.in = vin.ptr;
    c.out = vout.ptr;
    uint64_t max_shard = o->max_bytes / 2 / (uint64_t)o->world + 1024;
    if (cuMemAlloc(&c.codes, (size_t)(zk_chunk_bytes(max_shard, 8, qwz_block) *
                                      (uint64_t)o->world)) != CUDA_SUCCESS) {
        fprintf(stderr, "rank %d: no GPU memory for the in-process qwZ's codes\n", rank);
        return 1;
    }
    cuMemsetD8(c.in, 0, vin.size); /* zeros: no non-finite blocks; speed is data-blind */
    cuCtxSynchronize();

    double th0 = cut_now_us();
    if (zpp_connect(sock, &c.zc) || zpp_cuda_attach(c.zc, 32) || zpp_cuda_device_uuid(uuid)) {
        fprintf(stderr, "rank %d: cannot connect to %s or attach\n", rank, sock);
        return 1;
    }
    zpp_job_desc jd = {.job_id = "zpp-bench",
                       .rank = (uint32_t)rank,
                       .world_size = (uint32_t)o->world,
                       .local_rank = (uint32_t)(rank % G),
                       .node_count = (uint32_t)o->nodes,
                       .gpu_uuid = uuid,
                       .leader_addr = o->multi ? o->leader : NULL};
    if (zpp_hello(c.zc, &jd, NULL)) {
        fprintf(stderr, "rank %d: hello (%s): %s\n", rank, sock, zpp_last_error(c.zc));
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
               "buffers %.1f ms, first 4 KiB all-gather incl. %scommunicator creation and NCCL "
               "connect %.1f ms)\n",
               (th3 - th0) / 1e3, (th1 - th0) / 1e3, (th2 - th1) / 1e3,
               o->multi ? "job formation across daemons, " : "", (th3 - th2) / 1e3);
    if (check_inproc(&c, max_shard))
        return 1;

    /* small-call latency (one daemon: the daemon's own overhead) */
    struct {
        int k;
        struct lat_fig f;
    } lat[] = {{B_NCCL_AG, {0}}, {B_AG, {0}},      {B_QWZ, {0}},
               {B_INPROC_QWZ, {0}}, {B_NCCL_RS, {0}}, {B_RS, {0}}};
    for (size_t i = 0; !o->multi && i < sizeof lat / sizeof lat[0]; i++)
        if (latency(&c, lat[i].k, 2048, &lat[i].f)) {
            fprintf(stderr, "rank %d: latency %s failed: %s\n", rank, BNAME[lat[i].k],
                    zpp_last_error(c.zc));
            return 1;
        }
    if (rank == 0 && !o->multi) {
        printf("\nsmall calls (4 KiB tensor, each call then cuStreamSynchronize; %d samples)\n",
               LAT_SAMPLES);
        printf("(call: until the call returned, i.e. zppd's reply and the stream's wait on its "
               "done event, or NCCL's launch; tail: from there until the stream was done)\n");
        printf("%-28s %10s %10s %14s %12s %12s\n", "collective", "p50_us", "p90_us",
               "daemon_p50_us", "call_p50_us", "tail_p50_us");
        for (size_t i = 0; i < sizeof lat / sizeof lat[0]; i++)
            printf("%-28s %10.1f %10.1f %14.1f %12.1f %12.1f\n", BNAME[lat[i].k], lat[i].f.p50,
                   lat[i].f.p90, lat[i].f.d50, lat[i].f.call50, lat[i].f.tail50);
        printf("daemon overhead p50: all-gather %+.1f us, qwZ %+.1f us, reduce-scatter %+.1f us "
               "(zppd p50 - NCCL p50)\n",
               lat[1].f.p50 - lat[0].f.p50, lat[2].f.p50 - lat[0].f.p50,
               lat[5].f.p50 - lat[4].f.p50);
        printf("qwZ against the same qwZ in-process (quantize, NCCL all-gather, dequantize in the "
               "client): %+.1f us\n",
               lat[2].f.p50 - lat[3].f.p50);
    }
    if (rank == 0) {
        printf("\nthroughput (back-to-back calls on one stream; ms per call; speedup = NCCL ms / "
               "zppd ms against the NCCL collective of the same tensor)\n");
        printf("(pipe_ms: the same calls kept %d deep in flight, as a prefetching training loop "
               "submits them%s; inter/M: cross-node bytes of one zppd call / tensor bytes)\n",
               PIPE_DEPTH, o->multi ? ", measured below 256 MiB" : "");
        printf("%-10s %-26s %10s %10s %8s %10s %8s %8s %6s\n", "bytes", "collective", "ms",
               "nccl_ms", "speedup", "pipe_ms", "pipe_x", "inter/M", "iters");
    }
    struct goal_row goals[NSIZES];
    int ngoals = 0;
    for (size_t si = 0; si < NSIZES; si++) {
        uint64_t bytes = SIZES[si], count = bytes / 2;
        if (bytes > o->max_bytes || bytes < o->min_bytes)
            continue;
        int iters = iters_for(o, bytes);
        int warm = o->multi && bytes >= (64u << 20) ? o->warm : 3;
        int pipe = !o->multi || bytes < (256u << 20);
        char key[32];
        snprintf(key, sizeof key, "b%llu", (unsigned long long)bytes);
        if (keep_key(&c, count, key)) {
            fprintf(stderr, "rank %d: qwZ with key: %s\n", rank, zpp_last_error(c.zc));
            return 1;
        }
        /* Across daemons the simulated wire drifts by 10-20 % over seconds:
         * each kind runs once per round, in turn, so that a zppd time and
         * the NCCL time it is compared with are taken close together. */
        int rounds = o->multi ? o->rounds : 1;
        int iters_r = rounds > 1 ? (iters + rounds - 1) / rounds : iters;
        if (rounds > 1 && iters_r < 2)
            iters_r = 2;
        double t[B_N], tp[B_N], frac[B_N], tr[B_N][MAX_ROUNDS];
        for (int k = 0; k < B_N; k++)
            t[k] = tp[k] = frac[k] = 0;
        for (int r = 0; r < rounds; r++)
            for (int oi = 0; oi < B_N; oi++) {
                int k = ROUND_ORDER[oi], nccl = in_process(k);
                tr[k][r] = 0;
                if (multi_only(k) && !o->multi)
                    continue;
                memset(&g_last_res, 0, sizeof g_last_res);
                /* across daemons every window starts with one untimed
                 * call: a communicator idle while the others ran starts
                 * slower (the daemon's, idle longest, by 2.5-5 % on its
                 * first window of a pair: bench/results/
                 * multi-2026-11-24-h200x2-s21/), and back-to-back calls
                 * in training keep it busy */
                tr[k][r] = throughput(&c, k, count, key, iters_r,
                                      r == 0     ? warm
                                      : o->multi ? o->warm
                                                 : 0);
                if (r == 0) {
                    frac[k] = g_last_res.logical_bytes ? (double)g_last_res.bytes_inter /
                                                             (double)g_last_res.logical_bytes
                                                       : 0;
                    tp[k] = nccl || !pipe || tr[k][r] < 0
                                ? tr[k][r]
                                : pipelined(&c, k, count, key, iters_r, PIPE_DEPTH);
                }
                if (tr[k][r] < 0 || tp[k] < 0) {
                    fprintf(stderr, "rank %d: %s at %llu bytes failed: %s\n", rank, BNAME[k],
                            (unsigned long long)bytes, zpp_last_error(c.zc));
                    return 1;
                }
            }
        for (int k = 0; k < B_N; k++)
            t[k] = zb_median(tr[k], rounds);
        /* qwZ's goal sits a few percent under the wire's ceiling (~2x in
         * 2 x 1), inside a round's spread: at the goal sizes it gets
         * `pairs` more samples, each bracketed against drift (NCCL, qwZ,
         * qwZ, NCCL: a linear drift cancels), and is judged on their
         * median with the interval that median has. Every rank runs the
         * same calls. */
        int npairs = o->multi && bytes >= GOAL_MIN ? o->pairs : 0;
        /* -D: the same pairs for the wire's half all-gather and the
         * in-process qwZ, interleaved with qwZ's (pair p of each kind in
         * turn), to tell the daemon's share of a shortfall from the wire's.
         * -S N: N pairs that put the daemon's work next to the same work
         * without it, (in-process qwZ, zppd qwZ, zppd qwZ, in-process qwZ)
         * and (NCCL AG, zppd AG, zppd AG, NCCL AG): the daemon's own cost,
         * drift cancelled, without NCCL's bf16 time in between; the last
         * kind the same qwZ pairs with the daemon's windows PIPE_DEPTH deep. */
        enum { NPK = 6 };
        static const struct {
            int base, kind;
            int share; /* -S's (else -P's goal pairs, or -D's) */
            int pipe;  /* the kind's windows PIPE_DEPTH deep */
        } PK[NPK] = {{B_NCCL_AG, B_QWZ, 0, 0},        {B_NCCL_AG, B_WIRE_AG, 0, 0},
                     {B_NCCL_AG, B_INPROC_QWZ, 0, 0}, {B_INPROC_QWZ, B_QWZ, 1, 0},
                     {B_NCCL_AG, B_AG, 1, 0},         {B_INPROC_QWZ, B_QWZ, 1, 1}};
        int nshare = o->multi && bytes >= GOAL_MIN ? o->share : 0;
        int np[NPK] = {npairs, o->diag ? npairs : 0, o->diag ? npairs : 0, nshare, nshare, nshare};
        int most = npairs > nshare ? npairs : nshare;
        double pr[NPK][MAX_PAIRS], pos[NPK][4][MAX_PAIRS];
        struct split spl[NPK][4][MAX_PAIRS]; /* -S's windows not 4 deep */
        for (int p = 0; p < most; p++)
            for (int j = 0; j < NPK; j++) {
                if (p >= np[j])
                    continue;
                const int abba[4] = {PK[j].base, PK[j].kind, PK[j].kind, PK[j].base};
                double ms[4];
                for (int i = 0; i < 4; i++) {
                    int deep = PK[j].pipe && (i == 1 || i == 2);
                    struct split *sp = PK[j].share && !PK[j].pipe ? &spl[j][i][p] : NULL;
                    ms[i] = pos[j][i][p] =
                        deep ? warm_then_pipelined(&c, abba[i], count, key, iters_r, o->warm)
                             : throughput_split(&c, abba[i], count, key, iters_r, o->warm, sp);
                    if (ms[i] < 0) {
                        fprintf(stderr, "rank %d: goal pair %d, %s at %llu bytes failed: %s\n",
                                rank, p, BNAME[abba[i]], (unsigned long long)bytes,
                                zpp_last_error(c.zc));
                        return 1;
                    }
                }
                pr[j][p] = (ms[0] + ms[3]) / (ms[1] + ms[2]);
            }
        /* the goal pairs (entry 0) print in the goal summary; here with -D */
        for (int j = 0; j < NPK && rank == 0; j++) {
            double med, lo, hi;
            if (np[j] == 0 || (j == 0 && !o->diag))
                continue;
            zb_median_ci(pr[j], np[j], 0.95, &med, &lo, &hi);
            printf("%s %-10llu %-22s %.3fx%s (95%%: %.3f - %.3fx)  window medians ms: "
                   "%s %.3f, %s %.3f, %.3f, %s %.3f\n",
                   PK[j].share ? "share" : "pairs", (unsigned long long)bytes,
                   PK[j].pipe ? "zppd_qwz_int8_4_deep" : BNAME[PK[j].kind], med,
                   PK[j].share ? " of its base" : "", lo, hi, BNAME[PK[j].base],
                   zb_median(pos[j][0], np[j]), BNAME[PK[j].kind], zb_median(pos[j][1], np[j]),
                   zb_median(pos[j][2], np[j]), BNAME[PK[j].base], zb_median(pos[j][3], np[j]));
            if (PK[j].share && !PK[j].pipe)
                print_split(bytes, BNAME[PK[j].kind], BNAME[PK[j].base], spl[j], np[j]);
        }
        drop_key(&c, key);
        if (rank == 0) {
            for (int k = 0; k < B_N; k++) {
                int nccl = in_process(k);
                double base = rs_based(k) ? t[B_NCCL_RS] : t[B_NCCL_AG];
                if (t[k] <= 0)
                    continue;
                char pm[16] = "-", px[16] = "-", fr[16] = "-";
                if (!nccl && pipe) {
                    snprintf(pm, sizeof pm, "%.4f", tp[k]);
                    snprintf(px, sizeof px, "%.3f", base / tp[k]);
                }
                if (!nccl)
                    snprintf(fr, sizeof fr, "%.3f", frac[k]);
                printf("%-10llu %-26s %10.4f %10.4f %8.3f %10s %8s %8s %6d\n",
                       (unsigned long long)bytes, BNAME[k], t[k], base, base / t[k], pm, px, fr,
                       iters_r * rounds);
            }
            if (o->multi && bytes >= GOAL_MIN) {
                double qw[MAX_ROUNDS], qg[MAX_ROUNDS], hp[MAX_ROUNDS], wa[MAX_ROUNDS],
                    wq[MAX_ROUNDS], ip[MAX_ROUNDS], is[MAX_ROUNDS];
                struct goal_row *g = &goals[ngoals++];
                for (int r = 0; r < rounds; r++) {
                    qw[r] = tr[B_NCCL_AG][r] / tr[B_QWZ][r];
                    qg[r] = tr[B_NCCL_RS][r] / tr[B_QGZ][r];
                    hp[r] = tr[B_NCCL_AG][r] / tr[B_HPZ][r];
                    wa[r] = tr[B_NCCL_AG][r] / tr[B_WIRE_AG][r];
                    wq[r] = tr[B_NCCL_RS][r] / tr[B_WIRE_A2A][r];
                    ip[r] = tr[B_NCCL_AG][r] / tr[B_INPROC_QWZ][r];
                    is[r] = tr[B_INPROC_QWZ][r] / tr[B_QWZ][r];
                }
                *g = (struct goal_row){.bytes = bytes,
                                       .qwz_x = zb_median(qw, rounds),
                                       .qgz_x = zb_median(qg, rounds),
                                       .hpz_x = zb_median(hp, rounds),
                                       .qwz_m = frac[B_QWZ],
                                       .qgz_m = frac[B_QGZ],
                                       .hpz_m = frac[B_HPZ],
                                       .qwz_wire = zb_median(wa, rounds),
                                       .qgz_wire = zb_median(wq, rounds),
                                       .inproc_x = zb_median(ip, rounds),
                                       .inproc_share = zb_median(is, rounds),
                                       .qwz_lo = qw[0],
                                       .qwz_hi = qw[0],
                                       .qgz_lo = qg[0],
                                       .qgz_hi = qg[0]};
                g->qwz_rounds_x = g->qwz_x;
                if (npairs > 0) {
                    g->npairs = npairs;
                    g->qwzp_cov = zb_median_ci(pr[0], npairs, 0.95, &g->qwz_x, &g->qwzp_lo,
                                               &g->qwzp_hi);
                    g->qwzp_min = g->qwzp_max = pr[0][0];
                    for (int p = 1; p < npairs; p++) {
                        g->qwzp_min = pr[0][p] < g->qwzp_min ? pr[0][p] : g->qwzp_min;
                        g->qwzp_max = pr[0][p] > g->qwzp_max ? pr[0][p] : g->qwzp_max;
                    }
                }
                for (int r = 1; r < rounds; r++) {
                    g->qwz_lo = qw[r] < g->qwz_lo ? qw[r] : g->qwz_lo;
                    g->qwz_hi = qw[r] > g->qwz_hi ? qw[r] : g->qwz_hi;
                    g->qgz_lo = qg[r] < g->qgz_lo ? qg[r] : g->qgz_lo;
                    g->qgz_hi = qg[r] > g->qgz_hi ? qg[r] : g->qgz_hi;
                }
            }
        }
    }
    if (rank == 0 && o->multi)
        print_goals(goals, ngoals, o->rounds, o->warm);
    /* Leave the job only when every rank's GPU work is done (see
     * cut_meet: across daemons the first rank to leave aborts the job). */
    cuStreamSynchronize(c.st);
    if (cut_meet(o->meet, o->world, 1, 30000))
        fprintf(stderr, "rank %d: the other ranks did not finish within 30 s\n", rank);
    zpp_close(c.zc);
    ncclCommDestroy(c.comm);
    cuMemFree(c.codes);
    cut_vmm_free(&vin);
    cut_vmm_free(&vout);
    return 0;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s -s SOCK [-w W] [-n N] [-m MAX_MIB] [-M MIN_MIB] [-q]\n"
            "       %s -s 'PATH-{node}.sock' -A LEADER_HOST:PORT -n N [-G G | -w W] [-g MAP]\n"
            "          [-I HOSTID_PREFIX] [-m MAX_MIB] [-M MIN_MIB] [-i MAX_ITERS] [-R ROUNDS]\n"
            "          [-P PAIRS] [-D] [-S PAIRS] [-W WARM] [-b QWZ_BLOCK] [-q]\n",
            argv0, argv0);
}

int main(int argc, char **argv)
{
    struct bopts o = {.world = 2,
                      .nodes = 1,
                      .max_bytes = 1ull << 30,
                      .hostid = "zpp-node",
                      .rounds = 7,
                      .pairs = 25,
                      .warm = 1};
    int ch, per_node = 0;
    while ((ch = getopt(argc, argv, "s:w:n:m:M:qA:L:G:g:I:i:R:P:DS:W:b:")) != -1) {
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
        case 'M': /* skip the smaller sizes: one goal size with many pairs in one device call */
            o.min_bytes = (uint64_t)atoll(optarg) << 20;
            break;
        case 'q':
            o.quick = 1;
            break;
        case 'A':
        case 'L':
            o.leader = optarg;
            break;
        case 'G':
            per_node = atoi(optarg);
            break;
        case 'g':
            o.gpu_map = optarg;
            break;
        case 'I':
            o.hostid = optarg;
            break;
        case 'i':
            o.max_iters = atoi(optarg);
            break;
        case 'R':
            o.rounds = atoi(optarg);
            if (o.rounds < 1 || o.rounds > MAX_ROUNDS) {
                fprintf(stderr, "-R: rounds must be in 1..%d\n", MAX_ROUNDS);
                return 2;
            }
            break;
        case 'D':
            o.diag = 1;
            break;
        case 'S':
            o.share = atoi(optarg);
            if (o.share < 0 || o.share > MAX_PAIRS) {
                fprintf(stderr, "-S: pairs must be in 0..%d\n", MAX_PAIRS);
                return 2;
            }
            break;
        case 'W':
            o.warm = atoi(optarg);
            if (o.warm < 1 || o.warm > 16) {
                fprintf(stderr, "-W: untimed calls per window must be in 1..16\n");
                return 2;
            }
            break;
        case 'b': {
            long b = atol(optarg);
            if (b < 32 || b > 8192 || b % 32) {
                fprintf(stderr, "-b: qwZ's block must be a multiple of 32 in 32..8192\n");
                return 2;
            }
            qwz_block = (uint32_t)b;
            break;
        }
        case 'P':
            o.pairs = atoi(optarg);
            if (o.pairs < 0 || o.pairs > MAX_PAIRS) {
                fprintf(stderr, "-P: pairs must be in 0..%d\n", MAX_PAIRS);
                return 2;
            }
            break;
        default:
            usage(argv[0]);
            return 2;
        }
    }
    if (per_node > 0)
        o.world = o.nodes * per_node;
    o.multi = o.leader && o.leader[0] && o.nodes > 1;
    if (!o.sock || o.world < 1 || o.world > 64 || o.nodes < 1 || o.world % o.nodes ||
        o.max_bytes == 0 || o.min_bytes > o.max_bytes) {
        usage(argv[0]);
        return 2;
    }
    if (o.nodes > 1 && !o.multi && strstr(o.sock, "{node}")) {
        fprintf(stderr, "a socket template needs the leader's address (-A)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(o.idpipe))
        return 1;
    int G = o.world / o.nodes;
    if (o.multi) {
        char s0[256], s1[256];
        if (cut_node_socket(o.sock, 0, s0, sizeof s0) ||
            cut_node_socket(o.sock, o.nodes - 1, s1, sizeof s1)) {
            fprintf(stderr, "socket path too long\n");
            return 2;
        }
        printf("zpp-bench: %d client processes, %d node(s) x %d rank(s), one zppd per node "
               "(%s .. %s), leader %s, GPU map %s, sizes up to %llu MiB\n",
               o.world, o.nodes, G, s0, s1, o.leader, o.gpu_map ? o.gpu_map : "rank % GPUs",
               (unsigned long long)(o.max_bytes >> 20));
        if (o.hostid[0])
            printf("each rank process sets NCCL_HOSTID=%s<node> (the NCCL baseline sees %d "
                   "hosts)\n",
                   o.hostid, o.nodes);
    } else {
        printf("zpp-bench: %d client processes (one per GPU), %d node(s) x %d GPU(s), sizes up "
               "to %llu MiB\n",
               o.world, o.nodes, G, (unsigned long long)(o.max_bytes >> 20));
    }
    if (o.min_bytes)
        printf("sizes under %llu MiB skipped (-M)\n", (unsigned long long)(o.min_bytes >> 20));
    printf("qwZ: int8, block %u (zppd's and the in-process qwZ's)\n", qwz_block);
    printf("NCCL environment of the bench (same for the baseline and, through the script, the "
           "daemons):\n");
    cut_print_nccl_env("  ");
    o.meet = cut_meet_new();
    int failed = cut_spawn(o.world, bench_child, &o, -1, 0);
    cut_meet_free(o.meet);
    return failed ? 1 : 0;
}
