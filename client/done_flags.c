/*
 * done_flags.c — done-flag blocks and their watcher thread (done_flags.h).
 *
 * One watcher per process, started with the first watched block: it sleeps
 * in poll() on a wake-up pipe and on the read end of every watched block's
 * session pipe, and costs nothing while calls run. Everything it shares with
 * the connections' threads is under W.mu, except the flags and the values
 * (atomics: see zpp__dflags_after_wait for the order that makes a hang-up
 * and a wait never miss each other).
 */
#include "done_flags.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zpp.h"

static struct {
    pthread_mutex_t mu;
    pid_t pid;         /* the process the state below belongs to (0: none yet) */
    int running;       /* the watcher thread was started in this process */
    int wake[2];       /* a byte on wake[1] makes the watcher rebuild its poll set */
    zpp_dflags *blocks; /* every block of this process */
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}};

/* After a fork the child has the parent's blocks and pipes but no watcher:
 * it starts over (the parent's blocks stay with the parent). W.mu held. */
static void w_own(void)
{
    pid_t me = getpid();
    if (W.pid == me)
        return;
    W.pid = me;
    W.running = 0;
    W.wake[0] = W.wake[1] = -1; /* the parent's; the child's copies are left alone */
    W.blocks = NULL;
}

static int cyc_ge(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) >= 0;
}

void zpp__dflags_raise(zpp_dflags *b, int slot, uint32_t v)
{
    uint32_t cur = __atomic_load_n(&b->flags[slot], __ATOMIC_ACQUIRE);
    while (!cyc_ge(cur, v) &&
           !__atomic_compare_exchange_n(&b->flags[slot], &cur, v, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_ACQUIRE))
        ;
}

int zpp__dflags_reached(const zpp_dflags *b, int slot, uint32_t v)
{
    return cyc_ge(__atomic_load_n(&b->flags[slot], __ATOMIC_ACQUIRE), v);
}

/* The session's pipe hung up: nothing writes b's flags now; every promised
 * value is raised, after the outputs of the calls that will never run
 * (their flag short of it) were filled. hup is set first
 * (zpp__dflags_after_wait). W.mu held. */
static void hung_up(zpp_dflags *b)
{
    atomic_store(&b->hup, 1);
    uint32_t v[ZPP_DFLAGS_N];
    uint64_t at[ZPP_DFLAGS_N], len[ZPP_DFLAGS_N];
    int n = 0;
    for (int i = 0; i < ZPP_DFLAGS_N; i++) {
        /* a note is made before its arm: seeing the value, we see the note */
        v[i] = atomic_load(&b->want[i]);
        if (zpp__dflags_reached(b, i, v[i]))
            continue;
        uint64_t l = atomic_exchange(&b->lost_len[i], 0);
        if (l) {
            at[n] = atomic_load(&b->lost_at[i]);
            len[n++] = l;
        }
    }
    if (n && b->on_lost)
        b->on_lost(b->lost_ctx, at, len, n);
    for (int i = 0; i < ZPP_DFLAGS_N; i++)
        zpp__dflags_raise(b, i, v[i]);
    close(b->rfd);
    b->rfd = -1;
}

static void *watcher_main(void *arg)
{
    (void)arg;
    struct pollfd *pf = NULL;
    zpp_dflags **who = NULL;
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&W.mu);
        size_t n = 1;
        for (zpp_dflags *b = W.blocks; b; b = b->next_blk)
            n += b->rfd >= 0;
        if (n > cap) {
            struct pollfd *npf = realloc(pf, n * sizeof *pf);
            zpp_dflags **nwho = npf ? realloc(who, n * sizeof *who) : NULL;
            if (npf)
                pf = npf;
            if (nwho)
                who = nwho;
            if (!npf || !nwho) { /* no memory: try again shortly */
                pthread_mutex_unlock(&W.mu);
                usleep(10000);
                continue;
            }
            cap = n;
        }
        pf[0] = (struct pollfd){.fd = W.wake[0], .events = POLLIN};
        n = 1;
        for (zpp_dflags *b = W.blocks; b; b = b->next_blk)
            if (b->rfd >= 0) {
                pf[n] = (struct pollfd){.fd = b->rfd, .events = POLLIN};
                who[n++] = b;
            }
        pthread_mutex_unlock(&W.mu);

        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno != EINTR)
                usleep(10000);
            continue;
        }
        pthread_mutex_lock(&W.mu);
        if (pf[0].revents) {
            char buf[64];
            while (read(W.wake[0], buf, sizeof buf) > 0)
                ;
        }
        /* A block's rfd changes only under W.mu, and only here or in
         * zpp__dflags_watch (which wakes us first): who[i] still owns pf[i]
         * when its rfd is unchanged. */
        for (size_t i = 1; i < n; i++) {
            zpp_dflags *b = who[i];
            if (!pf[i].revents || b->rfd != pf[i].fd)
                continue;
            char buf[64];
            ssize_t r = (pf[i].revents & POLLIN) ? read(b->rfd, buf, sizeof buf) : 0;
            if (r > 0 || (r < 0 && (errno == EINTR || errno == EAGAIN)))
                continue; /* zppd writes nothing on it; whatever came is dropped */
            hung_up(b);
        }
        pthread_mutex_unlock(&W.mu);
    }
    return NULL;
}

/* Starts the watcher if this process has none. W.mu held. 0 or ZPP_EIO. */
static int w_start(void)
{
    w_own();
    if (W.running)
        return 0;
    if (W.wake[0] < 0 && pipe2(W.wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return ZPP_EIO;
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 64 * 1024);
    /* the process's signals go to its own threads, never to ours */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&t, &a, watcher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (rc != 0)
        return ZPP_EIO;
    W.running = 1;
    return 0;
}

/* Whether every ready write promised on b has landed (or none was made). */
static int ready_settled(const zpp_dflags *b)
{
    if (!atomic_load(&b->ready_used))
        return 1;
    for (int i = 0; i < ZPP_DFLAGS_N; i++)
        if (!cyc_ge(__atomic_load_n(&b->flags[ZPP_DFLAGS_N + i], __ATOMIC_ACQUIRE),
                    atomic_load(&b->want[i])))
            return 0;
    return 1;
}

int zpp__dflags_get(zpp_dflags **out)
{
    pthread_mutex_lock(&W.mu);
    w_own();
    for (zpp_dflags *b = W.blocks; b; b = b->next_blk)
        if (!b->in_use && b->rfd < 0 && ready_settled(b)) {
            b->in_use = 1;
            atomic_store(&b->hup, 0);
            atomic_store(&b->ready_used, 0);
            pthread_mutex_unlock(&W.mu);
            *out = b;
            return 0;
        }
    pthread_mutex_unlock(&W.mu);

    zpp_dflags *b = calloc(1, sizeof *b);
    if (!b)
        return ZPP_ENOMEM;
    b->rfd = -1;
    b->memfd = memfd_create("zpp-done-flags", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *p = MAP_FAILED;
    if (b->memfd < 0 || ftruncate(b->memfd, ZPP_DFLAGS_BYTES) != 0 ||
        fcntl(b->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        (p = mmap(NULL, ZPP_DFLAGS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0)) ==
            MAP_FAILED) {
        if (b->memfd >= 0)
            close(b->memfd);
        free(b);
        return ZPP_EIO;
    }
    b->flags = p;
    b->in_use = 1;
    pthread_mutex_lock(&W.mu);
    w_own();
    b->next_blk = W.blocks;
    W.blocks = b;
    pthread_mutex_unlock(&W.mu);
    *out = b;
    return 0;
}

int zpp__dflags_pipe(int *rfd, int *wfd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return ZPP_EIO;
    /* the read end never blocks the watcher; the write end is zppd's */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    *rfd = p[0];
    *wfd = p[1];
    return 0;
}

int zpp__dflags_watch(zpp_dflags *b, int rfd)
{
    pthread_mutex_lock(&W.mu);
    int rc = w_start();
    if (rc) {
        atomic_store(&b->hup, 1); /* no watcher: each wait raises its own flag */
        pthread_mutex_unlock(&W.mu);
        close(rfd);
        return rc;
    }
    if (b->rfd >= 0)
        close(b->rfd); /* (a previous session's pipe not yet hung up: not watched now) */
    atomic_store(&b->hup, 0);
    b->rfd = rfd;
    char x = 1;
    ssize_t w = write(W.wake[1], &x, 1); /* full: a wake-up is pending anyway */
    (void)w;
    pthread_mutex_unlock(&W.mu);
    return 0;
}

uint32_t zpp__dflags_arm(zpp_dflags *b, int slot)
{
    uint32_t v = atomic_fetch_add(&b->next, 1u) + 1u;
    if (v == 0) /* 0 is every flag's first value: never promise it */
        v = atomic_fetch_add(&b->next, 1u) + 1u;
    atomic_store(&b->want[slot], v);
    return v;
}

void zpp__dflags_note(zpp_dflags *b, int slot, uint64_t at, uint64_t len)
{
    atomic_store(&b->lost_at[slot], at);
    atomic_store(&b->lost_len[slot], len);
}

/* Forgets every note meeting [lo, hi). W.mu held. */
static void forget(zpp_dflags *b, uint64_t lo, uint64_t hi)
{
    for (int i = 0; i < ZPP_DFLAGS_N; i++) {
        uint64_t at = atomic_load(&b->lost_at[i]), len = atomic_load(&b->lost_len[i]);
        if (len && at < hi && lo < at + len)
            atomic_store(&b->lost_len[i], 0);
    }
}

void zpp__dflags_forget(zpp_dflags *b, uint64_t lo, uint64_t hi)
{
    if (!b)
        return;
    pthread_mutex_lock(&W.mu);
    forget(b, lo, hi);
    pthread_mutex_unlock(&W.mu);
}

void zpp__dflags_after_wait(zpp_dflags *b, int slot, uint32_t v)
{
    /* The wait was enqueued after want[slot] = v (zpp__dflags_arm): either
     * the watcher's raise, which follows its hup = 1, sees v, or this load
     * sees hup = 1 (both sequentially consistent). */
    if (atomic_load(&b->hup))
        zpp__dflags_raise(b, slot, v);
}

void zpp__dflags_put(zpp_dflags *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&W.mu);
    forget(b, 0, UINT64_MAX);
    b->in_use = 0; /* pooled again once b->rfd < 0: its pipe hung up */
    pthread_mutex_unlock(&W.mu);
}

void zpp__dflags_counts(int *pooled, int *held)
{
    int p = 0, h = 0;
    pthread_mutex_lock(&W.mu);
    w_own();
    for (const zpp_dflags *b = W.blocks; b; b = b->next_blk)
        if (!b->in_use && b->rfd < 0 && ready_settled(b))
            p++;
        else
            h++;
    pthread_mutex_unlock(&W.mu);
    *pooled = p;
    *held = h;
}
