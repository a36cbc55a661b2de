/*
 * backend_host.c — the host backend: the plain-C reference kernels
 * (kernels/quant_ref.c, kernels/qgz_ref.c) and in-memory copies between the ranks' buffers.
 *
 * Every rank of the job is hosted by this daemon (topo.nslots == W,
 * rank0 == 0 in practice; any slot range that covers every member of a
 * communicator works), so a collective is a set of memcpy calls from each
 * member's send buffer to each member's receive buffer at the offsets the
 * communicator's rank order gives:
 *   GLOBAL  member j = rank j;
 *   INTRA   member j = rank node*G + j (local index order);
 *   INTER   member j = rank j*G + local (node order, equal local index).
 * Which copies count as intra- or inter-node is coll.c's accounting, not
 * ours. Scratch is malloc'd memory tracked in the be_call and freed by
 * be_call_end. The store's memory is calloc'd (the device is ignored).
 *
 * Fault injection (config fault_inject, a test switch): after N successful
 * transfers (allgather, alltoall, reduce_scatter) every later transfer and
 * copy fails with ZPP_EBACKEND, and be_host_fatal reports it — the way a
 * sticky CUDA error poisons a process, so the daemon's exit path for that
 * (main.c) is tested without a GPU.
 *
 * Jobs: the host backend has no communicators to create, so a job is
 * ready as soon as job_open returns — except under the test hook
 * ZPPD_TEST_FORM_DELAY (backend.h), which makes job_poll report
 * BE_FORMING for a while, the way NCCL communicators that are still
 * connecting do on the cuda backend. The daemon's integration tests use it
 * to run the asynchronous formation path (calls parked until the job is
 * ready, the formation deadline, a client that leaves meanwhile) without a
 * GPU.
 *
 * Threads: a be_call is used by one thread at a time; store_alloc/free and
 * the job entries are called on the loop thread and touch no shared state
 * (the test hook's settings are the loop thread's). The fault-injection
 * counters are atomics (workers count, the loop reads).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "gate_flag.h"
#include "log.h"
#include "zpp.h"

#define HOST_SCRATCH_GROW 8 /* initial capacity of the scratch table */

static int host_fail(struct be_call *c, int code, const char *what)
{
    snprintf(c->err, sizeof c->err, "host backend: %s", what);
    return code;
}

/* ---- fault injection -------------------------------------------------- */

static atomic_uint_fast64_t g_fault_after; /* 1 + N when armed; 0 off */
static atomic_uint_fast64_t g_transfers;
static atomic_int g_sticky;

void be_host_fault_inject(uint64_t after_transfers)
{
    atomic_store(&g_transfers, 0);
    atomic_store(&g_sticky, 0);
    atomic_store(&g_fault_after, after_transfers + 1);
}

int be_host_fatal(char *why, size_t why_len)
{
    if (!atomic_load(&g_sticky))
        return 0;
    snprintf(why, why_len,
             "host backend: injected sticky device error after %llu transfers "
             "(fault_inject)",
             (unsigned long long)(atomic_load(&g_fault_after) - 1));
    return 1;
}

/* be_ops.check: host work completes before its reply; only the injected
 * sticky error can make a completed call's results untrustworthy. */
/* ---- sessions on the client's flags (be_ops.events_open_flags) ---------
 * The same protocol as the cuda backend's (docs/cuda.md, "Done flags"),
 * so that clients and the job layer meet one contract, and CI runs it. A
 * host call completes before its reply, so a call's done flag is raised
 * when it is answered (events_settle), by the loop; there are no streams,
 * so the ready flags are not read. The memfd stays mapped and the pipe
 * open until the session closes: nothing writes the flags after that. */
struct host_flags {
    uint32_t *map;
    size_t len;
    int n, live_fd;
};

static int host_events_open_flags(void *backend, int device, int n, void *map, size_t len,
                                  int live_fd, void **state, char *why, size_t why_len)
{
    (void)backend;
    (void)device;
    struct host_flags *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(map, len);
        if (live_fd >= 0)
            close(live_fd);
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    f->map = map;
    f->len = len;
    f->n = n;
    f->live_fd = live_fd;
    *state = f;
    return 0;
}

static void host_events_settle(void *backend, void *state, int slot_ev, uint64_t flag_value)
{
    struct host_flags *f = state;
    (void)backend;
    if (f && slot_ev >= 0 && slot_ev < f->n)
        gate_flag_raise(&f->map[slot_ev], (uint32_t)flag_value);
}

static void host_events_close(void *backend, void *state)
{
    struct host_flags *f = state;
    (void)backend;
    if (!f)
        return;
    munmap(f->map, f->len);
    if (f->live_fd >= 0)
        close(f->live_fd);
    free(f);
}

static int host_check(void *backend, void *events, char *why, size_t why_len)
{
    (void)backend;
    (void)events;
    return be_host_fatal(why, why_len) ? ZPP_EBACKEND : 0;
}

/* Counts a transfer (count = 1) or only checks; fails once sticky. */
static int fault_check(struct be_call *c, int count)
{
    uint64_t after = atomic_load(&g_fault_after);
    if (!after)
        return 0;
    if (count && atomic_fetch_add(&g_transfers, 1) + 1 >= after)
        atomic_store(&g_sticky, 1);
    if (atomic_load(&g_sticky))
        return host_fail(c, ZPP_EBACKEND, "sticky device error (injected by fault_inject)");
    return 0;
}

/* ---- jobs (and the formation test hook) ------------------------------ */

struct host_job {
    uint64_t ready_ms; /* job_poll says BE_FORMING before this time */
};

/* ZPPD_TEST_FORM_DELAY: parsed at the first job_open. */
static struct {
    int parsed;
    uint64_t delay_ms;
    uint64_t left; /* jobs still to delay; UINT64_MAX: every job */
} g_form;

static uint64_t host_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* "MS" or "MS:COUNT"; anything else leaves the hook off. */
static void form_hook_parse(void)
{
    const char *v = getenv(BE_HOST_FORM_DELAY_ENV);
    char *end = NULL;
    g_form.parsed = 1;
    if (!v || !*v)
        return;
    unsigned long long ms = strtoull(v, &end, 10);
    unsigned long long n = UINT64_MAX;
    if (end == v || (*end && *end != ':'))
        return;
    if (*end == ':') {
        const char *c = end + 1;
        n = strtoull(c, &end, 10);
        if (end == c || *end)
            return;
    }
    g_form.delay_ms = ms;
    g_form.left = n;
}

/* ZPPD_PEER for the host backend (host_peer_ok); -2 until read. */
static int host_peer_mode = -2;

static int host_job_open(void *backend, const struct be_topo *t, const int *devices, void **job,
                         char *why, size_t why_len)
{
    if (host_peer_mode == -2) /* the loop thread, before any call runs */
        host_peer_mode = be_peer_mode_env(0);
    if (t->nodes < 1 || t->local < 1 || t->world != t->nodes * t->local || t->nslots < 1 ||
        t->rank0 < 0 || t->rank0 > t->world - t->nslots) {
        snprintf(why, why_len, "bad topology for this daemon (rank0 %d, %d ranks hosted of %d)",
                 t->rank0, t->nslots, t->world);
        return ZPP_EINVAL;
    }
    struct host_job *hj = calloc(1, sizeof *hj);
    if (!hj) {
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    if (!g_form.parsed)
        form_hook_parse();
    if (g_form.delay_ms && g_form.left) {
        hj->ready_ms = host_now_ms() + g_form.delay_ms;
        if (g_form.left != UINT64_MAX)
            g_form.left--;
    }
    *job = hj;
    return 0;
}

/* Jobs across daemons: the host backend forms them (membership, heartbeats,
 * aborts) but moves no data between daemons (it makes no ids). */
static int host_job_open_ids(void *backend, const struct be_topo *t, const int *devices,
                             const uint8_t *ids, int nids, void **job, char *why, size_t why_len)
{
    return host_job_open(backend, t, devices, job, why, why_len);
}

static int host_job_poll(void *backend, void *job, char *why, size_t why_len)
{
    const struct host_job *hj = job;
    if (hj && hj->ready_ms && host_now_ms() < hj->ready_ms)
        return BE_FORMING;
    static const char *fail; /* test hook (backend.h), read at the first poll */
    static int read;
    if (!read) { /* loop thread only */
        fail = getenv(BE_HOST_POLL_FAIL_ENV);
        read = 1;
    }
    if (fail && *fail && access(fail, F_OK) == 0) {
        snprintf(why, why_len, "injected by %s", BE_HOST_POLL_FAIL_ENV);
        return -1;
    }
    return 0;
}

static void host_job_close(void *backend, void *job, int abort)
{
    free(job);
}

/* ---- communicators -------------------------------------------------- */

/* The rank of member j of the communicator of kind comm that rank r is in. */
static int comm_member(const struct be_topo *t, int comm, int r, int j)
{
    if (comm == BE_COMM_GLOBAL)
        return j;
    if (comm == BE_COMM_INTRA)
        return (r / t->local) * t->local + j;
    return j * t->local + r % t->local;
}

/* Checks comm and that slot s's communicator members are all hosted here;
 * returns the member's slot through slots[j]. */
static int comm_slots(struct be_call *c, int comm, int s, int *slots)
{
    const struct be_topo *t = &c->topo;
    if (comm != BE_COMM_GLOBAL && comm != BE_COMM_INTRA && comm != BE_COMM_INTER)
        return host_fail(c, ZPP_EINVAL, "unknown communicator");
    int r = be_rank(t, s);
    int n = be_comm_size(t, comm);
    for (int j = 0; j < n; j++) {
        int q = comm_member(t, comm, r, j) - t->rank0;
        if (q < 0 || q >= t->nslots)
            return host_fail(c, ZPP_EBACKEND, "a communicator member is not hosted here");
        slots[j] = q;
    }
    return 0;
}

static int topo_ok(struct be_call *c)
{
    const struct be_topo *t = &c->topo;
    if (t->nodes < 1 || t->local < 1 || t->world != t->nodes * t->local || t->nslots < 1 ||
        t->rank0 < 0 || t->rank0 + t->nslots > t->world)
        return host_fail(c, ZPP_EINVAL, "bad topology");
    return 0;
}

/* Starts a transfer: counts it for fault injection, then checks the
 * topology (the communicator sizes below divide by it). */
static int transfer_begin(struct be_call *c)
{
    int rc = fault_check(c, 1);
    return rc ? rc : topo_ok(c);
}

/* What one hosted slot does in a transfer: slots[0..n) are its
 * communicator's members in comm rank order (as slots), me is its own index
 * among them. */
typedef int (*slot_fn)(struct be_call *c, int s, int me, const int *slots, int n, void *arg);

/* Calls fn for every hosted slot with its communicator's members; stops at
 * the first error (a member not hosted here, or fn's). */
static int each_slot_members(struct be_call *c, int comm, slot_fn fn, void *arg)
{
    int *slots = malloc(sizeof *slots * (size_t)c->topo.world);
    if (!slots)
        return host_fail(c, ZPP_ENOMEM, "out of memory");
    int rc = 0;
    int n = be_comm_size(&c->topo, comm);
    for (int s = 0; s < c->topo.nslots && !rc; s++) {
        rc = comm_slots(c, comm, s, slots);
        if (!rc)
            rc = fn(c, s, be_comm_index(&c->topo, comm, be_rank(&c->topo, s)), slots, n, arg);
    }
    free(slots);
    return rc;
}

/* The buffers of an allgather or alltoall: bytes per member block. */
struct host_xfer {
    void *const *send;
    void *const *recv;
    size_t bytes;
};

static int allgather_slot(struct be_call *c, int s, int me, const int *slots, int n, void *arg)
{
    const struct host_xfer *x = arg;
    (void)c;
    (void)me;
    for (int j = 0; j < n; j++) {
        uint8_t *dst = (uint8_t *)x->recv[s] + (size_t)j * x->bytes;
        if (dst != x->send[slots[j]]) /* in place: own block already there */
            memcpy(dst, x->send[slots[j]], x->bytes);
    }
    return 0;
}

static int host_allgather(struct be_call *c, int comm, void *const *send, void *const *recv,
                          size_t bytes)
{
    int rc = transfer_begin(c);
    if (rc)
        return rc;
    struct host_xfer x = {.send = send, .recv = recv, .bytes = bytes};
    return each_slot_members(c, comm, allgather_slot, &x);
}

static int alltoall_slot(struct be_call *c, int s, int me, const int *slots, int n, void *arg)
{
    const struct host_xfer *x = arg;
    (void)c;
    for (int j = 0; j < n; j++)
        memcpy((uint8_t *)x->recv[s] + (size_t)j * x->bytes,
               (const uint8_t *)x->send[slots[j]] + (size_t)me * x->bytes, x->bytes);
    return 0;
}

static int host_alltoall(struct be_call *c, int comm, void *const *send, void *const *recv,
                         size_t bytes_per_peer)
{
    int rc = transfer_begin(c);
    if (rc)
        return rc;
    struct host_xfer x = {.send = send, .recv = recv, .bytes = bytes_per_peer};
    return each_slot_members(c, comm, alltoall_slot, &x);
}

/* ---- scratch and kernels -------------------------------------------- */

static int host_scratch(struct be_call *c, int s, size_t bytes, void **out)
{
    if (c->nscratch == c->cap_scratch) {
        int cap = c->cap_scratch ? c->cap_scratch * 2 : HOST_SCRATCH_GROW;
        void **t = realloc(c->scratch, sizeof *t * (size_t)cap);
        if (!t)
            return host_fail(c, ZPP_ENOMEM, "out of memory (scratch table)");
        c->scratch = t;
        c->cap_scratch = cap;
    }
    /* ZK_ALIGN-aligned like device memory; round up for aligned_alloc. */
    size_t sz = (bytes + ZK_ALIGN - 1) / ZK_ALIGN * ZK_ALIGN;
    void *p = aligned_alloc(ZK_ALIGN, sz ? sz : ZK_ALIGN);
    if (!p)
        return host_fail(c, ZPP_ENOMEM, "out of memory (scratch)");
    c->scratch[c->nscratch++] = p;
    *out = p;
    return 0;
}

void be_call_end(struct be_call *c)
{
    for (int i = 0; i < c->nscratch; i++)
        free(c->scratch[i]);
    free(c->scratch);
    c->scratch = NULL;
    c->nscratch = c->cap_scratch = 0;
}

static int host_quantize(struct be_call *c, int s, const void *x, int dtype, uint64_t n,
                         uint64_t n_valid, int bits, uint32_t block, void *out, uint64_t *poisoned)
{
    uint64_t p = zk_quantize_ref(x, dtype, n, n_valid, bits, block, out);
    if (poisoned)
        *poisoned += p;
    return 0;
}

static int host_dequantize(struct be_call *c, int s, const void *in, uint64_t n, uint64_t n_out,
                           int bits, uint32_t block, void *y, int dtype)
{
    zk_dequantize_ref(in, n, n_out, bits, block, y, dtype);
    return 0;
}

static int host_reorder_quantize(struct be_call *c, int s, const void *x, int dtype,
                                 const struct zk_qgz_geom *g, int stage, void *out,
                                 uint64_t *poisoned)
{
    uint64_t p = zk_qgz_reorder_quantize_stage_ref(x, dtype, g, stage, out);
    if (poisoned)
        *poisoned += p;
    return 0;
}

static int host_reduce_requant(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                               uint64_t piece, int bits, uint32_t block, void *out,
                               uint64_t *poisoned)
{
    uint64_t p = zk_reduce_requant_ref(in, in_stride, k, piece, bits, block, out);
    if (poisoned)
        *poisoned += p;
    return 0;
}

static int host_reduce_out(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                           uint64_t piece, int bits, uint32_t block, uint64_t count, int op,
                           float divisor, void *y, int out_dtype)
{
    zk_reduce_out_ref(in, in_stride, k, piece, bits, block, count, op, divisor, y, out_dtype);
    return 0;
}

static int host_copy(struct be_call *c, int s, void *dst, const void *src, size_t bytes)
{
    if (fault_check(c, 0))
        return ZPP_EBACKEND;
    if (dst != src && bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int host_zero(struct be_call *c, int s, void *dst, size_t bytes)
{
    if (bytes)
        memset(dst, 0, bytes);
    return 0;
}

/* A reduce-scatter's arguments, for reduce_scatter_slot. */
struct host_rs {
    void *const *send;
    void *const *recv;
    uint64_t count, shard;
    int dtype, out_dtype, op;
    size_t esize;
};

/* Rank r's shard of every member's input, zero-padded, gathered into one
 * scratch buffer, then summed in fp32 by the reference kernel. */
static int reduce_scatter_slot(struct be_call *c, int s, int me, const int *slots, int n, void *arg)
{
    const struct host_rs *a = arg;
    size_t esize = a->esize;
    size_t seg = (size_t)a->shard * esize;
    uint8_t *tmp;
    int rc = host_scratch(c, s, seg * (size_t)n, (void **)&tmp);
    if (rc)
        return rc;
    uint64_t lo = (uint64_t)me * a->shard;
    uint64_t valid = lo >= a->count ? 0 : (a->count - lo < a->shard ? a->count - lo : a->shard);
    for (int j = 0; j < n; j++) {
        uint8_t *dst = tmp + (size_t)j * seg;
        if (valid)
            memcpy(dst, (const uint8_t *)a->send[slots[j]] + lo * esize, (size_t)valid * esize);
        memset(dst + valid * esize, 0, seg - (size_t)valid * esize);
    }
    zk_sum_ref(tmp, a->shard, n, a->shard, a->dtype, a->op, (float)n, a->recv[s], a->out_dtype);
    return 0;
}

static int host_reduce_scatter(struct be_call *c, int comm, void *const *send, void *const *recv,
                               uint64_t count, uint64_t shard, int dtype, int out_dtype, int op)
{
    int rc = transfer_begin(c);
    if (rc)
        return rc;
    size_t esize = zk_dtype_size(dtype);
    if (!esize || !zk_dtype_size(out_dtype))
        return host_fail(c, ZPP_EINVAL, "bad dtype");
    int n = be_comm_size(&c->topo, comm);
    if (shard == 0 || shard > SIZE_MAX / esize / (size_t)n)
        return host_fail(c, ZPP_EINVAL, "bad shard size");
    struct host_rs a = {.send = send,
                        .recv = recv,
                        .count = count,
                        .shard = shard,
                        .dtype = dtype,
                        .out_dtype = out_dtype,
                        .op = op,
                        .esize = esize};
    return each_slot_members(c, comm, reduce_scatter_slot, &a);
}

/* ---- store memory --------------------------------------------------- */

static int host_store_alloc(void *backend, int device, size_t bytes, void **out)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        return ZPP_ENOMEM;
    *out = p;
    return 0;
}

static void host_store_free(void *backend, int device, void *p)
{
    free(p);
}

int be_peer_mode_env(int dflt)
{
    const char *env = getenv("ZPPD_PEER");
    return !env                                       ? dflt
           : !strcmp(env, "load")                     ? BE_PEER_LOAD
           : !strcmp(env, "copy")                     ? BE_PEER_COPY
           : !strcmp(env, "off") || !strcmp(env, "0") ? 0
                                                      : -1;
}

uint64_t be_env_uint(const char *name, uint64_t dflt, uint64_t max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || errno || v[0] < '0' || v[0] > '9' || x > max) {
        ZLOG_W("config", "an environment switch is not a number in range: ignored",
               "name=%s value=%s max=%" PRIu64, name, v, max);
        return dflt;
    }
    return (uint64_t)x;
}

int be_env_switch(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    return !(!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no") ||
             !strcasecmp(v, "false"));
}

/* Peer access: every rank's memory is this process's, so reading a
 * peer's staging or store is always possible and a fence orders nothing
 * (one worker thread runs the whole call). Off unless ZPPD_PEER is "load"
 * or "copy": the tests run coll.c's peer paths on the host this way. The
 * mode (host_peer_mode) is read at the first job_open. */
static int host_peer_ok(struct be_call *c, int comm)
{
    int mode = host_peer_mode > 0 ? host_peer_mode : 0;
    if (comm == BE_COMM_GLOBAL)
        return c->topo.nodes == 1 && c->topo.nslots == c->topo.world ? mode : 0;
    return comm == BE_COMM_INTRA ? mode : 0;
}

static int host_peer_fence(struct be_call *c, int comm)
{
    (void)c;
    (void)comm;
    return 0;
}

static int private_read(struct be_call *c)
{
    snprintf(c->err, sizeof c->err, "host backend: a private input went to a peer path");
    return ZPP_EBACKEND;
}

/* The cuda backend's one-kernel gather, in copies: with ZPPD_PEER=load the
 * tests run coll.c's gathered branch, with copy the fenced copies. */
static int host_peer_gather(struct be_call *c, int comm, void *const *send, void *const *recv,
                            size_t bytes)
{
    /* Here only the plain all-gather gathers over GLOBAL, from the inputs:
     * a private one handed to a peer path is coll.c's mistake, and the
     * private-input tests (ZPPD_TEST_PRIVATE_INPUTS) must see it. */
    if (c->in_private && comm == BE_COMM_GLOBAL)
        return private_read(c);
    if (host_peer_ok(c, comm) != BE_PEER_LOAD)
        return BE_DECLINED;
    const struct be_topo *t = &c->topo;
    int members = be_comm_size(t, comm);
    for (int s = 0; s < t->nslots; s++)
        for (int i = 0; i < members; i++) {
            int rc = host_copy(c, s, (uint8_t *)recv[s] + (size_t)i * bytes,
                               send[be_member_slot(t, comm, s, i)], bytes);
            if (rc)
                return rc;
        }
    return 0;
}

/* Test hook: with ZPPD_TEST_PRIVATE_INPUTS=1 every buffer counts as
 * readable by its own rank only, as a legacy IPC import is on the cuda
 * backend, so the tests run coll.c's and the calls' private-input
 * branches (be_call.in_private). */
static int host_buf_shared(void *backend, void *handle)
{
    static int priv = -1;
    (void)backend;
    (void)handle;
    if (priv < 0)
        priv = be_env_switch("ZPPD_TEST_PRIVATE_INPUTS", 0);
    return !priv;
}

/* The cuda backend's one-kernel qwZ, in the reference: with
 * ZPPD_PEER=load the tests run coll.c's branch for it. */
static int host_peer_qwz(struct be_call *c, int comm, void *const *in, void *const *out,
                         uint64_t shard, uint64_t count, int dtype, int bits, uint32_t block,
                         uint64_t *poisoned)
{
    size_t es = zk_dtype_size(dtype);
    if (c->in_private)
        return private_read(c);
    if (host_peer_ok(c, comm) != BE_PEER_LOAD)
        return BE_DECLINED;
    if (!es || !zk_params_ok(bits, block)) {
        snprintf(c->err, sizeof c->err, "host backend: bad qwZ parameters");
        return ZPP_EINVAL;
    }
    const struct be_topo *t = &c->topo;
    int members = be_comm_size(t, comm);
    for (int s = 0; s < t->nslots; s++)
        for (int i = 0; i < members; i++) {
            uint64_t lo = (uint64_t)i * shard;
            uint64_t n = be_clamp(count, lo, shard);
            int from = be_member_slot(t, comm, s, i);
            uint64_t p = zk_qdq_ref(in[from], dtype, n, bits, block, (uint8_t *)out[s] + lo * es);
            if (from == s && poisoned)
                *poisoned += p;
        }
    return 0;
}

/* The enqueue test variant's to_host (be_host_enqueue_ops): a copy, after
 * the file BE_HOST_TO_HOST_GATE_ENV names exists (polled, at most 60 s),
 * so that a test holds a publish's key check while other calls run. */
static int host_to_host(struct be_call *c, int s, void *dst, const void *src, size_t bytes)
{
    (void)s;
    const char *gate = getenv(BE_HOST_TO_HOST_GATE_ENV);
    for (int i = 0; gate && *gate && access(gate, F_OK) != 0; i++) {
        if (i == 6000)
            return host_fail(c, ZPP_ETIMEDOUT, "to_host gate file never appeared (test hook)");
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    memcpy(dst, src, bytes);
    return 0;
}

#define HOST_OPS_COMMON                                                                            \
    .check = host_check, .scratch = host_scratch, .quantize = host_quantize,                       \
    .dequantize = host_dequantize, .reorder_quantize = host_reorder_quantize,                      \
    .reduce_requant = host_reduce_requant, .reduce_out = host_reduce_out, .copy = host_copy,       \
    .zero = host_zero, .allgather = host_allgather, .alltoall = host_alltoall,                     \
    .reduce_scatter = host_reduce_scatter, .store_alloc = host_store_alloc,                        \
    .store_free = host_store_free, .job_open = host_job_open, .job_close = host_job_close,         \
    .job_poll = host_job_poll, .job_open_ids = host_job_open_ids, .peer_ok = host_peer_ok,         \
    .peer_fence = host_peer_fence, .peer_gather = host_peer_gather, .peer_qwz = host_peer_qwz,     \
    .buf_shared = host_buf_shared, .events_open_flags = host_events_open_flags,                    \
    .events_settle = host_events_settle, .events_close = host_events_close

const struct be_ops be_host_enqueue_ops = {
    .name = "host",
    HOST_OPS_COMMON,
    .enqueue_only = 1,
    .to_host = host_to_host,
};

const struct be_ops be_host_ops = {
    .name = "host",
    HOST_OPS_COMMON,
};
