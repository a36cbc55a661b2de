/*
 * coll_rig.h — the collective tests' rig (test_coll_host.c,
 * test_coll_shapes.c): slots whose buffers are malloc'd at exactly the
 * sizes coll_buffer_needs gives (so ASan sees any overrun), their outputs
 * filled with a byte the call must overwrite, and one call run through
 * prepare, run and finish on the host backend as the job layer does.
 */
#ifndef ZPP_TESTS_COLL_RIG_H
#define ZPP_TESTS_COLL_RIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "test.h"

#define MAX_W 16

static int g_job; /* its address is the job identity */

struct rig {
    struct be_topo t;
    struct coll_slot slots[MAX_W];
    size_t in_b, out_b; /* each slot's buffer sizes */
};

static inline struct be_topo topo_of(int nodes, int local)
{
    struct be_topo t = {.world = nodes * local,
                        .nodes = nodes,
                        .local = local,
                        .nslots = nodes * local,
                        .rank0 = 0};
    return t;
}

static inline double get(const void *buf, int dtype, uint64_t i)
{
    return (double)zk_widen(buf, dtype, i);
}

/* Allocates every slot's buffers at exactly the needed sizes; outputs
 * start as `fill` bytes (0xFF: NaN in every dtype). */
static inline void rig_alloc_fill(struct rig *g, const struct coll_args *a, int fill)
{
    char why[256];
    int rc = coll_buffer_needs(a, &g->t, &g->in_b, &g->out_b, why, sizeof why);
    if (rc)
        fprintf(stderr, "buffer_needs: %s\n", why);
    ASSERT_EQ(rc, 0);
    for (int s = 0; s < g->t.nslots; s++) {
        g->slots[s].in = g->in_b ? malloc(g->in_b) : NULL;
        g->slots[s].in_len = g->in_b;
        g->slots[s].out = g->out_b ? malloc(g->out_b) : NULL;
        g->slots[s].out_len = g->out_b;
        if (g->out_b)
            memset(g->slots[s].out, fill, g->out_b);
    }
}

static inline void rig_free(struct rig *g)
{
    for (int s = 0; s < g->t.nslots; s++) {
        free(g->slots[s].in);
        free(g->slots[s].out);
        g->slots[s].in = g->slots[s].out = NULL;
    }
}

/* prepare + run + finish as the job layer does; returns the call's status
 * (res and msg, 256 bytes, may be NULL). */
static inline int rig_call(struct rig *g, const struct coll_args *a, struct hpz_store *st,
                    const char *job_id, struct coll_result *res, char *msg)
{
    struct coll_exec x;
    memset(&x, 0, sizeof x);
    x.args = *a;
    x.topo = g->t;
    x.slots = g->slots;
    x.owner.tenant_uid = 1000;
    x.owner.job_id = job_id;
    x.owner.job = &g_job;
    x.store = st;
    x.call.ops = &be_host_ops;
    if (coll_prepare(&x) == 0)
        coll_run(&x);
    coll_finish(&x);
    if (res)
        *res = x.result;
    if (msg)
        snprintf(msg, 256, "%s", x.msg);
    return x.status;
}

#endif
