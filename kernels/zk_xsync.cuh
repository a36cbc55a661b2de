/*
 * zk_xsync.cuh — the barrier of zpp_kernels_cuda.h's zk_xsync, on the
 * device: the kernels of the members of a group of GPUs fence each other
 * through flags in the members' memory instead of events between streams.
 *
 * A member's flag block: words [0, ZK_XSYNC_MAX) "member m has arrived at
 * gen", [ZK_XSYNC_MAX, 2 ZK_XSYNC_MAX) "member m is done with gen", then a
 * counter of this kernel's CTAs that have finished, then the kernel's one
 * look at the abort word (XS_CLAIM, XS_SEEN: xs_aborted). Member m writes word m
 * of every block (its own included); a waiter polls its own block. The
 * flags need no fences around them: "arrived" stands for the work of the
 * member's stream before its kernel, complete and visible once the kernel
 * runs; "done" stands for the member's reads of the others' memory, which
 * have returned their values by the time its last CTA marks it (the CTA
 * barrier and the counter come after every thread used what it loaded).
 * Flags compare cyclically (int32 difference), so gen may wrap.
 *
 * Every CTA announces the arrival (the same value, written by whichever CTA
 * runs first), so no CTA depends on another CTA of its own kernel being
 * resident. Only the last CTA to finish (a counter) announces "done" and
 * waits for the others' "done": the kernel, and so the stream, ends once
 * no member reads this member's memory any more.
 *
 * Waits poll the abort word (host memory) every XS_POLL_ABORT rounds and
 * the global timer for the timeout; a wait that gives up sets *err. The
 * kernel goes on (its output is then undefined): it must end, whatever a
 * peer does, so that its stream and the GPU stay usable. Internal to
 * kernels/.
 */
#ifndef ZK_XSYNC_CUH
#define ZK_XSYNC_CUH

#include <stdint.h>

#include "zpp_kernels_cuda.h"

#define XS_ARRIVED 0
#define XS_DONE ZK_XSYNC_MAX
#define XS_COUNT (2 * ZK_XSYNC_MAX)
#define XS_CLAIM (2 * ZK_XSYNC_MAX + 1) /* gen whose look at the abort word a CTA took on */
#define XS_SEEN (2 * ZK_XSYNC_MAX + 2)  /* what that look saw: 2 gen, + 1 when aborted */
#define XS_POLL_ABORT 256u /* rounds of the flag loop between looks at the abort word */
#define XS_GRID_CAP 128u   /* CTAs of a fenced kernel: members sharing a GPU stay resident */

namespace zk
{

static __device__ __forceinline__ uint32_t xs_load(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

static __device__ __forceinline__ void xs_store(uint32_t *p, uint32_t v)
{
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

static __device__ __forceinline__ uint64_t xs_clock(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Waits (one thread) until words [base, base + n) of our block reach gen.
 * false when it gave up (abort or timeout). */
static __device__ __forceinline__ bool xs_wait(const zk_xsync &xs, int base)
{
    const uint32_t *f = xs.flags[xs.me] + base;
    uint64_t t0 = 0;
    unsigned round = 0;
    for (int m = 0; m < xs.n; m++)
        while ((int32_t)(xs_load(f + m) - xs.gen) < 0) {
            if (++round % XS_POLL_ABORT)
                continue;
            if (xs.abort && *xs.abort)
                return false;
            uint64_t t = xs_clock();
            if (!t0)
                t0 = t;
            else if (t - t0 > xs.timeout_ns) {
                if (xs.err)
                    *xs.err = 1u;
                return false;
            }
        }
    return true;
}

/* Marks word `base + me` of every member's block with gen. */
static __device__ __forceinline__ void xs_mark(const zk_xsync &xs, int base)
{
    for (int m = 0; m < xs.n; m++)
        xs_store(xs.flags[m] + base + xs.me, xs.gen);
}

/* Whether the job is aborted, by one look at the abort word per launch
 * (thread 0 of a CTA past the arrival wait). The first CTA to get here
 * reads the host word and leaves what it saw in our block; the others take
 * it from there, waiting for a CTA that is running and needs nothing else.
 * Every launch with a CTA past its wait writes XS_SEEN, so the word holds
 * the previous launch's answer (2 gen - 2 or - 1), never this one's, until
 * it is written. A read of host memory per CTA cost every fenced kernel
 * about 0.9 us per CTA on two H200s, the reads one after the other: 58 us
 * on a 1 MiB all-gather of 64 CTAs, 127 us on a 1 MiB qwZ of 128
 * (session 34, docs/cuda.md). */
static __device__ __forceinline__ bool xs_aborted(const zk_xsync &xs)
{
    if (!xs.abort)
        return false;
    uint32_t *b = xs.flags[xs.me];
    const uint32_t clear = 2u * xs.gen;
    if (atomicExch(b + XS_CLAIM, xs.gen) != xs.gen) {
        const bool stop = *xs.abort != 0;
        xs_store(b + XS_SEEN, clear + (stop ? 1u : 0u));
        return stop;
    }
    for (;;) {
        const uint32_t v = xs_load(b + XS_SEEN);
        if (v == clear || v == clear + 1u)
            return v != clear;
    }
}

/* At a kernel's start, every CTA: after it no thread of the CTA reads a
 * member's memory before that member's stream has reached its kernel.
 * false (in every thread) when the kernel must read no member's memory: the
 * wait gave up, or the job is aborted (then a member's kernel may have given
 * up and ended, and its memory may be gone, even if it had arrived; before
 * session 22 the kernel read on, an audit found). */
static __device__ __forceinline__ bool xs_enter(const zk_xsync &xs)
{
    if (!xs.n)
        return true;
    __shared__ int ok;
    if (threadIdx.x == 0) {
        xs_mark(xs, XS_ARRIVED);
        bool arrived = xs_wait(xs, XS_ARRIVED);
        __threadfence(); /* our reads of the members' memory come after the flags' */
        ok = arrived && !xs_aborted(xs);
    }
    __syncthreads();
    return ok != 0;
}

/* At a kernel's end, every CTA (every thread reaches it): the last CTA
 * waits until every member is done reading. true in thread 0 of the last
 * CTA, which comes after everything the kernel's other CTAs did before
 * their xs_leave. */
static __device__ __forceinline__ bool xs_leave(const zk_xsync &xs)
{
    if (!xs.n)
        return false;
    __syncthreads(); /* this CTA's loads have all returned */
    if (threadIdx.x != 0)
        return false;
    uint32_t *count = xs.flags[xs.me] + XS_COUNT;
    __threadfence();
    if (atomicAdd(count, 1u) != gridDim.x - 1)
        return false;
    *count = 0u; /* the next xsync kernel on this block runs after this one */
    xs_mark(xs, XS_DONE);
    xs_wait(xs, XS_DONE);
    return true;
}

/* The grid of a kernel that wants `ctas` CTAs (at least 1), at most `cap`
 * and, when it is fenced, at most XS_GRID_CAP: its loops take the rest. */
static inline unsigned xs_grid(uint64_t ctas, unsigned cap, bool fenced)
{
    if (fenced && cap > XS_GRID_CAP)
        cap = XS_GRID_CAP;
    return ctas < 1 ? 1u : ctas > cap ? cap : (unsigned)ctas;
}

/* The host side's checks of a zk_xsync (NULL: none): 0 or
 * cudaErrorInvalidValue. */
static inline int xs_ok(const zk_xsync *xs)
{
    if (!xs)
        return 0;
    if (xs->n < 1 || xs->n > ZK_XSYNC_MAX || xs->me < 0 || xs->me >= xs->n)
        return (int)cudaErrorInvalidValue;
    for (int m = 0; m < xs->n; m++)
        if (!xs->flags[m])
            return (int)cudaErrorInvalidValue;
    return 0;
}

} // namespace zk

#endif
