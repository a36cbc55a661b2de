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
    X(cuMemcpyHtoD) \
    X(cuPointerGetAttribute) \
    X(cuStreamCreate) \
    X(cuStreamDestroy) \
    X(cuStreamSynchronize) \
    X(cuStreamWaitEvent) \
    X(cuStreamWaitValue32) \
    X(cuStreamWaitValue64) \
    X(cuStreamWriteValue32) \
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
    int bits;          /* 64, or 32 where the GPU lacks 64-bit stream memops */
    char why[160];     /* how the stream order was chosen (zpp_cuda_sync_detail) */
};

/* The flag operations at the connection's width (values compare
 * cyclically under CU_STREAM_WAIT_VALUE_GEQ, so 32-bit ones may wrap). */
static CUresult flag_write(const struct zpp_cuda *z, CUstream st, CUdeviceptr at, uint64_t v)
{
    return z->bits == 32 ? ZCU(cuStreamWriteValue32)(st, at, (cuuint32_t)v,
                                                     CU_STREAM_WRITE_VALUE_DEFAULT)
                         : ZCU(cuStreamWriteValue64)(st, at, v, CU_STREAM_WRITE_VALUE_DEFAULT);
}

static CUresult flag_wait(const struct zpp_cuda *z, CUstream st, CUdeviceptr at, uint64_t v)
{
    return z->bits == 32 ? ZCU(cuStreamWaitValue32)(st, at, (cuuint32_t)v, CU_STREAM_WAIT_VALUE_GEQ)
                         : ZCU(cuStreamWaitValue64)(st, at, v, CU_STREAM_WAIT_VALUE_GEQ);
}

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
                for (int i = 0; i < z->n; i++) /* no wait asks for more than the last */
                    if (z->val_of[i])
                        flag_write(z, st, z->fbase + 8u * (CUdeviceptr)(z->n + i), z->val_of[i]);
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
        h->flag_bits = (uint32_t)z->bits;
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
        snprintf(z->why, sizeof z->why, "flags, %d-bit stream memory operations", z->bits);
        return 0;
    }
    if (z->fbase) /* offered, not taken: the daemon logs why */
        snprintf(z->why, sizeof z->why,
                 "events: the daemon did not take the %d-bit flag array (see its log)", z->bits);
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
    CUresult r;
#define FLAGS_NO(...)                                                                              \
    do {                                                                                           \
        snprintf(z->why, sizeof z->why, "events: " __VA_ARGS__);                                   \
        return -1;                                                                                 \
    } while (0)
    if (sync && !strcmp(sync, "events"))
        FLAGS_NO("ZPP_CUDA_SYNC=events");
    if ((r = ZCU(cuCtxGetDevice)(&dev)) != CUDA_SUCCESS)
        FLAGS_NO("cuCtxGetDevice failed (%d)", (int)r);
    if (ZCU(cuDeviceGetAttribute)(&fd_ok,
                                  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                  dev) != CUDA_SUCCESS ||
        !fd_ok)
        FLAGS_NO("the GPU cannot export VMM memory as a POSIX fd");
    if (ZCU(cuDeviceGetAttribute)(&mo64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                  dev) != CUDA_SUCCESS)
        mo64 = 0;
    z->bits = mo64 ? 64 : 32; /* 32-bit memops need no attribute (CUDA >= 12) */
    CUmemAllocationProp p = {0};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0, need = 16u * (size_t)z->n;
    if ((r = ZCU(cuMemGetAllocationGranularity)(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) !=
            CUDA_SUCCESS ||
        !g)
        FLAGS_NO("cuMemGetAllocationGranularity failed (%d)", (int)r);
    size_t size = (need + g - 1) / g * g;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    int fd = -1;
    if ((r = ZCU(cuMemCreate)(&h, size, &p, 0)) != CUDA_SUCCESS)
        FLAGS_NO("cuMemCreate of the flag array failed (%d)", (int)r);
    if ((r = ZCU(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                               0)) != CUDA_SUCCESS ||
        (r = ZCU(cuMemAddressReserve)(&va, size, 0, 0, 0)) != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd);
        ZCU(cuMemRelease)(h);
        FLAGS_NO("exporting or reserving the flag array failed (%d)", (int)r);
    }
    r = ZCU(cuMemMap)(va, size, 0, h, 0);
    ZCU(cuMemRelease)(h); /* the mapping (and the daemon's) keeps the memory */
    CUmemAccessDesc acc = {0};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const char *step = "cuMemMap";
    int mapped = r == CUDA_SUCCESS;
    if (mapped) {
        step = "cuMemSetAccess";
        r = ZCU(cuMemSetAccess)(va, size, &acc, 1);
    }
    if (mapped && r == CUDA_SUCCESS) {
        /* zeroed before the daemon reads them: a synchronous copy, no
         * kernel, only the flags' bytes (the rest of the granule is unused) */
        uint64_t zero[2 * ZPP_MAX_EVENTS] = {0};
        step = "cuMemcpyHtoD";
        r = ZCU(cuMemcpyHtoD)(va, zero, need);
    }
    if (r != CUDA_SUCCESS) {
        if (mapped)
            ZCU(cuMemUnmap)(va, size);
        ZCU(cuMemAddressFree)(va, size);
        close(fd);
        snprintf(z->why, sizeof z->why, "events: %s on the flag array failed (%d)", step, (int)r);
        /* a sticky error (the context is unusable) must not pass silently */
        return r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
                       r == CUDA_ERROR_ECC_UNCORRECTABLE || r == CUDA_ERROR_UNKNOWN
                   ? -2
                   : -1;
    }
#undef FLAGS_NO
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
    if (flags_create(z) == -2) { /* else offered with the events; the daemon picks */
        char msg[200];
        snprintf(msg, sizeof msg, "zpp_cuda_attach: %s", z->why + 8);
        ext_free(z, 0);
        return zpp__set_err(c, ZPP_EBACKEND, msg);
    }
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

const char *zpp_cuda_sync_detail(zpp_conn *c)
{
    struct zpp_cuda *z = c ? attached(c) : NULL;
    if (!z)
        return "not attached";
    return z->why[0] ? z->why : z->have_done ? "events" : "before Hello";
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
        r = flag_write(z, stream, z->fbase + 8u * (CUdeviceptr)slot, v);
        if (r != CUDA_SUCCESS)
            return drv_err(c, r, "cuStreamWriteValue (ready flag)");
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
        r = flag_wait(z, stream, z->fbase + 8u * (CUdeviceptr)(z->n + slot), z->val_of[slot]);
        if (r != CUDA_SUCCESS)
            return drv_err(c, r, "cuStreamWaitValue (done flag)");
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
