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
 * cuda backend enqueues on streams from the loop thread, and reads a
 * publish's bytes back (to_host) on a worker thread after that. Either way,
 * a be_call is used by one thread at a time.
 */
#ifndef ZPPD_BACKEND_H
#define ZPPD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "zpp_kernels.h"

enum be_comm { BE_COMM_GLOBAL = 0, BE_COMM_INTRA = 1, BE_COMM_INTER = 2 };

#define BE_LANE_MARKS 4 /* lane marks per slot (be_ops.lane_mark) */
#define BE_FORMING 1    /* job_poll: creation still in progress (never a ZPP_E* code) */

/* The topology of a job as one daemon sees it. */
struct be_topo {
    int world;  /* W */
    int nodes;  /* N */
    int local;  /* G = W / N; rank r is on node r / G with local index r % G */
    int nslots; /* ranks hosted by this daemon */
    int rank0;  /* the rank of slot 0; slot s hosts rank rank0 + s */
};

struct be_call; /* one collective in progress; owned by the caller */
struct be_import;

struct be_dev_stat;

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
                            const struct zk_qgz_geom *g, int stage, void *out, uint64_t *poisoned);
    int (*reduce_requant)(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                          uint64_t piece, int bits, uint32_t block, void *out, uint64_t *poisoned);
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
    /* What store_alloc of `bytes` on device really takes, which the store
     * charges to its budgets (the cuda backend maps whole VMM granules, 2
     * MiB on Hopper: a slice of a few bytes holds one); NULL: bytes. */
    size_t (*store_size)(void *backend, int device, size_t bytes);

    /* ---- device backends (cuda); NULL on the host backend ------------ */
    /* 1 when coll_run only enqueues work (on the loop thread) and the
     * client synchronises through the session's events; 0 when coll_run
     * does the work (on a worker thread). */
    int enqueue_only;
    /* The daemon's device index for a client GPU UUID, or -1. */
    int (*device_of_uuid)(void *backend, const char *uuid);
    /* Imports client memory for a session on `device` (see be_import).
     * Returns 0 with *handle (release with buf_release) and *ptr (the
     * device address of desc->offset), or a ZPP_E* code with why. */
    int (*buf_import)(void *backend, const struct be_import *desc, void **handle, uint8_t **ptr,
                      char *why, size_t why_len);
    void (*buf_release)(void *backend, void *handle);
    /* Optional, asked once per registration (handle NULL for a
     * shared-memory buffer): 0 when only the buffer's own GPU can read it
     * (a legacy IPC import: its mapping is not made for the peers), 1 when
     * the node's other GPUs can too. Absent: 1. A call with such an input
     * reads no input from a peer (be_call.in_private). */
    int (*buf_shared)(void *backend, void *handle);
    /* Opens a session's event pools: the client's ready events (n handles
     * of 64 bytes) and as many daemon done events, whose handles go to
     * done_out[i] (64 bytes each). *state is released with events_close. */
    int (*events_open)(void *backend, int device, const uint8_t *const *ready, int n,
                       uint8_t (*done_out)[64], void **state, char *why, size_t why_len);
    void (*events_close)(void *backend, void *state);
    /* Optional, instead of events_open: a session of n slots on the
     * client's flags (Hello.flags_nfds): map, len bytes of its memfd as the
     * caller mapped and checked it (sess_map_memfd; at least
     * ZPP_FLAGS_READY_OFF + 4 n bytes), and live_fd, a pipe's write end or
     * -1, both the backend's from here on, whatever it returns (munmap,
     * close). No interprocess event: a call's wait is on the client's ready
     * flag of its slot reaching the call's flag value, and after the call
     * its done flag gets that value; live_fd is closed once nothing will
     * write them again. *state as events_open's (events_close releases it);
     * a code with why: nothing kept. */
    int (*events_open_flags)(void *backend, int device, int n, void *map, size_t len, int live_fd,
                             void **state, char *why, size_t why_len);
    /* Optional, for sessions on flags: the call of slot_ev with flag_value
     * was answered; unless call_record took it (a stream writes its done
     * flag), the done flag is raised to flag_value now. */
    void (*events_settle)(void *backend, void *state, int slot_ev, uint64_t flag_value);
    /* The session's job was aborted: every wait of a job stream on its
     * ready events ends now (as at events_close), whether or not the client
     * ever completes them; the events stay open. NULL: nothing to do. */
    void (*events_release)(void *backend, void *state);
    /* 1 when the client's ready event slot_ev (0-based) of the session has
     * completed (on flags: its ready flag has reached flag_value), 0 while
     * it has not; NULL: always 1. */
    int (*events_ready)(void *backend, void *state, int slot_ev, uint64_t flag_value);
    /* Whether everything this backend was asked to do for a session (its
     * event pools; NULL for none) has completed on a device that still
     * works: 0, ZPP_EBUSY while some of it runs, ZPP_EBACKEND with why
     * when the device failed. Absent: 0 (work completes before its reply). */
    int (*check)(void *backend, void *events, char *why, size_t why_len);

    /* ---- a job's communicators (both backends) ----------------------
     * Two phases, so that the loop never waits while communicators connect
     * (across daemons that can take as long as the network does):
     * job_open starts creating the job's state for the hosted ranks (cuda:
     * streams and the NCCL communicators, non-blocking) and returns at
     * once, never waiting on the network or the GPU. It returns 0 with
     * *job (release with job_close, whether it became ready or not), or a
     * ZPP_E* code with why and nothing to release (*job untouched).
     * devices[slot] are the hosted ranks' devices (NULL on the host
     * backend).
     * job_poll reports where the job stands: BE_FORMING while creation is
     * still in progress, 0 once the job is ready and healthy, or a ZPP_E*
     * code with why when creation failed or an asynchronous error came
     * later (NCCL, a failed stream); after an error the caller closes the
     * job with abort = 1. It never blocks. The caller polls it (loop
     * thread) until it leaves BE_FORMING, against its own deadline, then
     * keeps calling it every tick for asynchronous errors. No call may use
     * the job before job_poll has returned 0 once.
     * job_close releases the job, ready or not, at any time after job_open;
     * abort = BE_CLOSE_ABORT aborts NCCL once the queued work has drained
     * (or could not, cuda: after 10 s), BE_CLOSE_ABORT_NOW at once: a peer
     * node is gone, so NCCL's kernels wait for nothing that will come (a
     * job still forming is always aborted: its in-progress communicators
     * are aborted, never waited for). */
    int (*job_open)(void *backend, const struct be_topo *t, const int *devices, void **job,
                    char *why, size_t why_len);
    void (*job_close)(void *backend, void *job, int abort);
#define BE_CLOSE_ABORT 1
#define BE_CLOSE_ABORT_NOW 2
    int (*job_poll)(void *backend, void *job, char *why, size_t why_len);
    /* job_open for a job that spans daemons: the global and inter-node
     * communicators come from the leader's ids (ids[0] global, ids[1 + i]
     * the inter-node communicator of local index i; none on a backend
     * without make_ids); t->rank0/nslots say which ranks this daemon
     * hosts. Same two phases as job_open. */
    int (*job_open_ids)(void *backend, const struct be_topo *t, const int *devices,
                        const uint8_t *ids, int nids, void **job, char *why, size_t why_len);
    /* Makes n communicator ids (128 bytes each, ncclGetUniqueId) for a job
     * that spans daemons; the leader sends them to the other nodes. NULL
     * on a backend that moves data inside one daemon only (host). */
    int (*make_ids)(void *backend, int n, uint8_t *ids, char *why, size_t why_len);
    /* ---- device backends (cuda) again; NULL on the host backend ------ */
    /* Device memory the job holds (communicators, staging). */
    uint64_t (*job_memory)(void *backend, void *job);
    /* Around coll_run: slot s's stream waits on the client's ready event
     * `slot_ev`, and afterwards records the daemon's done event. */
    /* flag_value: what the done flag of slot_ev gets after the call, where
     * events_flags mapped the session's flags (Collective.flag_value). */
    int (*call_wait)(struct be_call *c, int s, void *events, int slot_ev, uint64_t flag_value);
    int (*call_record)(struct be_call *c, int s, void *events, int slot_ev, uint64_t flag_value);
    /* Optional: after the replies of a call that went through call_record
     * are out (or held back: then at once), what the backend deferred past
     * them (cuda: done flags after a fenced launch's early record). Must
     * run for every such call. */
    void (*call_replied)(struct be_call *c);
    /* Copies `bytes` of slot s's device memory at src into host memory dst
     * and waits for the copy (ordered after the work already enqueued on
     * the slot's stream). Used to verify the content key of a shared hpZ
     * replica before it is published (coll.c, docs/hpz-sharing.md): the
     * cost is one device-to-host copy of the tensor plus a CPU SHA-256
     * pass, on a worker thread (coll_verify), while no other work of the
     * call's job is enqueued. NULL on the host backend, whose memory is
     * host memory; a device backend without it refuses to publish. */
    int (*to_host)(struct be_call *c, int s, void *dst, const void *src, size_t bytes);
    /* What each GPU holds, for zppctl status and the metrics: fills up to
     * max entries of out, returns how many GPUs there are. */
    int (*dev_stats)(void *backend, struct be_dev_stat *out, int max);
    /* Lanes: two streams per slot, so that one call's steps overlap (a
     * piece's dequantize while the next piece travels; a qgZ stage's
     * inter-node step while the next stage's intra-node step runs).
     * lane_use sends slot s's later work to lane 0 or 1. lane_mark records
     * mark m (0 .. BE_LANE_MARKS-1) on a lane as of now; lane_wait makes
     * later work on a lane wait for the mark's latest record. A call starts
     * and must end on lane 0 with lane 1 joined (coll_run does it). NULL
     * where work is already ordered (host backend). */
    int (*lane_use)(struct be_call *c, int s, int lane);
    int (*lane_mark)(struct be_call *c, int s, int lane, int m);
    int (*lane_wait)(struct be_call *c, int s, int lane, int m);
    /* 1 when overlapping on lanes pays on this call's GPUs (they are
     * shared through MPS); time-sliced, every extra NCCL launch of a call
     * pays context switches, and qwZ stays one piece on one node. */
    int (*lanes_cheap)(struct be_call *c);
    /* Peer access inside one daemon: the daemon owns every GPU of its
     * node in one process, so a GPU can read another's daemon memory
     * (staging, hpZ store) over NVLink without NCCL. peer_ok returns 0
     * (use the collectives), or how to move bytes between the members of
     * each slot's `comm` group: BE_PEER_COPY (copy-engine copies, then
     * local kernels) or BE_PEER_LOAD (kernels read the peer's memory
     * directly). Nonzero only when every member of every hosted group is
     * hosted here and, for BE_COMM_GLOBAL, the job has one node (virtual
     * nodes keep their wire). What may be read this way: daemon memory
     * (staging, store) and the client buffers the daemon imported, which
     * are mapped for the peer GPUs as well.
     * peer_fence: later work of every slot, on its current lane, waits for
     * everything the other members of its `comm` group have enqueued so
     * far, on their current lanes (no host wait). A call fences before
     * reading its peers' memory and again after, so that no member reuses
     * what a peer still reads. NULL on the host backend. */
    int (*peer_ok)(struct be_call *c, int comm);
    int (*peer_fence)(struct be_call *c, int comm);
    /* Optional, for peer_ok's groups: recv[s] + i * bytes = send[member
     * i's slot] for every member i of slot s's `comm` group, fenced before
     * and after like peer_fence's copies, in whatever way the backend
     * moves small gathers fastest. BE_DECLINED: nothing was enqueued, the
     * caller fences and copies itself. Never called with private inputs
     * (be_call.in_private) as send. */
    int (*peer_gather)(struct be_call *c, int comm, void *const *send, void *const *recv,
                       size_t bytes);
    /* Optional, for peer_ok's groups (BE_PEER_LOAD): a one-piece qwZ in
     * one step. out[s] + i * shard elements gets zk_qdq_ref(in[member i's
     * slot], dtype, clamp(count, i * shard, shard), bits, block): the
     * bytes of quantize, gather and dequantize. Each slot's own member's
     * poisoned blocks are added to *poisoned (the cuda backend's counters
     * report them a call late, as its quantize does). Fenced before and
     * after like peer_gather. BE_DECLINED: nothing was enqueued. Never
     * called for a call with private inputs. */
    int (*peer_qwz)(struct be_call *c, int comm, void *const *in, void *const *out,
                    uint64_t shard, uint64_t count, int dtype, int bits, uint32_t block,
                    uint64_t *poisoned);
};

#define BE_DECLINED 0x7e /* a backend op left the work to its caller */

#define BE_PEER_COPY 1
#define BE_PEER_LOAD 2
/* The ZPPD_PEER environment variable (docs/configuration.md): "load" ->
 * BE_PEER_LOAD, "copy" -> BE_PEER_COPY, "off" or "0" -> 0, unset -> dflt;
 * -1 for any other value. Read once, at a backend's start. */
int be_peer_mode_env(int dflt);
/* An on/off switch of the environment (docs/configuration.md,
 * "Environment"): unset or empty -> dflt; "0", "off", "no" or "false" ->
 * 0; anything else -> 1. */
int be_env_switch(const char *name, int dflt);
/* A measuring switch's number: the decimal value of variable name when it
 * is one from 0 to max; dflt when unset; dflt with a warning otherwise. */
uint64_t be_env_uint(const char *name, uint64_t dflt, uint64_t max);

/* One GPU as dev_stats sees it. */
struct be_dev_stat {
    char uuid[48];
    char name[96];               /* the driver's name of the device */
    int mps;                     /* contexts on it are shared through CUDA MPS */
    uint32_t imports;            /* client registrations mapped into the daemon */
    uint64_t imported_bytes;     /* their sizes (what the daemon keeps alive) */
    uint32_t deferred;           /* releases waiting for queued GPU work */
    uint64_t deferred_oldest_ms; /* age of the oldest of them */
    uint64_t used_bytes;         /* device memory in use, every process */
    uint64_t total_bytes;
};

/* A client buffer to import (cuda backend). */
struct be_import {
    int device;
    uint32_t uid;
    /* VMM: one fd per physical chunk, in address order. */
    int nfds;
    const int *fds;
    const uint64_t *chunk_sizes;
    /* legacy IPC handle (when allowed). */
    const uint8_t *ipc_handle;
    size_t ipc_len;
    uint64_t offset; /* from the start of chunk 0 / the allocation */
    uint64_t length;
};

/* The host backend: C reference kernels and in-memory copies between the
 * ranks' shared-memory buffers (all ranks of a job in this daemon). */
extern const struct be_ops be_host_ops;
/* Host backend fault injection (config fault_inject, tests only): after
 * `after_transfers` successful transfers, every transfer fails and
 * be_host_fatal returns 1 with a message, like a sticky CUDA error. */
void be_host_fault_inject(uint64_t after_transfers);
int be_host_fatal(char *why, size_t why_len);
/* Host backend test hook (tests only): the environment variable
 * ZPPD_TEST_FORM_DELAY = "MS" or "MS:COUNT" makes job_poll of the first
 * COUNT jobs opened (every job without COUNT) report BE_FORMING for MS
 * milliseconds after job_open, as communicators that take that long to
 * connect would; read at the first job_open. */
#define BE_HOST_FORM_DELAY_ENV "ZPPD_TEST_FORM_DELAY"
/* Test hook of the host backend: once the file this names exists, job_poll
 * reports a device error for every formed job, as a cuda backend does when
 * NCCL fails (tests/integration/test_multinode.c). */
#define BE_HOST_POLL_FAIL_ENV "ZPPD_TEST_POLL_FAIL_FILE"
/* Test hook: ZPPD_TEST_HOST_ENQUEUE=1 makes zppd run the host backend as
 * a device backend runs (be_host_enqueue_ops: enqueue_only, coll_run on
 * the loop thread, a publish's bytes read back through to_host on a worker
 * thread), so that the CPU tests cover that path of job.c and coll.c. Its
 * to_host waits for the file ZPPD_TEST_TO_HOST_GATE names, where set. */
extern const struct be_ops be_host_enqueue_ops;
#define BE_HOST_ENQUEUE_ENV "ZPPD_TEST_HOST_ENQUEUE"
#define BE_HOST_TO_HOST_GATE_ENV "ZPPD_TEST_TO_HOST_GATE"

/* The cuda backend (backend_cuda.c; only in builds with CUDA and NCCL).
 * be_cuda_open finds the GPUs; returns NULL with a message if none, and in
 * *drv the CUDA result of the step that failed or a GPU_START_* code
 * (gpu_start.h says what main does with it). */
extern const struct be_ops be_cuda_ops;
void *be_cuda_open(int allow_legacy_ipc, int *drv, char *why, size_t why_len);
void be_cuda_close(void *backend);
/* 1 (with a message) once a sticky CUDA error made the process unusable:
 * the caller (main, on the loop) must log and exit non-zero. */
int be_cuda_fatal(void *backend, char *why, size_t why_len);

/* A call in progress: created by coll.c for one collective. The backend's
 * private state hangs off `priv`. */
struct be_call {
    const struct be_ops *ops;
    struct be_topo topo;
    void *priv; /* the backend's job state (job_open), if any */
    /* scratch allocations made through ops->scratch (host backend). */
    void **scratch;
    int nscratch, cap_scratch;
    char err[256]; /* a backend's message for its last failure */
    /* Set by the caller: some slot's input is readable by its own GPU
     * only (be_ops.buf_shared), so no peer may read the inputs where they
     * lie; the outputs and daemon memory are not affected. */
    int in_private;
};

/* Frees the call's scratch (host backend); accepts a zeroed call. */
void be_call_end(struct be_call *c);

/* min(max(total - start, 0), len): how many of `len` elements starting at
 * `start` lie below `total` (a member's part of a tensor of `total`). */
static inline uint64_t be_clamp(uint64_t total, uint64_t start, uint64_t len)
{
    return start >= total ? 0 : (total - start < len ? total - start : len);
}

/* The slot's rank, node and local index. */
static inline int be_rank(const struct be_topo *t, int s)
{
    return t->rank0 + s;
}

/* The slot hosting member i of slot s's group in comm (BE_COMM_GLOBAL or
 * BE_COMM_INTRA), when every member is hosted here (peer_ok said so). */
static inline int be_member_slot(const struct be_topo *t, int comm, int s, int i)
{
    int first = comm == BE_COMM_GLOBAL ? 0 : be_rank(t, s) / t->local * t->local;
    return first + i - t->rank0;
}

/* The size of a communicator of kind comm, and rank r's index in its own
 * (GLOBAL: r; INTRA: its local index; INTER: its node). */
static inline int be_comm_size(const struct be_topo *t, int comm)
{
    return comm == BE_COMM_GLOBAL ? t->world : comm == BE_COMM_INTRA ? t->local : t->nodes;
}
static inline int be_comm_index(const struct be_topo *t, int comm, int r)
{
    return comm == BE_COMM_GLOBAL ? r : comm == BE_COMM_INTRA ? r % t->local : r / t->local;
}

/* The j-th member (j = 0 .. members - 1) that slot s reads in a gather by
 * peer access: its own part first, then the next members round the group.
 * Every GPU reading its members in the same order has all of them read
 * member 0 at once, then member 1, ...: one GPU's links serve every reader
 * while the others' stand idle. Round from each reader's own index, step j
 * is a permutation: every GPU serves one reader at a time. */
static inline int be_gather_member(const struct be_topo *t, int comm, int s, int j, int members)
{
    return (be_comm_index(t, comm, be_rank(t, s)) + j) % members;
}

#endif
