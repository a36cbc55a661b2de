/*
 * zpp_cuda.h — libzpp's CUDA side: GPU buffers and stream-ordered calls
 * against a zppd running the cuda backend. Include after zpp.h; needs
 * <cuda.h> (the driver API). zpp.h itself stays free of CUDA headers.
 *
 * Flow (docs/cuda.md):
 *   zpp_connect; zpp_cuda_attach(c, 16) with the GPU's context current;
 *   zpp_hello with gpu_uuid = zpp_cuda_device_uuid(...);
 *   zpp_register_cuda for each tensor (or its allocation) once;
 *   zpp_collective_async(c, &call, stream, &req) ... zpp_wait_stream(c,
 *   req, stream, &res): the daemon's stream waits for `stream`'s work
 *   before the call, and `stream` waits for the daemon's work after it; no
 *   CPU waits for a GPU. On done flags, zpp_collective_stream(c, &call,
 *   stream, &req) does both without waiting for the reply, and zpp_wait
 *   reads it later. zpp_collective on an attached connection does the
 *   same on the legacy default stream (stream 0).
 * A connection is used by one thread at a time, with a current CUDA context
 * on the device it was attached on.
 */
#ifndef ZPP_CUDA_H
#define ZPP_CUDA_H

#include <cuda.h>
#include <stdint.h>

#include "zpp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZPP_CUDA_UUID_LEN 48   /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL */
#define ZPP_CUDA_MAX_CHUNKS 256 /* VMM chunks one registration may carry (zppd: SESS_MAX_FDS) */

/* The UUID of the current context's device as nvidia-smi prints it (the
 * Hello's gpu_uuid). Returns 0 or a ZPP_E* code. */
ZPP_EXPORT int zpp_cuda_device_uuid(char out[ZPP_CUDA_UUID_LEN]);

/* Creates the connection's pool of n_events interprocess events (1..64)
 * on the current context's device; call before zpp_hello, which then sends
 * them and keeps the daemon's. Unless ZPP_DONE_FLAGS=0 it also offers the
 * daemon done flags in host memory (docs/cuda.md, "Done flags"). Freed by
 * zpp_close. */
ZPP_EXPORT int zpp_cuda_attach(zpp_conn *c, int n_events);

/* 1 when the daemon took the connection's done flags at zpp_hello: streams
 * wait on flags zppd writes, and that libzpp raises itself should zppd's
 * process end with calls answered and not done (their output, where it lies
 * wholly in one zpp_register_cuda range of c, is then filled with 0xFF
 * bytes, NaN, before the stream goes on, and zpp_check and the next call
 * say ZPP_ECLOSED); and no CUDA
 * IPC event is used, so the client needs neither zppd's uid nor its
 * /dev/shm. 0 when they wait on the daemon's done events (ZPP_DONE_FLAGS=0,
 * a daemon that could not map them or of before session 29) or c is not
 * attached. */
ZPP_EXPORT int zpp_cuda_done_flags(const zpp_conn *c);

/* Registers the device memory around [dptr, dptr + len): a VMM allocation
 * (cuMemCreate with the POSIX-fd handle type; PyTorch expandable segments)
 * goes as one descriptor per physical chunk covering the range; any other
 * (cudaMalloc) as the legacy IPC handle of its allocation (the daemon must
 * allow_legacy_ipc). The registered region is the whole covering
 * allocation(s): *offset_out is dptr's byte offset inside it, to use in
 * zpp_bufref.offset. A VMM range over more than ZPP_CUDA_MAX_CHUNKS chunks
 * is refused (ZPP_ELIMIT): register smaller ranges; a range that runs
 * past the end of its allocation is refused (ZPP_ERANGE). If the allocator
 * unmaps a chunk and maps new memory at the same address, the daemon keeps
 * reading the old memory: register again after the caching allocator
 * frees memory (libzpp caches nothing by address). */
ZPP_EXPORT int zpp_register_cuda(zpp_conn *c, const void *dptr, size_t len, uint64_t *buffer_id,
                                 uint64_t *offset_out);

/* Submits call ordered after the work on `stream` (records the next free
 * ready event on it). *req_id for zpp_wait_stream. ZPP_EBUSY when every
 * event of the pool is in flight. */
ZPP_EXPORT int zpp_collective_async(zpp_conn *c, const zpp_coll *call, CUstream stream,
                                    uint64_t *req_id);

/* Waits for req_id's reply, then makes `stream` wait (on the GPU) for the
 * daemon's work: results may be used by work enqueued on stream after
 * this returns. res may be NULL. A call of at most 1 MiB found finished
 * (its done event polled for up to ZPP_DONE_SPIN_US, default 20) needs no
 * wait on the stream, and gets none. The wait is on the call's done flag
 * where zpp_cuda_done_flags says 1, else on its done event. */
ZPP_EXPORT int zpp_wait_stream(zpp_conn *c, uint64_t req_id, CUstream stream, zpp_result *res);
/* zpp_collective_async and the stream's wait in one, with no wait for the
 * reply: on done flags (zpp_cuda_done_flags) the value the stream waits for
 * is known when the call is sent, so `stream` is made to wait for the
 * call's work here, and the calling thread goes on at once, as with an
 * in-process collective. The call's flag is raised whatever becomes of it:
 * by zppd's stream after the work, by zppd from the CPU when it refuses the
 * call, by libzpp when zppd's process ends; so the stream never waits for
 * good, and a refused call's output is left as it was. Read the reply
 * (result, or why it failed) with zpp_wait or zpp_test on *req_id, when it
 * suits: before using results of a call that may have failed, and often
 * enough that replies do not pile up. Synchronising `stream` before the
 * reply is in is allowed; it waits until zppd has done the call (or
 * refused it), which needs the job's other ranks to submit theirs. A slot
 * of the pool is free again once its call's work is done. ZPP_EUNSUPPORTED
 * on a connection without done flags (use zpp_collective_async and
 * zpp_wait_stream); ZPP_EBUSY, ZPP_ETIMEDOUT as zpp_collective_async; a
 * driver error after the call was sent leaves *req_id set, so that its
 * reply can still be read. */
ZPP_EXPORT int zpp_collective_stream(zpp_conn *c, const zpp_coll *call, CUstream stream,
                                     uint64_t *req_id);

#ifdef __cplusplus
}
#endif
#endif
