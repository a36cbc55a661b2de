/*
 * uv_wait.h — the peer tests' loop helper: run a libuv loop until a flag
 * is set or a time passes, with a 5 ms tick so that the loop wakes up to
 * look at the flag (the peer service's completions arrive through
 * uv_async, which needs no tick; the tick bounds the wait).
 */
#ifndef ZPP_TESTS_UV_WAIT_H
#define ZPP_TESTS_UV_WAIT_H

#include <stdint.h>
#include <uv.h>

static void uv_wait_tick(uv_timer_t *t)
{
    (void)t;
}

/* Runs loop until *flag is nonzero (flag NULL: never) or `ms` pass;
 * returns the ms spent. */
static inline uint64_t uv_wait_until(uv_loop_t *loop, const int *flag, uint64_t ms)
{
    uv_timer_t tick;
    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, uv_wait_tick, 5, 5);
    uv_update_time(loop);
    uint64_t t0 = uv_now(loop);
    while ((!flag || !*flag) && uv_now(loop) - t0 < ms)
        uv_run(loop, UV_RUN_ONCE);
    uint64_t spent = uv_now(loop) - t0;
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return spent;
}

#endif
