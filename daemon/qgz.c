/*
 * qgz.c — the qgZ reduce-scatter (ZeRO++ section 3.3, Algorithm 2 with S
 * stages), written against the backend table only.
 *
 * Per stage k, on every hosted rank (local index i, node nd):
 *   (0) reorder_quantize: W pieces into A; position p = i'*N + n' holds
 *       sub-chunk k of slice n'*G + i' (zk_qgz_slice_at);
 *   (1) G > 1: alltoall(INTRA, A -> B, N pieces per peer): from local peer
 *       l, B[l*N + n'] = that peer's piece of slice n'*G + i;
 *   (2) N > 1: for each n', reduce_requant over the G pieces B[l*N + n']
 *       (stride N pieces) into C[n'] = the node's partial sum of slice
 *       n'*G + i; N == 1: reduce_out straight from B into the output;
 *   (3) alltoall(INTER, C -> D, one piece per peer): node m receives C[m],
 *       i.e. slice m*G + i = its own rank's slice; with G == 1 the
 *       reordered A goes to the inter-node all-to-all directly (FLAT);
 *   (4) reduce_out over the N pieces of D (fp32 sum, mean divides by W)
 *       into elements [k*piece, k*piece + count_k) of the output.
 * So rank nd*G + i ends with slice nd*G + i: the final shard of its rank.
 *
 * The choice of algorithm lives here (qgz_plan): on one node, the exact
 * reduce-scatter unless the caller forces quantization (quantizing buys
 * nothing over NVLink; DESIGN.md "Where the in-process implementation
 * falls short").
 */
#include <stdio.h>
#include <stdlib.h>

#include "coll_internal.h"
#include "zpp.h"

int qgz_plan(const struct coll_args *a, const struct be_topo *t, struct qgz_plan *p)
{
    struct qgz_plan q = {0};
    if (t->nodes == 1 && !(a->flags & ZPP_FLAG_FORCE_QUANT)) {
        q.algo = ZPP_ALGO_RS_EXACT;
        *p = q;
        return 0;
    }
    if (zk_qgz_geom_init(&q.g, a->count, t->nodes, t->local, (int)a->stages, a->bits, a->block))
        return ZPP_EINVAL;
    q.algo = t->local > 1 ? ZPP_ALGO_QGZ_HIER : ZPP_ALGO_QGZ_FLAT;
    uint64_t run = (q.g.shard + q.g.piece - 1) / q.g.piece;
    q.stages_run = (int)(run < (uint64_t)q.g.stages ? run : (uint64_t)q.g.stages);
    *p = q;
    return 0;
}

/* The exact path: one backend reduce-scatter over the global communicator. */
static int qgz_exact(struct coll_exec *x)
{
    int rc = 0;
    int ns = x->topo.nslots;
    const struct coll_args *a = &x->args;
    void **send = calloc((size_t)ns, sizeof *send), **recv = calloc((size_t)ns, sizeof *recv);
    if (!send || !recv) {
        snprintf(x->msg, sizeof x->msg, "qgZ: out of memory");
        rc = ZPP_ENOMEM;
        goto exit;
    }
    uint64_t W = (uint64_t)x->topo.world;
    for (int s = 0; s < ns; s++) {
        send[s] = x->slots[s].in;
        recv[s] = x->slots[s].out;
    }
    COLL_CHECK(x, x->call.ops->reduce_scatter(&x->call, BE_COMM_GLOBAL, send, recv, a->count,
                                              (a->count + W - 1) / W, a->dtype, a->out_dtype,
                                              a->reduce));
exit:
    free(send);
    free(recv);
    return rc;
}

int qgz_run(struct coll_exec *x)
{
    int rc = 0;
    struct qgz_plan p;
    const struct coll_args *a = &x->args;
    const struct be_topo *t = &x->topo;
    const struct be_ops *ops = x->call.ops;
    struct be_call *c = &x->call;
    int ns = t->nslots, N = t->nodes, G = t->local, W = t->world;
    /* Per slot: A (W pieces), B (W pieces), C (N pieces), D (N pieces). */
    void **A = NULL, **B = NULL, **C = NULL, **D = NULL, **H = NULL, **Ak = NULL;
    int lanes = 0;
    uint64_t poisoned = 0;

    if (qgz_plan(a, t, &p)) {
        snprintf(x->msg, sizeof x->msg, "qgZ: geometry refused (count %llu, stages %u)",
                 (unsigned long long)a->count, a->stages);
        return ZPP_EINVAL;
    }
    if (p.algo == ZPP_ALGO_RS_EXACT)
        return qgz_exact(x);

    const struct zk_qgz_geom *g = &p.g;
    uint64_t pb = g->piece_bytes;
    size_t oes = zk_dtype_size(a->out_dtype);
    /* With lanes, stage k's inter-node step (lane 1) overlaps stage k+1's
     * quantize and intra-node step (lane 0). The buffer handed from lane 0
     * to lane 1 (A when FLAT, C when HIER) is then double-buffered: stage
     * k writes half k % 2 only after lane 1 marked it free at stage k - 2. */
    lanes = N > 1 && p.stages_run > 1 && coll_lanes(x);
    uint64_t nb = lanes ? 2 : 1;
    A = calloc((size_t)ns, sizeof *A);
    B = calloc((size_t)ns, sizeof *B);
    C = calloc((size_t)ns, sizeof *C);
    D = calloc((size_t)ns, sizeof *D);
    H = calloc((size_t)ns, sizeof *H);
    Ak = calloc((size_t)ns, sizeof *Ak);
    if (!A || !B || !C || !D || !H || !Ak) {
        snprintf(x->msg, sizeof x->msg, "qgZ: out of memory");
        rc = ZPP_ENOMEM;
        goto exit;
    }
    for (int s = 0; s < ns; s++) {
        COLL_CHECK(x, ops->scratch(c, s, (size_t)((G == 1 ? nb : 1) * W * pb), &A[s]));
        if (G > 1)
            COLL_CHECK(x, ops->scratch(c, s, (size_t)(W * pb), &B[s]));
        if (G > 1 && N > 1)
            COLL_CHECK(x, ops->scratch(c, s, (size_t)(nb * N * pb), &C[s]));
        if (G == 1 || N > 1)
            COLL_CHECK(x, ops->scratch(c, s, (size_t)(N * pb), &D[s]));
    }

    for (int k = 0; k < p.stages_run; k++) {
        uint64_t first = (uint64_t)k * g->piece;
        uint64_t cnt = be_clamp(g->shard, first, g->piece);
        int hb = lanes ? k % 2 : 0;
        for (int s = 0; s < ns; s++) {
            Ak[s] = (uint8_t *)A[s] + (G == 1 ? (uint64_t)hb * W * pb : 0);
            H[s] = G == 1 ? Ak[s] : (N > 1 ? (uint8_t *)C[s] + (uint64_t)hb * N * pb : NULL);
            if (lanes) {
                COLL_CHECK(x, coll_lane_use(x, s, 0));
                if (G == 1 && k >= 2) /* A half hb: lane 1 is done with stage k - 2 */
                    COLL_CHECK(x, coll_lane_wait(x, s, 0, hb));
            }
            COLL_CHECK(x, ops->reorder_quantize(c, s, x->slots[s].in, a->dtype, g, k, Ak[s],
                                                &poisoned));
        }
        if (G > 1) {
            COLL_CHECK(x, ops->alltoall(c, BE_COMM_INTRA, Ak, B, (size_t)(N * pb)));
            if (N == 1) {
                for (int s = 0; s < ns; s++)
                    COLL_CHECK(x, ops->reduce_out(c, s, B[s], pb, G, g->piece, g->bits, g->block,
                                                  cnt, a->reduce, (float)W,
                                                  (uint8_t *)x->slots[s].out + first * oes,
                                                  a->out_dtype));
                continue;
            }
            for (int s = 0; s < ns; s++) {
                if (lanes && k >= 2) /* C half hb: lane 1 is done with stage k - 2 */
                    COLL_CHECK(x, coll_lane_wait(x, s, 0, hb));
                for (int n = 0; n < N; n++)
                    COLL_CHECK(x,
                               ops->reduce_requant(c, s, (uint8_t *)B[s] + (uint64_t)n * pb,
                                                   (uint64_t)N * pb, G, g->piece, g->bits, g->block,
                                                   (uint8_t *)H[s] + (uint64_t)n * pb, &poisoned));
            }
        }
        if (lanes)
            for (int s = 0; s < ns; s++) {
                COLL_CHECK(x, coll_lane_follow(x, s, 1, 0));
                COLL_CHECK(x, coll_lane_use(x, s, 1));
            }
        COLL_CHECK(x, ops->alltoall(c, BE_COMM_INTER, H, D, (size_t)pb));
        for (int s = 0; s < ns; s++) {
            if (lanes)
                COLL_CHECK(x, coll_lane_mark(x, s, 1, hb));
            COLL_CHECK(x, ops->reduce_out(c, s, D[s], pb, N, g->piece, g->bits, g->block, cnt,
                                          a->reduce, (float)W,
                                          (uint8_t *)x->slots[s].out + first * oes, a->out_dtype));
        }
    }
exit:
    if (lanes) /* the call ends on lane 0, lane 1 joined (also after a failure) */
        for (int s = 0; s < ns; s++)
            if (coll_lane_use(x, s, 0) == 0)
                coll_lane_follow(x, s, 0, 1);
    x->result.nonfinite_blocks += poisoned;
    free(H);
    free(Ak);
    free(A);
    free(B);
    free(C);
    free(D);
    return rc;
}
