/*
 * backend_cuda_int.h — what the two files of the cuda backend share:
 * backend_cuda.c (devices, imported client memory, interprocess events,
 * store memory, the ops table) and backend_cuda_job.c (a job's streams,
 * NCCL communicators, staging pool, kernels and collectives).
 *
 * Threads: everything here runs on the daemon's loop thread. CUDA and NCCL
 * calls are made with the slot's device current (cu_use).
 */
#ifndef ZPPD_BACKEND_CUDA_INT_H
#define ZPPD_BACKEND_CUDA_INT_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* cu_to_host's bounded wait, on the loop thread, for the work queued
 * before an hpZ publish's copy to the host (job.c starts such a call only
 * once every rank's ready event has completed, so only the daemon's own
 * gather is left to wait for). */
#define CU_TO_HOST_WAIT_MS 5000u

#include "backend.h"

/* CLOCK_MONOTONIC in ms: the backend's clock, on the loop and its threads
 * alike (zppd_now_ms is main.c's, which tests replace). */
static inline uint64_t cu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The driver API is reached through libcuda.so.1 loaded at run time
 * (zcu_load), never linked: a zppd built with CUDA still starts, and falls
 * back to the host backend, on a machine with no NVIDIA driver. Call
 * driver functions as ZCU(cuMemMap)(...). */
/* The driver ABI version the loaded entry points must have: the one whose
 * prototypes this file calls. cuGetProcAddress with CUDA_VERSION (13000)
 * hands out the newest ABI of each name, and CUDA 13 gave cuCtxGetDevice a
 * second parameter (the context) under the same name; called with one
 * argument it read a stray register as the context and crashed in the
 * driver (bench/results/cuda-2026-11-22-h200x2-rejoin.txt).
 * 12.0's ABI is the cuda.h prototype of every function loaded here. */
#define ZCU_ABI 12000
/* clang-format off */
#define ZCU_FUNCS(X) \
    X(cuInit) \
    X(cuDeviceGetCount) \
    X(cuDeviceGet) \
    X(cuDeviceGetUuid) \
    X(cuDeviceGetName) \
    X(cuDeviceGetAttribute) \
    X(cuDeviceCanAccessPeer) \
    X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) \
    X(cuGetErrorName) \
    X(cuGetErrorString) \
    X(cuEventCreate) \
    X(cuEventDestroy) \
    X(cuEventRecord) \
    X(cuEventQuery) \
    X(cuCtxSetCurrent) \
    X(cuCtxPushCurrent) \
    X(cuCtxPopCurrent) \
    X(cuStreamQuery) \
    X(cuStreamWaitEvent) \
    X(cuStreamWaitValue32) \
    X(cuStreamWriteValue32) \
    X(cuIpcOpenMemHandle) \
    X(cuIpcCloseMemHandle) \
    X(cuIpcOpenEventHandle) \
    X(cuIpcGetEventHandle) \
    X(cuMemAddressReserve) \
    X(cuMemAddressFree) \
    X(cuMemGetAddressRange) \
    X(cuMemGetAllocationGranularity) \
    X(cuMemImportFromShareableHandle) \
    X(cuMemMap) \
    X(cuMemUnmap) \
    X(cuMemRelease) \
    X(cuMemSetAccess) \
    X(cuMemCreate)
/* clang-format on */

struct zcu_table {
#define ZCU_MEMBER(f) __typeof__(&f) p_##f;
    ZCU_FUNCS(ZCU_MEMBER)
#undef ZCU_MEMBER
};
extern struct zcu_table zcu;
#define ZCU(f) (zcu.p_##f)

/* Loads libcuda.so.1 and every function above (once). 0; -1 with why when
 * there is no libcuda.so.1, -2 when it is there but lacks what we call. */
int zcu_load(char *why, size_t why_len);

#define CU_UUID_LEN 48            /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL */
#define CU_NCCL_DEADLINE_MS 60000 /* enqueue deadline (creation: the job layer's) */

struct cu_dev {
    int ordinal;
    CUdevice dev;
    CUcontext ctx; /* the primary context, retained */
    char uuid[CU_UUID_LEN];
    char name[96];      /* cuDeviceGetName ("?" when the driver does not say) */
    size_t granularity; /* VMM minimum granularity (0: no VMM fd support) */
    int mps;            /* CU_DEVICE_ATTRIBUTE_MPS_ENABLED: 1, 0, or -1 unknown */
    uint32_t imports;   /* client registrations mapped (dev_stats) */
    uint64_t imported_bytes;
};

#define CU_MAX_PEER_GPUS 64  /* peer access is set up for at most this many GPUs */
#define CU_MAX_COUNTERS 4096 /* poisoned-block counters (one per hosted rank of a live job) */

struct cu_job;
struct cu_backend;

/* A release waiting for the GPU: fn(b, arg) runs once every event has
 * completed (see cu_defer). */
struct cu_grave {
    struct cu_grave *next;
    int device; /* what it frees lives on this GPU; -1: several */
    int nev;
    cudaEvent_t *ev;
    void (*fn)(struct cu_backend *b, void *arg);
    void *arg;
    uint64_t since_ms;
    int warned;
    /* optional: runs once when not drained after CU_STUCK_MS */
    void (*stuck)(struct cu_backend *b, void *arg);
    int stuck_done;
};

struct cu_backend {
    int ndev;
    struct cu_dev *devs;
    int allow_legacy;
    /* A sticky CUDA error was seen: the process must exit. Raised by the
     * loop thread or by a worker reading a publish back (cu_to_host), after
     * fatal_why is written; fatal_claimed picks the one writer. */
    _Atomic int fatal;
    atomic_int fatal_claimed;
    uint64_t health_ms; /* when cu_health last asked each GPU's context */
    char fatal_why[384];
    struct cu_grave *graves;      /* deferred releases, reaped by be_cuda_tick */
    struct cu_job *jobs;          /* live jobs (their streams are fenced on release) */
    unsigned long long *counters; /* pinned host memory, CU_MAX_COUNTERS */
    unsigned char *counter_used;
    struct cu_gate *gate; /* backend_cuda_gate.c */
    /* Peer access (be_ops.peer_ok): peer[r * ndev + s] = GPU r reads the
     * daemon memory of GPU s directly; every cu_vmm_alloc grants it. */
    unsigned char *peer;
    int peer_mode;            /* BE_PEER_COPY, BE_PEER_LOAD, or 0: off (ZPPD_PEER) */
    int peer_broken;          /* a grant failed: no call uses peer access any more */
    struct cu_reaper *reaper; /* backend_cuda_job.c: communicators end there */
    struct cu_launchers *launch; /* backend_cuda_launch.c, or NULL */
};

/* backend_cuda_gate.c: job streams wait on host flags that a thread raises
 * once the client's ready event has completed, or the loop raises when the
 * session closes; no stream of ours waits on a client's event. */
#define CU_GATE_FLAGS 64 /* flags per session block (>= ZPP_MAX_EVENTS) */
struct cu_gate;
int cu_gate_start(struct cu_backend *b, char *why, size_t why_len);
void cu_gate_stop(struct cu_backend *b);
/* A zeroed block of CU_GATE_FLAGS flags: host address and device address. */
int cu_gate_flags_get(struct cu_backend *b, uint32_t **host, CUdeviceptr *dev);
/* Back to the free list: only once no stream can still wait on it. */
void cu_gate_flags_put(struct cu_backend *b, uint32_t *host);
/* flag reaches v (cyclic max) once ev, of context ctx, has completed. */
int cu_gate_arm(struct cu_backend *b, CUcontext ctx, CUevent ev, uint32_t *flag, uint32_t v,
                const void *owner);
/* flag reaches v once the client's ready flag *src (host memory the gate
 * can read) has reached want. */
int cu_gate_arm_flag(struct cu_backend *b, const uint32_t *src, uint32_t want, uint32_t *flag,
                     uint32_t v, const void *owner);
/* Disarms owner's entries (before its events are destroyed). */
void cu_gate_drop(struct cu_backend *b, const void *owner);

/* backend_cuda_launch.c: a launcher thread per GPU runs one GPU's part of
 * a small fenced call while the others run theirs (ZPPD_LAUNCHERS). A
 * task is embedded first in the caller's own struct; fn gets it back. */
#define CU_MAX_TASKS 64
struct cu_task {
    int device;
    int (*fn)(struct cu_task *t); /* runs with `device` current; its result lands in rc */
    int rc;
};
struct cu_launchers;
int cu_launchers_start(struct cu_backend *b);
void cu_launchers_stop(struct cu_backend *b);
/* Runs the n tasks at once, each on its GPU's launcher (the first on the
 * calling thread), and returns when all have returned. */
void cu_run_tasks(struct cu_backend *b, struct cu_task *const *t, int n);

/* Daemon-owned device memory (staging, store, counters): cuMemCreate +
 * map, so that freeing it (cuMemUnmap) never synchronises the device: a
 * stream blocked on a dead client's event must not block the loop. */
int cu_vmm_alloc(struct cu_backend *b, int device, size_t bytes, void **out);
void cu_vmm_free(void *p);

/* Runs fn(b, arg) once the GPU has finished everything enqueued so far on
 * the streams of every live job on `device` (device -1: every device), now
 * if there is nothing to wait for. The loop never waits for the GPU. */
void cu_defer(struct cu_backend *b, int device, void (*fn)(struct cu_backend *, void *), void *arg);
/* Records one event on each stream of every live job on device (-1: all)
 * into *ev (malloc'd, *nev entries). 0 or -1 (out of memory). */
int cu_jobs_fence(struct cu_backend *b, int device, cudaEvent_t **ev, int *nev);
/* Adds a grave waiting on ev[0..nev) (takes ownership of ev); returns it,
 * or NULL when it ran fn at once (out of memory: it waited). */
struct cu_grave *cu_grave_add(struct cu_backend *b, cudaEvent_t *ev, int nev,
                              void (*fn)(struct cu_backend *, void *), void *arg);
/* Reaps completed graves; logs (once) graves older than a minute. */
void cu_reap(struct cu_backend *b);

/* Makes device `device`'s primary context current on this thread. */
int cu_use(const struct cu_backend *b, int device);

/* Formats a CUDA driver / runtime / NCCL failure into why. Return code. */
int cu_drv_fail(CUresult r, const char *what, char *why, size_t why_len);
int cu_rt_fail(cudaError_t r, const char *what, char *why, size_t why_len);

/* A sticky error (the context is unusable) from a runtime error code. */
int cu_rt_sticky(cudaError_t r);
void cu_mark_fatal(struct cu_backend *b, const char *what, cudaError_t r);

/* backend_cuda_job.c: the job entries and the per-call entries. */
int cu_job_open(void *backend, const struct be_topo *t, const int *devices, void **job, char *why,
                size_t why_len);
void cu_job_close(void *backend, void *job, int abort);
/* Every tick: ends the finalizing of closed jobs' communicators (all: at
 * exit, now, aborting what is not done). */
void cu_jobs_tick(struct cu_backend *b, int all);
/* Jobs whose communicators are still finalizing or that the reaper has
 * not ended yet (dev_stats counts them as deferred releases on every GPU:
 * their memory is not back yet). */
int cu_reaper_pending(struct cu_backend *b);
/* At exit: waits up to wait_ms for the communicators still ending. */
void cu_reaper_stop(struct cu_backend *b, int wait_ms);
/* Unregisters (cudaHostUnregister, in device's context) and unmaps host
 * memory [host, host + len) mapped from a client's memfd, then closes
 * live_fd (the client's pipe, or -1), on the reaper thread: whether
 * unregistering waits for the device is not documented, and the loop must
 * not wait behind a stream parked on a gate. */
void cu_reaper_host_release(struct cu_backend *b, int device, void *host, size_t len,
                            int live_fd);
int cu_job_open_ids(void *backend, const struct be_topo *t, const int *devices, const uint8_t *ids,
                    int nids, void **job, char *why, size_t why_len);
int cu_make_ids(void *backend, int n, uint8_t *ids, char *why, size_t why_len);
int cu_to_host(struct be_call *c, int s, void *dst, const void *src, size_t bytes);
int cu_lane_use(struct be_call *c, int s, int lane);
int cu_lane_mark(struct be_call *c, int s, int lane, int m);
int cu_lanes_cheap(struct be_call *c);
int cu_peer_ok(struct be_call *c, int comm);
int cu_peer_fence(struct be_call *c, int comm);
int cu_peer_gather(struct be_call *c, int comm, void *const *send, void *const *recv,
                   size_t bytes);
/* call_wait notes slot s's done event of call c; call_record asks whether
 * a fenced launch recorded it already, after the slot's last work of the
 * call (1: nothing to record). */
void cu_call_done_note(struct be_call *c, int s, CUevent done);
/* A fenced launch recorded slot s's done event already: the client's done
 * flag is written after it, once the call's replies are out
 * (cu_call_replied: be_ops.call_replied), so that the reply does not wait
 * for one more driver call. */
void cu_call_flag_later(struct be_call *c, int s, CUdeviceptr flag, uint32_t value);
void cu_call_replied(struct be_call *c);
int cu_call_done_early(struct be_call *c, int s, CUevent done);
/* done is about to be destroyed (its session closes): no slot keeps it
 * noted (a call that failed between call_wait and call_record left it). */
void cu_call_done_forget(struct cu_backend *b, CUevent done);
int cu_peer_qwz(struct be_call *c, int comm, void *const *in, void *const *out, uint64_t shard,
                uint64_t count, int dtype, int bits, uint32_t block, uint64_t *poisoned);
int cu_lane_wait(struct be_call *c, int s, int lane, int m);
int cu_job_poll(void *backend, void *job, char *why, size_t why_len);
uint64_t cu_job_memory(void *backend, void *job);
/* The stream of slot s of the call's job (NULL if none) and its device. */
CUstream cu_call_stream(struct be_call *c, int s, int *device);
/* The backend of the call's job (NULL if none). */
struct cu_backend *cu_call_backend(struct be_call *c, int s);

int cu_scratch(struct be_call *c, int s, size_t bytes, void **out);
int cu_quantize(struct be_call *c, int s, const void *x, int dtype, uint64_t n, uint64_t n_valid,
                int bits, uint32_t block, void *out, uint64_t *poisoned);
int cu_dequantize(struct be_call *c, int s, const void *in, uint64_t n, uint64_t n_out, int bits,
                  uint32_t block, void *y, int dtype);
int cu_reorder_quantize(struct be_call *c, int s, const void *x, int dtype,
                        const struct zk_qgz_geom *g, int stage, void *out, uint64_t *poisoned);
int cu_reduce_requant(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                      uint64_t piece, int bits, uint32_t block, void *out, uint64_t *poisoned);
int cu_reduce_out(struct be_call *c, int s, const void *in, uint64_t in_stride, int k,
                  uint64_t piece, int bits, uint32_t block, uint64_t count, int op, float divisor,
                  void *y, int out_dtype);
int cu_copy(struct be_call *c, int s, void *dst, const void *src, size_t bytes);
int cu_zero(struct be_call *c, int s, void *dst, size_t bytes);
int cu_allgather(struct be_call *c, int comm, void *const *send, void *const *recv, size_t bytes);
int cu_alltoall(struct be_call *c, int comm, void *const *send, void *const *recv,
                size_t bytes_per_peer);
int cu_reduce_scatter(struct be_call *c, int comm, void *const *send, void *const *recv,
                      uint64_t count, uint64_t shard, int dtype, int out_dtype, int op);

#endif
