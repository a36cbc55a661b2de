/*
 * gate_flag.h — the arithmetic of the host gate's flags (backend_cuda_gate.c),
 * kept free of CUDA so that it is unit-tested on every machine.
 *
 * A flag is a 32-bit counter that only moves forward, cyclically: a job
 * stream waits with cuStreamWaitValue32(CU_STREAM_WAIT_VALUE_GEQ), which
 * passes once (int32_t)(*flag - v) >= 0, so the counters wrap safely as
 * long as no wait lags 2^31 raises behind. Raises come from the gate thread
 * (an event completed) and from the loop (call_wait found it completed, or
 * the session closed), in any order: a raise never moves a flag back.
 */
#ifndef ZPPD_GATE_FLAG_H
#define ZPPD_GATE_FLAG_H

#include <stdint.h>

/* What cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ tests. */
static inline int gate_flag_reached(uint32_t cur, uint32_t v)
{
    return (int32_t)(cur - v) >= 0;
}

/* Raises *flag to v unless it is already there or beyond (cyclic). */
static inline void gate_flag_raise(uint32_t *flag, uint32_t v)
{
    uint32_t cur = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
    while (!gate_flag_reached(cur, v) &&
           !__atomic_compare_exchange_n(flag, &cur, v, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
        ;
}

#endif
