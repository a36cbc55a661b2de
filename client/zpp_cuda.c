/*
 * zpp_cuda.c — libzpp's CUDA side (zpp_cuda.h): the connection's pool of
 * interprocess events, registration of GPU memory (VMM descriptors or a
 * legacy IPC handle), and stream-ordered collectives.
 *
 * It plugs into zpp.c through the zpp__ext hooks of zpp_int.h: Hello sends
 * our ready events and we open the daemon's done events from the reply;
 * zpp_collective on an attached connection becomes async + stream wait on
 * the default stream. Event slot i is in flight from zpp_collective_async
 * (which records ready[i]) until zpp_wait_stream (which makes the stream
 * wait on done[i]); the daemon records done[i] only for a call that named
 * slot i, so a slot is never re-recorded by either side while in use.
 *
 * The daemon watches ready[i] from the host (cuEventQuery), which sees the
 * latest record, not the one a call named. So ready[i] is re-recorded only
 * once done[i] of its previous call has completed: by then the daemon has
 * seen the earlier record. Slots rotate, so the one picked has almost
 * always finished long ago; if none has, the caller waits here for the
 * oldest (SLOT_WAIT_MS at most).
 *
 * Flags (done_flags.h; docs/cuda.md, "Done flags"): unless
 * ZPP_DONE_FLAGS=0, the connection also offers a block of 32-bit flags in
 * host memory, registered with CUDA once per process. When the daemon takes
 * them (HelloReply.flag_sync, with no done events) no interprocess
 * event is used at all: the stream writes call k's value to ready flag i
 * where it would record ready[i], zppd writes it to done flag i after the
 * call's work, and the stream waits for that flag instead of done[i]; a
 * read of the done flag says whether slot i is free. A flag can be raised
 * from here, an event of another process cannot, so a stream whose zppd
 * died with the call answered does not wait for good; and with no IPC
 * event, a client needs neither zppd's uid nor its /dev/shm.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "done_flags.h"
#include "zpp_cuda.h"
#include "zpp_int.h"

/* the block's done flags end where the protocol puts the ready flags */
_Static_assert(ZPP_DFLAGS_N * 4 == ZPP_FLAGS_READY_OFF, "done_flags.h and zpp.proto disagree");

#define EV_HANDLE_LEN 64
#define SLOT_WAIT_MS 60000 /* longest wait for a slot's previous call to finish */
/* zpp_wait_stream of a call of at most DONE_POLL_MAX_BYTES (tensor bytes)
 * polls its done event up to ZPP_DONE_SPIN_US (default DONE_SPIN_US_DEF)
 * before it makes the stream wait on it; a call found finished needs no
 * wait on the stream at all. A stream's wait on another process's event
 * costs a small call 8-10 us of GPU-side latency on two H200s under MPS
 * (bench/results/cuda-2026-11-23-h200x2-s14/), the query a fraction of a
 * microsecond. Larger calls take longer than any spin: one query. */
#define DONE_POLL_MAX_BYTES (1ull << 20)
#define DONE_SPIN_US_DEF 20
#define DONE_SPIN_US_MAX 1000

/* The driver API through libcuda.so.1 loaded at run time: libzpp never
 * links libcuda, so host-only users need no NVIDIA driver. */
/* The driver ABI of the entry points loaded below: 12.0's is the cuda.h
 * prototype of each of them (why not CUDA_VERSION: daemon/backend_cuda_int.h,
 * ZCU_ABI). */
#define ZCU_ABI 12000
/* clang-format off */
#define ZCU_FUNCS(X) \
    X(cuCtxGetCurrent) \
    X(cuCtxSetCurrent) \
    X(cuCtxGetDevice) \
    X(cuDeviceGet) \
    X(cuDeviceGetUuid) \
    X(cuEventCreate) \
    X(cuEventDestroy) \
    X(cuEventQuery) \
    X(cuEventRecord) \
    X(cuGetErrorString) \
    X(cuIpcGetEventHandle) \
    X(cuIpcGetMemHandle) \
    X(cuIpcOpenEventHandle) \
    X(cuMemExportToShareableHandle) \
    X(cuMemHostGetDevicePointer) \
    X(cuMemHostRegister) \
    X(cuMemsetD8Async) \
    X(cuMemGetAddressRange) \
    X(cuMemRelease) \
    X(cuMemRetainAllocationHandle) \
    X(cuPointerGetAttribute) \
    X(cuStreamCreate) \
    X(cuStreamDestroy) \
    X(cuStreamSynchronize) \
    X(cuStreamWaitEvent) \
    X(cuStreamWaitValue32) \
    X(cuStreamWriteValue32)
/* clang-format on */

static struct {
#define ZCU_MEMBER(f) __typeof__(&f) p_##f;
    ZCU_FUNCS(ZCU_MEMBER)
#undef ZCU_MEMBER
} zcu;
#define ZCU(f) (zcu.p_##f)
/* 0: not loaded (or the last try failed), 1: a thread is loading, 2: loaded.
 * zcu is process-wide while connections are per thread (zpp.h): threads
 * with connections of their own may make their first CUDA call at once. */
static atomic_int zcu_state;

/* Fills zcu; 0 or ZPP_EUNSUPPORTED. Only one thread at a time (zcu_load). */
static int zcu_fill(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return ZPP_EUNSUPPORTED;
    __typeof__(&cuGetProcAddress) gpa;
    *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
    if (!gpa)
        return ZPP_EUNSUPPORTED;
#define ZCU_LOAD(f)                                                                                \
    {                                                                                              \
        CUdriverProcAddressQueryResult q;                                                          \
        if (gpa(#f, (void **)&zcu.p_##f, ZCU_ABI, CU_GET_PROC_ADDRESS_DEFAULT, &q) !=              \
                CUDA_SUCCESS ||                                                                    \
            !zcu.p_##f)                                                                            \
            return ZPP_EUNSUPPORTED;                                                               \
    }
    ZCU_FUNCS(ZCU_LOAD)
#undef ZCU_LOAD
    return 0;
}

/* Loads the driver functions once per process; 0 or ZPP_EUNSUPPORTED.
 * Thread-safe: one thread fills zcu, the others wait for its outcome. */
static int zcu_load(void)
{
    int st = atomic_load_explicit(&zcu_state, memory_order_acquire);
    while (st != 2) {
        if (st == 0 && atomic_compare_exchange_strong(&zcu_state, &st, 1)) {
            int rc = zcu_fill();
            atomic_store_explicit(&zcu_state, rc ? 0 : 2, memory_order_release);
            return rc;
        }
        if (st == 1) {
            sched_yield();
            st = atomic_load_explicit(&zcu_state, memory_order_acquire);
        }
    }
    return 0;
}

struct zpp_cuda {
    CUcontext ctx;
    int n;
    CUevent *ready; /* ours, interprocess */
    CUevent *done;  /* the daemon's, opened from HelloReply */
    uint8_t (*ready_h)[EV_HANDLE_LEN];
    ProtobufCBinaryData *wire;
    uint64_t *req_of; /* slot -> req_id in flight (0: free) */
    unsigned char *used; /* slot -> a call has named it (done[i] recorded or to be) */
    unsigned char *small; /* slot -> its call is small enough to poll for (DONE_POLL_MAX_BYTES) */
    int next;         /* round-robin start for the next free slot */
    int have_done;
    uint64_t done_spin_ns; /* ZPP_DONE_SPIN_US */
    /* done flags: the block (NULL: none offered), where the GPU sees it,
     * the pipe of the Hello in progress, whether the daemon took them, and
     * each slot's value of its call in flight */
    zpp_dflags *df;
    CUdeviceptr df_dev;
    int live_rfd, live_wfd;
    int flag_sync; /* on the flags: no interprocess event, done[] unused */
    uint32_t *fval;
    /* the device memory registered on this connection, for the ranges a
     * lost call's output is filled in (done_flags.h), and the job's world
     * size (a reduce-scatter's output is its rank's shard) */
    struct zcu_reg {
        uint64_t id;
        CUdeviceptr base;
        uint64_t len;
    } *regs;
    size_t n_regs, cap_regs;
    uint32_t world;
};

static int drv_err(zpp_conn *c, CUresult r, const char *what)
{
    const char *s = NULL;
    char msg[200];
    ZCU(cuGetErrorString)(r, &s);
    snprintf(msg, sizeof msg, "%s: %s", what, s ? s : "CUDA error");
    return zpp__set_err(c, r == CUDA_ERROR_OUT_OF_MEMORY ? ZPP_ENOMEM : ZPP_EBACKEND, msg);
}

static void uuid_fmt(const CUuuid *u, char *out)
{
    const unsigned char *x = (const unsigned char *)u->bytes;
    snprintf(out, ZPP_CUDA_UUID_LEN,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", x[0], x[1],
             x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13], x[14],
             x[15]);
}

int zpp_cuda_device_uuid(char out[ZPP_CUDA_UUID_LEN])
{
    CUdevice d;
    CUuuid u;
    if (!out)
        return ZPP_EINVAL;
    if (zcu_load())
        return ZPP_EUNSUPPORTED;
    if (ZCU(cuCtxGetDevice)(&d) != CUDA_SUCCESS || ZCU(cuDeviceGetUuid)(&u, d) != CUDA_SUCCESS)
        return ZPP_EBACKEND;
    uuid_fmt(&u, out);
    return 0;
}

/* ---- lost calls' outputs ------------------------------------------------ */

/* The watcher's on_lost (done_flags.h): the outputs of calls that zppd
 * answered and will never run, filled with 0xFF bytes (NaN in fp32, fp16
 * and bf16) on a stream of its own before their flags are raised. Runs on
 * the watcher thread with the connection's context, which it leaves as it
 * found it. It waits for the fill however long it takes: the flags rise
 * only after it, and the connection that owns the memory is held until
 * then (a closing one forgets its ranges under the watcher's lock), so the
 * memory cannot be freed under it. A CUDA failure leaves the outputs as
 * they are: undefined, as before. */
static void fill_lost(void *ctx, const uint64_t *at, const uint64_t *len, int n)
{
    CUcontext prev = NULL;
    CUstream s = NULL;
    ZCU(cuCtxGetCurrent)(&prev);
    if (ZCU(cuCtxSetCurrent)((CUcontext)ctx) != CUDA_SUCCESS)
        return;
    /* non-blocking: a legacy-stream memset would wait for the very streams
     * held by the flags it is to let go */
    if (ZCU(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
        for (int i = 0; i < n; i++)
            ZCU(cuMemsetD8Async)((CUdeviceptr)at[i], 0xFF, (size_t)len[i], s);
        ZCU(cuStreamSynchronize)(s);
        ZCU(cuStreamDestroy)(s);
    }
    ZCU(cuCtxSetCurrent)(prev);
}

/* Where call's output lies: 0 when it is not wholly inside one device
 * registration of this connection, or its size is not known here (a
 * reduce-scatter before the world size is); else its length, and *at. */
static uint64_t out_span(const struct zpp_cuda *z, const zpp_coll *call, uint64_t *at)
{
    int reduce = call->op == ZPP_OP_REDUCE_SCATTER || call->op == ZPP_OP_QGZ_REDUCE_SCATTER;
    int gather = call->op == ZPP_OP_ALLGATHER || call->op == ZPP_OP_QWZ_ALLGATHER ||
                 call->op == ZPP_OP_HPZ_GATHER;
    int dt = reduce && call->out_dtype ? (int)call->out_dtype : (int)call->dtype;
    uint64_t es = dt == ZPP_FP32 ? 4 : dt == ZPP_FP16 || dt == ZPP_BF16 ? 2 : 0;
    uint64_t elems = gather ? call->count
                     : reduce && z->world ? call->count / z->world + !!(call->count % z->world)
                                          : 0;
    if (!es || !elems || elems > UINT64_MAX / es)
        return 0;
    uint64_t bytes = elems * es;
    for (size_t i = 0; i < z->n_regs; i++) {
        const struct zcu_reg *g = &z->regs[i];
        if (g->id != call->output.buffer_id)
            continue;
        if (call->output.offset > g->len || bytes > g->len - call->output.offset)
            return 0;
        *at = g->base + call->output.offset;
        return bytes;
    }
    return 0;
}

/* A registration of [base, base + len) as buffer id, remembered for
 * out_span; without memory it is not, and such calls stay unfilled. */
static void reg_add(struct zpp_cuda *z, uint64_t id, CUdeviceptr base, uint64_t len)
{
    if (z->n_regs == z->cap_regs) {
        size_t cap = z->cap_regs ? 2 * z->cap_regs : 16;
        struct zcu_reg *r = realloc(z->regs, cap * sizeof *r);
        if (!r)
            return;
        z->regs = r;
        z->cap_regs = cap;
    }
    z->regs[z->n_regs++] = (struct zcu_reg){id, base, len};
}

/* ---- hooks -------------------------------------------------------------- */

static void ext_free(void *state)
{
    struct zpp_cuda *z = state;
    if (!z)
        return;
    CUcontext prev = NULL;
    ZCU(cuCtxGetCurrent)(&prev);
    if (z->ctx)
        ZCU(cuCtxSetCurrent)(z->ctx);
    for (int i = 0; i < z->n; i++) {
        if (z->ready && z->ready[i])
            ZCU(cuEventDestroy)(z->ready[i]);
        if (z->done && z->done[i])
            ZCU(cuEventDestroy)(z->done[i]);
    }
    if (z->ctx && prev != z->ctx)
        ZCU(cuCtxSetCurrent)(prev); /* NULL too: leave no context bound here */
    free(z->ready);
    free(z->done);
    free(z->ready_h);
    free(z->wire);
    free(z->req_of);
    free(z->used);
    free(z->small);
    free(z->fval);
    free(z->regs);
    if (z->live_rfd >= 0)
        close(z->live_rfd);
    if (z->live_wfd >= 0)
        close(z->live_wfd);
    zpp__dflags_put(z->df); /* pooled once the daemon is done with it */
    free(z);
}

static void live_close(struct zpp_cuda *z)
{
    if (z->live_rfd >= 0)
        close(z->live_rfd);
    if (z->live_wfd >= 0)
        close(z->live_wfd);
    z->live_rfd = z->live_wfd = -1;
}

static int ext_hello_out(void *state, Zpp__Hello *h, int *fds, int *nfds)
{
    struct zpp_cuda *z = state;
    z->world = h->world_size;
    h->ready_events = z->wire;
    h->n_ready_events = (size_t)z->n;
    *nfds = 0;
    live_close(z); /* a Hello refused before: its pipe is of no use */
    if (!z->df || zpp__dflags_pipe(&z->live_rfd, &z->live_wfd))
        return 0; /* no done flags: the stream waits on the done events */
    h->flags_nfds = 2;
    h->flags_size = ZPP_DFLAGS_BYTES;
    h->nslots = (uint32_t)z->n;
    h->flag_bits = 32;
    fds[0] = z->df->memfd;
    fds[1] = z->live_wfd;
    *nfds = 2;
    return 0;
}

static int ext_hello_in(void *state, zpp_conn *c, const Zpp__HelloReply *hr)
{
    struct zpp_cuda *z = state;
    /* On the flags the daemon opened none of our events and sends none of
     * its own (proto: HelloReply.flag_sync). */
    int on_flags = hr->flag_sync != 0;
    if (on_flags && (!z->df || z->live_rfd < 0 || hr->n_done_events))
        return zpp__set_err(c, ZPP_EPROTO,
                            "the daemon says it took flags this Hello did not offer, or sent done "
                            "events with them");
    if (!on_flags && hr->n_done_events != (size_t)z->n)
        return zpp__set_err(c, ZPP_EPROTO,
                            "the daemon returned a different number of done events (is it "
                            "running the cuda backend?)");
    for (int i = 0; i < z->n && !on_flags; i++) {
        CUipcEventHandle h;
        if (hr->done_events[i].len != sizeof h)
            return zpp__set_err(c, ZPP_EPROTO, "a done event handle is not 64 bytes");
        memcpy(&h, hr->done_events[i].data, sizeof h);
        if (z->done[i]) {
            ZCU(cuEventDestroy)(z->done[i]);
            z->done[i] = NULL;
        }
        CUresult r = ZCU(cuIpcOpenEventHandle)(&z->done[i], h);
        if (r != CUDA_SUCCESS) {
            z->done[i] = NULL;
            return drv_err(c, r,
                           r == CUDA_ERROR_MAP_FAILED
                               ? "cuIpcOpenEventHandle (daemon done event; zppd and its clients "
                                 "must run as one uid and share /dev/shm: docs/cuda.md)"
                               : "cuIpcOpenEventHandle (daemon done event)");
        }
    }
    z->have_done = 1;
    /* zppd holds the only write end of the pipe from now on */
    if (z->live_wfd >= 0)
        close(z->live_wfd);
    z->live_wfd = -1;
    z->flag_sync = on_flags;
    if (z->flag_sync) {
        atomic_store(&z->df->ready_used, 1);
        int rfd = z->live_rfd;
        z->live_rfd = -1;
        zpp__dflags_watch(z->df, rfd); /* on failure every wait raises its own flag */
    } else {
        live_close(z);
    }
    return 0;
}

/* The daemon let buffer id go: a call lost from now on is not filled there
 * (the memory may be freed), and no note of an earlier one stays. */
static void ext_deregistered(void *state, uint64_t id)
{
    struct zpp_cuda *z = state;
    for (size_t i = 0; i < z->n_regs; i++)
        if (z->regs[i].id == id) {
            zpp__dflags_forget(z->df, z->regs[i].base, z->regs[i].base + z->regs[i].len);
            z->regs[i] = z->regs[--z->n_regs];
            return;
        }
}

static int ext_collective(void *state, zpp_conn *c, const zpp_coll *call, zpp_result *res)
{
    uint64_t id = 0;
    int rc = zpp_collective_async(c, call, (CUstream)0, &id);
    if (rc < 0)
        return rc;
    return zpp_wait_stream(c, id, (CUstream)0, res);
}

/* A block of done flags for the connection, registered with CUDA (once per
 * block: a registration is per process), unless ZPP_DONE_FLAGS=0. Where
 * anything fails the connection offers none and waits on its done events. */
static void done_flags_offer(struct zpp_cuda *z)
{
    if (!zpp__env_uint("ZPP_DONE_FLAGS", 1, 1, NULL) || zpp__dflags_get(&z->df))
        return;
    CUdeviceptr d = 0;
    if (!z->df->user &&
        ZCU(cuMemHostRegister)(z->df->flags, ZPP_DFLAGS_BYTES,
                               CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP) ==
            CUDA_SUCCESS)
        z->df->user = z->df; /* registered: never undone (done_flags.h) */
    if (!z->df->user || ZCU(cuMemHostGetDevicePointer)(&d, z->df->flags, 0) != CUDA_SUCCESS) {
        zpp__dflags_put(z->df);
        z->df = NULL;
        return;
    }
    z->df_dev = d;
    z->df->lost_ctx = z->ctx;
    z->df->on_lost = fill_lost;
}

int zpp_cuda_attach(zpp_conn *c, int n_events)
{
    if (!c)
        return ZPP_EINVAL;
    if (zcu_load())
        return zpp__set_err(c, ZPP_EUNSUPPORTED,
                            "zpp_cuda_attach: no NVIDIA driver "
                            "(libcuda.so.1) could be loaded");
    zpp__ext *x = zpp__ext_of(c);
    if (x->state)
        return zpp__set_err(c, ZPP_ESTATE, "zpp_cuda_attach: already attached");
    if (n_events < 1 || n_events > (int)ZPP_MAX_EVENTS)
        return zpp__set_err(c, ZPP_EINVAL, "zpp_cuda_attach: n_events must be in 1..64");
    struct zpp_cuda *z = calloc(1, sizeof *z);
    int rc = 0;
    CUresult r;
    if (z)
        z->live_rfd = z->live_wfd = -1;
    if (!z || !(z->ready = calloc((size_t)n_events, sizeof *z->ready)) ||
        !(z->fval = calloc((size_t)n_events, sizeof *z->fval)) ||
        !(z->done = calloc((size_t)n_events, sizeof *z->done)) ||
        !(z->ready_h = calloc((size_t)n_events, sizeof *z->ready_h)) ||
        !(z->wire = calloc((size_t)n_events, sizeof *z->wire)) ||
        !(z->req_of = calloc((size_t)n_events, sizeof *z->req_of)) ||
        !(z->used = calloc((size_t)n_events, 1)) || !(z->small = calloc((size_t)n_events, 1))) {
        ext_free(z);
        return zpp__set_err(c, ZPP_ENOMEM, "zpp_cuda_attach: out of memory");
    }
    if ((r = ZCU(cuCtxGetCurrent)(&z->ctx)) != CUDA_SUCCESS || !z->ctx) {
        ext_free(z);
        return zpp__set_err(c, ZPP_ESTATE, "zpp_cuda_attach: no current CUDA context");
    }
    z->n = n_events;
    z->done_spin_ns = zpp__env_us_ns("ZPP_DONE_SPIN_US", DONE_SPIN_US_DEF, DONE_SPIN_US_MAX);
    for (int i = 0; i < n_events; i++) {
        CUipcEventHandle h;
        r = ZCU(cuEventCreate)(&z->ready[i], CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            z->ready[i] = NULL;
            rc = drv_err(c, r, "cuEventCreate (interprocess)");
            break;
        }
        if ((r = ZCU(cuIpcGetEventHandle)(&h, z->ready[i])) != CUDA_SUCCESS) {
            rc = drv_err(c, r, "cuIpcGetEventHandle");
            break;
        }
        memcpy(z->ready_h[i], &h, EV_HANDLE_LEN);
        z->wire[i].data = z->ready_h[i];
        z->wire[i].len = EV_HANDLE_LEN;
    }
    if (rc < 0) {
        ext_free(z);
        return rc;
    }
    done_flags_offer(z);
    x->state = z;
    x->deregistered = ext_deregistered;
    x->hello_out = ext_hello_out;
    x->hello_in = ext_hello_in;
    x->collective = ext_collective;
    x->free = ext_free;
    return 0;
}

static struct zpp_cuda *attached(zpp_conn *c)
{
    zpp__ext *x = zpp__ext_of(c);
    return x->free == ext_free ? x->state : NULL;
}

int zpp_cuda_done_flags(const zpp_conn *c)
{
    const struct zpp_cuda *z = c ? attached((zpp_conn *)c) : NULL;
    return z && z->flag_sync;
}

/* ---- buffers ------------------------------------------------------------ */

int zpp_register_cuda(zpp_conn *c, const void *dptr, size_t len, uint64_t *buffer_id,
                      uint64_t *offset_out)
{
    if (!c)
        return ZPP_EINVAL;
    if (!dptr || !len || !buffer_id || !offset_out)
        return zpp__set_err(c, ZPP_EINVAL, "zpp_register_cuda: null pointer or zero length");
    if (zcu_load())
        return zpp__set_err(c, ZPP_EUNSUPPORTED, "zpp_register_cuda: no NVIDIA driver");
    struct zpp_cuda *z = attached(c); /* NULL: registered, not remembered */
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)dptr, base = 0;
    size_t size = 0;
    CUresult r = ZCU(cuMemGetAddressRange)(&base, &size, p);
    if (r != CUDA_SUCCESS)
        return drv_err(c, r, "zpp_register_cuda: cuMemGetAddressRange (not device memory?)");
    char uuid[ZPP_CUDA_UUID_LEN] = "";
    int ord = -1;
    CUdevice dev;
    CUuuid u;
    if (ZCU(cuPointerGetAttribute)(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS &&
        ZCU(cuDeviceGet)(&dev, ord) == CUDA_SUCCESS &&
        ZCU(cuDeviceGetUuid)(&u, dev) == CUDA_SUCCESS)
        uuid_fmt(&u, uuid);

    CUmemGenericAllocationHandle h;
    if (ZCU(cuMemRetainAllocationHandle)(&h, (void *)(uintptr_t)base) == CUDA_SUCCESS) {
        /* VMM: one descriptor per physical chunk covering [p, p + len). */
        ZCU(cuMemRelease)(h);
        int fds[ZPP_CUDA_MAX_CHUNKS];
        uint64_t sizes[ZPP_CUDA_MAX_CHUNKS];
        int n = 0, rc = 0;
        CUdeviceptr at = base, end = p + len;
        while (at < end) {
            CUdeviceptr cb = 0;
            size_t cs = 0;
            if (n == ZPP_CUDA_MAX_CHUNKS) {
                rc = zpp__set_err(c, ZPP_ELIMIT,
                                  "zpp_register_cuda: the range spans more than 256 VMM chunks; "
                                  "register smaller ranges");
                break;
            }
            if ((r = ZCU(cuMemGetAddressRange)(&cb, &cs, at)) != CUDA_SUCCESS || cb != at || !cs) {
                rc = r != CUDA_SUCCESS ? drv_err(c, r, "cuMemGetAddressRange (chunk)")
                                       : zpp__set_err(c, ZPP_EINVAL, "VMM chunks not contiguous");
                break;
            }
            if ((r = ZCU(cuMemRetainAllocationHandle)(&h, (void *)(uintptr_t)cb)) != CUDA_SUCCESS) {
                rc = drv_err(c, r, "cuMemRetainAllocationHandle (chunk)");
                break;
            }
            int fd = -1;
            r = ZCU(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                  0);
            ZCU(cuMemRelease)(h);
            if (r != CUDA_SUCCESS) {
                rc = drv_err(c, r,
                             "cuMemExportToShareableHandle (allocated without the POSIX-fd "
                             "handle type?)");
                break;
            }
            fds[n] = fd;
            sizes[n++] = cs;
            at = cb + cs;
        }
        if (rc == 0) {
            uint64_t total = 0;
            for (int i = 0; i < n; i++)
                total += sizes[i];
            rc = zpp__register_dev(c, fds, n, sizes, NULL, 0, uuid, 0, total, buffer_id);
            if (rc == 0) {
                *offset_out = p - base;
                if (z)
                    reg_add(z, *buffer_id, base, total);
            }
        }
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return rc;
    }
    /* cudaMalloc memory: the legacy IPC handle of the allocation, which
     * must hold all of [p, p + len) (cuMemGetAddressRange: p - base < size). */
    if (len > size - (p - base))
        return zpp__set_err(c, ZPP_ERANGE,
                            "zpp_register_cuda: the range runs past the end of its allocation");
    CUipcMemHandle ih;
    if ((r = ZCU(cuIpcGetMemHandle)(&ih, base)) != CUDA_SUCCESS)
        return drv_err(c, r, "cuIpcGetMemHandle");
    uint8_t raw[EV_HANDLE_LEN];
    memcpy(raw, &ih, sizeof raw);
    int rc = zpp__register_dev(c, NULL, 0, NULL, raw, sizeof raw, uuid, 0, size, buffer_id);
    memset(raw, 0, sizeof raw); /* a bearer token: do not leave copies around */
    if (rc == 0) {
        *offset_out = p - base;
        if (z)
            reg_add(z, *buffer_id, base, size);
    }
    return rc;
}

/* ---- stream-ordered calls --------------------------------------------------- */

/* Whether slot i's last call has finished on the daemon's side: its done
 * event (CUDA_SUCCESS, CUDA_ERROR_NOT_READY or an error), or on the flags
 * alone its done flag, which zppd writes after the call's work. */
static CUresult slot_done(struct zpp_cuda *z, int i)
{
    if (z->flag_sync)
        return zpp__dflags_reached(z->df, i, z->fval[i]) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    return ZCU(cuEventQuery)(z->done[i]);
}

/* zpp_collective_async, and with `early` zpp_collective_stream: the
 * stream's wait on the done flag enqueued here, the slot then not held for
 * the reply (slot_done alone says when it is free again). */
static int submit_on(zpp_conn *c, const zpp_coll *call, CUstream stream, uint64_t *req_id,
                     int early)
{
    if (!c)
        return ZPP_EINVAL;
    const char *fn = early ? "zpp_collective_stream" : "zpp_collective_async";
    char msg[96];
    struct zpp_cuda *z = attached(c);
    if (!z || !z->have_done || !req_id) {
        snprintf(msg, sizeof msg, "%s: %s", fn,
                 req_id ? "call zpp_cuda_attach before zpp_hello" : "no req_id");
        return zpp__set_err(c, req_id ? ZPP_ESTATE : ZPP_EINVAL, msg);
    }
    if (early && !z->flag_sync)
        return zpp__set_err(c, ZPP_EUNSUPPORTED,
                            "zpp_collective_stream: this connection has no done flags "
                            "(zpp_cuda_done_flags is 0): use zpp_collective_async and "
                            "zpp_wait_stream");
    /* The events belong to the context attached at zpp_cuda_attach; a
     * caller's thread (autograd's backward thread, say) may have none or
     * another current. */
    CUcontext prev = NULL;
    ZCU(cuCtxGetCurrent)(&prev);
    if (prev != z->ctx)
        ZCU(cuCtxSetCurrent)(z->ctx);
    /* A free slot whose previous call has finished on the daemon's side
     * (see the top of this file); else the first free one, waited for. */
    int slot = -1, oldest = -1;
    for (int k = 0; k < z->n && slot < 0; k++) {
        int i = (z->next + k) % z->n;
        if (z->req_of[i])
            continue;
        if (!z->used[i] || slot_done(z, i) != CUDA_ERROR_NOT_READY)
            slot = i;
        else if (oldest < 0)
            oldest = i;
    }
    CUresult r = CUDA_SUCCESS;
    if (slot < 0 && oldest >= 0) {
        const uint64_t end = zpp__mono_ns() + SLOT_WAIT_MS * 1000000ull;
        while ((r = slot_done(z, oldest)) == CUDA_ERROR_NOT_READY && zpp__mono_ns() < end)
            sched_yield();
        if (r == CUDA_SUCCESS)
            slot = oldest;
    }
    if (slot < 0) {
        if (prev != z->ctx)
            ZCU(cuCtxSetCurrent)(prev);
        if (oldest < 0)
            return zpp__set_err(c, ZPP_EBUSY, "every event of the pool is in flight: wait first");
        if (r == CUDA_ERROR_NOT_READY)
            return zpp__set_err(c, ZPP_ETIMEDOUT,
                                "no event slot: the daemon has not finished the calls that used "
                                "them (waited 60 s)");
        return drv_err(c, r, "cuEventQuery (done event)");
    }
    /* promised before it is sent: a hang-up from now on raises the flag,
     * after filling the output noted here */
    uint32_t fv = 0;
    if (z->flag_sync) {
        uint64_t at = 0, len = out_span(z, call, &at);
        zpp__dflags_note(z->df, slot, at, len);
        fv = zpp__dflags_arm(z->df, slot);
    }
    if (z->flag_sync)
        r = ZCU(cuStreamWriteValue32)(stream, z->df_dev + ZPP_FLAGS_READY_OFF + 4u * (unsigned)slot,
                                      fv, CU_STREAM_WRITE_VALUE_DEFAULT);
    else
        r = ZCU(cuEventRecord)(z->ready[slot], stream);
    if (prev != z->ctx)
        ZCU(cuCtxSetCurrent)(prev);
    if (r != CUDA_SUCCESS)
        return drv_err(c, r, z->flag_sync ? "cuStreamWriteValue32 (ready flag)"
                                       : "cuEventRecord (ready event)");
    uint64_t id = 0;
    int rc = zpp__submit_ev(c, call, (uint32_t)slot + 1, fv, &id);
    if (rc < 0)
        return rc;
    z->fval[slot] = fv;
    z->req_of[slot] = early ? 0 : id;
    z->used[slot] = 1;
    uint64_t es = call->dtype == ZPP_FP32 ? 4 : 2;
    z->small[slot] = call->count <= DONE_POLL_MAX_BYTES / es;
    z->next = (slot + 1) % z->n;
    *req_id = id;
    if (!early)
        return 0;
    /* The stream waits for the value zppd's stream writes after the call,
     * or zppd from the CPU when it refuses the call, or the watcher when
     * zppd's pipe hangs up: every way the call can end raises it. */
    if (prev != z->ctx)
        ZCU(cuCtxSetCurrent)(z->ctx);
    r = ZCU(cuStreamWaitValue32)(stream, z->df_dev + 4u * (unsigned)slot, fv,
                                 CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS)
        zpp__dflags_after_wait(z->df, slot, fv);
    if (prev != z->ctx)
        ZCU(cuCtxSetCurrent)(prev);
    return r == CUDA_SUCCESS ? 0 : drv_err(c, r, "cuStreamWaitValue32 (done flag)");
}

int zpp_collective_async(zpp_conn *c, const zpp_coll *call, CUstream stream, uint64_t *req_id)
{
    return submit_on(c, call, stream, req_id, 0);
}

int zpp_collective_stream(zpp_conn *c, const zpp_coll *call, CUstream stream, uint64_t *req_id)
{
    return submit_on(c, call, stream, req_id, 1);
}

int zpp_wait_stream(zpp_conn *c, uint64_t req_id, CUstream stream, zpp_result *res)
{
    if (!c)
        return ZPP_EINVAL;
    struct zpp_cuda *z = attached(c);
    int slot = -1;
    if (z)
        for (int i = 0; i < z->n; i++)
            if (z->req_of[i] == req_id && req_id) {
                slot = i;
                break;
            }
    int rc = zpp_wait(c, req_id, res);
    if (slot < 0)
        return rc;
    z->req_of[slot] = 0;
    if (rc == ZPP_EBUSY || rc == ZPP_ENOENT)
        return rc;
    /* Also after a failed call: the daemon may have recorded done[slot]
     * (a failure after enqueue); waiting on it costs nothing otherwise. */
    CUcontext prev = NULL;
    ZCU(cuCtxGetCurrent)(&prev);
    if (prev != z->ctx)
        ZCU(cuCtxSetCurrent)(z->ctx);
    /* done[slot] was recorded before the reply was sent, so a query now
     * sees this call's record: complete means the call's work is done and
     * the stream has nothing to wait for. On the flags the done flag says
     * it (a read of host memory); a call zppd did not run has it raised
     * before its reply. */
    CUresult r = slot_done(z, slot);
    if (r == CUDA_ERROR_NOT_READY && z->small[slot] && z->done_spin_ns) {
        const uint64_t end = zpp__mono_ns() + z->done_spin_ns;
        while ((r = slot_done(z, slot)) == CUDA_ERROR_NOT_READY && zpp__mono_ns() < end)
            ;
    }
    const char *what = "cuStreamWaitEvent (done event)";
    if (r != CUDA_SUCCESS && z->flag_sync) {
        /* not yet: the stream waits for the flag zppd's stream writes
         * after the call, which libzpp raises itself should zppd go first */
        what = "cuStreamWaitValue32 (done flag)";
        r = ZCU(cuStreamWaitValue32)(stream, z->df_dev + 4u * (unsigned)slot, z->fval[slot],
                                     CU_STREAM_WAIT_VALUE_GEQ);
        if (r == CUDA_SUCCESS)
            zpp__dflags_after_wait(z->df, slot, z->fval[slot]);
    } else if (r != CUDA_SUCCESS) { /* not yet (or the query failed): the stream waits */
        r = ZCU(cuStreamWaitEvent)(stream, z->done[slot], 0);
    }
    if (prev != z->ctx)
        ZCU(cuCtxSetCurrent)(prev);
    if (r != CUDA_SUCCESS && rc == 0)
        return drv_err(c, r, what);
    return rc;
}
