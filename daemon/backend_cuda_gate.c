/*
 * backend_cuda_gate.c — the host gate: how a job stream waits for a
 * client's ready event without any stream of ours ever waiting on it.
 *
 * Why. A client killed with an event recorded but never executed leaves
 * that event incomplete for good (seen on H200s, with and without MPS). A
 * stream of ours waiting on it (cuStreamWaitEvent) would wait for ever, and
 * a stream blocked for ever does damage beyond itself: the GPU maps our
 * streams onto a few hardware queues, so unrelated streams queued behind it
 * stall, and anything that synchronises the device hangs. The MPS kill test
 * showed it: after a client's SIGKILL the next job's NCCL communicators
 * never finished connecting.
 *
 * How. Each session gets a block of 32-bit flags in pinned, mapped host
 * memory. call_wait arms the gate (ready event, flag, value v) and makes
 * the job stream wait until the flag reaches v (cuStreamWaitValue32, >=,
 * cyclic); the gate thread polls its armed events with cuEventQuery and
 * raises each flag once its event has completed. Closing a session raises
 * every flag of it from the loop thread: job streams go on whether or not
 * the client's events ever complete. So every wait of ours ends, at the
 * latest, when its session closes.
 *
 * Snapshots. cuStreamWaitEvent waits for the event as recorded at that
 * moment; a query sees the latest record. libzpp therefore re-records a
 * ready event only after the daemon's done event of its previous use has
 * completed (zpp_cuda.c), which implies the gate saw the earlier record. A
 * client that breaks the rule only releases its own call early.
 *
 * Cost. call_wait raises the flag itself, and makes the stream wait for
 * nothing, when the event has already completed. Otherwise the thread polls its armed events
 * back to back for GATE_SPIN_NS after the last progress (an event
 * completes microseconds after the client's work, so the collective starts
 * about as soon as with a GPU-side wait), then every GATE_NAP_NS; with
 * nothing armed it polls for GATE_LINGER_NS more, then sleeps on a
 * condition variable. The price is a CPU core of the node while calls are
 * in flight (a cuEventQuery is about a microsecond).
 *
 * Flags live in pages that are never freed while the daemon runs (freeing
 * pinned memory synchronises the device); a session's block goes back to
 * the free list only once every job stream that may still wait on it has
 * passed (cu_grave, by the caller).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "backend_cuda_int.h"
#include "gate_flag.h"
#include "log.h"
#include "zpp.h"

#define GATE_SPIN_NS 5000000ull /* poll back to back this long after progress */
#define GATE_SPIN_ENV "ZPPD_GATE_SPIN_US" /* measuring switch: another spin (docs/cuda.md) */
#define GATE_NAP_NS 20000l      /* then nap this long between passes */
#define GATE_LINGER_NS 2000000ull /* poll for new entries this long before sleeping */
#define GATE_BLOCKS_PER_PAGE 64 /* blocks of CU_GATE_FLAGS flags per page */

struct gate_entry {
    CUcontext ctx;
    CUevent ev;           /* NULL: src instead */
    const uint32_t *src;  /* a client's ready flag (done flags' sessions) */
    uint32_t want;        /* what src must reach */
    uint32_t *flag;
    uint32_t v;
    const void *owner;
};

struct gate_page {
    struct gate_page *next;
    uint32_t *host; /* GATE_BLOCKS_PER_PAGE * CU_GATE_FLAGS flags */
};

struct cu_gate {
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    struct gate_entry *armed;
    int narmed, cap;
    uint64_t errors;
    /* flag blocks: pages, and a free list of block pointers */
    struct gate_page *pages;
    uint32_t **free_blocks;
    int nfree, free_cap, nblocks;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *gate_main(void *arg)
{
    struct cu_gate *g = arg;
    uint64_t progress = mono_ns();
    const uint64_t spin_ns = be_env_uint(GATE_SPIN_ENV, GATE_SPIN_NS / 1000u, 1000000u) * 1000u;
    CUcontext cur = NULL;
    prctl(PR_SET_TIMERSLACK, 1000ul); /* naps of microseconds, not 50 us */
    pthread_mutex_lock(&g->mu);
    for (;;) {
        /* Linger a little before sleeping: calls come in bursts, and a
         * wake-up from the condition variable costs tens of microseconds. */
        while (!g->stop && g->narmed == 0 && mono_ns() - progress < GATE_LINGER_NS) {
            pthread_mutex_unlock(&g->mu);
            sched_yield();
            pthread_mutex_lock(&g->mu);
        }
        while (!g->stop && g->narmed == 0) {
            pthread_cond_wait(&g->cv, &g->mu);
            progress = mono_ns();
        }
        if (g->stop)
            break;
        int fired = 0;
        for (int i = 0; i < g->narmed;) {
            struct gate_entry *e = &g->armed[i];
            CUresult r;
            if (!e->ev) { /* a flag in host memory: no driver call */
                r = gate_flag_reached(__atomic_load_n(e->src, __ATOMIC_ACQUIRE), e->want)
                        ? CUDA_SUCCESS
                        : CUDA_ERROR_NOT_READY;
            } else {
                if (cur != e->ctx && ZCU(cuCtxSetCurrent)(e->ctx) == CUDA_SUCCESS)
                    cur = e->ctx;
                r = ZCU(cuEventQuery)(e->ev);
            }
            if (r == CUDA_ERROR_NOT_READY) {
                i++;
                continue;
            }
            if (r == CUDA_SUCCESS) {
                gate_flag_raise(e->flag, e->v); /* an earlier arm may fire later */
            } else {
                /* Not raised: the session's close raises it. */
                if (g->errors++ == 0)
                    ZLOG_W("cuda", "cuEventQuery failed on a client's ready event", "error=%d",
                           (int)r);
            }
            g->armed[i] = g->armed[--g->narmed];
            fired = 1;
        }
        if (fired)
            progress = mono_ns();
        if (g->narmed && mono_ns() - progress >= spin_ns) {
            struct timespec nap = {0, GATE_NAP_NS};
            pthread_mutex_unlock(&g->mu);
            nanosleep(&nap, NULL);
            pthread_mutex_lock(&g->mu);
        } else if (g->narmed) {
            /* let call_wait / events_close take the lock between passes */
            pthread_mutex_unlock(&g->mu);
            sched_yield();
            pthread_mutex_lock(&g->mu);
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int cu_gate_start(struct cu_backend *b, char *why, size_t why_len)
{
    struct cu_gate *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    int e = pthread_create(&g->thread, NULL, gate_main, g);
    if (e) {
        snprintf(why, why_len, "cannot start the gate thread: %s", strerror(e));
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
        return ZPP_EBACKEND;
    }
    pthread_setname_np(g->thread, "zppd-gate");
    g->started = 1;
    b->gate = g;
    return 0;
}

void cu_gate_stop(struct cu_backend *b)
{
    struct cu_gate *g = b->gate;
    if (!g)
        return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_signal(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    while (g->pages) {
        struct gate_page *p = g->pages;
        g->pages = p->next;
        cudaFreeHost(p->host); /* at exit only */
        free(p);
    }
    free(g->armed);
    free(g->free_blocks);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
    b->gate = NULL;
}

int cu_gate_flags_get(struct cu_backend *b, uint32_t **host, CUdeviceptr *dev)
{
    struct cu_gate *g = b->gate;
    if (!g)
        return ZPP_EBACKEND;
    pthread_mutex_lock(&g->mu);
    if (g->nfree == 0) {
        struct gate_page *p = calloc(1, sizeof *p);
        size_t bytes = (size_t)GATE_BLOCKS_PER_PAGE * CU_GATE_FLAGS * sizeof(uint32_t);
        int need = g->nblocks + GATE_BLOCKS_PER_PAGE;
        if (p && g->free_cap < need) {
            uint32_t **fb = realloc(g->free_blocks, sizeof *fb * (size_t)need);
            if (fb) {
                g->free_blocks = fb;
                g->free_cap = need;
            }
        }
        if (!p || g->free_cap < need ||
            cudaHostAlloc((void **)&p->host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) !=
                cudaSuccess) {
            pthread_mutex_unlock(&g->mu);
            free(p);
            return ZPP_ENOMEM;
        }
        memset(p->host, 0, bytes);
        p->next = g->pages;
        g->pages = p;
        g->nblocks = need;
        for (int i = 0; i < GATE_BLOCKS_PER_PAGE; i++)
            g->free_blocks[g->nfree++] = p->host + (size_t)i * CU_GATE_FLAGS;
    }
    uint32_t *blk = g->free_blocks[--g->nfree];
    pthread_mutex_unlock(&g->mu);
    void *d = NULL;
    if (cudaHostGetDevicePointer(&d, blk, 0) != cudaSuccess) {
        cu_gate_flags_put(b, blk);
        return ZPP_EBACKEND;
    }
    for (int i = 0; i < CU_GATE_FLAGS; i++)
        __atomic_store_n(&blk[i], 0u, __ATOMIC_RELEASE);
    *host = blk;
    *dev = (CUdeviceptr)(uintptr_t)d;
    return 0;
}

void cu_gate_flags_put(struct cu_backend *b, uint32_t *host)
{
    struct cu_gate *g = b->gate;
    if (!g || !host)
        return;
    pthread_mutex_lock(&g->mu);
    if (g->nfree < g->free_cap)
        g->free_blocks[g->nfree++] = host; /* free_cap >= nblocks */
    pthread_mutex_unlock(&g->mu);
}

/* Arms entry e; 0 or ZPP_ENOMEM / ZPP_EBACKEND. */
static int gate_push(struct cu_backend *b, struct gate_entry e)
{
    struct cu_gate *g = b->gate;
    if (!g)
        return ZPP_EBACKEND;
    pthread_mutex_lock(&g->mu);
    if (g->narmed == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        struct gate_entry *a = realloc(g->armed, sizeof *a * (size_t)cap);
        if (!a) {
            pthread_mutex_unlock(&g->mu);
            return ZPP_ENOMEM;
        }
        g->armed = a;
        g->cap = cap;
    }
    g->armed[g->narmed++] = e;
    if (g->narmed == 1)
        pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

int cu_gate_arm(struct cu_backend *b, CUcontext ctx, CUevent ev, uint32_t *flag, uint32_t v,
                const void *owner)
{
    return gate_push(b, (struct gate_entry){ctx, ev, NULL, 0, flag, v, owner});
}

int cu_gate_arm_flag(struct cu_backend *b, const uint32_t *src, uint32_t want, uint32_t *flag,
                     uint32_t v, const void *owner)
{
    return gate_push(b, (struct gate_entry){NULL, NULL, src, want, flag, v, owner});
}

void cu_gate_drop(struct cu_backend *b, const void *owner)
{
    struct cu_gate *g = b->gate;
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->narmed;)
        if (g->armed[i].owner == owner)
            g->armed[i] = g->armed[--g->narmed];
        else
            i++;
    pthread_mutex_unlock(&g->mu);
}
