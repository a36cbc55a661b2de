/*
 * backend_cuda_job.c — a job on the cuda backend: per hosted rank (slot) a
 * stream on its GPU, the three NCCL communicators, a grow-only staging pool
 * and a poisoned-block counter; and the per-call entries of the ops table
 * (kernels of kernels/zpp_kernels_cuda.h, collectives through NCCL), all
 * enqueued on the slot's stream from the loop thread.
 *
 * Communicators (one daemon hosts every rank of the job for now: nslots ==
 * W, rank0 == 0; real multi-node jobs come with the peer service):
 *   GLOBAL  one communicator of W ranks;
 *   INTRA   one per node, G ranks in local-rank order;
 *   INTER   one per local index, N ranks in node order.
 * Creation never waits on the loop thread: cu_job_open makes the streams
 * and starts the first communicator group, non-blocking
 * (config.blocking = 0, one ncclGroupStart/End per communicator), and
 * cu_job_poll, which the job layer calls from a timer, starts each next
 * group once the previous one has left ncclInProgress (the state machine
 * under "communicator creation"); the job layer owns the deadline. They
 * live as long as the job (reused by every call, kept across a client's
 * reconnect, since the job outlives sessions), and are aborted
 * (ncclCommAbort) on job_close(abort=1) or when the job closes before it
 * was ready, finalized and destroyed otherwise.
 *
 * Enqueueing a collective: ncclGroupStart; one NCCL call per slot on that
 * slot's communicator and stream; ncclGroupEnd. On a non-blocking
 * communicator ncclGroupEnd may return ncclInProgress while NCCL finishes
 * the launch; NCCL's rule is that nothing else may be enqueued on those
 * streams before the state leaves ncclInProgress, so we poll (a few
 * microseconds in the steady state; the first call of a job connects).
 *
 * Closing never waits for the GPU on the loop thread: job_close records an
 * event on each slot stream and the job stays on the backend's list (its
 * streams keep being fenced by later releases) until those events
 * complete; then the communicators are aborted (if the job was), or
 * finalized without the loop waiting (ncclCommFinalize, polled from the
 * tick by cu_jobs_tick, aborted after CU_FINALIZE_MS) and destroyed; then
 * the streams are destroyed and the staging unmapped. A job
 * whose streams have not drained after CU_STUCK_MS (a peer that never
 * arrives) gets ncclCommAbort, which makes NCCL's kernels return.
 * Queued calls of an aborted job still run (on garbage) rather than being
 * cut short: a kernel launched after ncclCommAbort freed the communicator
 * would fault, and a fault is fatal to the whole daemon.
 *
 * Staging: scratch requests of one call are bump-allocated from a per-slot
 * list of device blocks; the list only grows (a request that fits no block
 * adds one of max(request, total so far)), and is rewound when the next
 * call starts. Every use of slot s's staging is on slot s's stream, so the
 * next call's reuse is ordered after the previous call's work. We mark a
 * call as seen by setting be_call.cap_scratch to CU_CALL_SEEN (the host
 * backend's scratch table is unused here: nscratch stays 0, so
 * be_call_end frees nothing of ours).
 *
 * Poisoned (non-finite) blocks: the kernels add into a per-slot device
 * counter; after each quantizing kernel an 8-byte copy to pinned host
 * memory is enqueued. A quantizing entry reports what that copy shows at
 * enqueue time, i.e. the blocks of calls that have already finished: the
 * counts arrive on a later reply, never lost, never double counted.
 *
 * Reduce-scatter: sum with equal input and output dtype goes to
 * ncclReduceScatter (inputs padded to W * shard in staging when count is
 * not a multiple of W). Mean, or a different output dtype, runs as an
 * all-to-all of the shards into staging and zk_sum_cuda (fp32
 * accumulation, ranks in order), the same arithmetic as the host backend.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda_int.h"
#include "poll_wait.h"
#include "log.h"
#include "zpp.h"
#include "zpp_kernels_cuda.h"

#define CU_NCOMM 3
#define CU_CALL_SEEN (-0x2b)  /* be_call.cap_scratch marker: staging rewound */
#define CU_STAGING_ALIGN 256u /* staging allocations start on this boundary */
#define CU_XSYNC_OFF 256u     /* a slot's zk_xsync flags, after its poison counter */
/* a slot's device words: the poison counter and its mirror, the flags */
#define CU_SLOT_DEV_BYTES (CU_XSYNC_OFF + ZK_XSYNC_WORDS * sizeof(uint32_t))
#define CU_XSYNC_TIMEOUT_NS (60ull * 1000000000ull) /* a fenced kernel's waits give up */
#define CU_STAGING_MIN (4u << 20)
#define CU_FINALIZE_MS 10000
#define CU_STUCK_MS 10000 /* a closing job's streams not drained: abort NCCL */

struct cu_block {
    void *p;
    size_t size, used;
};

struct cu_slot {
    int device;
    int counter;                     /* index into the backend's pinned counters, or -1 */
    cudaStream_t stream;             /* lane 0: where calls start and end (the session's events) */
    cudaStream_t side;               /* lane 1: overlaps lane 0 inside one call (be_ops.lane_use) */
    cudaEvent_t mark[BE_LANE_MARKS]; /* be_ops.lane_mark / lane_wait */
    cudaEvent_t fence;               /* be_ops.peer_fence */
    int lane;                        /* where the next work of this slot goes */
    ncclComm_t comm[CU_NCOMM];
    int crank[CU_NCOMM], csize[CU_NCOMM];
    struct cu_block *blocks;
    int nblocks;
    unsigned long long *d_poison; /* [0] the counter, [1] zk_qdq_ptrs_cuda's last mirror of it */
    volatile unsigned long long *h_poison;
    uint32_t *xflags; /* zk_xsync flag block (in d_poison's allocation, peer-mapped) */
    unsigned long long poison_seen;
    /* The call's done event, between call_wait and call_record (done_call
     * is the call's be_call), and whether a fenced launch recorded it
     * already: early, when nothing was enqueued since (enq == early_enq;
     * enq counts the enqueues through cur() and the lane marks). */
    CUevent done;
    const struct be_call *done_call;
    unsigned enq, early_enq;
    int early;
    /* A client's done flag held back until the call's replies are out
     * (cu_call_flag_later, cu_call_replied); 0: none. */
    CUdeviceptr pend_flag;
    uint32_t pend_value;
    const struct be_call *pend_call;
};

struct cu_job {
    struct cu_backend *b;
    struct cu_job *next; /* the backend's list: live and closing jobs */
    struct be_topo t;
    struct cu_slot *slots;
    uint64_t comm_bytes; /* device memory NCCL took at creation (estimate) */
    /* Creation (cu_job_poll drives it): step (form_k, form_g) is the
     * communicator group in progress once form_started. */
    int ready; /* every communicator created: calls may use the job */
    int form_k, form_g, form_started;
    int form_rc; /* creation failed: the code cu_job_poll keeps returning */
    char form_why[256];
    uint8_t *ids; /* the leader's ids (jobs across daemons), until ready */
    int nids;
    size_t *free0;  /* free device memory before creation, per device, until ready */
    int closing;    /* job_close ran: waiting for the streams to drain */
    int abort;      /* close by ncclCommAbort (else finalize + destroy) */
    int comms_gone; /* communicators already aborted */
    int finalizing; /* ncclCommFinalize under way (cu_jobs_tick ends it) */
    uint64_t fin_ms;
    /* Fenced kernels (zk_xsync, "fenced kernels" below): the number of the
     * last one, and a gate block whose word 0 tells their waits to give up
     * (host) and word 1 says one did (device). */
    uint32_t xgen;
    uint32_t *xhost;
    CUdeviceptr xdev;
    struct xs_task *xtasks; /* one per slot, reused by every fenced launch */
    int linked[CU_NCOMM];   /* peer_linked, per communicator (cu_peer_ok) */
    int xbroken; /* a fenced launch failed half-way: the job has to end */
};

static int nccl_fail(ncclResult_t r, ncclComm_t comm, const char *what, char *why, size_t len)
{
    const char *last = comm ? ncclGetLastError(comm) : NULL;
    snprintf(why, len, "%s: %s%s%s", what, ncclGetErrorString(r), last && last[0] ? ": " : "",
             last ? last : "");
    return ZPP_EBACKEND;
}

/* Polls comms until none is ncclInProgress (0), one fails, or the
 * deadline passes. spin: yield between polls rather than sleep. */
static int wait_comms(ncclComm_t *comms, int n, int deadline_ms, const char *what, char *why,
                      size_t len)
{
    uint64_t end = cu_now_ms() + (uint64_t)deadline_ms;
    for (;;) {
        int busy = 0;
        for (int i = 0; i < n; i++) {
            ncclResult_t st = ncclSuccess;
            if (!comms[i])
                continue;
            ncclResult_t r = ncclCommGetAsyncError(comms[i], &st);
            if (r != ncclSuccess)
                return nccl_fail(r, comms[i], what, why, len);
            if (st == ncclInProgress)
                busy = 1;
            else if (st != ncclSuccess)
                return nccl_fail(st, comms[i], what, why, len);
        }
        if (!busy)
            return 0;
        if (cu_now_ms() > end) {
            snprintf(why, len, "%s: still in progress after %d ms", what, deadline_ms);
            return ZPP_ETIMEDOUT;
        }
        sched_yield();
    }
}

static struct cu_job *call_job(struct be_call *c, int s)
{
    struct cu_job *j = c->priv;
    /* The job layer runs no call before job_poll said ready; checked anyway. */
    if (!j || !j->ready || s < 0 || s >= j->t.nslots)
        return NULL;
    return j;
}

CUstream cu_call_stream(struct be_call *c, int s, int *device)
{
    struct cu_job *j = call_job(c, s);
    if (!j)
        return NULL;
    *device = j->slots[s].device;
    if (cu_use(j->b, j->slots[s].device))
        return NULL;
    return (CUstream)j->slots[s].stream;
}

struct cu_backend *cu_call_backend(struct be_call *c, int s)
{
    struct cu_job *j = call_job(c, s);
    return j ? j->b : NULL;
}

/* The stream of the slot's current lane, for work about to be enqueued. */
static cudaStream_t cur(struct cu_slot *sl)
{
    sl->enq++;
    return sl->lane && sl->side ? sl->side : sl->stream;
}

void cu_call_done_note(struct be_call *c, int s, CUevent done)
{
    struct cu_job *j = call_job(c, s);
    if (!j)
        return;
    j->slots[s].done = done;
    j->slots[s].done_call = c;
    j->slots[s].early = 0;
}

int cu_call_done_early(struct be_call *c, int s, CUevent done)
{
    struct cu_job *j = call_job(c, s);
    if (!j)
        return 0;
    struct cu_slot *sl = &j->slots[s];
    int early = sl->early && sl->done == done && sl->done_call == c && sl->enq == sl->early_enq;
    sl->done = NULL;
    sl->done_call = NULL;
    sl->early = 0;
    return early;
}

void cu_call_flag_later(struct be_call *c, int s, CUdeviceptr flag, uint32_t value)
{
    struct cu_job *j = call_job(c, s);
    if (!j)
        return;
    j->slots[s].pend_flag = flag;
    j->slots[s].pend_value = value;
    j->slots[s].pend_call = c;
}

void cu_call_replied(struct be_call *c)
{
    struct cu_job *j = c->priv;
    if (!j || !j->ready)
        return;
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        if (!sl->pend_flag || sl->pend_call != c)
            continue;
        CUresult r = cu_use(j->b, sl->device)
                         ? CUDA_ERROR_INVALID_CONTEXT
                         : ZCU(cuStreamWriteValue32)((CUstream)sl->stream, sl->pend_flag,
                                                     sl->pend_value, CU_STREAM_WRITE_VALUE_DEFAULT);
        sl->pend_flag = 0;
        sl->pend_call = NULL;
        if (r == CUDA_SUCCESS)
            continue;
        /* The client's stream waits for this flag until zppd's pipe closes:
         * a device that cannot take a stream write is failed (sticky), or
         * said so. */
        if (cu_rt_sticky((cudaError_t)r))
            cu_mark_fatal(j->b, "writing a client's done flag", (cudaError_t)r);
        else
            ZLOG_E("cuda", "cannot write a client's done flag: its stream waits until the session "
                   "ends", "slot=%d rc=%d", s, (int)r);
    }
}

void cu_call_done_forget(struct cu_backend *b, CUevent done)
{
    for (struct cu_job *j = b->jobs; j; j = j->next)
        for (int s = 0; s < j->t.nslots; s++)
            if (j->slots[s].done == done) {
                j->slots[s].done = NULL;
                j->slots[s].done_call = NULL;
                j->slots[s].early = 0;
            }
}

/* Makes slot s current; 0 and *sl, or a code with c->err. */
static int slot_use(struct be_call *c, int s, struct cu_slot **sl)
{
    struct cu_job *j = call_job(c, s);
    if (!j) {
        snprintf(c->err, sizeof c->err, "cuda backend: no job state for slot %d", s);
        return ZPP_EINVAL;
    }
    if (cu_use(j->b, j->slots[s].device)) {
        snprintf(c->err, sizeof c->err, "cuda backend: cannot use device %d", j->slots[s].device);
        return ZPP_EBACKEND;
    }
    *sl = &j->slots[s];
    return 0;
}

/* A launch or enqueue result: 0, or a code with c->err (sticky errors
 * mark the backend fatal). */
static int rt_check(struct be_call *c, int e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    struct cu_job *j = c->priv;
    if (j && cu_rt_sticky((cudaError_t)e))
        cu_mark_fatal(j->b, what, (cudaError_t)e);
    return cu_rt_fail((cudaError_t)e, what, c->err, sizeof c->err);
}

/* ---- job open / close ------------------------------------------------- */

static int comm_group_of(const struct be_topo *t, int k, int r)
{
    return k == BE_COMM_GLOBAL ? 0 : k == BE_COMM_INTRA ? r / t->local : r % t->local;
}
/* 1 when every group of `comm` (GLOBAL or INTRA) is hosted here whole
 * and each pair of its members' GPUs has peer access: a job's constant,
 * worked out once its slots have their devices (job_open_common). */
static int peer_linked(const struct cu_job *j, int comm)
{
    const struct be_topo *t = &j->t;
    const struct cu_backend *b = j->b;
    if (!b->peer)
        return 0;
    if (comm == BE_COMM_GLOBAL) {
        if (t->nodes != 1 || t->nslots != t->world)
            return 0;
    } else if (comm != BE_COMM_INTRA || t->rank0 % t->local || t->nslots % t->local) {
        return 0;
    }
    for (int r = 0; r < t->nslots; r++)
        for (int s = 0; s < t->nslots; s++)
            if (r != s &&
                comm_group_of(t, comm, t->rank0 + r) == comm_group_of(t, comm, t->rank0 + s) &&
                !b->peer[j->slots[r].device * b->ndev + j->slots[s].device])
                return 0;
    return 1;
}

static int comm_ngroups(const struct be_topo *t, int k)
{
    return k == BE_COMM_GLOBAL ? 1 : k == BE_COMM_INTRA ? t->nodes : t->local;
}

/* ---- the reaper: communicators end off the loop ------------------------
 * ncclCommDestroy (after a finalize) and ncclCommAbort free NCCL's device
 * buffers and join its proxy threads: on two H200s under MPS two closed
 * jobs' communicators held the loop for 5.8 s
 * (bench/results/cuda-2026-11-22-h200x2-peer.txt). So they run on one
 * thread of their own. Nothing else uses a communicator handed over. */
struct cu_dead {
    struct cu_dead *next;
    int abort, n;
    CUcontext ctx; /* host != NULL: unregister and unmap [host, host + len), */
    void *host;    /* then close live_fd (if >= 0) */
    size_t len;
    int live_fd;
    ncclComm_t comm[];
};

struct cu_reaper {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct cu_dead *head, **tail;
    int stop, busy;
};

static void dead_end(struct cu_dead *d)
{
    uint64_t t0 = cu_now_ms();
    if (d->host) {
        ZCU(cuCtxSetCurrent)(d->ctx);
        cudaError_t e = cudaHostUnregister(d->host);
        munmap(d->host, d->len);
        if (d->live_fd >= 0)
            close(d->live_fd);
        uint64_t ms = cu_now_ms() - t0;
        if (e != cudaSuccess || ms >= 100)
            ZLOG_I("cuda", "a client's done flags unmapped (off the loop)", "ms=%" PRIu64 " rc=%s",
                   ms, cudaGetErrorName(e));
        free(d);
        return;
    }
    for (int i = 0; i < d->n; i++) {
        if (d->abort)
            ncclCommAbort(d->comm[i]);
        else
            ncclCommDestroy(d->comm[i]);
    }
    uint64_t ms = cu_now_ms() - t0;
    if (ms >= 1000)
        ZLOG_I("cuda", "communicators ended (off the loop)", "n=%d how=%s ms=%" PRIu64, d->n,
               d->abort ? "abort" : "destroy", ms);
    free(d);
}

static void *reaper_main(void *arg)
{
    struct cu_reaper *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->head && !r->stop)
            pthread_cond_wait(&r->cv, &r->mu);
        if (!r->head)
            break;
        struct cu_dead *d = r->head;
        r->head = d->next;
        if (!r->head)
            r->tail = &r->head;
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);
        dead_end(d);
        pthread_mutex_lock(&r->mu);
        r->busy = 0;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static struct cu_reaper *reaper_get(struct cu_backend *b)
{
    if (b->reaper)
        return b->reaper;
    struct cu_reaper *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->tail = &r->head;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thread, NULL, reaper_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        free(r);
        return NULL;
    }
    return b->reaper = r;
}

int cu_reaper_pending(struct cu_backend *b)
{
    struct cu_reaper *r = b->reaper;
    int n = 0;
    for (const struct cu_job *j = b->jobs; j; j = j->next)
        n += j->finalizing; /* the reaper gets them next */
    if (!r)
        return n;
    pthread_mutex_lock(&r->mu);
    for (const struct cu_dead *d = r->head; d; d = d->next)
        n++;
    n += r->busy;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void cu_reaper_stop(struct cu_backend *b, int wait_ms)
{
    struct cu_reaper *r = b->reaper;
    if (!r)
        return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    int left = 0;
    while ((r->head || r->busy) && !left)
        left = pthread_cond_timedwait(&r->cv, &r->mu, &until) != 0;
    pthread_mutex_unlock(&r->mu);
    b->reaper = NULL;
    if (left) { /* a communicator that will not end: it goes with the process */
        ZLOG_W("cuda", "communicators still ending at exit", "wait_ms=%d", wait_ms);
        pthread_detach(r->thread);
        return;
    }
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static void reaper_push(struct cu_backend *b, struct cu_dead *d)
{
    struct cu_reaper *r = reaper_get(b);
    if (!r) {
        dead_end(d);
        return;
    }
    pthread_mutex_lock(&r->mu);
    *r->tail = d;
    r->tail = &d->next;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void cu_reaper_host_release(struct cu_backend *b, int device, void *host, size_t len,
                            int live_fd)
{
    struct cu_dead *d = calloc(1, sizeof *d);
    if (!d) { /* no memory to hand it over: a mapping left is better than a loop held */
        ZLOG_W("cuda", "out of memory: a client's done flags stay mapped", "bytes=%zu", len);
        if (live_fd >= 0)
            close(live_fd); /* the streams have passed: nothing writes them again */
        return;
    }
    d->ctx = b->devs[device].ctx;
    d->host = host;
    d->len = len;
    d->live_fd = live_fd;
    reaper_push(b, d);
}

/* Destroys (or, abort, aborts) every communicator of j, on the reaper
 * thread (here, if it cannot start). */
static void comms_release(struct cu_job *j, int abort)
{
    int n = 0;
    for (int s = 0; s < j->t.nslots; s++)
        for (int k = 0; k < CU_NCOMM; k++)
            n += j->slots[s].comm[k] != NULL;
    struct cu_dead *d = NULL;
    if (n && !j->comms_gone && (d = calloc(1, sizeof *d + sizeof d->comm[0] * (size_t)n))) {
        d->abort = abort;
        for (int s = 0; s < j->t.nslots; s++)
            for (int k = 0; k < CU_NCOMM; k++)
                if (j->slots[s].comm[k])
                    d->comm[d->n++] = j->slots[s].comm[k];
    } else if (n && !j->comms_gone) {
        /* no memory to hand them over: end them here rather than lose them */
        for (int s = 0; s < j->t.nslots; s++)
            for (int k = 0; k < CU_NCOMM; k++)
                if (j->slots[s].comm[k]) {
                    if (abort)
                        ncclCommAbort(j->slots[s].comm[k]);
                    else
                        ncclCommDestroy(j->slots[s].comm[k]);
                }
    }
    for (int s = 0; s < j->t.nslots; s++)
        for (int k = 0; k < CU_NCOMM; k++)
            j->slots[s].comm[k] = NULL;
    j->comms_gone = 1;
    if (d)
        reaper_push(j->b, d);
}

/* 1 while some communicator of j is ncclInProgress, 0 when none is, -1
 * when one failed. */
static int comms_busy(struct cu_job *j)
{
    int busy = 0;
    for (int s = 0; s < j->t.nslots; s++)
        for (int k = 0; k < CU_NCOMM; k++) {
            ncclComm_t c = j->slots[s].comm[k];
            ncclResult_t st = ncclSuccess;
            if (!c)
                continue;
            if (ncclCommGetAsyncError(c, &st) != ncclSuccess ||
                (st != ncclSuccess && st != ncclInProgress)) {
                ZLOG_I("cuda", "a closing job's communicator failed: aborting it", "err=%s last=%s",
                       ncclGetErrorString(st), ncclGetLastError(c));
                return -1;
            }
            busy |= st == ncclInProgress;
        }
    return busy;
}

/* Starts ncclCommFinalize on every communicator of j (all before any
 * destroy: each waits for the others). 1: under way, cu_jobs_tick ends it;
 * 0: nothing left to wait for (j->abort set when a finalize failed). */
static int comms_finalize_start(struct cu_job *j)
{
    for (int s = 0; s < j->t.nslots; s++)
        for (int k = 0; k < CU_NCOMM; k++) {
            ncclComm_t c = j->slots[s].comm[k];
            if (!c)
                continue;
            cu_use(j->b, j->slots[s].device);
            ncclResult_t r = ncclCommFinalize(c);
            if (r != ncclSuccess && r != ncclInProgress) {
                ZLOG_I("cuda", "ncclCommFinalize failed: aborting the job's communicators",
                       "err=%s last=%s", ncclGetErrorString(r), ncclGetLastError(c));
                j->abort = 1;
                return 0;
            }
        }
    int busy = comms_busy(j);
    if (busy < 0)
        j->abort = 1;
    return busy > 0;
}

/* Frees what is left of j: streams, events, staging, counters. Its
 * communicators are gone. */
static void job_free(struct cu_backend *b, struct cu_job *j)
{
    for (struct cu_job **pp = &b->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        if (cu_use(b, sl->device))
            continue;
        if (sl->stream)
            cudaStreamDestroy(sl->stream);
        if (sl->side)
            cudaStreamDestroy(sl->side);
        for (int k = 0; k < BE_LANE_MARKS; k++)
            if (sl->mark[k])
                cudaEventDestroy(sl->mark[k]);
        if (sl->fence)
            cudaEventDestroy(sl->fence);
        for (int i = 0; i < sl->nblocks; i++)
            cu_vmm_free(sl->blocks[i].p);
        free(sl->blocks);
        cu_vmm_free(sl->d_poison);
        if (sl->counter >= 0)
            b->counter_used[sl->counter] = 0;
    }
    free(j->slots);
    free(j->ids);
    free(j->free0);
    if (j->xhost)
        cu_gate_flags_put(b, j->xhost);
    free(j->xtasks);
    free(j);
}

/* Once j's streams have drained (or at once when nothing was ever
 * enqueued): abort its communicators, or start finalizing them, which
 * cu_jobs_tick finishes without the loop waiting. */
static void job_reap(struct cu_backend *b, void *arg)
{
    struct cu_job *j = arg;
    if (!j->abort && !j->comms_gone && comms_finalize_start(j)) {
        j->finalizing = 1;
        j->fin_ms = cu_now_ms();
        return;
    }
    comms_release(j, j->abort);
    job_free(b, j);
}

void cu_jobs_tick(struct cu_backend *b, int all)
{
    struct cu_job *next;
    for (struct cu_job *j = b->jobs; j; j = next) {
        next = j->next;
        if (!j->finalizing)
            continue;
        int busy = comms_busy(j);
        if (busy > 0 && !all && cu_now_ms() - j->fin_ms < CU_FINALIZE_MS)
            continue;
        /* failed, or still finalizing after CU_FINALIZE_MS (a peer gone
         * quiet): abort instead */
        if (busy > 0)
            ZLOG_I("cuda", "finalize not done: aborting the job's communicators", "ms=%" PRIu64,
                   cu_now_ms() - j->fin_ms);
        comms_release(j, busy != 0);
        job_free(b, j);
    }
}

int cu_jobs_fence(struct cu_backend *b, int device, cudaEvent_t **ev, int *nev)
{
    int n = 0, cap = 0;
    *ev = NULL;
    *nev = 0;
    for (struct cu_job *j = b->jobs; j; j = j->next)
        cap += 2 * j->t.nslots;
    if (!cap)
        return 0;
    cudaEvent_t *e = calloc((size_t)cap, sizeof *e);
    if (!e)
        return -1;
    for (struct cu_job *j = b->jobs; j; j = j->next)
        for (int s = 0; s < j->t.nslots; s++) {
            struct cu_slot *sl = &j->slots[s];
            if (!sl->stream || (device >= 0 && sl->device != device) || cu_use(b, sl->device))
                continue;
            for (int k = 0; k < 2; k++) {
                cudaStream_t st = k ? sl->side : sl->stream;
                if (!st || cudaEventCreateWithFlags(&e[n], cudaEventDisableTiming) != cudaSuccess)
                    continue;
                if (cudaEventRecord(e[n], st) != cudaSuccess) {
                    cudaEventDestroy(e[n]);
                    continue;
                }
                n++;
            }
        }
    *ev = e;
    *nev = n;
    return 0;
}

/* ---- fenced kernels ---------------------------------------------------
 *
 * A small call between the GPUs of one node costs more in host calls than
 * on the GPU: peer_fence's events before and after the reads are two calls
 * per GPU and peer each, and a copy-engine copy per member is one more.
 * The fenced kernels (zk_xsync, kernels/zk_xsync.cuh) do the reads of a
 * whole call on one GPU in one launch and fence the members' kernels to
 * each other through flags in their memory: a small one-node all-gather,
 * hpZ gather or reduce-scatter is then one launch per GPU between the
 * session's gate wait and done event. Each slot's flags sit beside its
 * poison counter (peer-mapped like all our memory); the job numbers its
 * fenced launches (xgen) and every member of a launch gets the same
 * number. Calls of up to ZPPD_XSYNC_MAX_KIB KiB read per GPU (default
 * 1024) take this path unless ZPPD_XSYNC=0; larger ones keep the events
 * and the copy engines, which move bulk bytes at full speed without
 * holding SMs.
 *
 * Whatever happens, a fenced kernel ends: its waits give up when the job
 * aborts (xsync_abort raises word 0 of the job's gate block, which the
 * kernels poll) or after CU_XSYNC_TIMEOUT_NS, and say so in word 1, which
 * cu_job_poll turns into the job's failure. A launch that fails after some
 * members' launched aborts the waits at once (their partner never comes)
 * and fails the job the same way. */

static void xsync_abort(struct cu_job *j)
{
    if (j->xhost)
        ((volatile uint32_t *)j->xhost)[0] = 1u;
}

/* 1 when the calls of `comm` reading `bytes` per GPU take fenced kernels. */
static int xsync_use(struct be_call *c, int comm, uint64_t bytes)
{
    static int on = -1;
    static uint64_t max = 1024u << 10;
    struct cu_job *j = c->priv;
    if (on < 0) {
        max = be_env_uint("ZPPD_XSYNC_MAX_KIB", 1024, 1ull << 30) << 10;
        on = be_env_switch("ZPPD_XSYNC", 1);
    }
    /* peer_ok's groups are one node's GPUs, all of one size */
    return on && bytes <= max && j && j->ready && j->xhost && !j->xbroken &&
           j->slots[0].csize[comm] <= ZK_XSYNC_MAX && j->t.nslots <= CU_MAX_TASKS &&
           cu_peer_ok(c, comm) == BE_PEER_LOAD;
}

/* Slot s's part of fenced launch gen over `comm`. */
static void xsync_for(const struct cu_job *j, int comm, int s, uint32_t gen, struct zk_xsync *xs)
{
    const struct cu_slot *sl = &j->slots[s];
    memset(xs, 0, sizeof *xs);
    xs->n = sl->csize[comm];
    xs->me = sl->crank[comm];
    xs->gen = gen;
    for (int i = 0; i < xs->n; i++)
        xs->flags[i] = j->slots[be_member_slot(&j->t, comm, s, i)].xflags;
    xs->abort = (const volatile uint32_t *)(uintptr_t)j->xdev;
    xs->err = (uint32_t *)(uintptr_t)(j->xdev + sizeof(uint32_t));
    xs->timeout_ns = CU_XSYNC_TIMEOUT_NS;
}

/* A fenced launch failed after others of the same gen went out. */
static int xsync_failed(struct cu_job *j, int rc)
{
    j->xbroken = 1;
    xsync_abort(j);
    return rc;
}

/* One GPU's part of a fenced launch, run by cu_run_tasks (on that GPU's
 * launcher thread): the kernel and, when the slot's lane 0 has the call's
 * done event waiting (call_wait noted it), its record right after, so
 * that call_record has nothing left to do for the slot unless more work
 * was enqueued since. */
enum { XT_COPY, XT_SUM, XT_QDQ };
struct xs_task {
    struct cu_task t; /* first: cu_run_tasks hands it back */
    int kind;
    cudaStream_t st;
    CUevent done;
    CUresult rec;
    struct zk_xsync xs;
    int k; /* ranges (copy, qdq) or inputs (sum) */
    const void *src[ZK_XSYNC_MAX];
    void *dst[ZK_XSYNC_MAX]; /* sum: dst[0] */
    uint64_t len[ZK_XSYNC_MAX]; /* copy: bytes; qdq: elements; sum: len[0] elements */
    int dtype, out_dtype, op, bits, mine;
    uint32_t block;
    unsigned long long *d_poison, *h_poison;
};

static int xs_task_run(struct cu_task *t)
{
    struct xs_task *x = (struct xs_task *)t;
    int e;
    if (x->kind == XT_COPY)
        e = zk_copy_ptrs_cuda(x->dst, x->src, x->len, x->k, &x->xs, x->st);
    else if (x->kind == XT_SUM)
        e = zk_sum_ptrs_sync_cuda(x->src, x->k, x->len[0], x->dtype, x->op, (float)x->k, x->dst[0],
                                  x->out_dtype, &x->xs, x->st);
    else
        e = zk_qdq_ptrs_cuda(x->src, x->len, x->dst, x->k, x->dtype, x->bits, x->block, x->mine,
                             x->d_poison, x->h_poison, &x->xs, x->st);
    x->rec = CUDA_SUCCESS;
    if (e == cudaSuccess && x->done)
        x->rec = ZCU(cuEventRecord)(x->done, (CUstream)x->st);
    return e;
}

/* Fills the common part of slot s's task of fenced launch gen; the
 * caller fills the kernel's arguments. */
static void xs_task_init(struct be_call *c, struct cu_job *j, int comm, int s, uint32_t gen,
                         int kind, struct xs_task *x)
{
    struct cu_slot *sl = &j->slots[s];
    memset(x, 0, sizeof *x);
    x->t.device = sl->device;
    x->t.fn = xs_task_run;
    x->kind = kind;
    x->st = cur(sl);
    /* the done event goes on lane 0, after the call's last work there */
    x->done = !sl->lane && sl->done && sl->done_call == c ? sl->done : NULL;
    xsync_for(j, comm, s, gen, &x->xs);
}

/* Runs the slots' tasks of one fenced launch, every GPU's at once; 0, or
 * the first failure's code with c->err (the launch is broken). */
static int xs_run(struct be_call *c, struct cu_job *j, const char *what)
{
    struct cu_task *pt[CU_MAX_TASKS] = {0}; /* xsync_use: n <= CU_MAX_TASKS */
    struct xs_task *x = j->xtasks;
    int rc = 0, n = j->t.nslots;
    for (int s = 0; s < n; s++)
        pt[s] = &x[s].t;
    cu_run_tasks(j->b, pt, n);
    for (int s = 0; s < n; s++) {
        struct cu_slot *sl = &j->slots[s];
        if (!rc && x[s].t.rc)
            rc = rt_check(c, x[s].t.rc, what);
        if (x[s].done && !x[s].t.rc && x[s].rec == CUDA_SUCCESS) {
            sl->early = 1;
            sl->early_enq = sl->enq;
        }
    }
    return rc ? xsync_failed(j, rc) : 0;
}

/* After CU_STUCK_MS without draining: NCCL kernels waiting for a peer that
 * will never come return once their communicator is aborted. */
static void cu_job_stuck(struct cu_backend *b, void *arg)
{
    struct cu_job *j = arg;
    xsync_abort(j);
    if (j->comms_gone)
        return;
    j->abort = 1;
    comms_release(j, 1);
}

/* cu_job_close could not fence every stream of the job (no host memory for
 * the events, or a failed record): rather than unmap staging that queued
 * work may still use (a fault there is fatal to every job of the daemon),
 * the loop thread waits here for every stream to drain, polling; after
 * CU_STUCK_MS the communicators are aborted (cu_job_stuck), which makes
 * NCCL kernels waiting for a peer return. If the streams still have not
 * drained after twice that, the job's memory is left mapped for good
 * (logged): a leak, not a corruption. 0 when drained. Rare: only when host
 * memory ran out; ZPPD_TEST_CLOSE_NO_FENCE forces it for the GPU tests. */
static int drain_blocking(struct cu_backend *b, struct cu_job *j, int abort_now)
{
    uint64_t t0 = cu_now_ms();
    int stuck_done = abort_now; /* a node is gone: no use waiting first */
    if (abort_now)
        cu_job_stuck(b, j);
    for (;;) {
        int busy = 0;
        for (int s = 0; s < j->t.nslots; s++) {
            struct cu_slot *sl = &j->slots[s];
            if (cu_use(b, sl->device))
                continue;
            for (int k = 0; k < 2; k++) {
                cudaStream_t st = k ? sl->side : sl->stream;
                if (st && cudaStreamQuery(st) == cudaErrorNotReady)
                    busy = 1;
            }
        }
        if (!busy)
            return 0;
        uint64_t waited = cu_now_ms() - t0;
        if (!stuck_done && waited >= CU_STUCK_MS) {
            stuck_done = 1;
            cu_job_stuck(b, j);
        }
        if (waited >= 2u * CU_STUCK_MS) {
            ZLOG_E("cuda", "a closing job's streams never drained: its memory stays mapped",
                   "waited_ms=%" PRIu64, waited);
            return -1;
        }
        struct timespec nap = {0, 200000}; /* 0.2 ms */
        nanosleep(&nap, NULL);
    }
}

void cu_job_close(void *backend, void *job, int abort)
{
    struct cu_backend *b = backend;
    struct cu_job *j = job;
    if (!j || j->closing)
        return;
    j->closing = 1;
    /* Communicators still being created are aborted, never finalized:
     * ncclCommAbort is the one way out NCCL allows while one is in
     * progress (ncclCommFinalize needs a ready communicator). */
    j->abort = abort || !j->ready;
    if (abort) /* fenced kernels of the job stop waiting for each other */
        xsync_abort(j);
    int nev = 0, want = 0;
    static int no_fence = -1; /* test hook, read once */
    if (no_fence < 0)
        no_fence = be_env_switch("ZPPD_TEST_CLOSE_NO_FENCE", 0);
    cudaEvent_t *ev = no_fence ? NULL : calloc((size_t)j->t.nslots * 2, sizeof *ev);
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        if (!sl->stream || cu_use(b, sl->device))
            continue;
        for (int k = 0; k < 2; k++) {
            cudaStream_t st = k ? sl->side : sl->stream;
            if (!st)
                continue;
            want++;
            if (!ev)
                continue;
            if (cudaEventCreateWithFlags(&ev[nev], cudaEventDisableTiming) != cudaSuccess)
                continue;
            if (cudaEventRecord(ev[nev], st) == cudaSuccess)
                nev++;
            else
                cudaEventDestroy(ev[nev]);
        }
    }
    if (nev < want) { /* a stream without a fence: wait for all of them here */
        for (int i = 0; i < nev; i++)
            cudaEventDestroy(ev[i]);
        free(ev);
        ZLOG_W("cuda", "closing a job without events to fence its streams: waiting for them",
               "streams=%d fenced=%d", want, nev);
        if (drain_blocking(b, j, abort == BE_CLOSE_ABORT_NOW) == 0)
            job_reap(b, j);
        return;
    }
    if (nev == 0) {
        free(ev);
        job_reap(b, j);
        return;
    }
    struct cu_grave *g = cu_grave_add(b, ev, nev, job_reap, j);
    if (g) {
        g->stuck = cu_job_stuck;
        if (abort == BE_CLOSE_ABORT_NOW) { /* a node is gone: no use waiting 10 s */
            g->stuck_done = 1;
            cu_job_stuck(b, j);
        }
    }
}

/* ---- communicator creation: a small state machine ---------------------
 *
 * The sets are created one group at a time, in a fixed order that every
 * daemon of a job follows: GLOBAL, then INTRA group 0 .. N-1, then INTER
 * group 0 .. G-1 (groups this daemon hosts no member of are skipped). A
 * step is one ncclGroupStart, ncclCommInitRankConfig (blocking = 0) for
 * every hosted member of that communicator, ncclGroupEnd: NCCL requires
 * the local ranks of one communicator to init inside one group when one
 * thread drives several GPUs. ncclGroupEnd returns ncclInProgress and NCCL
 * connects in its own threads; cu_job_poll then asks
 * ncclCommGetAsyncError of that step's communicators (the one call NCCL
 * allows on a communicator in progress, besides ncclCommAbort) and starts
 * the next step only once all of them have left ncclInProgress — the same
 * order and the same calls as when the loop waited, without the wait.
 * Nothing else touches a communicator before its job is ready: calls wait
 * in the job layer until cu_job_poll has returned 0. cu_job_close of a
 * job that is not ready aborts (ncclCommAbort) every communicator made so
 * far, in progress or not. */

/* Starts group g of communicator set k for the hosted slots. Returns 0
 * (*none = 1 when this daemon hosts no member of it), or a code with why. */
static int comm_group_start(struct cu_job *j, int k, int g, int *none, char *why, size_t why_len)
{
    const struct be_topo *t = &j->t;
    int n = be_comm_size(t, k), hosted = 0;
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    *none = 0;
    for (int s = 0; s < t->nslots; s++)
        hosted += comm_group_of(t, k, be_rank(t, s)) == g;
    if (!hosted) {
        *none = 1;
        return 0;
    }
    if (j->ids && k != BE_COMM_INTRA) {
        int at = k == BE_COMM_GLOBAL ? 0 : 1 + g;
        if (at >= j->nids) {
            snprintf(why, why_len, "the leader sent %d communicator ids, %d needed", j->nids,
                     at + 1);
            return ZPP_EINVAL;
        }
        memcpy(&id, j->ids + (size_t)at * NCCL_UNIQUE_ID_BYTES, sizeof id);
    } else if (hosted != n) {
        snprintf(why, why_len, "a %s communicator has members on other daemons but no id",
                 k == BE_COMM_INTRA ? "intra-node" : "job");
        return ZPP_EUNSUPPORTED;
    } else if ((r = ncclGetUniqueId(&id)) != ncclSuccess) {
        return nccl_fail(r, NULL, "ncclGetUniqueId", why, why_len);
    }
    ncclGroupStart();
    for (int s = 0; s < t->nslots; s++) {
        int rk = be_rank(t, s);
        if (comm_group_of(t, k, rk) != g)
            continue;
        struct cu_slot *sl = &j->slots[s];
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        /* experiment switch: a blocking ncclGroupEnd holds the loop again */
        cfg.blocking = be_env_switch("ZPP_NCCL_BLOCKING", 0);
        cu_use(j->b, sl->device);
        sl->crank[k] = be_comm_index(t, k, rk);
        sl->csize[k] = n;
        r = ncclCommInitRankConfig(&sl->comm[k], n, id, sl->crank[k], &cfg);
        if (r != ncclSuccess && r != ncclInProgress) {
            ncclGroupEnd();
            return nccl_fail(r, NULL, "ncclCommInitRankConfig", why, why_len);
        }
    }
    r = ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail(r, NULL, "ncclGroupEnd (communicator creation)", why, why_len);
    return 0;
}

/* Where group g of set k stands: 0 with *busy (some communicator still
 * ncclInProgress), or a code with why. */
static int comm_group_state(struct cu_job *j, int k, int g, int *busy, char *why, size_t why_len)
{
    static const char *const set[CU_NCOMM] = {"job", "intra-node", "inter-node"};
    char what[96];
    *busy = 0;
    for (int s = 0; s < j->t.nslots; s++) {
        ncclComm_t c = j->slots[s].comm[k];
        ncclResult_t st = ncclSuccess, r;
        if (!c || comm_group_of(&j->t, k, be_rank(&j->t, s)) != g)
            continue;
        snprintf(what, sizeof what, "creating the %s communicator %d (rank %d)", set[k], g,
                 be_rank(&j->t, s));
        if ((r = ncclCommGetAsyncError(c, &st)) != ncclSuccess)
            return nccl_fail(r, c, what, why, why_len);
        if (st == ncclInProgress)
            *busy = 1;
        else if (st != ncclSuccess)
            return nccl_fail(st, c, what, why, why_len);
    }
    return 0;
}

static void form_next(struct cu_job *j)
{
    j->form_started = 0;
    if (++j->form_g >= comm_ngroups(&j->t, j->form_k)) {
        j->form_g = 0;
        j->form_k++;
    }
}

/* Every communicator is there: the memory NCCL took, and the job is ready. */
static void form_done(struct cu_job *j)
{
    struct cu_backend *b = j->b;
    for (int s = 0; j->free0 && s < j->t.nslots; s++) {
        size_t fr = 0, tot = 0;
        int dev = j->slots[s].device;
        cu_use(b, dev);
        cudaMemGetInfo(&fr, &tot);
        if (j->free0[dev] > fr)
            j->comm_bytes += j->free0[dev] - fr;
        j->free0[dev] = fr; /* count each device once */
    }
    free(j->free0);
    j->free0 = NULL;
    free(j->ids);
    j->ids = NULL;
    j->ready = 1;
}

/* Moves creation on as far as it can without waiting: 0 ready, BE_FORMING,
 * or a code with why. */
static int form_step(struct cu_job *j, char *why, size_t why_len)
{
    for (;;) {
        int rc, busy = 0, none = 0;
        if (j->form_started) {
            if ((rc = comm_group_state(j, j->form_k, j->form_g, &busy, why, why_len)))
                return rc;
            if (busy)
                return BE_FORMING;
            form_next(j);
        }
        if (j->form_k >= CU_NCOMM) {
            form_done(j);
            return 0;
        }
        if ((rc = comm_group_start(j, j->form_k, j->form_g, &none, why, why_len)))
            return rc;
        if (none)
            form_next(j);
        else
            j->form_started = 1;
    }
}

static int job_open_common(struct cu_backend *b, const struct be_topo *t, const int *devices,
                           const uint8_t *ids, int nids, void **job, char *why, size_t why_len)
{
    struct cu_job *j = NULL;
    int rc = 0;
    if (t->nodes < 1 || t->local < 1 || t->world != t->nodes * t->local || t->rank0 < 0 ||
        t->nslots < 1 || t->rank0 > t->world - t->nslots || (!ids && t->nslots != t->world)) {
        snprintf(why, why_len, "bad topology for this daemon (rank0 %d, %d ranks hosted of %d)",
                 t->rank0, t->nslots, t->world);
        return ZPP_EINVAL;
    }
    for (int s = 0; s < t->nslots; s++) {
        if (devices[s] < 0 || devices[s] >= b->ndev) {
            snprintf(why, why_len, "rank %d has no device", s);
            return ZPP_EINVAL;
        }
        for (int q = 0; q < s; q++)
            if (devices[q] == devices[s]) {
                snprintf(why, why_len,
                         "ranks %d and %d use the same GPU %s (NCCL needs one GPU "
                         "per rank)",
                         q, s, b->devs[devices[s]].uuid);
                return ZPP_EINVAL;
            }
    }
    if (!(j = calloc(1, sizeof *j)) || !(j->slots = calloc((size_t)t->nslots, sizeof *j->slots)) ||
        !(j->free0 = calloc((size_t)b->ndev, sizeof *j->free0)) ||
        (ids && !(j->ids = malloc((size_t)nids * NCCL_UNIQUE_ID_BYTES)))) {
        if (j) {
            free(j->slots);
            free(j->free0);
        }
        free(j);
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    j->b = b;
    j->t = *t;
    if (ids) {
        memcpy(j->ids, ids, (size_t)nids * NCCL_UNIQUE_ID_BYTES);
        j->nids = nids;
    }
    for (int s = 0; s < t->nslots; s++)
        j->slots[s].counter = -1;
    /* On the list from now on: cu_job_close (also on failure below) unlinks
     * it only once its streams have drained. */
    j->next = b->jobs;
    b->jobs = j;
    /* no gate block or no task array: no fenced kernels for this job */
    if (cu_gate_flags_get(b, &j->xhost, &j->xdev))
        j->xhost = NULL;
    else if (!(j->xtasks = calloc((size_t)t->nslots, sizeof *j->xtasks))) {
        cu_gate_flags_put(b, j->xhost);
        j->xhost = NULL;
    }
    for (int s = 0; s < t->nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        cudaError_t e;
        sl->device = devices[s];
        if ((rc = cu_use(b, sl->device))) {
            snprintf(why, why_len, "cannot use device %d", sl->device);
            goto fail;
        }
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        j->free0[sl->device] = fr;
        if ((e = cudaStreamCreateWithFlags(&sl->stream, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaStreamCreateWithFlags(&sl->side, cudaStreamNonBlocking)) != cudaSuccess) {
            rc = cu_rt_fail(e, "creating a slot's streams", why, why_len);
            goto fail;
        }
        for (int k = 0; k <= BE_LANE_MARKS; k++)
            if ((e = cudaEventCreateWithFlags(k < BE_LANE_MARKS ? &sl->mark[k] : &sl->fence,
                                              cudaEventDisableTiming)) != cudaSuccess) {
                rc = cu_rt_fail(e, "creating a slot's events", why, why_len);
                goto fail;
            }
        if ((rc = cu_vmm_alloc(b, sl->device, CU_SLOT_DEV_BYTES, (void **)&sl->d_poison))) {
            snprintf(why, why_len, "cannot allocate device memory for the counters");
            goto fail;
        }
        sl->xflags = (uint32_t *)((uint8_t *)sl->d_poison + CU_XSYNC_OFF);
        if ((e = cudaMemsetAsync(sl->d_poison, 0, CU_SLOT_DEV_BYTES, sl->stream)) != cudaSuccess) {
            rc = cu_rt_fail(e, "clearing a counter", why, why_len);
            goto fail;
        }
        for (int i = 0; i < CU_MAX_COUNTERS; i++)
            if (!b->counter_used[i]) {
                b->counter_used[i] = 1;
                sl->counter = i;
                break;
            }
        if (sl->counter < 0) {
            snprintf(why, why_len, "more than %d ranks in live jobs", CU_MAX_COUNTERS);
            rc = ZPP_ELIMIT;
            goto fail;
        }
        sl->h_poison = &b->counters[sl->counter];
        *sl->h_poison = 0;
    }
    for (int k = 0; k < CU_NCOMM; k++)
        j->linked[k] = peer_linked(j, k);
    /* The first step starts now; cu_job_poll drives the rest. */
    rc = form_step(j, why, why_len);
    if (rc && rc != BE_FORMING)
        goto fail;
    *job = j;
    return 0;
fail:
    cu_job_close(b, j, 1);
    return rc ? rc : ZPP_EBACKEND;
}

int cu_job_open(void *backend, const struct be_topo *t, const int *devices, void **job, char *why,
                size_t why_len)
{
    return job_open_common(backend, t, devices, NULL, 0, job, why, why_len);
}

/* The leader's ids for a job across daemons, checked before any NCCL call
 * (a daemon that fails later, inside ncclCommInitRank, leaves the other
 * daemons waiting in theirs until the creation deadline): one id for the
 * global communicator and one per local index, none all-zero, no two
 * equal; this daemon hosts whole nodes (its intra-node communicators are
 * its own). */
static int ids_check(const struct be_topo *t, const uint8_t *ids, int nids, char *why,
                     size_t why_len)
{
    static const uint8_t zero[NCCL_UNIQUE_ID_BYTES];
    if (!ids || nids < 1) {
        snprintf(why, why_len, "no communicator ids");
        return ZPP_EINVAL;
    }
    if (t->nodes < 2 || t->local < 1 || nids != 1 + t->local) {
        snprintf(why, why_len,
                 "the leader sent %d communicator ids; a job of %d nodes x %d ranks across "
                 "daemons needs %d (the global one and one inter-node one per local index)",
                 nids, t->nodes, t->local, 1 + t->local);
        return ZPP_EINVAL;
    }
    if (t->nslots < 1 || t->rank0 % t->local || t->nslots % t->local) {
        snprintf(why, why_len,
                 "this daemon hosts ranks %d..%d of a job of %d ranks per node: a daemon must "
                 "host whole nodes",
                 t->rank0, t->rank0 + t->nslots - 1, t->local);
        return ZPP_EINVAL;
    }
    for (int i = 0; i < nids; i++) {
        const uint8_t *a = ids + (size_t)i * NCCL_UNIQUE_ID_BYTES;
        if (!memcmp(a, zero, sizeof zero)) {
            snprintf(why, why_len, "communicator id %d from the leader is all zeros", i);
            return ZPP_EINVAL;
        }
        for (int q = 0; q < i; q++)
            if (!memcmp(a, ids + (size_t)q * NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES)) {
                snprintf(why, why_len,
                         "communicator ids %d and %d from the leader are equal (NCCL_COMM_ID "
                         "set on the leader?)",
                         q, i);
                return ZPP_EINVAL;
            }
    }
    return 0;
}

int cu_job_open_ids(void *backend, const struct be_topo *t, const int *devices, const uint8_t *ids,
                    int nids, void **job, char *why, size_t why_len)
{
    int rc = ids_check(t, ids, nids, why, why_len);
    if (rc)
        return rc;
    return job_open_common(backend, t, devices, ids, nids, job, why, why_len);
}

/* ncclGetUniqueId starts a bootstrap root (a listening socket and a
 * thread) in this process, on NCCL's bootstrap interface
 * (NCCL_SOCKET_IFNAME): the other daemons must reach that address. Each
 * root lives until every rank of its communicator has connected to it. */
int cu_make_ids(void *backend, int n, uint8_t *ids, char *why, size_t why_len)
{
    (void)backend;
    if (n < 1 || !ids) {
        snprintf(why, why_len, "bad request for %d communicator ids", n);
        return ZPP_EINVAL;
    }
    /* With NCCL_COMM_ID, ncclGetUniqueId returns that one address for every
     * communicator and makes no root: the job's communicators would all
     * meet on one port, and a second job's with them. */
    if (getenv("NCCL_COMM_ID")) {
        snprintf(why, why_len,
                 "NCCL_COMM_ID is set in zppd's environment: every communicator would get the "
                 "same id; unset it");
        return ZPP_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        ncclUniqueId id;
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return nccl_fail(r, NULL, "ncclGetUniqueId", why, why_len);
        memcpy(ids + (size_t)i * NCCL_UNIQUE_ID_BYTES, &id, NCCL_UNIQUE_ID_BYTES);
    }
    return 0;
}

/* poll_wait's query for cu_to_host: has the event completed? */
struct ev_query {
    cudaEvent_t ev;
    cudaError_t r; /* the last answer */
};

static int ev_query(void *arg)
{
    struct ev_query *q = arg;
    q->r = cudaEventQuery(q->ev);
    return q->r == cudaSuccess ? POLL_DONE : q->r == cudaErrorNotReady ? POLL_NOT_YET : POLL_FAILED;
}

int cu_to_host(struct be_call *c, int s, void *dst, const void *src, size_t bytes)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc || !bytes)
        return rc;
    /* A worker thread waits here (an hpZ publish's hash, coll_verify),
     * while the loop serves everyone else: a bounded wait for the work
     * queued before the copy, polled, then the copy, which into pageable
     * memory would itself wait for that work without a bound. A stream
     * stalled behind a stuck client or a dead node's NCCL gather would
     * otherwise hold the call, and its job, for good (an audit; the loop
     * itself, when the hash still ran there). */
    struct ev_query eq;
    if ((rc = rt_check(c, cudaEventCreateWithFlags(&eq.ev, cudaEventDisableTiming),
                       "cudaEventCreate (to host)")))
        return rc;
    eq.r = cudaEventRecord(eq.ev, cur(sl));
    int st = eq.r == cudaSuccess ? poll_wait(ev_query, &eq, CU_TO_HOST_WAIT_MS, 50) : POLL_FAILED;
    cudaEventDestroy(eq.ev);
    if (st == POLL_NOT_YET) {
        snprintf(c->err, sizeof c->err,
                 "cuda backend: the gathered bytes were not ready within %u ms (a rank's "
                 "stream or a node stalled): nothing published",
                 (unsigned)CU_TO_HOST_WAIT_MS);
        return ZPP_ETIMEDOUT;
    }
    if ((rc = rt_check(c, eq.r, "cudaEventRecord / cudaEventQuery (to host)")))
        return rc;
    if ((rc = rt_check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cur(sl)),
                       "cudaMemcpyAsync (to host)")))
        return rc;
    return rt_check(c, cudaStreamSynchronize(cur(sl)), "cudaStreamSynchronize (to host)");
}

int cu_job_poll(void *backend, void *job, char *why, size_t why_len)
{
    struct cu_job *j = job;
    if (!j || j->closing)
        return 0;
    if (!j->ready) {
        if (!j->form_rc) {
            int rc = form_step(j, j->form_why, sizeof j->form_why);
            if (rc == 0 || rc == BE_FORMING)
                return rc;
            j->form_rc = rc;
        }
        snprintf(why, why_len, "%s", j->form_why);
        return j->form_rc;
    }
    if (j->xbroken) {
        snprintf(why, why_len, "a kernel launch on one of the job's GPUs failed while the others "
                               "waited for it");
        return ZPP_EBACKEND;
    }
    if (j->xhost && ((volatile uint32_t *)j->xhost)[1]) {
        snprintf(why, why_len,
                 "a kernel on one of the job's GPUs waited %llu s for the job's other GPUs and "
                 "gave up",
                 (unsigned long long)(CU_XSYNC_TIMEOUT_NS / 1000000000ull));
        return ZPP_EBACKEND;
    }
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        for (int k = 0; k < CU_NCOMM; k++) {
            ncclResult_t st = ncclSuccess;
            if (!sl->comm[k])
                continue;
            ncclResult_t r = ncclCommGetAsyncError(sl->comm[k], &st);
            if (r != ncclSuccess)
                return nccl_fail(r, sl->comm[k], "ncclCommGetAsyncError", why, why_len);
            if (st != ncclSuccess && st != ncclInProgress)
                return nccl_fail(st, sl->comm[k], "NCCL", why, why_len);
        }
        if (cu_use(j->b, sl->device))
            continue;
        cudaError_t e = cudaStreamQuery(sl->stream);
        if (e == cudaSuccess && sl->side)
            e = cudaStreamQuery(sl->side);
        if (e != cudaSuccess && e != cudaErrorNotReady) {
            if (cu_rt_sticky(e))
                cu_mark_fatal(j->b, "a job's stream", e);
            return cu_rt_fail(e, "stream", why, why_len);
        }
    }
    return 0;
}

uint64_t cu_job_memory(void *backend, void *job)
{
    struct cu_job *j = job;
    if (!j)
        return 0;
    uint64_t m = j->comm_bytes;
    for (int s = 0; s < j->t.nslots; s++) {
        CUdeviceptr base;
        size_t sz = 0;
        if (j->slots[s].d_poison &&
            ZCU(cuMemGetAddressRange)(&base, &sz, (CUdeviceptr)(uintptr_t)j->slots[s].d_poison) ==
                CUDA_SUCCESS)
            m += sz;
    }
    for (int s = 0; s < j->t.nslots; s++)
        for (int i = 0; i < j->slots[s].nblocks; i++)
            m += j->slots[s].blocks[i].size;
    return m;
}

/* ---- staging ----------------------------------------------------------- */

int cu_scratch(struct be_call *c, int s, size_t bytes, void **out)
{
    struct cu_job *j = call_job(c, s);
    struct cu_slot *sl;
    int rc;
    if ((rc = slot_use(c, s, &sl)))
        return rc;
    if (c->cap_scratch != CU_CALL_SEEN) { /* first request of this call */
        for (int q = 0; q < j->t.nslots; q++)
            for (int i = 0; i < j->slots[q].nblocks; i++)
                j->slots[q].blocks[i].used = 0;
        c->cap_scratch = CU_CALL_SEEN;
    }
    size_t need = (bytes + CU_STAGING_ALIGN - 1) / CU_STAGING_ALIGN * CU_STAGING_ALIGN;
    if (need == 0)
        need = CU_STAGING_ALIGN;
    for (int i = 0; i < sl->nblocks; i++) {
        struct cu_block *bl = &sl->blocks[i];
        if (bl->size - bl->used >= need) {
            *out = (uint8_t *)bl->p + bl->used;
            bl->used += need;
            return 0;
        }
    }
    size_t total = 0;
    for (int i = 0; i < sl->nblocks; i++)
        total += sl->blocks[i].size;
    size_t sz = need > total ? need : total;
    if (sz < CU_STAGING_MIN)
        sz = CU_STAGING_MIN;
    struct cu_block *nb = realloc(sl->blocks, sizeof *nb * (size_t)(sl->nblocks + 1));
    if (!nb) {
        snprintf(c->err, sizeof c->err, "out of memory (staging table)");
        return ZPP_ENOMEM;
    }
    sl->blocks = nb;
    void *p = NULL;
    if ((rc = cu_vmm_alloc(j->b, sl->device, sz, &p))) {
        snprintf(c->err, sizeof c->err, "cuda backend: cannot allocate %zu bytes of staging", sz);
        return rc;
    }
    nb[sl->nblocks++] = (struct cu_block){.p = p, .size = sz, .used = need};
    *out = p;
    return 0;
}

/* ---- kernels ------------------------------------------------------------ */

/* After a quantizing kernel: copies the slot's counter to pinned memory
 * and reports what earlier calls counted (see the top of the file). */
static void poison_report(struct cu_slot *sl, uint64_t *poisoned)
{
    unsigned long long seen = *sl->h_poison;
    if (poisoned && seen > sl->poison_seen)
        *poisoned += seen - sl->poison_seen;
    if (seen > sl->poison_seen)
        sl->poison_seen = seen;
}

static int poison_after(struct be_call *c, struct cu_slot *sl, uint64_t *poisoned)
{
    poison_report(sl, poisoned);
    return rt_check(c,
                    cudaMemcpyAsync((void *)sl->h_poison, sl->d_poison, sizeof *sl->h_poison,
                                    cudaMemcpyDeviceToHost, cur(sl)),
                    "poison counter copy");
}

int cu_quantize(struct be_call *c, int s, const void *x, int dtype, uint64_t n, uint64_t n_valid,
                int bits, uint32_t block, void *out, uint64_t *poisoned)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    rc =
        rt_check(c, zk_quantize_cuda(x, dtype, n, n_valid, bits, block, out, sl->d_poison, cur(sl)),
                 "zk_quantize_cuda");
    return rc ? rc : poison_after(c, sl, poisoned);
}

int cu_dequantize(struct be_call *c, int s, const void *in, uint64_t n, uint64_t n_out, int bits,
                  uint32_t block, void *y, int dtype)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    return rt_check(c, zk_dequantize_cuda(in, n, n_out, bits, block, y, dtype, cur(sl)),
                    "zk_dequantize_cuda");
}

int cu_reorder_quantize(struct be_call *c, int s, const void *x, int dtype,
                        const struct zk_qgz_geom *g, int stage, void *out, uint64_t *poisoned)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    rc = rt_check(
        c, zk_qgz_reorder_quantize_stage_cuda(x, dtype, g, stage, out, sl->d_poison, cur(sl)),
        "zk_qgz_reorder_quantize_stage_cuda");
    return rc ? rc : poison_after(c, sl, poisoned);
}

int cu_reduce_requant(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                      uint64_t piece, int bits, uint32_t block, void *out, uint64_t *poisoned)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    rc = rt_check(
        c, zk_reduce_requant_cuda(in, in_stride, k, piece, bits, block, out, sl->d_poison, cur(sl)),
        "zk_reduce_requant_cuda");
    return rc ? rc : poison_after(c, sl, poisoned);
}

int cu_reduce_out(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                  uint64_t piece, int bits, uint32_t block, uint64_t count, int op, float divisor,
                  void *y, int out_dtype)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    return rt_check(c,
                    zk_reduce_out_cuda(in, in_stride, k, piece, bits, block, count, op, divisor, y,
                                       out_dtype, cur(sl)),
                    "zk_reduce_out_cuda");
}

int cu_copy(struct be_call *c, int s, void *dst, const void *src, size_t bytes)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc || !bytes || dst == src)
        return rc;
    return rt_check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cur(sl)),
                    "cudaMemcpyAsync");
}

int cu_zero(struct be_call *c, int s, void *dst, size_t bytes)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc || !bytes)
        return rc;
    return rt_check(c, cudaMemsetAsync(dst, 0, bytes, cur(sl)), "cudaMemsetAsync");
}

/* ---- collectives ------------------------------------------------------ */

static ncclDataType_t nccl_dtype(int dtype)
{
    return dtype == ZPP_FP32 ? ncclFloat32 : dtype == ZPP_FP16 ? ncclFloat16 : ncclBfloat16;
}

static int comm_ok(struct be_call *c, int comm)
{
    struct cu_job *j = c->priv;
    if (!j || !j->ready) {
        snprintf(c->err, sizeof c->err, "cuda backend: the job has no communicators%s",
                 j ? " yet (still forming)" : "");
        return ZPP_EINVAL;
    }
    if (comm != BE_COMM_GLOBAL && comm != BE_COMM_INTRA && comm != BE_COMM_INTER) {
        snprintf(c->err, sizeof c->err, "cuda backend: unknown communicator %d", comm);
        return ZPP_EINVAL;
    }
    return 0;
}

/* After ncclGroupEnd: lets a non-blocking launch finish before anything
 * else goes on the streams. */
static int group_end(struct be_call *c, int comm, const char *what)
{
    struct cu_job *j = c->priv;
    ncclResult_t r = ncclGroupEnd();
    if (r == ncclSuccess)
        return 0;
    if (r != ncclInProgress)
        return nccl_fail(r, NULL, what, c->err, sizeof c->err);
    ncclComm_t comms[j->t.nslots];
    for (int s = 0; s < j->t.nslots; s++)
        comms[s] = j->slots[s].comm[comm];
    return wait_comms(comms, j->t.nslots, CU_NCCL_DEADLINE_MS, what, c->err, sizeof c->err);
}

int cu_allgather(struct be_call *c, int comm, void *const *send, void *const *recv, size_t bytes)
{
    int rc = comm_ok(c, comm);
    struct cu_job *j = c->priv;
    if (rc || !bytes)
        return rc;
    ncclGroupStart();
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        cu_use(j->b, sl->device);
        ncclResult_t r = ncclAllGather(send[s], recv[s], bytes, ncclUint8, sl->comm[comm], cur(sl));
        if (r != ncclSuccess && r != ncclInProgress) {
            ncclGroupEnd();
            return nccl_fail(r, sl->comm[comm], "ncclAllGather", c->err, sizeof c->err);
        }
    }
    return group_end(c, comm, "ncclAllGather");
}

/* All-to-alls whose members are all hosted here run as peer copies, and
 * the reduce-scatter of a one-node job reads the members' inputs in place
 * instead of ncclReduceScatter: with ZPPD_PEER=load one zk_sum_ptrs_cuda
 * per GPU (1.28x / 1.35x in-process NCCL at 64 / 256 MiB on 2 H200s under
 * MPS, bench/results/cuda-2026-11-23-h200x2-sumptrs.txt), with copy an
 * all-to-all by peer copies and zk_sum_cuda (0.92x / 0.97x). Both give the
 * host backend's bytes. ZPPD_PEER_A2A=0 turns it off (docs/cuda.md).
 * Returns the peer mode (BE_PEER_LOAD or BE_PEER_COPY) or 0. */
static int peer_a2a(struct be_call *c, int comm)
{
    static int on = -1;
    if (on < 0)
        on = be_env_switch("ZPPD_PEER_A2A", 1);
    return on ? cu_peer_ok(c, comm) : 0;
}

/* All-to-all by peer copies: slot s's block p is member p's block at s's
 * own index, fenced before (the peers' sends are ready) and after (no
 * member reuses its send while a peer still reads it). */
static int alltoall_peer(struct be_call *c, int comm, void *const *send, void *const *recv,
                         size_t bpp)
{
    struct cu_job *j = c->priv;
    const struct be_topo *t = &j->t;
    int rc = cu_peer_fence(c, comm);
    for (int s = 0; !rc && s < t->nslots; s++) {
        const struct cu_slot *sl = &j->slots[s];
        int me = sl->crank[comm];
        for (int p = 0; !rc && p < sl->csize[comm]; p++)
            rc = cu_copy(c, s, (uint8_t *)recv[s] + (size_t)p * bpp,
                         (const uint8_t *)send[be_member_slot(t, comm, s, p)] + (size_t)me * bpp,
                         bpp);
    }
    int rc2 = cu_peer_fence(c, comm);
    return rc ? rc : rc2;
}

/* An all-to-all between two members is one all-gather: each member
 * contributes the block meant for the other, then keeps its own block by a
 * local copy. The wire carries the same bytes, but NCCL runs a collective
 * over all its channels where ncclSend/ncclRecv use the few a peer pair
 * gets: over the socket transport (2 simulated nodes on nvidia-h200-x2)
 * ncclSend/ncclRecv moved about 2.1 GB/s per direction against 3.4 GB/s
 * for ncclAllGather (bench/results/multi-2026-11-22-h200x2-peer.txt).
 * qgZ's inter-node step with two nodes is this case. ZPPD_A2A_PAIR_AG=0
 * keeps ncclSend/ncclRecv (docs/configuration.md). */
static int pair_ag(const struct cu_job *j, int comm)
{
    static int on = -1;
    if (on < 0)
        on = be_env_switch("ZPPD_A2A_PAIR_AG", 1);
    return on && j->slots[0].csize[comm] == 2; /* every slot's group has one size */
}

static int alltoall_pair(struct be_call *c, int comm, void *const *send, void *const *recv,
                         size_t bpp)
{
    struct cu_job *j = c->priv;
    ncclGroupStart();
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        int other = 1 - sl->crank[comm];
        cu_use(j->b, sl->device);
        ncclResult_t r = ncclAllGather((const uint8_t *)send[s] + (size_t)other * bpp, recv[s],
                                       bpp, ncclUint8, sl->comm[comm], cur(sl));
        if (r != ncclSuccess && r != ncclInProgress) {
            ncclGroupEnd();
            return nccl_fail(r, sl->comm[comm], "ncclAllGather (pair all-to-all)", c->err,
                             sizeof c->err);
        }
    }
    int rc = group_end(c, comm, "ncclAllGather (pair all-to-all)");
    /* The gather left this member's contribution in its own block: put the
     * block it keeps there instead, after the gather on the same stream. */
    for (int s = 0; !rc && s < j->t.nslots; s++) {
        size_t me = (size_t)j->slots[s].crank[comm] * bpp;
        rc = cu_copy(c, s, (uint8_t *)recv[s] + me, (const uint8_t *)send[s] + me, bpp);
    }
    return rc;
}

int cu_alltoall(struct be_call *c, int comm, void *const *send, void *const *recv,
                size_t bytes_per_peer)
{
    int rc = comm_ok(c, comm);
    struct cu_job *j = c->priv;
    if (rc || !bytes_per_peer)
        return rc;
    if (peer_a2a(c, comm))
        return alltoall_peer(c, comm, send, recv, bytes_per_peer);
    if (pair_ag(j, comm))
        return alltoall_pair(c, comm, send, recv, bytes_per_peer);
    ncclGroupStart();
    for (int s = 0; s < j->t.nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        int n = sl->csize[comm], me = sl->crank[comm];
        cu_use(j->b, sl->device);
        for (int p = 0; p < n; p++) {
            const uint8_t *sb = (const uint8_t *)send[s] + (size_t)p * bytes_per_peer;
            uint8_t *rb = (uint8_t *)recv[s] + (size_t)p * bytes_per_peer;
            ncclResult_t r = ncclSuccess;
            if (p == me) {
                cudaError_t e = cudaMemcpyAsync(rb, sb, bytes_per_peer, cudaMemcpyDefault, cur(sl));
                if (e != cudaSuccess) {
                    ncclGroupEnd();
                    return rt_check(c, e, "cudaMemcpyAsync (all-to-all, own block)");
                }
                continue;
            }
            r = ncclSend(sb, bytes_per_peer, ncclUint8, p, sl->comm[comm], cur(sl));
            if (r == ncclSuccess || r == ncclInProgress)
                r = ncclRecv(rb, bytes_per_peer, ncclUint8, p, sl->comm[comm], cur(sl));
            if (r != ncclSuccess && r != ncclInProgress) {
                ncclGroupEnd();
                return nccl_fail(r, sl->comm[comm], "ncclSend/ncclRecv", c->err, sizeof c->err);
            }
        }
    }
    return group_end(c, comm, "all-to-all");
}

/* The exact reduce-scatter of members that read each other's memory
 * (ZPPD_PEER=load): each member's sum kernel reads its block of every
 * member's input where it lies, over NVLink, in member order (the bytes of
 * the all-to-all + zk_sum_cuda path and of the host backend), fenced
 * before (the inputs are written) and after (no member reuses its input
 * while a peer still reads it). One pass and no staging copy. */
static int sum_peer_load(struct be_call *c, int comm, void *const *in, void *const *recv,
                         uint64_t shard, size_t seg, int dtype, int out_dtype, int op)
{
    struct cu_job *j = c->priv;
    const struct be_topo *t = &j->t;
    if (xsync_use(c, comm, (uint64_t)j->slots[0].csize[comm] * shard * zk_dtype_size(dtype))) {
        /* one fenced kernel per GPU, all GPUs' launched at once */
        uint32_t gen = ++j->xgen;
        struct xs_task *x = j->xtasks;
        for (int s = 0; s < t->nslots; s++) {
            struct cu_slot *sl = &j->slots[s];
            int me = sl->crank[comm], n = sl->csize[comm];
            xs_task_init(c, j, comm, s, gen, XT_SUM, &x[s]);
            for (int p = 0; p < n; p++)
                x[s].src[p] = (const uint8_t *)in[be_member_slot(t, comm, s, p)] + (size_t)me * seg;
            x[s].k = n;
            x[s].len[0] = shard;
            x[s].dst[0] = recv[s];
            x[s].dtype = dtype;
            x[s].out_dtype = out_dtype;
            x[s].op = op;
        }
        return xs_run(c, j, "zk_sum_ptrs_sync_cuda");
    }
    int rc = cu_peer_fence(c, comm);
    for (int s = 0; s < t->nslots && !rc; s++) {
        struct cu_slot *sl;
        if ((rc = slot_use(c, s, &sl)))
            break;
        int me = sl->crank[comm], n = sl->csize[comm];
        const void *src[ZK_SUM_MAX_PTRS];
        for (int p = 0; p < n; p++)
            src[p] = (const uint8_t *)in[be_member_slot(t, comm, s, p)] + (size_t)me * seg;
        rc = rt_check(c,
                      zk_sum_ptrs_cuda(src, n, shard, dtype, op, (float)n, recv[s], out_dtype,
                                       cur(sl)),
                      "zk_sum_ptrs_cuda");
    }
    int rc2 = cu_peer_fence(c, comm);
    return rc ? rc : rc2;
}

int cu_reduce_scatter(struct be_call *c, int comm, void *const *send, void *const *recv,
                      uint64_t count, uint64_t shard, int dtype, int out_dtype, int op)
{
    int rc = comm_ok(c, comm);
    struct cu_job *j = c->priv;
    size_t esize = zk_dtype_size(dtype);
    if (rc)
        return rc;
    if (!esize || !zk_dtype_size(out_dtype)) {
        snprintf(c->err, sizeof c->err, "cuda backend: bad dtype");
        return ZPP_EINVAL;
    }
    int ns = j->t.nslots, n = j->slots[0].csize[comm];
    if (shard == 0 || shard > SIZE_MAX / esize / (size_t)n || count > shard * (uint64_t)n) {
        snprintf(c->err, sizeof c->err, "cuda backend: bad shard size");
        return ZPP_EINVAL;
    }
    size_t seg = (size_t)shard * esize, full = seg * (size_t)n;
    void **in = calloc((size_t)ns, sizeof *in), **tmp = calloc((size_t)ns, sizeof *tmp);
    if (!in || !tmp) {
        rc = ZPP_ENOMEM;
        snprintf(c->err, sizeof c->err, "out of memory");
        goto exit;
    }
    /* Pad the input to n * shard elements where count falls short; copy
     * it where the peers may read it when it is private (be_call.in_private)
     * and they would (peer_a2a). */
    int pa = peer_a2a(c, comm);
    for (int s = 0; s < ns; s++) {
        in[s] = send[s];
        if (count == shard * (uint64_t)n && !(pa && c->in_private))
            continue;
        if ((rc = cu_scratch(c, s, full, &in[s])) ||
            (rc = cu_copy(c, s, in[s], send[s], (size_t)count * esize)) ||
            (rc = cu_zero(c, s, (uint8_t *)in[s] + (size_t)count * esize,
                          full - (size_t)count * esize)))
            goto exit;
    }
    if (op == ZPP_SUM && dtype == out_dtype && !pa) {
        ncclGroupStart();
        for (int s = 0; s < ns; s++) {
            struct cu_slot *sl = &j->slots[s];
            cu_use(j->b, sl->device);
            ncclResult_t r = ncclReduceScatter(in[s], recv[s], (size_t)shard, nccl_dtype(dtype),
                                               ncclSum, sl->comm[comm], cur(sl));
            if (r != ncclSuccess && r != ncclInProgress) {
                ncclGroupEnd();
                rc = nccl_fail(r, sl->comm[comm], "ncclReduceScatter", c->err, sizeof c->err);
                goto exit;
            }
        }
        rc = group_end(c, comm, "ncclReduceScatter");
        goto exit;
    }
    if (pa == BE_PEER_LOAD && n <= ZK_SUM_MAX_PTRS) {
        rc = sum_peer_load(c, comm, in, recv, shard, seg, dtype, out_dtype, op);
        goto exit;
    }
    for (int s = 0; s < ns; s++)
        if ((rc = cu_scratch(c, s, full, &tmp[s])))
            goto exit;
    if ((rc = cu_alltoall(c, comm, in, tmp, seg)))
        goto exit;
    for (int s = 0; s < ns; s++) {
        struct cu_slot *sl;
        if ((rc = slot_use(c, s, &sl)))
            goto exit;
        rc = rt_check(
            c,
            zk_sum_cuda(tmp[s], shard, n, shard, dtype, op, (float)n, recv[s], out_dtype, cur(sl)),
            "zk_sum_cuda");
        if (rc)
            goto exit;
    }
exit:
    free(in);
    free(tmp);
    return rc;
}

/* ---- lanes ----------------------------------------------------------- */

int cu_lane_use(struct be_call *c, int s, int lane)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    sl->lane = lane ? 1 : 0;
    return 0;
}

/* Records mark m on a lane (its state as of now); lane_wait makes later work
 * on a lane wait for the mark's latest record. A wait captures the event's
 * state when it is enqueued, so re-recording the mark afterwards is safe. */
static int lane_mark_op(struct be_call *c, int s, int lane, int m, int wait)
{
    struct cu_slot *sl;
    int rc = slot_use(c, s, &sl);
    if (rc)
        return rc;
    if (m < 0 || m >= BE_LANE_MARKS) {
        snprintf(c->err, sizeof c->err, "cuda backend: no lane mark %d", m);
        return ZPP_EINVAL;
    }
    cudaStream_t st = lane ? sl->side : sl->stream;
    sl->enq++;
    if (wait)
        return rt_check(c, cudaStreamWaitEvent(st, sl->mark[m], 0), "cudaStreamWaitEvent (lane)");
    return rt_check(c, cudaEventRecord(sl->mark[m], st), "cudaEventRecord (lane mark)");
}

int cu_lane_mark(struct be_call *c, int s, int lane, int m)
{
    return lane_mark_op(c, s, lane, m, 0);
}

int cu_lane_wait(struct be_call *c, int s, int lane, int m)
{
    return lane_mark_op(c, s, lane, m, 1);
}

int cu_lanes_cheap(struct be_call *c)
{
    struct cu_job *j = call_job(c, 0);
    return j && j->b->devs[j->slots[0].device].mps > 0;
}

/* ---- peer access ------------------------------------------------------ */

int cu_peer_ok(struct be_call *c, int comm)
{
    struct cu_job *j = call_job(c, 0);
    if (!j || !j->b->peer_mode || j->b->peer_broken || comm < 0 || comm >= CU_NCOMM)
        return 0;
    return j->linked[comm] ? j->b->peer_mode : 0;
}

/* A barrier among the streams of each comm group: every member records
 * its fence event on its current lane, then every member's current lane
 * waits for the others' (a wait takes the event's latest record at enqueue
 * time, so recording the next fence later is safe). */
int cu_peer_fence(struct be_call *c, int comm)
{
    struct cu_job *j = call_job(c, 0);
    struct cu_slot *sl;
    int rc;
    if (!j)
        return slot_use(c, 0, &sl);
    const struct be_topo *t = &j->t;
    for (int s = 0; s < t->nslots; s++) {
        if ((rc = slot_use(c, s, &sl)) ||
            (rc = rt_check(c, cudaEventRecord(sl->fence, cur(sl)), "cudaEventRecord (fence)")))
            return rc;
    }
    for (int r = 0; r < t->nslots; r++) {
        if ((rc = slot_use(c, r, &sl)))
            return rc;
        for (int s = 0; s < t->nslots; s++) {
            if (s == r ||
                comm_group_of(t, comm, t->rank0 + r) != comm_group_of(t, comm, t->rank0 + s))
                continue;
            rc = rt_check(c, cudaStreamWaitEvent(cur(sl), j->slots[s].fence, 0),
                          "cudaStreamWaitEvent (fence)");
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* be_ops.peer_gather: small gathers as one fenced copy kernel per GPU
 * (see "fenced kernels"); larger ones are left to the caller's fenced
 * copy-engine copies. */
int cu_peer_gather(struct be_call *c, int comm, void *const *send, void *const *recv,
                   size_t bytes)
{
    struct cu_job *j = c->priv;
    int rc = comm_ok(c, comm);
    if (rc)
        return rc;
    if (!xsync_use(c, comm, (uint64_t)bytes * (uint64_t)j->slots[0].csize[comm]))
        return BE_DECLINED;
    const struct be_topo *t = &j->t;
    uint32_t gen = ++j->xgen;
    struct xs_task *x = j->xtasks;
    for (int s = 0; s < t->nslots; s++) {
        int n = j->slots[s].csize[comm];
        xs_task_init(c, j, comm, s, gen, XT_COPY, &x[s]);
        for (int i = 0; i < n; i++) {
            x[s].dst[i] = (uint8_t *)recv[s] + (size_t)i * bytes;
            x[s].src[i] = send[be_member_slot(t, comm, s, i)];
            x[s].len[i] = bytes;
        }
        x[s].k = n;
    }
    return xs_run(c, j, "zk_copy_ptrs_cuda");
}

/* be_ops.peer_qwz: a small one-node qwZ as one fenced kernel per GPU
 * (zk_qdq_ptrs_cuda): each GPU quantizes and dequantizes every member's
 * shard where it lies, so no codes are staged or gathered. The kernel
 * copies the slot's poisoned-block counter to its pinned mirror itself,
 * which spares poison_after's copy. */
int cu_peer_qwz(struct be_call *c, int comm, void *const *in, void *const *out, uint64_t shard,
                uint64_t count, int dtype, int bits, uint32_t block, uint64_t *poisoned)
{
    struct cu_job *j = c->priv;
    int rc = comm_ok(c, comm);
    size_t es = zk_dtype_size(dtype);
    if (rc)
        return rc;
    if (!es || !zk_params_ok(bits, block) || shard > SIZE_MAX / es / ZK_XSYNC_MAX) {
        snprintf(c->err, sizeof c->err, "cuda backend: bad qwZ parameters");
        return ZPP_EINVAL;
    }
    if (!xsync_use(c, comm, (uint64_t)shard * es * (uint64_t)j->slots[0].csize[comm]))
        return BE_DECLINED;
    const struct be_topo *t = &j->t;
    uint32_t gen = ++j->xgen;
    struct xs_task *x = j->xtasks;
    for (int s = 0; s < t->nslots; s++) {
        struct cu_slot *sl = &j->slots[s];
        int k = sl->csize[comm];
        xs_task_init(c, j, comm, s, gen, XT_QDQ, &x[s]);
        for (int i = 0; i < k; i++) {
            uint64_t lo = (uint64_t)i * shard;
            x[s].src[i] = in[be_member_slot(t, comm, s, i)];
            x[s].dst[i] = (uint8_t *)out[s] + lo * es;
            x[s].len[i] = be_clamp(count, lo, shard);
        }
        x[s].k = k;
        x[s].dtype = dtype;
        x[s].bits = bits;
        x[s].block = block;
        x[s].mine = sl->crank[comm];
        x[s].d_poison = sl->d_poison;
        x[s].h_poison = (unsigned long long *)sl->h_poison;
    }
    rc = xs_run(c, j, "zk_qdq_ptrs_cuda");
    for (int s = 0; !rc && s < t->nslots; s++)
        poison_report(&j->slots[s], poisoned);
    return rc;
}
