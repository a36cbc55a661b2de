/*
 * coll_internal.h — what coll.c and qgz.c share: the error macro that
 * records where a backend call failed, and the qgZ entry points. Not for
 * the job layer (it sees coll.h only).
 */
#ifndef ZPPD_COLL_INTERNAL_H
#define ZPPD_COLL_INTERNAL_H

#include <stdint.h>

#include "coll.h"

/* Records a failure of a backend call at file:line in x->msg (with the
 * backend's own message from x->call.err) and returns the code to
 * propagate: rc if it is a ZPP_E* code, else ZPP_EBACKEND. */
int coll_fail_at(struct coll_exec *x, int rc, const char *file, int line);

/* NCCL-style check: on a non-zero return, record file:line, set rc and go
 * to the function's `exit:` label (its one cleanup path). */
#define COLL_CHECK(x, call)                                                                        \
    do {                                                                                           \
        int check_rc_ = (call);                                                                    \
        if (check_rc_ != 0) {                                                                      \
            rc = coll_fail_at((x), check_rc_, __FILE__, __LINE__);                                 \
            goto exit;                                                                             \
        }                                                                                          \
    } while (0)

/* Lanes (backend.h): with a backend that has them, a call's steps can run
 * on two streams per slot. Marks 0 and 1 belong to the algorithm; 2 and 3
 * to coll_lane_follow. Without lanes (host backend) these do nothing and
 * coll_lanes() is 0. */
#define COLL_MARK_FOLLOW0 2
static inline int coll_lanes(const struct coll_exec *x)
{
    const struct be_ops *o = x->call.ops;
    return o->lane_use && o->lane_mark && o->lane_wait;
}
static inline int coll_lane_use(struct coll_exec *x, int s, int lane)
{
    return coll_lanes(x) ? x->call.ops->lane_use(&x->call, s, lane) : 0;
}
static inline int coll_lane_mark(struct coll_exec *x, int s, int lane, int m)
{
    return coll_lanes(x) ? x->call.ops->lane_mark(&x->call, s, lane, m) : 0;
}
static inline int coll_lane_wait(struct coll_exec *x, int s, int lane, int m)
{
    return coll_lanes(x) ? x->call.ops->lane_wait(&x->call, s, lane, m) : 0;
}
/* Later work on lane `to` waits for everything enqueued on `from` so far. */
static inline int coll_lane_follow(struct coll_exec *x, int s, int to, int from)
{
    int rc = coll_lane_mark(x, s, from, COLL_MARK_FOLLOW0 + from);
    return rc ? rc : coll_lane_wait(x, s, to, COLL_MARK_FOLLOW0 + from);
}

/* The plan of a qgZ call: the algorithm (ZPP_ALGO_RS_EXACT, _QGZ_HIER or
 * _QGZ_FLAT), the geometry (when quantized) and the number of stages that
 * carry data (stages whose pieces lie wholly past the shard are skipped).
 * Returns 0 or ZPP_EINVAL (geometry refused). */
struct qgz_plan {
    int algo;
    struct zk_qgz_geom g;
    int stages_run;
};
int qgz_plan(const struct coll_args *a, const struct be_topo *t, struct qgz_plan *p);

/* Runs a qgZ reduce-scatter (x prepared). Returns 0 or a ZPP_E* code with
 * x->msg; adds poisoned blocks to x->result.nonfinite_blocks. Caller's
 * thread (see coll_run). */
int qgz_run(struct coll_exec *x);

#endif
