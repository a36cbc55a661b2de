/*
 * zpp.h — the public C API of libzpp, the client library of zppd.
 *
 * A training rank connects to the node's zppd over a Unix socket, joins its
 * job (zpp_hello), registers the buffers it will pass (host backend: shared
 * memory made with zpp_shm_create; cuda backend: device memory), and calls
 * the ZeRO++ collectives. Every function returns 0 or a negative ZPP_E*
 * code; the connection keeps the daemon's message for the last failure
 * (zpp_last_error). Output parameters are untouched on failure. Several
 * connections may live in one process, each used by one thread at a time;
 * the only global state is the list of connections that joined a job, for
 * the Goodbye said at exit (zpp_close).
 */
#ifndef ZPP_H
#define ZPP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ZPP_EXPORT __attribute__((visibility("default")))
#else
#define ZPP_EXPORT
#endif

#define ZPP_VERSION_MAJOR 0
#define ZPP_VERSION_MINOR 1
#define ZPP_VERSION_PATCH 0
#define ZPP_VERSION_STRING "0.1.0"
#define ZPP_DEFAULT_SOCKET "/run/zppd/zppd.sock"

/* Error codes: name, value, message. The daemon sends these values on the
 * wire (Reply.code), the Python binding builds its exceptions from this list
 * (zpp_err_name/zpp_strerror over ZPP_ERRNO_MAX). */
#define ZPP_ERRNO_MAP(XX)                                                                          \
    XX(EINVAL, -1, "invalid argument")                                                             \
    XX(EPROTO, -2, "protocol error")                                                               \
    XX(ENOMEM, -3, "out of memory")                                                                \
    XX(ELIMIT, -4, "limit reached")                                                                \
    XX(ENOENT, -5, "not found")                                                                    \
    XX(EPERM, -6, "permission denied")                                                             \
    XX(EMISMATCH, -7, "call differs across ranks")                                                 \
    XX(EABORTED, -8, "job aborted")                                                                \
    XX(ETIMEDOUT, -9, "timed out")                                                                 \
    XX(EIO, -10, "i/o error")                                                                      \
    XX(ECLOSED, -11, "connection closed")                                                          \
    XX(EVERSION, -12, "protocol version not supported")                                            \
    XX(EBACKEND, -13, "backend error")                                                             \
    XX(EUNSUPPORTED, -14, "not supported")                                                         \
    XX(EDRAINING, -15, "daemon is draining")                                                       \
    XX(ESTATE, -16, "not allowed in this state")                                                   \
    XX(EEXIST, -17, "already exists")                                                              \
    XX(ERANGE, -18, "out of range")                                                                \
    XX(EBUSY, -19, "busy")

typedef enum {
    ZPP_OK = 0,
#define XX(name, val, msg) ZPP_##name = (val),
    ZPP_ERRNO_MAP(XX)
#undef XX
        ZPP_ERRNO_MAX = -19
} zpp_errno_t;

/* Static strings; unknown codes give "unknown error" / "UNKNOWN". */
ZPP_EXPORT const char *zpp_strerror(int code);
ZPP_EXPORT const char *zpp_err_name(int code);

/* Element types, reductions and collectives (values equal the wire enums). */
typedef enum { ZPP_FP32 = 1, ZPP_FP16 = 2, ZPP_BF16 = 3 } zpp_dtype_t;
typedef enum { ZPP_SUM = 0, ZPP_MEAN = 1 } zpp_reduce_t;
typedef enum {
    ZPP_OP_QWZ_ALLGATHER = 1,
    ZPP_OP_HPZ_GATHER = 2,
    ZPP_OP_HPZ_INVALIDATE = 3,
    ZPP_OP_QGZ_REDUCE_SCATTER = 4,
    ZPP_OP_ALLGATHER = 5,
    ZPP_OP_REDUCE_SCATTER = 6,
    ZPP_OP_BARRIER = 7
} zpp_op_t;
/* Static lower-case name of a zpp_op_t ("qgz_reduce_scatter"); "unknown"
 * otherwise. The daemon logs and labels its metrics with the same names. */
ZPP_EXPORT const char *zpp_op_name(int op);
typedef enum {
    ZPP_ALGO_QWZ = 1,
    ZPP_ALGO_HPZ = 2,
    ZPP_ALGO_QGZ_HIER = 3,
    ZPP_ALGO_QGZ_FLAT = 4,
    ZPP_ALGO_RS_EXACT = 5,
    ZPP_ALGO_AG_EXACT = 6,
    ZPP_ALGO_NONE = 7
} zpp_algo_t;
ZPP_EXPORT const char *zpp_algo_name(int algo);

#define ZPP_FLAG_FORCE_QUANT 1u
#define ZPP_FLAG_INVALIDATE_ALL 2u
/* qwZ or plain all-gather: also publish the gathered tensor as a shared,
 * read-only hpZ replica under zpp_coll.content_key (docs/hpz-sharing.md). */
#define ZPP_FLAG_PUBLISH 4u
/* With ZPP_FLAG_INVALIDATE_ALL: drop the job's own hpZ keys but keep it
 * attached to the shared replicas it reads (they stay, and are not evicted
 * while it is attached). */
#define ZPP_FLAG_KEEP_SHARED 8u

typedef struct zpp_conn zpp_conn; /* opaque */

/* Who this rank is. Strings may be NULL (empty). */
typedef struct {
    const char *job_id;
    uint32_t rank;
    uint32_t world_size;
    uint32_t local_rank;
    uint32_t node_count;
    const char *gpu_uuid;     /* "host" or NULL on the host backend */
    const char *leader_addr;  /* node 0's daemon, host:port (multi-node) */
    const char *tenant_label; /* optional */
} zpp_job_desc;

typedef struct {
    uint64_t session_id;
    char daemon_version[32];
    char backend[16];
    uint64_t max_frame;
    uint32_t max_buffers;
    uint32_t max_pending;
    uint32_t nodes;
    uint32_t local_size;
} zpp_hello_info;

/* Connects to the daemon's socket (NULL: $ZPP_SOCKET or ZPP_DEFAULT_SOCKET).
 * *out is freed with zpp_close. */
ZPP_EXPORT int zpp_connect(const char *socket_path, zpp_conn **out);
/* Closes the connection and frees it; accepts NULL. Pending async requests
 * are abandoned. A connection that joined a job says Goodbye first (from
 * the process that said Hello only), so that zppd takes this for a rank
 * leaving on purpose (it may rejoin) and not for a dead one (the job is
 * aborted at once). A normal exit says it for connections left open; a
 * killed or crashed process does not (docs/protocol.md). */
ZPP_EXPORT void zpp_close(zpp_conn *c);
/* The daemon's (or library's) message for the last failed call on c. */
ZPP_EXPORT const char *zpp_last_error(const zpp_conn *c);
/* The socket descriptor (for poll); owned by c. */
ZPP_EXPORT int zpp_fd(const zpp_conn *c);

/* Joins a job. info may be NULL. */
ZPP_EXPORT int zpp_hello(zpp_conn *c, const zpp_job_desc *job, zpp_hello_info *info);

/* ---- host shared memory ------------------------------------------------ */
/* A sealed memfd mapping: the daemon maps it, the client reads and writes
 * it through ptr. Freed with zpp_shm_destroy (accepts NULL). */
typedef struct zpp_shm zpp_shm;
ZPP_EXPORT int zpp_shm_create(size_t bytes, zpp_shm **out);
ZPP_EXPORT void *zpp_shm_ptr(const zpp_shm *s);
ZPP_EXPORT size_t zpp_shm_size(const zpp_shm *s);
ZPP_EXPORT int zpp_shm_fd(const zpp_shm *s);
ZPP_EXPORT void zpp_shm_destroy(zpp_shm *s);

/* Registers [offset, offset+length) of a shared-memory object (its fd is
 * sent over the socket; the caller keeps its own). */
ZPP_EXPORT int zpp_register_shm(zpp_conn *c, const zpp_shm *s, uint64_t offset, uint64_t length,
                                uint64_t *buffer_id);
/* Registers a raw descriptor (a sealed memfd); see zpp_register_shm. */
ZPP_EXPORT int zpp_register_fd(zpp_conn *c, int fd, uint64_t offset, uint64_t length,
                               uint64_t *buffer_id);
ZPP_EXPORT int zpp_deregister(zpp_conn *c, uint64_t buffer_id);

/* ---- collectives -------------------------------------------------------- */
typedef struct {
    uint64_t buffer_id;
    uint64_t offset; /* bytes */
} zpp_bufref;

/* One collective call; fill with zpp_coll_init and set what applies.
 * count is the element count of the full tensor:
 *   all-gathers: input holds this rank's shard of ceil(count/W) elements
 *                (the last ranks' shards may extend past count: ignored),
 *                output holds count elements;
 *   reduce-scatters: input holds count elements, output receives this
 *                rank's shard of ceil(count/W) elements (elements past
 *                count are written as 0);
 *   hpZ gather: output holds count elements.
 * seq 0 means "the connection's next sequence number". */
typedef struct {
    zpp_op_t op;
    zpp_dtype_t dtype;
    zpp_dtype_t out_dtype; /* 0: same as dtype */
    uint64_t count;
    uint32_t bits;   /* 8 or 4 */
    uint32_t block;  /* 0: daemon default */
    uint32_t stages; /* 0: daemon default */
    zpp_reduce_t reduce;
    const char *hpz_key; /* NULL or "" for none */
    zpp_bufref input;
    zpp_bufref output;
    uint32_t flags;
    uint32_t timeout_ms;
    uint64_t seq;
    /* A shared hpZ replica's content key, "sha256:" + the 64 lowercase hex
     * digits of the SHA-256 of the tensor (count elements of dtype, as the
     * all-gather returns them); NULL or "" for none. With ZPP_FLAG_PUBLISH
     * on an all-gather: publish under it; on an hpZ gather: read it (in
     * place of hpz_key); on an hpZ invalidate: detach from it. */
    const char *content_key;
} zpp_coll;

typedef struct {
    int algo; /* zpp_algo_t */
    uint64_t seq;
    uint64_t logical_bytes;
    uint64_t bytes_intra;
    uint64_t bytes_inter;
    uint64_t bytes_zero3_inter;
    uint64_t nonfinite_blocks;
    uint64_t elapsed_us;
} zpp_result;

ZPP_EXPORT void zpp_coll_init(zpp_coll *call, zpp_op_t op, zpp_dtype_t dtype, uint64_t count);

/* Blocking call: submits and waits. res may be NULL. */
ZPP_EXPORT int zpp_collective(zpp_conn *c, const zpp_coll *call, zpp_result *res);

/* Async: submits and returns a request id; zpp_wait blocks until that
 * request's reply (other replies that arrive meanwhile are kept), zpp_test
 * returns ZPP_EBUSY if it has not arrived yet, and only then (a daemon that
 * answered ZPP_EBUSY gives ZPP_EPROTO), never blocking for long: it reads
 * at most 1024 replies of other requests per call. Every submitted request
 * must be waited for (or the connection closed). A submit while the
 * daemon's max_pending requests are submitted and not yet waited for
 * returns ZPP_ELIMIT at once: nothing is sent and the call's sequence
 * number is not used, so the same call may be submitted again after a
 * wait. (A refusal from the daemon itself, e.g. after a reload lowered
 * max_pending_per_session, comes as the call's reply and its number is
 * used: the job's other ranks wait for this rank's call of that number.) */
ZPP_EXPORT int zpp_submit(zpp_conn *c, const zpp_coll *call, uint64_t *req_id);
ZPP_EXPORT int zpp_wait(zpp_conn *c, uint64_t req_id, zpp_result *res);
ZPP_EXPORT int zpp_test(zpp_conn *c, uint64_t req_id, zpp_result *res);

/* Convenience wrappers (blocking). */
ZPP_EXPORT int zpp_qwz_allgather(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count,
                                 zpp_dtype_t dtype, uint32_t bits, uint32_t block,
                                 const char *hpz_key, zpp_result *res);
ZPP_EXPORT int zpp_hpz_gather(zpp_conn *c, zpp_bufref out, uint64_t count, zpp_dtype_t dtype,
                              const char *hpz_key, zpp_result *res);
ZPP_EXPORT int zpp_hpz_invalidate(zpp_conn *c, const char *hpz_key, zpp_result *res);
ZPP_EXPORT int zpp_qgz_reduce_scatter(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count,
                                      zpp_dtype_t dtype, zpp_dtype_t out_dtype, uint32_t bits,
                                      zpp_reduce_t reduce, zpp_result *res);
ZPP_EXPORT int zpp_allgather(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count,
                             zpp_dtype_t dtype, zpp_result *res);
ZPP_EXPORT int zpp_reduce_scatter(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count,
                                  zpp_dtype_t dtype, zpp_dtype_t out_dtype, zpp_reduce_t reduce,
                                  zpp_result *res);
ZPP_EXPORT int zpp_barrier(zpp_conn *c, zpp_result *res);

/* Did every call this connection got an answer for also complete, on a
 * device that still works? On the cuda backend an answer means the work is
 * enqueued on the GPU: if the device fails before it runs (and zppd exits
 * 3), a stream waiting on the daemon's done events may go on without the
 * results. Ask after the stream has waited for the last call's results
 * (e.g. before an optimizer step or a checkpoint): 0 yes; ZPP_EBUSY some
 * of that work still runs (ask again); ZPP_EBACKEND the device failed, the
 * results are not to be used (zpp_last_error says how); ZPP_ECLOSED the
 * daemon is gone. Calls not yet answered are not covered. */
ZPP_EXPORT int zpp_check(zpp_conn *c);

/* ---- admin (zppctl) ------------------------------------------------------ */
/* Sends a StatusQuery / JobsQuery and returns the reply as a JSON object
 * string in buf (NUL-terminated; ZPP_ERANGE if it does not fit). */
ZPP_EXPORT int zpp_admin_status_json(zpp_conn *c, char *buf, size_t len);
ZPP_EXPORT int zpp_admin_jobs_json(zpp_conn *c, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
