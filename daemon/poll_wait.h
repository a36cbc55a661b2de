/*
 * poll_wait.h — a bounded wait by polling, for waits that must never block
 * without a bound: cu_to_host waits so for the work queued on a stream
 * before it copies a publish's bytes back (a stream stalled behind a stuck
 * client or a dead node would otherwise hold the call for good). `query`
 * is asked until it says done or failed, with a nap of nap_us between
 * asks, for at most max_ms. Header-only and free of CUDA, so that the unit
 * tests run the loop itself (tests/unit/test_poll_wait.c).
 */
#ifndef ZPPD_POLL_WAIT_H
#define ZPPD_POLL_WAIT_H

#include <stdint.h>
#include <time.h>

enum poll_state {
    POLL_DONE = 0,    /* the awaited thing happened */
    POLL_NOT_YET = 1, /* query: ask again; poll_wait: max_ms passed first */
    POLL_FAILED = 2   /* query failed (it keeps its own error in arg) */
};

static inline uint64_t poll_wait_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* POLL_DONE, POLL_FAILED, or POLL_NOT_YET once max_ms have passed with
 * every answer "not yet". query is asked at least once. */
static inline int poll_wait(int (*query)(void *arg), void *arg, uint64_t max_ms, long nap_us)
{
    const uint64_t t0 = poll_wait_now_ms();
    for (;;) {
        int st = query(arg);
        if (st != POLL_NOT_YET)
            return st == POLL_DONE ? POLL_DONE : POLL_FAILED;
        if (poll_wait_now_ms() - t0 > max_ms)
            return POLL_NOT_YET;
        struct timespec nap = {nap_us / 1000000, (nap_us % 1000000) * 1000};
        nanosleep(&nap, NULL);
    }
}

#endif
