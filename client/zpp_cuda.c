/*
 * zpp_cuda.c — libzpp's CUDA side (zpp_cuda.h): the connection's call
 * slots (a shared flag array for stream memory operations, and a pool of
 * interprocess events as the fallback), registration of GPU memory (VMM
 * descriptors or a legacy IPC handle), and stream-ordered collectives.
 *
 * It plugs into zpp.c through the zpp__ext hooks of zpp_int.h: Hello
 * offers the flag array's descriptor and our ready events; the reply says
 * which the daemon took (flag_sync), or carries its done events. zpp_collective on an
 * attached connection becomes async + stream wait on the default stream.
 * Slot i is in flight from zpp_collective_async (which writes ready[i] =
 * v, v growing per call, or records ready event i) until zpp_wait_stream
 * (which makes the stream wait for done[i] >= v, or on done event i); the
 * daemon writes done[i] only for the call that named slot i.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zpp_cuda.h"
#include "zpp_int.h"

#define EV_HANDLE_LEN 64

/* The driver API through libcuda.so.1 loaded at run time: libzpp never
 * links libcuda, so host-only users need no NVIDIA driver. */
/* clang-format off */
#define ZCU_FUNCS(X) \
    X(cuCtxGetCurrent) \
    X(cuCtxSetCurrent) \
    X(cuCtxGetDevice) \
    X(cuCtxSynchronize) \
    X(cuDeviceGet) \
    X(cuDeviceGetAttribute) \
    X(cuDeviceGetUuid) \
    X(cuEventCreate) \
    X(cuEventDestroy) \
    X(cuEventRecord) \
    X(cuGetErrorString) \
    X(cuIpcGetEventHandle) \
    X(cuIpcGetMemHandle) \
    X(cuIpcOpenEventHandle) \
    X(cuMemAddressFree) \
    X(cuMemAddressReserve) \
    X(cuMemCreate) \
    X(cuMemExportToShareableHandle) \
    X(cuMemGetAddressRange) \
    X(cuMemGetAllocationGranularity) \
    X(cuMemMap) \
    X(cuMemRelease) \
    X(cuMemRetainAllocationHandle) \
    X(cuMemSetAccess) \
    X(cuMemUnmap) \
    X(cuMemsetD8) \
    X(cuPointerGetAttribute) \
    X(cuStreamCreate) \
    X(cuStreamDestroy) \
    X(cuStreamSynchronize) \
    X(cuStreamWaitEvent) \
    X(cuStreamWaitValue64) \
    X(cuStreamWriteValue64)
/* clang-format on */

static struct {
#define ZCU_MEMBER(f) __typeof__(&f) p_##f;
    ZCU_FUNCS(ZCU_MEMBER)
#undef ZCU_MEMBER
    int loaded;
} zcu;
#define ZCU(f) (zcu.p_##f)

/* Loads the driver functions once; 0 or ZPP_EUNSUPPORTED. Not thread-safe
 * on the first call (like the rest of a connection's use). */
static int zcu_load(void)
{
    if (zcu.loaded)
        return 0;
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
        if (gpa(#f, (void **)&zcu.p_##f, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) !=         \
                CUDA_SUCCESS ||                                                                    \
            !zcu.p_##f)                                                                            \
            return ZPP_EUNSUPPORTED;                                                               \
    }
    ZCU_FUNCS(ZCU_LOAD)
#undef ZCU_LOAD
    zcu.loaded = 1;
    return 0;
}

/* A dead daemon's done flags get this on close: above any value in use
 * under CU_STREAM_WAIT_VALUE_GEQ's cyclic comparison (not UINT64_MAX). */
#define FLAG_RELEASE (1ull << 62)

struct zpp_cuda {
    CUcontext ctx;
    int n;
    CUevent *ready; /* ours, interprocess */
    CUevent *done;  /* the daemon's, opened from HelloReply */
    uint8_t (*ready_h)[EV_HANDLE_LEN];
    ProtobufCBinaryData *wire;
    uint64_t *req_of; /* slot -> req_id in flight (0: free) */
    int next;         /* round-robin start for the next free slot */
    int have_done;
    /* Stream memory operations (docs/cuda.md): a VMM flag array on our
     * GPU, ready[i] at 8*i and done[i] at 8*(n + i), shared with the
     * daemon by a POSIX fd sent with Hello. */
    CUdeviceptr fbase; /* 0: not offered */
    size_t fsize;
    int ffd;           /* until Hello is answered */
    int flag_sync;     /* the daemon took the flags (HelloReply.flag_sync) */
    uint64_t seq;      /* the last flag value used; grows per call */
    uint64_t *val_of;  /* slot -> flag value of its call in flight */
    int waited;        /* a stream waits on a done flag: sync before unmapping */
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

/* ---- hooks -------------------------------------------------------------- */

static void flags_unmap(struct zpp_cuda *z)
{
    if (z->fbase) {
        ZCU(cuMemUnmap)(z->fbase, z->fsize);
        ZCU(cuMemAddressFree)(z->fbase, z->fsize);
        z->fbase = 0;
    }
    if (z->ffd >= 0)
        close(z->ffd);
    z->ffd = -1;
}

static void ext_free(void *state, int dead)
{
    struct zpp_cuda *z = state;
    if (!z)
        return;
    CUcontext prev = NULL;
    ZCU(cuCtxGetCurrent)(&prev);
    if (z->ctx)
        ZCU(cuCtxSetCurrent)(z->ctx);
    if (z->fbase && z->waited) {
        /* Streams may still hold waits on our done flags: the memory must
         * outlive them. With a live daemon they end when its work does.
         * With a dead one they would never end: release them (their
         * results are lost anyway), then wait for the device. */
        if (dead) {
            CUstream st = NULL;
            if (ZCU(cuStreamCreate)(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
                for (int i = 0; i < z->n; i++)
                    ZCU(cuStreamWriteValue64)(st, z->fbase + 8u * (CUdeviceptr)(z->n + i),
                                              FLAG_RELEASE, CU_STREAM_WRITE_VALUE_DEFAULT);
                ZCU(cuStreamSynchronize)(st);
                ZCU(cuStreamDestroy)(st);
            }
        }
        ZCU(cuCtxSynchronize)();
    }
    flags_unmap(z);
    for (int i = 0; i < z->n; i++) {
        if (z->ready && z->ready[i])
            ZCU(cuEventDestroy)(z->ready[i]);
        if (z->done && z->done[i])
            ZCU(cuEventDestroy)(z->done[i]);
    }
    if (prev)
        ZCU(cuCtxSetCurrent)(prev);
    free(z->ready);
    free(z->done);
    free(z->ready_h);
    free(z->wire);
    free(z->req_of);
    free(z->val_of);
    free(z);
}

static int ext_hello_out(void *state, Zpp__Hello *h, int *fd)
{
    struct zpp_cuda *z = state;
    h->ready_events = z->wire;
    h->n_ready_events = (size_t)z->n;
    *fd = -1;
    if (z->fbase && z->ffd >= 0) {
        h->flags_nfds = 1;
        h->flags_size = z->fsize;
        h->nslots = (uint32_t)z->n;
        *fd = z->ffd;
    }
    return 0;
}

static int ext_hello_in(void *state, zpp_conn *c, const Zpp__HelloReply *hr)
{
    struct zpp_cuda *z = state;
    if (z->ffd >= 0) { /* the daemon has its own reference now (or none) */
        close(z->ffd);
        z->ffd = -1;
    }
    if (hr->flag_sync) {
        if (!z->fbase)
            return zpp__set_err(c, ZPP_EPROTO, "the daemon chose flags that were not offered");
        z->flag_sync = 1;
        z->have_done = 1;
        return 0;
    }
    if (hr->n_done_events != (size_t)z->n)
        return zpp__set_err(c, ZPP_EPROTO,
                            "the daemon returned a different number of done events (is it "
                            "running the cuda backend?)");
    for (int i = 0; i < z->n; i++) {
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
            return drv_err(c, r, "cuIpcOpenEventHandle (daemon done event)");
        }
    }
    z->have_done = 1;
    /* events chosen: the flag array is not needed */
    flags_unmap(z);
    return 0;
}

/* Creates the flag array (2n uint64, zeroed) as exportable VMM memory on
 * the context's device, and its descriptor. 0, or -1 when this GPU or
 * driver cannot (the events are used then). */
static int flags_create(struct zpp_cuda *z)
{
    CUdevice dev;
    int mo64 = 0, fd_ok = 0;
    const char *sync = getenv("ZPP_CUDA_SYNC");
    if (sync && !strcmp(sync, "events"))
        return -1;
    if (ZCU(cuCtxGetDevice)(&dev) != CUDA_SUCCESS ||
        ZCU(cuDeviceGetAttribute)(&mo64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                  dev) != CUDA_SUCCESS ||
        ZCU(cuDeviceGetAttribute)(&fd_ok,
                                  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                  dev) != CUDA_SUCCESS ||
        !mo64 || !fd_ok)
        return -1;
    CUmemAllocationProp p = {0};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0, need = 16u * (size_t)z->n;
    if (ZCU(cuMemGetAllocationGranularity)(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS ||
        !g)
        return -1;
    size_t size = (need + g - 1) / g * g;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    int fd = -1;
    if (ZCU(cuMemCreate)(&h, size, &p, 0) != CUDA_SUCCESS)
        return -1;
    if (ZCU(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
            CUDA_SUCCESS ||
        ZCU(cuMemAddressReserve)(&va, size, 0, 0, 0) != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd);
        ZCU(cuMemRelease)(h);
        return -1;
    }
    CUresult r = ZCU(cuMemMap)(va, size, 0, h, 0);
    ZCU(cuMemRelease)(h); /* the mapping (and the daemon's) keeps the memory */
    CUmemAccessDesc acc = {0};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (r == CUDA_SUCCESS)
        r = ZCU(cuMemSetAccess)(va, size, &acc, 1);
    if (r == CUDA_SUCCESS)
        r = ZCU(cuMemsetD8)(va, 0, size);
    if (r == CUDA_SUCCESS)
        r = ZCU(cuCtxSynchronize)(); /* zeroed before the daemon reads them */
    if (r != CUDA_SUCCESS) {
        ZCU(cuMemUnmap)(va, size);
        ZCU(cuMemAddressFree)(va, size);
        close(fd);
        return -1;
    }
    z->fbase = va;
    z->fsize = size;
    z->ffd = fd;
    return 0;
}

static int ext_collective(void *state, zpp_conn *c, const zpp_coll *call, zpp_result *res)
{
    uint64_t id = 0;
    int rc = zpp_collective_async(c, call, (CUstream)0, &id);
    if (rc < 0)
        return rc;
    return zpp_wait_stream(c, id, (CUstream)0, res);
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
        z->ffd = -1;
    if (!z || !(z->ready = calloc((size_t)n_events, sizeof *z->ready)) ||
        !(z->val_of = calloc((size_t)n_events, sizeof *z->val_of)) ||
        !(z->done = calloc((size_t)n_events, sizeof *z->done)) ||
        !(z->ready_h = calloc((size_t)n_events, sizeof *z->ready_h)) ||
        !(z->wire = calloc((size_t)n_events, sizeof *z->wire)) ||
        !(z->req_of = calloc((size_t)n_events, sizeof *z->req_of))) {
        ext_free(z, 0);
        return zpp__set_err(c, ZPP_ENOMEM, "zpp_cuda_attach: out of memory");
    }
    if ((r = ZCU(cuCtxGetCurrent)(&z->ctx)) != CUDA_SUCCESS || !z->ctx) {
        ext_free(z, 0);
        return zpp__set_err(c, ZPP_ESTATE, "zpp_cuda_attach: no current CUDA context");
    }
    z->n = n_events;
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
        ext_free(z, 0);
        return rc;
    }
    flags_create(z); /* offered with the events; the daemon picks */
    x->state = z;
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

const char *zpp_cuda_sync_mode(zpp_conn *c)
{
    struct zpp_cuda *z = c ? attached(c) : NULL;
    if (!z || !z->have_done)
        return "none";
    return z->flag_sync ? "flags" : "events";
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
                                  "zpp_register_cuda: the range spans more than 16 VMM chunks; "
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
            if (rc == 0)
                *offset_out = p - base;
        }
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return rc;
    }
    /* cudaMalloc memory: the legacy IPC handle of the allocation. */
    CUipcMemHandle ih;
    if ((r = ZCU(cuIpcGetMemHandle)(&ih, base)) != CUDA_SUCCESS)
        return drv_err(c, r, "cuIpcGetMemHandle");
    uint8_t raw[EV_HANDLE_LEN];
    memcpy(raw, &ih, sizeof raw);
    int rc = zpp__register_dev(c, NULL, 0, NULL, raw, sizeof raw, uuid, 0, size, buffer_id);
    memset(raw, 0, sizeof raw); /* a bearer token: do not leave copies around */
    if (rc == 0)
        *offset_out = p - base;
    return rc;
}

/* ---- stream-ordered calls --------------------------------------------------- */

int zpp_collective_async(zpp_conn *c, const zpp_coll *call, CUstream stream, uint64_t *req_id)
{
    if (!c)
        return ZPP_EINVAL;
    struct zpp_cuda *z = attached(c);
    if (!z || !z->have_done)
        return zpp__set_err(c, ZPP_ESTATE,
                            "zpp_collective_async: call zpp_cuda_attach before zpp_hello");
    if (!req_id)
        return zpp__set_err(c, ZPP_EINVAL, "zpp_collective_async: no req_id");
    int slot = -1;
    for (int k = 0; k < z->n; k++) {
        int i = (z->next + k) % z->n;
        if (!z->req_of[i]) {
            slot = i;
            break;
        }
    }
    if (slot < 0)
        return zpp__set_err(c, ZPP_EBUSY, "every event of the pool is in flight: wait first");
    uint64_t v = 0;
    CUresult r;
    if (z->flag_sync) {
        v = ++z->seq;
        r = ZCU(cuStreamWriteValue64)(stream, z->fbase + 8u * (CUdeviceptr)slot, v,
                                      CU_STREAM_WRITE_VALUE_DEFAULT);
        if (r != CUDA_SUCCESS)
            return drv_err(c, r, "cuStreamWriteValue64 (ready flag)");
    } else if ((r = ZCU(cuEventRecord)(z->ready[slot], stream)) != CUDA_SUCCESS) {
        return drv_err(c, r, "cuEventRecord (ready event)");
    }
    uint64_t id = 0;
    int rc = zpp__submit_ev(c, call, (uint32_t)slot + 1, v, &id);
    if (rc < 0)
        return rc;
    z->req_of[slot] = id;
    z->val_of[slot] = v;
    z->next = (slot + 1) % z->n;
    *req_id = id;
    return 0;
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
    CUresult r;
    if (z->flag_sync) {
        /* Only after a successful call: a failed one may never get its
         * done flag written (the daemon records it after the whole call
         * was enqueued), and waiting for it would block the stream. */
        if (rc != 0)
            return rc;
        r = ZCU(cuStreamWaitValue64)(stream, z->fbase + 8u * (CUdeviceptr)(z->n + slot),
                                     z->val_of[slot], CU_STREAM_WAIT_VALUE_GEQ);
        if (r != CUDA_SUCCESS)
            return drv_err(c, r, "cuStreamWaitValue64 (done flag)");
        z->waited = 1;
        return 0;
    }
    /* Also after a failed call: the daemon may have recorded done[slot]
     * (a failure after enqueue); waiting on it costs nothing otherwise. */
    r = ZCU(cuStreamWaitEvent)(stream, z->done[slot], 0);
    if (r != CUDA_SUCCESS && rc == 0)
        return drv_err(c, r, "cuStreamWaitEvent (done event)");
    return rc;
}
