/*
 * test_coll_shapes.c — coll.c/qgz.c on the host backend over many edge
 * shapes, drawn at random from a fixed seed: topologies up to 4 x 4, counts
 * of 1, below the world size, around multiples of the block and of the
 * world, int4 with odd counts, every block size class, 1..6 qgZ stages,
 * forced quantization on one node. Buffers are malloc'd at exactly the
 * sizes coll_buffer_needs gives (ASan sees an overrun) and outputs start
 * as NaN bytes (an element a call leaves unwritten shows). Checked: plain
 * all-gather exact, qwZ identical on every rank and within its bound, hpZ
 * gather equal to the qwZ that stored the key, reduce-scatters within a
 * loose bound of the exact sum with zeros past count.
 *
 * The gathers' switches are read once per process, so each configuration
 * (default; peer access, load and copy; flat rings in small pieces) runs
 * in a child of its own.
 */
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "coll_rig.h"
#include "hpz_store.h"
#include "test.h"
#include "zpp.h"

#define ROUNDS 700

static uint64_t g_seed = 7;

static uint64_t rnd(uint64_t n)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (g_seed >> 33) % n;
}

/* outputs start as NaN in every dtype: an element left unwritten shows */
static void rig_alloc(struct rig *g, const struct coll_args *a)
{
    rig_alloc_fill(g, a, 0xFF);
}

static int run_call(struct rig *g, const struct coll_args *a, struct hpz_store *st, char *msg)
{
    return rig_call(g, a, st, "shapes", NULL, msg);
}

static void describe(const char *what, const struct be_topo *t, const struct coll_args *a)
{
    fprintf(stderr,
            "%s: %dx%d op %d dtype %d out %d count %llu bits %d block %u stages %u flags %u\n",
            what, t->nodes, t->local, a->op, a->dtype, a->out_dtype, (unsigned long long)a->count,
            a->bits, a->block, a->stages, a->flags);
}

static uint64_t pick_count(uint64_t W, uint32_t block)
{
    uint64_t base[] = {1, 2, 3, W - 1 ? W - 1 : 1, W, W + 1, block - 1, block, block + 1,
                       W * block - 1, W * block, W * block + 1, 2 * W * block + 3,
                       W * (block + 1) - 1, 1 + rnd(5000), 1 + rnd(40000)};
    return base[rnd(sizeof base / sizeof base[0])];
}

static void one_round(struct hpz_store *st)
{
    static const uint32_t blocks[] = {32, 64, 96, 128, 256, 8192};
    static const int dts[] = {ZK_FP32, ZK_FP16, ZK_BF16};
    static const int ops[] = {ZPP_OP_QWZ_ALLGATHER, ZPP_OP_ALLGATHER, ZPP_OP_REDUCE_SCATTER,
                              ZPP_OP_QGZ_REDUCE_SCATTER};
    struct rig g;
    memset(&g, 0, sizeof g);
    int N = 1 + (int)rnd(4), G = 1 + (int)rnd(4);
    g.t = topo_of(N, G);
    uint64_t W = (uint64_t)(N * G);
    struct coll_args a;
    memset(&a, 0, sizeof a);
    a.op = ops[rnd(4)];
    a.dtype = dts[rnd(3)];
    a.out_dtype = (a.op == ZPP_OP_REDUCE_SCATTER || a.op == ZPP_OP_QGZ_REDUCE_SCATTER)
                      ? dts[rnd(3)]
                      : a.dtype;
    a.bits = rnd(2) ? 4 : 8;
    a.block = blocks[rnd(6)];
    a.stages = 1 + (uint32_t)rnd(6);
    a.reduce = rnd(2) ? ZPP_MEAN : ZPP_SUM;
    a.count = pick_count(W, a.block);
    if (a.op == ZPP_OP_QGZ_REDUCE_SCATTER && rnd(2))
        a.flags = ZPP_FLAG_FORCE_QUANT;
    int keyed = a.op == ZPP_OP_QWZ_ALLGATHER && rnd(2);
    if (keyed)
        snprintf(a.hpz_key, sizeof a.hpz_key, "k%llu", (unsigned long long)rnd(1000000));
    size_t es = zk_dtype_size(a.dtype), oes = zk_dtype_size(a.out_dtype);
    uint64_t shard = (a.count + W - 1) / W;
    rig_alloc(&g, &a);
    int gather = a.op == ZPP_OP_QWZ_ALLGATHER || a.op == ZPP_OP_ALLGATHER;
    /* Inputs: value of global element e is f(e) (+ rank for reductions). */
    double *ref = calloc(a.count, sizeof *ref);
    double amax = 0;
    for (int s = 0; s < g.t.nslots; s++) {
        uint64_t n = g.in_b / es;
        for (uint64_t e = 0; e < n; e++) {
            uint64_t gi = gather ? (uint64_t)s * shard + e : e;
            double v = gi < a.count ? sin((double)gi * 0.37 + s * 1.3) * 2 : 1e4;
            zk_narrow((float)v, g.slots[s].in, a.dtype, e);
            v = get(g.slots[s].in, a.dtype, e);
            if (gi < a.count) {
                if (gather)
                    ref[gi] = v;
                else
                    ref[gi] += v;
                amax = fmax(amax, fabs(v));
            }
        }
    }
    char msg[256];
    int rc = run_call(&g, &a, st, msg);
    if (rc) {
        describe("call failed", &g.t, &a);
        fprintf(stderr, "  %s\n", msg);
    }
    ASSERT_EQ(rc, 0);
    double q = zk_qmax(a.bits);
    if (gather) {
        for (int s = 0; s < g.t.nslots; s++)
            for (uint64_t e = 0; e < a.count; e++) {
                double v = get(g.slots[s].out, a.dtype, e);
                double tol = a.op == ZPP_OP_ALLGATHER ? 0 : amax / q + fabs(ref[e]) / 64;
                if (!(fabs(v - ref[e]) <= tol)) {
                    describe("gather wrong", &g.t, &a);
                    fprintf(stderr, "  rank %d elem %llu got %g want %g\n", s,
                            (unsigned long long)e, v, ref[e]);
                    ASSERT(0);
                }
            }
        if (a.op == ZPP_OP_QWZ_ALLGATHER)
            for (int s = 1; s < g.t.nslots; s++)
                ASSERT(memcmp(g.slots[s].out, g.slots[0].out, a.count * es) == 0);
        if (keyed) {
            struct rig h;
            memset(&h, 0, sizeof h);
            h.t = g.t;
            struct coll_args b = a;
            b.op = ZPP_OP_HPZ_GATHER;
            rig_alloc(&h, &b);
            rc = run_call(&h, &b, st, msg);
            if (rc)
                fprintf(stderr, "hpz gather: %s\n", msg);
            ASSERT_EQ(rc, 0);
            for (int s = 0; s < h.t.nslots; s++)
                ASSERT(memcmp(h.slots[s].out, g.slots[0].out, a.count * es) == 0);
            rig_free(&h);
            struct coll_args inv = a;
            inv.op = ZPP_OP_HPZ_INVALIDATE;
            struct rig none;
            memset(&none, 0, sizeof none);
            none.t = g.t;
            ASSERT_EQ(run_call(&none, &inv, st, msg), 0);
        }
    } else {
        if (a.reduce == ZPP_MEAN)
            for (uint64_t e = 0; e < a.count; e++)
                ref[e] /= (double)W;
        double tol = (double)W * amax * 3 / q + 1e-3;
        if (a.reduce == ZPP_MEAN)
            tol /= (double)W;
        for (int s = 0; s < g.t.nslots; s++)
            for (uint64_t e = 0; e < shard; e++) {
                uint64_t gi = (uint64_t)s * shard + e;
                double v = get(g.slots[s].out, a.out_dtype, e);
                double want = gi < a.count ? ref[gi] : 0.0;
                if (!(fabs(v - want) <= tol + fabs(want) / 64)) {
                    describe("reduce wrong", &g.t, &a);
                    fprintf(stderr, "  rank %d elem %llu got %g want %g\n", s,
                            (unsigned long long)e, v, want);
                    ASSERT(0);
                }
            }
        (void)oes;
    }
    free(ref);
    rig_free(&g);
}

static int run_config(const char *const *env)
{
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        for (; *env; env += 2)
            setenv(env[0], env[1], 1);
        /* job_open reads ZPPD_PEER for the host backend's peer paths */
        struct be_topo t = {.world = 1, .nodes = 1, .local = 1, .nslots = 1, .rank0 = 0};
        void *job = NULL;
        char why[128];
        ASSERT_EQ(be_host_ops.job_open(NULL, &t, NULL, &job, why, sizeof why), 0);
        be_host_ops.job_close(NULL, job, 0);
        struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
        for (int i = 0; i < ROUNDS; i++)
            one_round(st);
        hpz_store_free(st);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The order in which a gather by peer access reads its members
 * (be_gather_member): each slot its own part first, every member once, and
 * at every step no two readers on one member. */
static void test_gather_order(void)
{
    for (int local = 1; local <= 8; local++)
        for (int nodes = 1; nodes <= 3; nodes++)
            for (int comm = BE_COMM_GLOBAL; comm <= BE_COMM_INTRA; comm++) {
                int members = comm == BE_COMM_GLOBAL ? nodes * local : local;
                for (int node = 0; node < nodes; node++) {
                    struct be_topo t = {.world = nodes * local,
                                        .nodes = nodes,
                                        .local = local,
                                        .nslots = members,
                                        .rank0 = comm == BE_COMM_GLOBAL ? 0 : node * local};
                    for (int s = 0; s < members; s++) { /* every member once, its own first */
                        unsigned read = 0;
                        /* step 0 reads the member this slot hosts */
                        ASSERT_EQ(
                            be_member_slot(&t, comm, s, be_gather_member(&t, comm, s, 0, members)),
                            s);
                        for (int j = 0; j < members; j++)
                            read |= 1u << be_gather_member(&t, comm, s, j, members);
                        ASSERT_EQ(read, (1u << members) - 1);
                    }
                    for (int j = 0; j < members; j++) { /* one reader per member and step */
                        unsigned readers = 0;
                        for (int s = 0; s < members; s++)
                            readers |= 1u << be_gather_member(&t, comm, s, j, members);
                        ASSERT_EQ(readers, (1u << members) - 1);
                    }
                }
            }
}

int main(void)
{
    test_gather_order();
    static const char *const configs[][9] = {
        {NULL},
        {"ZPPD_PEER", "load", NULL},
        {"ZPPD_PEER", "copy", "ZPP_QWZ_PIECE_KIB", "1", NULL},
        {"ZPP_QWZ_HIER", "0", "ZPP_AG_HIER", "0", "ZPP_QWZ_PIECE_KIB", "1", NULL},
        {"ZPPD_PEER", "load", "ZPP_QWZ_PIECE_KIB", "1", "ZPPD_PEER_GATHER_MAX", "2", NULL},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        int rc = run_config(configs[i]);
        if (rc)
            fprintf(stderr, "configuration %zu failed (%d)\n", i, rc);
        ASSERT_EQ(rc, 0);
    }
    printf("test_coll_shapes: ok\n");
    return 0;
}
