/*
 * backend.h — what a backend (host, cuda) offers the collective algorithms.
 *
 * The algorithms (coll.c, qgz.c) are written against this table and never
 * touch CUDA, NCCL or shared memory directly, the way NCCL's device code is
 * written against primitives and never against a transport. A backend runs
 * the kernels of kernels/zpp_kernels.h on one local rank's device, and the
 * collectives over the job's three communicators:
 *   BE_COMM_GLOBAL  all W ranks, in rank order;
 *   BE_COMM_INTRA   the G ranks of one node, in local-rank order;
 *   BE_COMM_INTER   the N ranks of equal local index, in node order.
 * Collective entries take arrays indexed by the daemon's local slot (0 ..
 * be_call.nslots-1): every rank hosted by this daemon takes part at once
 * (the host backend hosts all W ranks; the cuda backend its node's G).
 *
 * Threads: the host backend runs a whole call on one worker thread; the
 * cuda backend enqueues on streams from the loop thread. Either way, a
 * be_call is used by one thread at a time.
 */
#ifndef ZPPD_BACKEND_H
#define ZPPD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "zpp_kernels.h"

enum be_comm { BE_COMM_GLOBAL = 0, BE_COMM_INTRA = 1, BE_COMM_INTER = 2 };

/* The topology of a job as one daemon sees it. */
struct be_topo {
    int world;  /* W */
    int nodes;  /* N */
    int local;  /* G = W / N; rank r is on node r / G with local index r % G */
    int nslots; /* ranks hosted by this daemon */
    int rank0;  /* the rank of slot 0; slot s hosts rank rank0 + s */
};

struct be_call; /* one collective in progress; owned by the caller */

struct be_ops {
    const char *name;

    /* Scratch memory on slot s's device, valid until end_call. */
    int (*scratch)(struct be_call *c, int s, size_t bytes, void **out);

    /* Kernels on slot s's device (see zpp_kernels.h for the arithmetic).
     * Poisoned-block counts are added to *poisoned (may be NULL). */
    int (*quantize)(struct be_call *c, int s, const void *x, int dtype, uint64_t n,
                    uint64_t n_valid, int bits, uint32_t block, void *out, uint64_t *poisoned);
    int (*dequantize)(struct be_call *c, int s, const void *in, uint64_t n, uint64_t n_out,
                      int bits, uint32_t block, void *y, int dtype);
    int (*reorder_quantize)(struct be_call *c, int s, const void *x, int dtype,
                            const struct zk_qgz_geom *g, int stage, void *out,
                            uint64_t *poisoned);
    int (*reduce_requant)(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                          uint64_t piece, int bits, uint32_t block, void *out,
                          uint64_t *poisoned);
    int (*reduce_out)(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                      uint64_t piece, int bits, uint32_t block, uint64_t count, int op,
                      float divisor, void *y, int out_dtype);
    int (*copy)(struct be_call *c, int s, void *dst, const void *src, size_t bytes);
    int (*zero)(struct be_call *c, int s, void *dst, size_t bytes);

    /* Collectives; send/recv indexed by slot. */
    int (*allgather)(struct be_call *c, int comm, void *const *send, void *const *recv,
                     size_t bytes);
    int (*alltoall)(struct be_call *c, int comm, void *const *send, void *const *recv,
                    size_t bytes_per_peer);
    /* Exact reduce-scatter of `count` elements (dtype) per rank into each
     * rank's shard of `shard` elements (out_dtype), fp32 accumulation where
     * the backend can; elements past count read as 0 and write as 0. */
    int (*reduce_scatter)(struct be_call *c, int comm, void *const *send, void *const *recv,
                          uint64_t count, uint64_t shard, int dtype, int out_dtype, int op);

    /* Store memory for hpZ slices (on slot s's device); freed with
     * store_free. Called on the loop thread. */
    int (*store_alloc)(void *backend, int device, size_t bytes, void **out);
    void (*store_free)(void *backend, int device, void *p);
};

/* The host backend: C reference kernels and in-memory copies between the
 * ranks' shared-memory buffers (all ranks of a job in this daemon). */
extern const struct be_ops be_host_ops;

/* A call in progress: created by coll.c for one collective. The backend's
 * private state hangs off `priv`. */
struct be_call {
    const struct be_ops *ops;
    struct be_topo topo;
    void *priv;
    /* scratch allocations made through ops->scratch (host backend). */
    void **scratch;
    int nscratch, cap_scratch;
    char err[256]; /* a backend's message for its last failure */
};

/* Frees the call's scratch (host backend); accepts a zeroed call. */
void be_call_end(struct be_call *c);

/* The slot's rank, node and local index. */
static inline int be_rank(const struct be_topo *t, int s)
{
    return t->rank0 + s;
}

#endif
