/*
 * coll.h — the collective algorithms (qwZ, hpZ, qgZ, plain) as seen by the
 * job layer.
 *
 * The job layer (job.c) matches call k on every rank, then hands coll.c one
 * coll_exec with the agreed arguments and every hosted rank's resolved
 * buffers. Three phases:
 *   coll_prepare  loop thread: checks what needs the store (reserves hpZ
 *                 slices under the budget, pins an entry for a gather,
 *                 drops keys for an invalidate); no data is touched.
 *   coll_run      worker thread (host backend) or loop thread (cuda): the
 *                 algorithm, through the backend table (backend.h).
 *   coll_verify   a worker thread, after coll_run on the loop thread (cuda):
 *                 a shared replica's content key checked against the
 *                 gathered bytes (a device-to-host copy and a SHA-256 of
 *                 the tensor: seconds for a large one, which the loop must
 *                 not spend while it serves every other client).
 *   coll_finish   loop thread: commits or rolls back store effects, frees
 *                 scratch, fills the result.
 * Semantics of count (the full tensor's element count, any value >= 1):
 *   all-gathers: input = rank r's shard, elements [r*shard, (r+1)*shard) of
 *     the tensor with shard = ceil(count/W) (entries past count are
 *     ignored); output = count elements.
 *   reduce-scatters: input = count elements; output = rank r's shard of
 *     `shard` elements (entries past count are written as 0).
 *   hpZ gather: output = count elements; must match the qwZ that stored
 *     the key (count, dtype).
 * Shared replicas (docs/hpz-sharing.md): an all-gather with
 * ZPP_FLAG_PUBLISH and a content key keeps the slices as a read-only
 * replica of the tenant after checking that the tensor hashes to the key
 * (or attaches to the replica already there, if the bytes are equal); an
 * hpZ gather naming a content key reads a replica of its tenant or of one
 * the share rules open to it; an hpZ invalidate naming one detaches.
 * Byte accounting (coll_result) is computed from the geometry, for the
 * whole job (all ranks together), the same on every backend:
 *   bytes_inter        bytes that must cross node boundaries;
 *   bytes_intra        bytes delivered between ranks of one node;
 *   bytes_zero3_inter  what plain ZeRO-3 sends across nodes for the same
 *                      tensor: (N-1) * count * dtype size.
 */
#ifndef ZPPD_COLL_H
#define ZPPD_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct hpz_store;

/* The agreed arguments of one call (the same on every rank). Values of
 * op/dtype/reduce/algo are those of zpp.h (== the wire enums). */
struct coll_args {
    int op;
    int dtype;
    int out_dtype; /* resolved: never 0 */
    int bits;
    int reduce;
    uint32_t block;  /* resolved: never 0 */
    uint32_t stages; /* resolved: >= 1 */
    uint32_t flags;
    uint64_t count;
    char hpz_key[257];
    /* A shared replica's content key ("sha256:" + 64 hex digits; anything
     * else, including a longer value cut to fit, is refused). */
    char content_key[80];
};

struct coll_result {
    int algo;
    uint64_t logical_bytes;
    uint64_t bytes_intra;
    uint64_t bytes_inter;
    uint64_t bytes_zero3_inter;
    uint64_t nonfinite_blocks;
};

/* One hosted rank's buffers for a call (NULL/0 where the op has none). */
struct coll_slot {
    void *in;
    size_t in_len;
    void *out;
    size_t out_len;
};

/* Identifies a job to the store: tenant and job id. */
struct coll_owner {
    uint32_t tenant_uid;
    const char *job_id;
    const void *job; /* the job object; store entries die with it */
};

struct coll_exec {
    struct coll_args args;
    struct be_topo topo;
    struct coll_slot *slots; /* topo.nslots entries, owned by the caller */
    struct coll_owner owner;
    struct hpz_store *store;
    struct be_call call;
    void *store_ref; /* the store entry reserved or pinned by prepare */
    struct coll_result result;
    int status;      /* 0 or a ZPP_E* code after run */
    char msg[256];   /* message for a failure */
    /* Added by the data plane (optional for the caller): */
    const int *devices; /* slot -> device index for hpZ store memory; NULL:
                           slot s is device s (host backend) */
    int ran;            /* set by coll_prepare (0) and coll_run (1): a call
                           prepared but never run is rolled back by finish */
    /* Added for shared hpZ replicas: what store_ref is (enum coll_store in
     * coll.c), set by coll_prepare. */
    int store_kind;
    /* Set by coll_run on a backend that only enqueues (be_ops.enqueue_only,
     * coll_run on the loop thread): a content key to check, which the caller
     * hands to coll_verify on a worker thread. */
    int verify_pending;
    /* Set by the caller before coll_finish: what the call stored is rolled
     * back whatever its status (its job was aborted while it ran, and its
     * ranks are told so). */
    int discard;
};

/* Loop thread, when a rank submits: the bytes its input and output buffers
 * must hold for these arguments (0 where unused). Returns 0, or ZPP_EINVAL
 * with a message in why (unsupported dtype/bits/block, count 0, ...). */
int coll_buffer_needs(const struct coll_args *a, const struct be_topo *t, size_t *in_bytes,
                      size_t *out_bytes, char *why, size_t why_len);

/* Loop thread: prepares x (args, topo, slots, owner, store already set;
 * x->call.ops set to the backend). Returns 0 or a ZPP_E* code with x->msg. */
int coll_prepare(struct coll_exec *x);

/* Runs the algorithm. Returns 0 or a ZPP_E* code with x->msg; also sets
 * x->status. */
int coll_run(struct coll_exec *x);

/* Any one thread, after a coll_run that left x->verify_pending (and before
 * coll_finish): checks the content key against the gathered bytes, which
 * it reads after the work coll_run enqueued (be_ops.to_host). Touches only
 * x, its pinned or reserved store entry and the backend's to_host. Returns
 * 0 or a ZPP_E* code with x->msg; also sets x->status. */
int coll_verify(struct coll_exec *x);

/* Loop thread: commits (status 0) or rolls back store effects and frees
 * scratch. Safe after a failed prepare. */
void coll_finish(struct coll_exec *x);

/* Daemon-wide defaults used to resolve args (block 0, stages 0). */
#define COLL_DEFAULT_BLOCK 256u
#define COLL_DEFAULT_STAGES 2u

#endif
