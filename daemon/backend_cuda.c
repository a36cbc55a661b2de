/*
 * backend_cuda.c — the cuda backend: the node's GPUs, client memory
 * imported into the daemon, the sessions' interprocess events, hpZ store
 * memory, and the ops table. A job's streams, NCCL communicators, staging
 * and the collectives live in backend_cuda_job.c.
 *
 * Devices: every GPU the daemon sees, by its UUID as nvidia-smi prints it
 * ("GPU-xxxxxxxx-xxxx-..."): a client names its GPU by UUID because its
 * CUDA_VISIBLE_DEVICES differs from ours. We retain each primary context
 * and use the runtime API on it (cudaSetDevice), the driver API where the
 * runtime has no call (VMM import, IPC events).
 *
 * Client memory (docs/cuda.md, "Buffers"):
 *   VMM: one POSIX fd per physical chunk (cuMemExportToShareableHandle on
 *     the client), imported with cuMemImportFromShareableHandle, mapped back
 *     to back in one reserved range, read-write for the device. The range
 *     [offset, offset + length) must lie inside the sum of the chunks.
 *   legacy: a cudaIpcMemHandle of the base allocation (only when
 *     allow_legacy_ipc; a bearer token, DESIGN.md), opened with
 *     cuIpcOpenMemHandle; cuMemGetAddressRange gives the real allocation
 *     size against which the range is checked. One open per (device, uid,
 *     handle), reference-counted: the driver refuses a second open of the
 *     same allocation in one process.
 * Release is deferred until the work already queued on the device's job
 * streams has passed (cu_defer below): a call still enqueued may read it.
 *
 * Events: per session, the client's ready events (opened from their IPC
 * handles) and as many daemon done events (interprocess, no timing), whose
 * handles go back in HelloReply. call_wait makes the slot's stream wait on
 * the session's gate flag for the ready event (struct cu_events);
 * call_record records the done event on it: no CPU waits for the GPU.
 *
 * Sticky CUDA errors (illegal address and the like) make the whole process
 * unusable: they set b->fatal; be_cuda_fatal() tells main, which exits.
 *
 * Releases never wait for the GPU on the loop thread: memory that queued
 * work may still touch is freed once events recorded on every live job's
 * streams have completed (cu_defer; reaped from be_cuda_fatal, which main
 * calls every tick).
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda_int.h"
#include "frame.h"
#include "gate_flag.h"
#include "gpu_start.h"
#include "log.h"
#include "zpp.h"

#define CU_IPC_HANDLE_LEN 64 /* sizeof(CUipcMemHandle) == sizeof(CUipcEventHandle) */

/* ---- the driver API, loaded at run time ---------------------------------- */

struct zcu_table zcu;

int zcu_load(char *why, size_t why_len)
{
    static int loaded;
    if (loaded)
        return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, why_len, "no NVIDIA driver (libcuda.so.1): %s", dlerror());
        return -1;
    }
    __typeof__(&cuGetProcAddress) gpa;
    *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) {
        snprintf(why, why_len, "libcuda.so.1 has no cuGetProcAddress_v2 (driver too old)");
        dlclose(h);
        return -2;
    }
#define ZCU_LOAD(f)                                                                                \
    {                                                                                              \
        CUdriverProcAddressQueryResult q;                                                          \
        if (gpa(#f, (void **)&zcu.p_##f, ZCU_ABI, CU_GET_PROC_ADDRESS_DEFAULT, &q) !=              \
                CUDA_SUCCESS ||                                                                    \
            !zcu.p_##f) {                                                                          \
            snprintf(why, why_len, "the NVIDIA driver lacks %s (CUDA %d)", #f, ZCU_ABI);           \
            return -2;                                                                             \
        }                                                                                          \
    }
    ZCU_FUNCS(ZCU_LOAD)
#undef ZCU_LOAD
    loaded = 1;
    return 0;
}

/* ---- errors --------------------------------------------------------- */

int cu_drv_fail(CUresult r, const char *what, char *why, size_t why_len)
{
    const char *name = NULL, *msg = NULL;
    ZCU(cuGetErrorName)(r, &name);
    ZCU(cuGetErrorString)(r, &msg);
    if (why && why_len)
        snprintf(why, why_len, "%s: %s (%s)", what, msg ? msg : "?", name ? name : "?");
    return r == CUDA_ERROR_OUT_OF_MEMORY ? ZPP_ENOMEM : ZPP_EBACKEND;
}

int cu_rt_fail(cudaError_t r, const char *what, char *why, size_t why_len)
{
    if (why && why_len)
        snprintf(why, why_len, "%s: %s (%s)", what, cudaGetErrorString(r), cudaGetErrorName(r));
    return r == cudaErrorMemoryAllocation ? ZPP_ENOMEM : ZPP_EBACKEND;
}

int cu_rt_sticky(cudaError_t r)
{
    switch (r) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorLaunchTimeout:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorExternalDevice:
    /* the MPS server ended this client: CUDA is gone until a restart */
    case cudaErrorMpsClientTerminated:
        return 1;
    default:
        return 0;
    }
}

void cu_mark_fatal(struct cu_backend *b, const char *what, cudaError_t r)
{
    if (atomic_exchange(&b->fatal_claimed, 1))
        return;
    int mps = 0;
    for (int i = 0; i < b->ndev; i++)
        mps |= b->devs[i].mps > 0;
    /* Under MPS a GPU is one fault domain (docs/cuda.md, "MPS"): the
     * operator reading this should look at the other clients too. */
    snprintf(b->fatal_why, sizeof b->fatal_why, "%s: %s (%s)%s", what, cudaGetErrorString(r),
             cudaGetErrorName(r),
             mps ? "; under MPS this may be another process's fault on the GPU, or a process "
                   "killed while its kernels ran"
                 : "");
    atomic_store(&b->fatal, 1);
}

/* Asks each GPU's context, once per CU_HEALTH_MS, whether it still works.
 * Jobs' stream and event queries see a sticky error when there is work;
 * this sees one with no work at all. Under MPS a GPU is one fault domain:
 * another client's fault, or a client killed mid-kernel, poisons our idle
 * context too, and the MPS server then takes no new client on that GPU
 * until every client, zppd included, has exited (docs/cuda.md, "MPS";
 * measured: an idle zppd that did not ask held the GPU closed to everyone).
 * A query of the context's NULL stream costs microseconds and never waits. */
#define CU_HEALTH_MS 1000u
static void cu_health(struct cu_backend *b)
{
    const uint64_t now = cu_now_ms();
    if (b->fatal || now - b->health_ms < CU_HEALTH_MS)
        return;
    b->health_ms = now;
    for (int i = 0; i < b->ndev && !b->fatal; i++) {
        CUcontext popped;
        CUresult r = ZCU(cuCtxPushCurrent)(b->devs[i].ctx);
        if (r == CUDA_SUCCESS) {
            r = ZCU(cuStreamQuery)(NULL);
            ZCU(cuCtxPopCurrent)(&popped);
        }
        /* an MPS error on a context we hold: the server is recovering
         * and waits for us to exit too */
        const int mps =
            r >= CUDA_ERROR_MPS_CONNECTION_FAILED && r <= CUDA_ERROR_MPS_CLIENT_TERMINATED;
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY && (mps || cu_rt_sticky((cudaError_t)r)))
            cu_mark_fatal(b, "asking the GPU's context", (cudaError_t)r);
    }
}

/* Called by main on every tick: also the place where deferred releases
 * are reaped (the loop never waits for the GPU) and the GPUs' contexts
 * asked (cu_health). */
int be_cuda_fatal(void *backend, char *why, size_t why_len)
{
    struct cu_backend *b = backend;
    if (!b)
        return 0;
    cu_reap(b);
    cu_jobs_tick(b, 0);
    cu_health(b);
    if (!b->fatal)
        return 0;
    if (why && why_len)
        snprintf(why, why_len, "%s", b->fatal_why);
    return 1;
}

int cu_use(const struct cu_backend *b, int device)
{
    if (device < 0 || device >= b->ndev)
        return ZPP_EINVAL;
    return cudaSetDevice(b->devs[device].ordinal) == cudaSuccess ? 0 : ZPP_EBACKEND;
}

/* ---- daemon-owned memory and deferred releases ------------------------- */

/* Makes [va, va + size) readable and writable by GPU `device` and by every
 * GPU that reads its memory directly (be_ops.peer_ok). If the peers are
 * refused, peer access goes off for good (calls decide on peer reads
 * before they allocate, and later ones no longer take them) and this
 * grant fails: the call that asked for the memory may already have chosen
 * peer reads of it, and would fault the GPU for every job. The caller
 * frees the range and fails; from then on memory is granted to `device`
 * alone. */
static CUresult grant_access(struct cu_backend *b, int device, CUdeviceptr va, size_t size)
{
    CUmemAccessDesc acc[CU_MAX_PEER_GPUS];
    int nacc = 0;
    memset(acc, 0, sizeof acc);
    for (int o = 0; o < b->ndev && nacc < CU_MAX_PEER_GPUS; o++)
        if (o == device || (b->peer && !b->peer_broken && b->peer[o * b->ndev + device])) {
            acc[nacc].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc[nacc].location.id = b->devs[o].dev;
            acc[nacc].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            if (o == device && nacc) { /* this GPU first: the fallback uses acc[0] */
                CUmemAccessDesc t = acc[0];
                acc[0] = acc[nacc];
                acc[nacc] = t;
            }
            nacc++;
        }
    CUresult r = ZCU(cuMemSetAccess)(va, size, acc, (size_t)nacc);
    if (r != CUDA_SUCCESS && nacc > 1) {
        ZLOG_W("cuda", "cannot grant peer GPUs access to memory: peer access off, this "
                       "allocation fails",
               "gpu=%d", device);
        b->peer_broken = 1;
    }
    return r;
}

int cu_vmm_alloc(struct cu_backend *b, int device, size_t bytes, void **out)
{
    const struct cu_dev *d = &b->devs[device];
    CUmemAllocationProp p = {0};
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    size_t g = d->granularity ? d->granularity : (2u << 20);
    size_t size = (bytes + g - 1) / g * g;
    if (!size)
        size = g;
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = d->dev;
    CUresult r = ZCU(cuMemCreate)(&h, size, &p, 0);
    if (r != CUDA_SUCCESS)
        return r == CUDA_ERROR_OUT_OF_MEMORY ? ZPP_ENOMEM : ZPP_EBACKEND;
    if ((r = ZCU(cuMemAddressReserve)(&va, size, 0, 0, 0)) != CUDA_SUCCESS) {
        ZCU(cuMemRelease)(h);
        return ZPP_ENOMEM;
    }
    r = ZCU(cuMemMap)(va, size, 0, h, 0);
    ZCU(cuMemRelease)(h); /* the mapping keeps the memory */
    if (r != CUDA_SUCCESS) {
        ZCU(cuMemAddressFree)(va, size);
        return ZPP_EBACKEND;
    }
    r = grant_access(b, device, va, size);
    if (r != CUDA_SUCCESS) {
        ZCU(cuMemUnmap)(va, size);
        ZCU(cuMemAddressFree)(va, size);
        return ZPP_EBACKEND;
    }
    *out = (void *)(uintptr_t)va;
    return 0;
}

void cu_vmm_free(void *p)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!p || ZCU(cuMemGetAddressRange)(&base, &size, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return;
    ZCU(cuMemUnmap)(base, size);
    ZCU(cuMemAddressFree)(base, size);
}

struct cu_grave *cu_grave_add(struct cu_backend *b, cudaEvent_t *ev, int nev,
                              void (*fn)(struct cu_backend *, void *), void *arg)
{
    struct cu_grave *g = calloc(1, sizeof *g);
    if (!g) { /* out of memory: better late than never, and never unsafe */
        for (int i = 0; i < nev; i++)
            cudaEventSynchronize(ev[i]);
        fn(b, arg);
        for (int i = 0; i < nev; i++)
            cudaEventDestroy(ev[i]);
        free(ev);
        return NULL;
    }
    g->device = -1;
    g->ev = ev;
    g->nev = nev;
    g->fn = fn;
    g->arg = arg;
    g->since_ms = cu_now_ms();
    g->next = b->graves;
    b->graves = g;
    return g;
}

void cu_defer(struct cu_backend *b, int device, void (*fn)(struct cu_backend *, void *), void *arg)
{
    cudaEvent_t *ev = NULL;
    int nev = 0;
    int frc = cu_jobs_fence(b, device, &ev, &nev);
    if (frc || nev == 0) {
        free(ev);
        /* no memory for the fence (it says nev 0 then): wait on the GPU (rare) */
        if (frc)
            cudaDeviceSynchronize();
        fn(b, arg);
        return;
    }
    struct cu_grave *g = cu_grave_add(b, ev, nev, fn, arg);
    if (g)
        g->device = device;
}

void cu_reap(struct cu_backend *b)
{
    uint64_t now = cu_now_ms();
    struct cu_grave **pp = &b->graves;
    while (*pp) {
        struct cu_grave *g = *pp;
        int done = 1;
        for (int i = 0; i < g->nev && done; i++) {
            cudaError_t e = cudaEventQuery(g->ev[i]);
            if (e == cudaErrorNotReady) {
                done = 0;
            } else if (e != cudaSuccess && cu_rt_sticky(e)) {
                cu_mark_fatal(b, "waiting for a deferred release", e);
                return;
            }
        }
        if (!done) {
            if (g->stuck && !g->stuck_done && now - g->since_ms > 10000) {
                g->stuck_done = 1;
                ZLOG_W("cuda",
                       "a closing job's streams have not drained for 10 s: aborting its "
                       "communicators",
                       "events=%d", g->nev);
                g->stuck(b, g->arg);
            }
            if (!g->warned && now - g->since_ms > 60000) {
                g->warned = 1;
                ZLOG_W("cuda",
                       "device memory still held: a stream has not drained for 60 s "
                       "(blocked on a dead client's event?)",
                       "events=%d", g->nev);
            }
            pp = &g->next;
            continue;
        }
        *pp = g->next;
        g->fn(b, g->arg);
        for (int i = 0; i < g->nev; i++)
            cudaEventDestroy(g->ev[i]);
        free(g->ev);
        free(g);
    }
}

/* ---- open / close ----------------------------------------------------- */

static void format_uuid(const CUuuid *u, char *out, size_t len)
{
    const unsigned char *x = (const unsigned char *)u->bytes;
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13],
             x[14], x[15]);
}

/* Which GPUs read each other's memory directly (NVLink or PCIe peer
 * access), and how calls use it: ZPPD_PEER = "load" (default: kernels read
 * the peer's memory), "copy" (copy-engine copies, then local kernels) or
 * "off" (every byte through NCCL). docs/cuda.md, "Peer access". */
static void peer_setup(struct cu_backend *b)
{
    b->peer_mode = be_peer_mode_env(BE_PEER_LOAD);
    if (b->peer_mode < 0) {
        ZLOG_W("cuda", "ZPPD_PEER is not load, copy or off: using load", "value=%s",
               getenv("ZPPD_PEER"));
        b->peer_mode = BE_PEER_LOAD;
    }
    if (!b->peer_mode || b->ndev < 2 || b->ndev > CU_MAX_PEER_GPUS ||
        !(b->peer = calloc((size_t)b->ndev * (size_t)b->ndev, 1)))
        return;
    int pairs = 0;
    for (int r = 0; r < b->ndev; r++)
        for (int s = 0; s < b->ndev; s++) {
            int can = 0;
            if (r != s &&
                ZCU(cuDeviceCanAccessPeer)(&can, b->devs[r].dev, b->devs[s].dev) == CUDA_SUCCESS &&
                can) {
                b->peer[r * b->ndev + s] = 1;
                pairs++;
            }
        }
    /* Daemon memory is granted to peers per allocation (cu_vmm_alloc);
     * enabling the contexts' peer access as well lets the runtime's
     * copies between GPUs take the direct path. */
    for (int r = 0; r < b->ndev; r++)
        for (int s = 0; s < b->ndev; s++)
            if (b->peer[r * b->ndev + s] && !cu_use(b, r)) {
                cudaError_t e = cudaDeviceEnablePeerAccess(b->devs[s].ordinal, 0);
                if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
                    ZLOG_W("cuda", "peer access refused", "gpu=%d peer=%d err=%s", r, s,
                           cudaGetErrorName(e));
                    b->peer[r * b->ndev + s] = 0;
                    pairs--;
                }
                cudaGetLastError();
            }
    ZLOG_I("cuda", "peer access", "mode=%s pairs=%d of %d",
           b->peer_mode == BE_PEER_LOAD ? "load" : "copy", pairs, b->ndev * (b->ndev - 1));
}

void *be_cuda_open(int allow_legacy_ipc, int *drv, char *why, size_t why_len)
{
    struct cu_backend *b = NULL;
    int n = 0;
    int lr = zcu_load(why, why_len);
    if (lr) {
        /* no library: no GPU here; a library too old for us: a driver to fix */
        *drv = lr == -1 ? GPU_START_NO_DRIVER : GPU_START_OTHER;
        return NULL;
    }
    CUresult r = ZCU(cuInit)(0);
    *drv = (int)r;
    if (r != CUDA_SUCCESS) {
        cu_drv_fail(r, "cuInit", why, why_len);
        return NULL;
    }
    if ((r = ZCU(cuDeviceGetCount)(&n)) != CUDA_SUCCESS) {
        *drv = (int)r;
        cu_drv_fail(r, "cuDeviceGetCount", why, why_len);
        return NULL;
    }
    if (n < 1) {
        *drv = GPU_START_NO_DEVICES;
        snprintf(why, why_len, "no CUDA device is visible");
        return NULL;
    }
    *drv = GPU_START_OTHER; /* from here on, unless a driver call says otherwise */
    /* NCCL's RAS listener would let any local user query our jobs and
     * collide between tenants (DESIGN.md); the operator may override. */
    setenv("NCCL_RAS_ENABLE", "0", 0);
    b = calloc(1, sizeof *b);
    if (!b || !(b->devs = calloc((size_t)n, sizeof *b->devs))) {
        snprintf(why, why_len, "out of memory");
        free(b);
        return NULL;
    }
    b->allow_legacy = allow_legacy_ipc;
    for (int i = 0; i < n; i++) {
        struct cu_dev *d = &b->devs[i];
        CUuuid u;
        d->ordinal = i;
        if ((r = ZCU(cuDeviceGet)(&d->dev, i)) != CUDA_SUCCESS ||
            (r = ZCU(cuDeviceGetUuid)(&u, d->dev)) != CUDA_SUCCESS ||
            (r = ZCU(cuDevicePrimaryCtxRetain)(&d->ctx, d->dev)) != CUDA_SUCCESS) {
            *drv = (int)r;
            cu_drv_fail(r, "opening a device", why, why_len);
            b->ndev = i;
            be_cuda_close(b);
            return NULL;
        }
        b->ndev = i + 1;
        format_uuid(&u, d->uuid, sizeof d->uuid);
        if (ZCU(cuDeviceGetName)(d->name, (int)sizeof d->name, d->dev) != CUDA_SUCCESS)
            snprintf(d->name, sizeof d->name, "?");
        int fd_ok = 0;
        ZCU(cuDeviceGetAttribute)
        (&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d->dev);
        if (fd_ok) {
            CUmemAllocationProp p = {0};
            p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            p.location.id = d->dev;
            p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
            if (ZCU(cuMemGetAllocationGranularity)(
                    &d->granularity, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
                d->granularity = 0;
        }
        /* Under MPS the daemon's and the clients' work share one GPU
         * context; without it the GPU time-slices between processes and
         * every hop between a client's stream and ours costs ~150 us
         * (docs/cuda.md, "MPS"). */
        int mps = 0;
        d->mps =
            ZCU(cuDeviceGetAttribute)(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, d->dev) == CUDA_SUCCESS
                ? mps != 0
                : -1;
        ZLOG_I("cuda", "GPU", "index=%d uuid=%s mps=%s vmm_fd=%s", i, d->uuid,
               d->mps > 0    ? "on"
               : d->mps == 0 ? "off"
                             : "unknown",
               d->granularity ? "yes" : "no");
    }
    if (b->devs[0].mps == 0)
        ZLOG_W("cuda",
               "not running under CUDA MPS: the GPU time-slices between zppd and its clients, so "
               "each call costs about 0.3 ms of GPU time and collectives cannot overlap the "
               "clients' compute (docs/cuda.md, \"MPS\")",
               "gpus=%d", n);
    peer_setup(b);
    b->counter_used = calloc(CU_MAX_COUNTERS, 1);
    if (!b->counter_used) {
        snprintf(why, why_len, "out of memory");
        be_cuda_close(b);
        return NULL;
    }
    if (cu_gate_start(b, why, why_len)) {
        be_cuda_close(b);
        return NULL;
    }
    cu_use(b, 0);
    cudaError_t ce = cudaHostAlloc((void **)&b->counters, sizeof *b->counters * CU_MAX_COUNTERS,
                                   cudaHostAllocPortable);
    if (ce != cudaSuccess) {
        /* the runtime's MPS and readiness codes are the driver's numbers */
        *drv = (int)ce;
        (void)cudaGetLastError();
        b->counters = NULL;
        cu_rt_fail(ce, "allocating pinned host memory", why, why_len);
        be_cuda_close(b);
        return NULL;
    }
    if (cu_launchers_start(b)) {
        snprintf(why, why_len, "out of memory");
        be_cuda_close(b);
        return NULL;
    }
    return b;
}

void be_cuda_close(void *backend)
{
    struct cu_backend *b = backend;
    if (!b)
        return;
    /* At exit: what is still deferred goes with the process (waiting could
     * hang on a stream blocked for good). */
    cu_reap(b);
    cu_jobs_tick(b, 1);
    cu_reaper_stop(b, 10000);
    while (b->graves) {
        struct cu_grave *g = b->graves;
        b->graves = g->next;
        free(g->ev);
        free(g);
    }
    cu_launchers_stop(b);
    cu_gate_stop(b);
    if (b->counters)
        cudaFreeHost(b->counters);
    for (int i = 0; i < b->ndev; i++)
        ZCU(cuDevicePrimaryCtxRelease)(b->devs[i].dev);
    free(b->counter_used);
    free(b->peer);
    free(b->devs);
    free(b);
}

static int cuda_device_of_uuid(void *backend, const char *uuid)
{
    struct cu_backend *b = backend;
    if (!uuid)
        return -1;
    for (int i = 0; i < b->ndev; i++)
        if (!strcasecmp(b->devs[i].uuid, uuid))
            return i;
    return -1;
}

/* ---- imported client memory ----------------------------------------- */

enum { IMP_VMM = 1, IMP_LEGACY = 2 };

/* One legacy open, shared by the registrations of one (device, uid,
 * handle). Linked from the backend-wide list. */
struct cu_legacy {
    struct cu_legacy *next;
    int device;
    uint32_t uid;
    uint8_t handle[CU_IPC_HANDLE_LEN];
    CUdeviceptr base;
    size_t size;
    int refs;
};
static struct cu_legacy *legacy_opens; /* loop thread only */

struct cu_import {
    int kind;
    int device;
    struct cu_backend *b;
    /* VMM: the handles are released right after mapping (the mapping
     * holds the memory); sizes[i] of the nmapped chunks, for unmapping. */
    CUdeviceptr va;
    size_t va_size;
    int nmapped;
    CUmemGenericAllocationHandle *handles;
    size_t *sizes;
    /* legacy */
    struct cu_legacy *leg;
    uint64_t counted; /* bytes added to the device's imported_bytes */
};

static void vmm_release(struct cu_import *im)
{
    size_t off = 0;
    for (int i = 0; i < im->nmapped; i++) {
        ZCU(cuMemUnmap)(im->va + off, im->sizes[i]);
        off += im->sizes[i];
    }
    if (im->va)
        ZCU(cuMemAddressFree)(im->va, im->va_size);
    free(im->handles);
    free(im->sizes);
}

static int range_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

static int import_vmm(struct cu_backend *b, const struct be_import *d, struct cu_import *im,
                      uint8_t **ptr, char *why, size_t why_len)
{
    const struct cu_dev *dev = &b->devs[d->device];
    uint64_t total = 0;
    CUresult r;
    int rc = 0;
    if (!dev->granularity) {
        snprintf(why, why_len, "GPU %s cannot import POSIX-fd VMM memory", dev->uuid);
        return ZPP_EUNSUPPORTED;
    }
    for (int i = 0; i < d->nfds; i++) {
        uint64_t cs = d->chunk_sizes[i];
        if (cs == 0 || cs % dev->granularity || cs > UINT64_MAX - total) {
            snprintf(why, why_len, "chunk %d: size %" PRIu64 " is not a positive multiple of %zu",
                     i, cs, dev->granularity);
            return ZPP_EINVAL;
        }
        total += cs;
    }
    if (total > SIZE_MAX || !range_ok(d->offset, d->length, total)) {
        snprintf(why, why_len,
                 "range [%" PRIu64 ", +%" PRIu64 ") is outside the %" PRIu64 " mapped bytes",
                 d->offset, d->length, total);
        return ZPP_ERANGE;
    }
    im->handles = calloc((size_t)d->nfds, sizeof *im->handles);
    im->sizes = calloc((size_t)d->nfds, sizeof *im->sizes);
    if (!im->handles || !im->sizes) {
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    if ((r = ZCU(cuMemAddressReserve)(&im->va, (size_t)total, 0, 0, 0)) != CUDA_SUCCESS) {
        im->va = 0;
        return cu_drv_fail(r, "cuMemAddressReserve", why, why_len);
    }
    im->va_size = (size_t)total;
    size_t off = 0;
    for (int i = 0; i < d->nfds; i++) {
        CUmemGenericAllocationHandle h;
        r = ZCU(cuMemImportFromShareableHandle)(&h, (void *)(uintptr_t)d->fds[i],
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r != CUDA_SUCCESS) {
            char what[64];
            snprintf(what, sizeof what, "chunk %d: cuMemImportFromShareableHandle", i);
            return cu_drv_fail(r, what, why, why_len);
        }
        r = ZCU(cuMemMap)(im->va + off, (size_t)d->chunk_sizes[i], 0, h, 0);
        ZCU(cuMemRelease)(h); /* the mapping keeps the memory */
        if (r != CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "chunk %d: cuMemMap of %" PRIu64 " bytes", i,
                     d->chunk_sizes[i]);
            return cu_drv_fail(r, what, why, why_len);
        }
        im->sizes[i] = (size_t)d->chunk_sizes[i];
        im->nmapped = i + 1;
        off += (size_t)d->chunk_sizes[i];
    }
    /* Peers read it too: a plain all-gather on one node copies between
     * the ranks' own buffers (be_ops.peer_ok). */
    if ((r = grant_access(b, d->device, im->va, im->va_size)) != CUDA_SUCCESS)
        return cu_drv_fail(r, "cuMemSetAccess", why, why_len);
    *ptr = (uint8_t *)(uintptr_t)im->va + d->offset;
    return rc;
}

static int import_legacy(struct cu_backend *b, const struct be_import *d, struct cu_import *im,
                         uint8_t **ptr, char *why, size_t why_len)
{
    struct cu_legacy *l;
    CUresult r;
    if (!b->allow_legacy) {
        snprintf(why, why_len, "legacy CUDA IPC handles are disabled (allow_legacy_ipc)");
        return ZPP_EPERM;
    }
    if (d->ipc_len != CU_IPC_HANDLE_LEN) {
        snprintf(why, why_len, "an IPC handle is %d bytes, not %zu", CU_IPC_HANDLE_LEN, d->ipc_len);
        return ZPP_EINVAL;
    }
    for (l = legacy_opens; l; l = l->next)
        if (l->device == d->device && l->uid == d->uid &&
            !memcmp(l->handle, d->ipc_handle, CU_IPC_HANDLE_LEN))
            break;
    if (!l) {
        CUipcMemHandle h;
        CUdeviceptr base = 0, rbase = 0;
        size_t size = 0;
        memcpy(&h, d->ipc_handle, sizeof h);
        r = ZCU(cuIpcOpenMemHandle)(&base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r != CUDA_SUCCESS)
            return cu_drv_fail(r, "cuIpcOpenMemHandle (bad or stale handle?)", why, why_len);
        if ((r = ZCU(cuMemGetAddressRange)(&rbase, &size, base)) != CUDA_SUCCESS) {
            ZCU(cuIpcCloseMemHandle)(base);
            return cu_drv_fail(r, "cuMemGetAddressRange", why, why_len);
        }
        if (!(l = calloc(1, sizeof *l))) {
            ZCU(cuIpcCloseMemHandle)(base);
            snprintf(why, why_len, "out of memory");
            return ZPP_ENOMEM;
        }
        l->device = d->device;
        l->uid = d->uid;
        memcpy(l->handle, d->ipc_handle, CU_IPC_HANDLE_LEN);
        l->base = base;
        l->size = size;
        l->next = legacy_opens;
        legacy_opens = l;
    }
    if (!range_ok(d->offset, d->length, l->size)) {
        snprintf(why, why_len,
                 "range [%" PRIu64 ", +%" PRIu64 ") is outside the %zu-byte allocation", d->offset,
                 d->length, l->size);
        if (l->refs == 0) {
            im->leg = l;
            l->refs = 1; /* released by the caller's cleanup */
        }
        return ZPP_ERANGE;
    }
    l->refs++;
    im->leg = l;
    *ptr = (uint8_t *)(uintptr_t)l->base + d->offset;
    return 0;
}

static void legacy_unref(struct cu_legacy *l)
{
    if (--l->refs > 0)
        return;
    for (struct cu_legacy **pp = &legacy_opens; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    ZCU(cuIpcCloseMemHandle)(l->base);
    free(l);
}

static void import_free(struct cu_backend *b, void *arg)
{
    struct cu_import *im = arg;
    struct cu_dev *dv = &b->devs[im->device];
    dv->imports--;
    dv->imported_bytes -= im->counted;
    cu_use(b, im->device);
    if (im->kind == IMP_VMM)
        vmm_release(im);
    else if (im->leg)
        legacy_unref(im->leg);
    free(im);
}

/* The streams whose queued work may still touch memory of `device`: its
 * own, and with several GPUs every GPU's, since a peer's kernel reads it
 * (peer access) and need not be done when the owner's stream is: a fenced
 * kernel that gave up its wait (job aborted) ends before its partners read
 * (an audit). */
static int fence_device(const struct cu_backend *b, int device)
{
    return b->ndev > 1 ? -1 : device;
}

/* Work already enqueued may still read or write this memory: unmap once
 * every live job's streams that may touch it have passed this point. */
static void cuda_buf_release(void *backend, void *handle)
{
    struct cu_import *im = handle;
    if (!im)
        return;
    cu_defer(im->b, fence_device(im->b, im->device), import_free, im);
}

/* VMM imports are granted to the peers (grant_access); a legacy IPC
 * import, opened with lazy peer access, faulted when a peer GPU's kernel
 * read it under MPS (2026-11-23, the fused qwZ on two H200s). */
static int cuda_buf_shared(void *backend, void *handle)
{
    const struct cu_import *im = handle;
    (void)backend;
    return im && !im->leg;
}

static int cuda_buf_import(void *backend, const struct be_import *d, void **handle, uint8_t **ptr,
                           char *why, size_t why_len)
{
    struct cu_backend *b = backend;
    struct cu_import *im = NULL;
    uint8_t *p = NULL;
    int rc;
    if (d->device < 0 || d->device >= b->ndev) {
        snprintf(why, why_len, "no such device %d", d->device);
        return ZPP_EINVAL;
    }
    if ((d->nfds > 0) == (d->ipc_len > 0)) {
        snprintf(why, why_len, "give either VMM descriptors or one IPC handle");
        return ZPP_EINVAL;
    }
    if (d->length == 0) {
        snprintf(why, why_len, "length must be at least 1");
        return ZPP_EINVAL;
    }
    if (!(im = calloc(1, sizeof *im))) {
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    im->b = b;
    im->device = d->device;
    im->kind = d->nfds ? IMP_VMM : IMP_LEGACY;
    if ((rc = cu_use(b, d->device))) {
        snprintf(why, why_len, "cannot use device %d", d->device);
        goto fail;
    }
    rc = im->kind == IMP_VMM ? import_vmm(b, d, im, &p, why, why_len)
                             : import_legacy(b, d, im, &p, why, why_len);
    if (rc)
        goto fail;
    im->counted = im->kind == IMP_VMM ? im->va_size : d->length;
    b->devs[d->device].imports++;
    b->devs[d->device].imported_bytes += im->counted;
    *handle = im;
    *ptr = p;
    return 0;
fail:
    if (im->kind == IMP_VMM)
        vmm_release(im);
    else if (im->leg)
        legacy_unref(im->leg);
    free(im);
    return rc;
}

/* ---- events ----------------------------------------------------------- */

/* A session's events. The job streams never wait on a client's event:
 * call_wait arms the host gate (backend_cuda_gate.c) to raise flag i to
 * gen[i] once ready[i] has completed, and the job stream waits for the
 * flag (cuStreamWaitValue32 on mapped host memory). When the session
 * closes, the loop raises every flag itself, so a client that dies with an
 * event recorded but never completed cannot hold a stream of ours. */
struct cu_events {
    int device;
    int n;
    CUevent *ready;     /* opened from the client's handles; NULL with the client's flags */
    CUevent *done;      /* ours: exported, or with the client's flags our own */
    uint32_t *flags;    /* n flags of a gate block (host address) */
    CUdeviceptr dflags; /* the same, as the GPU sees them */
    uint32_t *gen;      /* the last value each flag was told to reach */
    /* The client's flags (events_open_flags; NULL: none). Done flag i at
     * cf->dev + 4 i, written on the slot's stream after the call's work;
     * ready flag i at cf->host + ZPP_FLAGS_READY_OFF + 4 i, written by the
     * client's stream, which the gate reads from the host instead of
     * querying an event. */
    struct cu_cflags *cf;
    uint32_t *crec; /* per slot, the value of the last call_record: a stream writes it */
};

/* A client's flags: its memfd mapped (by the job layer) and registered,
 * and its pipe, closed once nothing writes them again (-1: none). Handed
 * whole to the reaper when the session closes (cflags_release_now). */
struct cu_cflags {
    int device;
    void *host;
    size_t len;
    CUdeviceptr dev;
    int live_fd;
};

/* The client's ready flag of slot i (host memory, written by its GPU). */
static const uint32_t *ready_flag(const struct cu_events *ev, int i)
{
    return (const uint32_t *)((const char *)ev->cf->host + ZPP_FLAGS_READY_OFF) + i;
}

static void cflags_release_now(struct cu_backend *b, void *p)
{
    struct cu_cflags *cf = p;
    cu_reaper_host_release(b, cf->device, cf->host, cf->len, cf->live_fd);
    free(cf);
}

static void flags_put_now(struct cu_backend *b, void *p)
{
    cu_gate_flags_put(b, p);
}

/* Disarms the session's gate entries (the gate thread must not query
 * events about to go) and opens every gate it had: job streams waiting
 * for its flags go on. */
static void events_open_gates(struct cu_backend *b, struct cu_events *ev)
{
    cu_gate_drop(b, ev);
    if (ev->flags && ev->gen)
        for (int i = 0; i < ev->n; i++)
            gate_flag_raise(&ev->flags[i], ev->gen[i]);
}

/* The job of the session was aborted: a client that stays connected with
 * a stuck stream would otherwise keep the job's streams waiting, and with
 * them every later release on the GPU (cu_jobs_fence records on them), for
 * as long as it lives (an audit). */
static void cuda_events_release(void *backend, void *state)
{
    struct cu_events *ev = state;
    if (ev)
        events_open_gates(backend, ev);
}

static int cuda_events_ready(void *backend, void *state, int slot_ev, uint64_t flag_value)
{
    struct cu_events *ev = state;
    if (!ev || slot_ev < 0 || slot_ev >= ev->n)
        return 1; /* call_wait refuses it */
    if (!ev->ready)
        return gate_flag_reached(__atomic_load_n(ready_flag(ev, slot_ev), __ATOMIC_ACQUIRE),
                                 (uint32_t)flag_value);
    cu_use(backend, ev->device);
    return ZCU(cuEventQuery)(ev->ready[slot_ev]) != CUDA_ERROR_NOT_READY;
}

static void cuda_events_settle(void *backend, void *state, int slot_ev, uint64_t flag_value)
{
    struct cu_events *ev = state;
    (void)backend;
    if (ev && ev->cf && ev->crec && slot_ev >= 0 && slot_ev < ev->n &&
        ev->crec[slot_ev] != (uint32_t)flag_value)
        gate_flag_raise((uint32_t *)ev->cf->host + slot_ev, (uint32_t)flag_value);
}

static void cuda_events_close(void *backend, void *state)
{
    struct cu_events *ev = state;
    struct cu_backend *b = backend;
    if (!ev)
        return;
    cu_use(b, ev->device);
    /* Disarm first (the gate thread must not query events we destroy),
     * then open every gate: job streams waiting for this session's flags
     * go on whether or not the client ever completes its events. */
    events_open_gates(b, ev);
    /* the block is reused once the job streams' pending waits have read it */
    if (ev->flags)
        cu_defer(b, ev->device, flags_put_now, ev->flags);
    /* the client's flags are unmapped once the job streams have written
     * them (on the reaper: cu_reaper_host_release) */
    if (ev->cf)
        cu_defer(b, ev->device, cflags_release_now, ev->cf);
    free(ev->gen);
    free(ev->crec);
    for (int i = 0; i < ev->n; i++) {
        if (ev->ready && ev->ready[i])
            ZCU(cuEventDestroy)(ev->ready[i]);
        if (ev->done && ev->done[i]) {
            cu_call_done_forget(b, ev->done[i]);
            ZCU(cuEventDestroy)(ev->done[i]);
        }
    }
    free(ev->ready);
    free(ev->done);
    free(ev);
}

static int cuda_events_open(void *backend, int device, const uint8_t *const *ready, int n,
                            uint8_t (*done_out)[64], void **state, char *why, size_t why_len)
{
    struct cu_backend *b = backend;
    struct cu_events *ev = NULL;
    CUresult r;
    int rc = 0;
    if (n < 1 || n > CU_GATE_FLAGS || device < 0 || device >= b->ndev) {
        snprintf(why, why_len, "bad device or event count");
        return ZPP_EINVAL;
    }
    if (cu_use(b, device)) {
        snprintf(why, why_len, "cannot use device %d", device);
        return ZPP_EBACKEND;
    }
    ev = calloc(1, sizeof *ev);
    if (!ev || !(ev->ready = calloc((size_t)n, sizeof *ev->ready)) ||
        !(ev->done = calloc((size_t)n, sizeof *ev->done)) ||
        !(ev->gen = calloc((size_t)n, sizeof *ev->gen))) {
        snprintf(why, why_len, "out of memory");
        rc = ZPP_ENOMEM;
        goto fail;
    }
    ev->device = device;
    ev->n = n;
    if ((rc = cu_gate_flags_get(b, &ev->flags, &ev->dflags))) {
        ev->flags = NULL;
        snprintf(why, why_len, "cannot allocate the session's gate flags (pinned host memory)");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        CUipcEventHandle h;
        memcpy(&h, ready[i], sizeof h);
        if ((r = ZCU(cuIpcOpenEventHandle)(&ev->ready[i], h)) != CUDA_SUCCESS) {
            ev->ready[i] = NULL;
            /* An IPC event lives in a /dev/shm file of its creator's, mode
             * 0600 (measured on driver 580: bench/results/
             * robust-2026-11-24-h200-s20/): another uid or another /dev/shm
             * cannot map it. Say so rather than leave the driver's words. */
            rc = cu_drv_fail(r,
                             r == CUDA_ERROR_MAP_FAILED
                                 ? "cuIpcOpenEventHandle (client ready event; zppd and its "
                                   "clients must run as one uid and share /dev/shm: docs/cuda.md)"
                                 : "cuIpcOpenEventHandle (client ready event)",
                             why, why_len);
            goto fail;
        }
        r = ZCU(cuEventCreate)(&ev->done[i], CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            ev->done[i] = NULL;
            rc = cu_drv_fail(r, "cuEventCreate", why, why_len);
            goto fail;
        }
        if ((r = ZCU(cuIpcGetEventHandle)(&h, ev->done[i])) != CUDA_SUCCESS) {
            rc = cu_drv_fail(r, "cuIpcGetEventHandle", why, why_len);
            goto fail;
        }
        memcpy(done_out[i], &h, 64);
    }
    *state = ev;
    return 0;
fail:
    cuda_events_close(b, ev);
    return rc;
}

/* Registers the client's flags (map, len: its memfd as the job layer
 * mapped it) into ev->cf; takes map and live_fd whatever happens. 0, or a
 * code with why. */
static int cflags_register(struct cu_backend *b, struct cu_events *ev, void *map, size_t len,
                           int live_fd, char *why, size_t why_len)
{
    struct cu_cflags *cf = calloc(1, sizeof *cf);
    void *d = NULL;
    cudaError_t e = !cf ? cudaErrorMemoryAllocation
                    : cu_use(b, ev->device)
                        ? cudaErrorInvalidDevice
                        : cudaHostRegister(map, len,
                                           cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e == cudaSuccess && (e = cudaHostGetDevicePointer(&d, map, 0)) != cudaSuccess)
        cudaHostUnregister(map);
    if (e != cudaSuccess) {
        free(cf);
        munmap(map, len);
        if (live_fd >= 0)
            close(live_fd);
        snprintf(why, why_len, "cudaHostRegister of the flags: %s", cudaGetErrorString(e));
        return e == cudaErrorMemoryAllocation ? ZPP_ENOMEM : ZPP_EBACKEND;
    }
    *cf = (struct cu_cflags){ev->device, map, len, (CUdeviceptr)(uintptr_t)d, live_fd};
    ev->cf = cf;
    return 0;
}

/* be_ops.events_open_flags: a session whose client's streams and ours meet
 * on its flags, with no interprocess event: ready flags the gate reads,
 * done flags our streams write, and done events of our own for the early
 * record of fenced launches and for check. */
static int cuda_events_open_flags(void *backend, int device, int n, void *map, size_t len,
                                  int live_fd, void **state, char *why, size_t why_len)
{
    struct cu_backend *b = backend;
    struct cu_events *ev = NULL;
    CUresult r;
    int rc = 0;
    if (n < 1 || n > CU_GATE_FLAGS || device < 0 || device >= b->ndev || cu_use(b, device)) {
        snprintf(why, why_len, "bad device or slot count");
        rc = ZPP_EINVAL;
    } else if (!(ev = calloc(1, sizeof *ev)) ||
               !(ev->done = calloc((size_t)n, sizeof *ev->done)) ||
               !(ev->gen = calloc((size_t)n, sizeof *ev->gen)) ||
               !(ev->crec = calloc((size_t)n, sizeof *ev->crec))) {
        snprintf(why, why_len, "out of memory");
        rc = ZPP_ENOMEM;
    }
    if (rc) {
        if (ev) {
            free(ev->done);
            free(ev->gen);
        }
        free(ev);
        munmap(map, len);
        if (live_fd >= 0)
            close(live_fd);
        return rc;
    }
    ev->device = device;
    ev->n = n;
    if ((rc = cflags_register(b, ev, map, len, live_fd, why, why_len)))
        goto fail;
    if ((rc = cu_gate_flags_get(b, &ev->flags, &ev->dflags))) {
        ev->flags = NULL;
        snprintf(why, why_len, "cannot allocate the session's gate flags (pinned host memory)");
        goto fail;
    }
    for (int i = 0; i < n; i++)
        if ((r = ZCU(cuEventCreate)(&ev->done[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            ev->done[i] = NULL;
            rc = cu_drv_fail(r, "cuEventCreate", why, why_len);
            goto fail;
        }
    *state = ev;
    return 0;
fail:
    cuda_events_close(b, ev);
    return rc;
}

/* be_ops.check: the GPUs' contexts asked now (cu_health), then each done
 * event of the session: an answered call recorded its event on its stream
 * before the reply, and the event completes once the work before it has. */
static int cuda_check(void *backend, void *events, char *why, size_t why_len)
{
    struct cu_backend *b = backend;
    struct cu_events *ev = events;
    b->health_ms = 0; /* ask now, whatever the last tick did */
    cu_health(b);
    CUresult r = CUDA_SUCCESS;
    int busy = 0;
    if (!b->fatal && ev && (r = ZCU(cuCtxPushCurrent)(b->devs[ev->device].ctx)) == CUDA_SUCCESS) {
        /* the first result that is neither done nor running ends the look */
        for (int i = 0; i < ev->n && r == CUDA_SUCCESS; i++) {
            r = ZCU(cuEventQuery)(ev->done[i]);
            if (r == CUDA_ERROR_NOT_READY) {
                busy = 1;
                r = CUDA_SUCCESS;
            }
        }
        CUcontext popped;
        ZCU(cuCtxPopCurrent)(&popped);
    }
    if (r != CUDA_SUCCESS && cu_rt_sticky((cudaError_t)r))
        cu_mark_fatal(b, "checking a call's completion", (cudaError_t)r);
    if (b->fatal) {
        snprintf(why, why_len, "%s", b->fatal_why);
        return ZPP_EBACKEND;
    }
    if (r != CUDA_SUCCESS) {
        cu_drv_fail(r, "checking a call's completion", why, why_len);
        return ZPP_EBACKEND;
    }
    if (busy) {
        snprintf(why, why_len, "calls answered on this session still run on the GPU");
        return ZPP_EBUSY;
    }
    return 0;
}

static int cuda_call_wait(struct be_call *c, int s, void *events, int slot_ev, uint64_t flag_value)
{
    struct cu_events *ev = events;
    struct cu_backend *b = cu_call_backend(c, s);
    int dev;
    CUstream st = cu_call_stream(c, s, &dev);
    if (!ev || !st || !b || slot_ev < 0 || slot_ev >= ev->n || dev != ev->device) {
        snprintf(c->err, sizeof c->err, "slot %d: no stream or no such event %d", s, slot_ev);
        return ZPP_EINVAL;
    }
    cu_call_done_note(c, s, ev->done[slot_ev]);
    /* the job stream waits for flag slot_ev to reach v (cyclic >=); the
     * gate raises it once the client's ready event has completed */
    uint32_t v = ++ev->gen[slot_ev];
    int rc = 0;
    /* Many ready events have completed by the time the call arrives (the
     * client's stream had nothing left before the record): then the
     * stream has nothing to wait for. The flag is raised all the same (a
     * later wait on it compares against v) and the gate thread is spared
     * a round; the wait itself, a driver call and a look at host memory
     * by the GPU's front end, is left out. */
    if (!ev->ready) { /* the client's ready flag: read, not queried */
        const uint32_t *src = ready_flag(ev, slot_ev);
        if (gate_flag_reached(__atomic_load_n(src, __ATOMIC_ACQUIRE), (uint32_t)flag_value)) {
            gate_flag_raise(&ev->flags[slot_ev], v);
            return 0;
        }
        rc = cu_gate_arm_flag(b, src, (uint32_t)flag_value, &ev->flags[slot_ev], v, ev);
    } else if (ZCU(cuEventQuery)(ev->ready[slot_ev]) == CUDA_SUCCESS) {
        gate_flag_raise(&ev->flags[slot_ev], v);
        return 0;
    } else {
        rc = cu_gate_arm(b, b->devs[dev].ctx, ev->ready[slot_ev], &ev->flags[slot_ev], v, ev);
    }
    if (rc) {
        snprintf(c->err, sizeof c->err, "cannot arm the gate for the client's ready event");
        return rc;
    }
    CUresult r = ZCU(cuStreamWaitValue32)(st, ev->dflags + 4u * (unsigned)slot_ev, v,
                                          CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS)
        return cu_drv_fail(r, "waiting for the client's ready event", c->err, sizeof c->err);
    return 0;
}

static int cuda_call_record(struct be_call *c, int s, void *events, int slot_ev,
                            uint64_t flag_value)
{
    struct cu_events *ev = events;
    int dev;
    CUstream st = cu_call_stream(c, s, &dev);
    if (!ev || !st || slot_ev < 0 || slot_ev >= ev->n || dev != ev->device) {
        snprintf(c->err, sizeof c->err, "slot %d: no stream or no such event %d", s, slot_ev);
        return ZPP_EINVAL;
    }
    /* The client's done flag (events_flags) goes on the same stream, after
     * the call's last work: before the event, or, where a fenced launch's
     * thread recorded the event already (backend_cuda_launch.c), after it,
     * once the replies are out (be_ops.call_replied: a small call's reply
     * does not wait for the write). Not on that thread: work enqueued
     * after its record makes us record again, and a flag written early
     * could not be taken back. A client that finds the event complete does
     * not wait on the flag; one that finds it not complete waits for a
     * write still to come. Either way the write precedes the next call's
     * on this stream, so a flag never goes back. */
    int early = cu_call_done_early(c, s, ev->done[slot_ev]);
    CUdeviceptr flag = ev->cf ? ev->cf->dev + 4u * (unsigned)slot_ev : 0;
    CUresult r = CUDA_SUCCESS;
    if (flag && !early &&
        (r = ZCU(cuStreamWriteValue32)(st, flag, (uint32_t)flag_value,
                                       CU_STREAM_WRITE_VALUE_DEFAULT)) != CUDA_SUCCESS)
        return cu_drv_fail(r, "writing the client's done flag", c->err, sizeof c->err);
    if (flag)
        ev->crec[slot_ev] = (uint32_t)flag_value; /* written, or to be (events_settle) */
    if (!early && (r = ZCU(cuEventRecord)(ev->done[slot_ev], st)) != CUDA_SUCCESS)
        return cu_drv_fail(r, "cuEventRecord", c->err, sizeof c->err);
    if (flag && early)
        cu_call_flag_later(c, s, flag, (uint32_t)flag_value);
    return 0;
}

/* ---- store memory ------------------------------------------------------- */

static int cuda_store_alloc(void *backend, int device, size_t bytes, void **out)
{
    if (cu_use(backend, device))
        return ZPP_EINVAL;
    return cu_vmm_alloc(backend, device, bytes, out);
}

/* cu_vmm_alloc's rounding: whole granules, at least one. */
static size_t cuda_store_size(void *backend, int device, size_t bytes)
{
    struct cu_backend *b = backend;
    size_t g = device >= 0 && device < b->ndev && b->devs[device].granularity
                   ? b->devs[device].granularity
                   : (2u << 20);
    size_t size = (bytes + g - 1) / g * g;
    return size ? size : g;
}

static void store_free_now(struct cu_backend *b, void *p)
{
    cu_vmm_free(p);
}

/* A queued call may still read the slice: free it once the device's job
 * streams have passed this point. */
static void cuda_store_free(void *backend, int device, void *p)
{
    if (!p || cu_use(backend, device))
        return;
    cu_defer(backend, fence_device(backend, device), store_free_now, p);
}

static int cuda_dev_stats(void *backend, struct be_dev_stat *out, int max)
{
    struct cu_backend *b = backend;
    uint64_t now = cu_now_ms();
    int ending = cu_reaper_pending(b);
    for (int i = 0; i < b->ndev && i < max; i++) {
        const struct cu_dev *dv = &b->devs[i];
        struct be_dev_stat *o = &out[i];
        memset(o, 0, sizeof *o);
        o->deferred = (uint32_t)ending;
        snprintf(o->uuid, sizeof o->uuid, "%s", dv->uuid);
        snprintf(o->name, sizeof o->name, "%s", dv->name);
        o->mps = dv->mps;
        o->imports = dv->imports;
        o->imported_bytes = dv->imported_bytes;
        for (const struct cu_grave *g = b->graves; g; g = g->next)
            if (g->device == i || g->device < 0) {
                o->deferred++;
                if (now - g->since_ms > o->deferred_oldest_ms)
                    o->deferred_oldest_ms = now - g->since_ms;
            }
        size_t fr = 0, tot = 0;
        if (!cu_use(b, i) && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
            o->used_bytes = tot - fr;
            o->total_bytes = tot;
        }
    }
    return b->ndev;
}

const struct be_ops be_cuda_ops = {
    .name = "cuda",
    .scratch = cu_scratch,
    .quantize = cu_quantize,
    .dequantize = cu_dequantize,
    .reorder_quantize = cu_reorder_quantize,
    .reduce_requant = cu_reduce_requant,
    .reduce_out = cu_reduce_out,
    .copy = cu_copy,
    .zero = cu_zero,
    .allgather = cu_allgather,
    .alltoall = cu_alltoall,
    .reduce_scatter = cu_reduce_scatter,
    .store_alloc = cuda_store_alloc,
    .store_free = cuda_store_free,
    .store_size = cuda_store_size,
    .enqueue_only = 1,
    .device_of_uuid = cuda_device_of_uuid,
    .buf_import = cuda_buf_import,
    .buf_shared = cuda_buf_shared,
    .buf_release = cuda_buf_release,
    .events_open = cuda_events_open,
    .events_close = cuda_events_close,
    .events_open_flags = cuda_events_open_flags,
    .events_settle = cuda_events_settle,
    .call_replied = cu_call_replied,
    .events_release = cuda_events_release,
    .events_ready = cuda_events_ready,
    .check = cuda_check,
    .job_open = cu_job_open,
    .job_close = cu_job_close,
    .job_poll = cu_job_poll,
    .job_memory = cu_job_memory,
    .call_wait = cuda_call_wait,
    .call_record = cuda_call_record,
    .job_open_ids = cu_job_open_ids,
    .make_ids = cu_make_ids,
    .to_host = cu_to_host,
    .dev_stats = cuda_dev_stats,
    .lane_use = cu_lane_use,
    .lane_mark = cu_lane_mark,
    .lane_wait = cu_lane_wait,
    .lanes_cheap = cu_lanes_cheap,
    .peer_ok = cu_peer_ok,
    .peer_fence = cu_peer_fence,
    .peer_gather = cu_peer_gather,
    .peer_qwz = cu_peer_qwz,
};
