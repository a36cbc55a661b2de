/*
 * backend_cuda_launch.c — a launcher thread per GPU, so that the host
 * work of a small fenced call (docs/cuda.md, "Fenced kernels") runs on
 * every GPU of the call at once.
 *
 * Why. A small one-node call is one fenced kernel per GPU plus the record
 * of its done event, and each of those driver calls takes microseconds of
 * host time (more under MPS). On the loop thread the GPUs' launches come
 * one after the other, so the last GPU's kernel starts, and the reply
 * leaves, a few microseconds per GPU later than they need to; and the
 * first GPU's kernel waits for the last one's at its fence.
 *
 * How. cu_run_tasks hands each task but the first to the launcher thread
 * of its GPU, runs the first itself, and returns once every task has
 * returned; the loop thread never enqueues on a stream while a launcher
 * does. A task is the launch function of one GPU's part (the caller's),
 * run with that GPU current. A launcher polls for work back to back for
 * LAUNCH_LINGER_NS after its last task (calls come in bursts, and a
 * wake-up from a condition variable costs tens of microseconds), then
 * sleeps; the price is a CPU core per GPU while small calls are in flight,
 * like the host gate's thread. ZPPD_LAUNCHERS=0 runs every task on the loop
 * thread instead.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "backend_cuda_int.h"
#include "log.h"
#include "zpp.h"

#define LAUNCH_LINGER_NS 2000000ull /* poll for work this long before sleeping */

struct cu_launcher {
    pthread_t thread;
    int started;
    int device;
    struct cu_backend *b;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int posted;   /* 1: task is the thread's to run; 0 once it has returned */
    atomic_int sleeping; /* the thread waits on cv */
    atomic_int stop;
    struct cu_task *task;
};

struct cu_launchers {
    int n;
    struct cu_launcher *l;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    sched_yield();
#endif
}

static void *launch_main(void *arg)
{
    struct cu_launcher *l = arg;
    char name[16];
    snprintf(name, sizeof name, "zppd-launch%d", l->device);
    prctl(PR_SET_NAME, name);
    cu_use(l->b, l->device);
    uint64_t last = mono_ns();
    for (;;) {
        if (atomic_load(&l->posted)) {
            struct cu_task *t = l->task;
            t->rc = t->fn(t);
            atomic_store(&l->posted, 0);
            last = mono_ns();
            continue;
        }
        if (atomic_load(&l->stop))
            break;
        if (mono_ns() - last < LAUNCH_LINGER_NS) {
            spin_pause();
            continue;
        }
        /* posted is stored before sleeping is read by the poster, and
         * sleeping before posted here (sequentially consistent): one of
         * the two sees the other, so no post is missed. */
        pthread_mutex_lock(&l->mu);
        atomic_store(&l->sleeping, 1);
        while (!atomic_load(&l->posted) && !atomic_load(&l->stop))
            pthread_cond_wait(&l->cv, &l->mu);
        atomic_store(&l->sleeping, 0);
        pthread_mutex_unlock(&l->mu);
        last = mono_ns();
    }
    return NULL;
}

int cu_launchers_start(struct cu_backend *b)
{
    if (!be_env_switch("ZPPD_LAUNCHERS", 1) || b->ndev < 2)
        return 0;
    struct cu_launchers *ls = calloc(1, sizeof *ls);
    if (!ls || !(ls->l = calloc((size_t)b->ndev, sizeof *ls->l))) {
        free(ls);
        return ZPP_ENOMEM;
    }
    ls->n = b->ndev;
    b->launch = ls;
    for (int i = 0; i < b->ndev; i++) {
        struct cu_launcher *l = &ls->l[i];
        l->device = i;
        l->b = b;
        pthread_mutex_init(&l->mu, NULL);
        pthread_cond_init(&l->cv, NULL);
        if (pthread_create(&l->thread, NULL, launch_main, l) != 0) {
            ZLOG_W("cuda", "no launcher thread: that GPU's launches run on the loop thread",
                   "gpu=%d", i);
            continue;
        }
        l->started = 1;
    }
    return 0;
}

void cu_launchers_stop(struct cu_backend *b)
{
    struct cu_launchers *ls = b->launch;
    if (!ls)
        return;
    for (int i = 0; i < ls->n; i++) {
        struct cu_launcher *l = &ls->l[i];
        if (!l->started)
            continue;
        pthread_mutex_lock(&l->mu);
        atomic_store(&l->stop, 1);
        pthread_cond_signal(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; i < ls->n; i++) {
        pthread_mutex_destroy(&ls->l[i].mu);
        pthread_cond_destroy(&ls->l[i].cv);
    }
    free(ls->l);
    free(ls);
    b->launch = NULL;
}

/* Runs task t on the caller's thread, its GPU current. */
static void run_here(struct cu_backend *b, struct cu_task *t)
{
    if (cu_use(b, t->device)) {
        t->rc = (int)cudaErrorInvalidDevice;
        return;
    }
    t->rc = t->fn(t);
}

void cu_run_tasks(struct cu_backend *b, struct cu_task *const *t, int n)
{
    struct cu_launchers *ls = b->launch;
    struct cu_launcher *busy[CU_MAX_TASKS] = {0};
    for (int i = 1; ls && i < n && i < CU_MAX_TASKS; i++) {
        int d = t[i]->device;
        struct cu_launcher *l = d >= 0 && d < ls->n ? &ls->l[d] : NULL;
        int taken = 0;
        for (int k = 1; k < i && l; k++)
            taken |= busy[k] == l;
        if (!l || !l->started || taken)
            continue; /* run here, below */
        l->task = t[i];
        atomic_store(&l->posted, 1);
        if (atomic_load(&l->sleeping)) {
            pthread_mutex_lock(&l->mu);
            pthread_cond_signal(&l->cv);
            pthread_mutex_unlock(&l->mu);
        }
        busy[i] = l;
    }
    for (int i = 0; i < n; i++)
        if (i >= CU_MAX_TASKS || !busy[i])
            run_here(b, t[i]);
    for (int i = 1; i < n && i < CU_MAX_TASKS; i++)
        if (busy[i])
            while (atomic_load(&busy[i]->posted))
                spin_pause();
}
