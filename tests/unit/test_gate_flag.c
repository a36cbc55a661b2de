/*
 * test_gate_flag.c — the host gate's flag arithmetic (daemon/gate_flag.h):
 * the GEQ test agrees with CU_STREAM_WAIT_VALUE_GEQ's definition across the
 * wrap at 2^32, a raise never moves a flag back, and raises from several
 * threads in any order leave the flag at the largest value while an
 * observer never sees it go backwards.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/gate_flag.h"
#include "test.h"

static void test_reached(void)
{
    ASSERT(gate_flag_reached(5, 5));
    ASSERT(gate_flag_reached(6, 5));
    ASSERT(!gate_flag_reached(4, 5));
    /* across the wrap: 3 is 4 raises past 0xFFFFFFFF */
    ASSERT(gate_flag_reached(3, 0xFFFFFFFFu));
    ASSERT(!gate_flag_reached(0xFFFFFFFFu, 3));
    ASSERT(gate_flag_reached(0, 0xFFFFFFF0u));
    /* half the ring apart is the edge */
    ASSERT(gate_flag_reached(0x7FFFFFFFu, 0));
    ASSERT(!gate_flag_reached(0x80000000u, 0));
}

static void test_raise_order(void)
{
    uint32_t f = 0;
    gate_flag_raise(&f, 2);
    ASSERT_EQ(f, 2);
    gate_flag_raise(&f, 1); /* an older arm firing late */
    ASSERT_EQ(f, 2);
    gate_flag_raise(&f, 2);
    ASSERT_EQ(f, 2);
    gate_flag_raise(&f, 7);
    ASSERT_EQ(f, 7);
    f = 0xFFFFFFFEu;
    gate_flag_raise(&f, 1); /* past the wrap: forward */
    ASSERT_EQ(f, 1);
    gate_flag_raise(&f, 0xFFFFFFFFu); /* behind now: ignored */
    ASSERT_EQ(f, 1);
}

#define RAISERS 4
#define PER 200000u

static uint32_t g_flag;
static int g_stop;
static uint64_t g_backwards;

static void *raiser(void *arg)
{
    uint32_t base = (uint32_t)(uintptr_t)arg;
    /* each thread raises to every RAISERS-th value, so they interleave */
    for (uint32_t i = 0; i < PER; i++)
        gate_flag_raise(&g_flag, base + 1 + i * RAISERS);
    return NULL;
}

static void *observer(void *arg)
{
    (void)arg;
    uint32_t last = __atomic_load_n(&g_flag, __ATOMIC_ACQUIRE);
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        uint32_t cur = __atomic_load_n(&g_flag, __ATOMIC_ACQUIRE);
        if (!gate_flag_reached(cur, last))
            g_backwards++;
        last = cur;
    }
    return NULL;
}

static void test_concurrent(uint32_t start)
{
    pthread_t r[RAISERS], o;
    g_flag = start;
    __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
    g_backwards = 0;
    ASSERT_EQ(pthread_create(&o, NULL, observer, NULL), 0);
    for (int t = 0; t < RAISERS; t++)
        ASSERT_EQ(pthread_create(&r[t], NULL, raiser, (void *)(uintptr_t)(start + (uint32_t)t)), 0);
    for (int t = 0; t < RAISERS; t++)
        pthread_join(r[t], NULL);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(o, NULL);
    /* the largest value any thread asked for */
    ASSERT_EQ(g_flag, start + RAISERS + (PER - 1) * RAISERS);
    ASSERT_EQ(g_backwards, 0);
}

int main(void)
{
    test_reached();
    test_raise_order();
    test_concurrent(0);
    test_concurrent(0xFFFFFF00u); /* the run crosses the wrap */
    printf("test_gate_flag: ok\n");
    return 0;
}
