/*
 * zpp_int.h — libzpp internals shared by its own files and zppctl; not
 * installed, not exported from the shared library.
 *
 * zppctl needs the decoded admin replies (for its tables), not only the JSON
 * that the public zpp_admin_*_json functions render.
 */
#ifndef ZPP_INT_H
#define ZPP_INT_H

#include "frame.h"
#include "zpp.h"

/* Sends an admin query (which = ZPP__REQUEST__BODY_STATUS, _JOBS,
 * _SESSIONS, _STORE or _METRICS) and waits for its reply. Returns 0 and
 * *out (free with zpp_reply_free) whose body is the matching reply, or a
 * negative code with the message in zpp_last_error(c). Needs no Hello. */
int zpp__admin_query(zpp_conn *c, int which, Zpp__Reply **out);

/* Asks the daemon to drain (off = 0) or to take jobs again (off = 1).
 * Returns 0 and *out (body: DrainReply), or a negative code (ZPP_EPERM
 * unless the caller is root or the daemon's uid). */
int zpp__admin_drain(zpp_conn *c, int off, Zpp__Reply **out);

/* Render a StatusReply / JobsReply as a JSON object into a malloc'd,
 * NUL-terminated string the caller frees. Returns 0 or ZPP_ENOMEM. */
int zpp__status_json(const Zpp__StatusReply *st, char **out);
int zpp__jobs_json(const Zpp__JobsReply *jr, char **out);
int zpp__sessions_json(const Zpp__SessionsReply *sr, char **out);
int zpp__store_json(const Zpp__StoreReply *sr, char **out);
int zpp__drain_json(const Zpp__DrainReply *dr, char **out);

/* ---- hooks for the CUDA side (zpp_cuda.c; zpp.c stays CUDA-free) ---- */

/* Per-connection extension state, set by zpp_cuda_attach. hello_out fills
 * the Hello's CUDA fields (ready event handles, 64 bytes each, and the done
 * flags; what they point to stays valid until hello_in) and up to 2
 * descriptors to send with it (fds, *nfds); hello_in takes the reply's
 * done events and flag_sync (0 or a code, which fails zpp_hello);
 * collective, if set, replaces zpp_collective's body (stream-ordered
 * calls); deregistered, if set, runs once the daemon let a buffer go;
 * free runs in zpp_close. */
typedef struct {
    void *state;
    int (*hello_out)(void *state, Zpp__Hello *h, int *fds, int *nfds);
    int (*hello_in)(void *state, zpp_conn *c, const Zpp__HelloReply *hr);
    int (*collective)(void *state, zpp_conn *c, const zpp_coll *call, zpp_result *res);
    void (*deregistered)(void *state, uint64_t buffer_id);
    void (*free)(void *state);
} zpp__ext;

/* The connection's extension slot (never NULL for a live c). */
zpp__ext *zpp__ext_of(zpp_conn *c);

/* Records a failure on c with a message; returns code. */
int zpp__set_err(zpp_conn *c, int code, const char *msg);

/* zpp_submit with Collective.event_slot (1-based; 0 = none) and
 * Collective.flag_value. */
int zpp__submit_ev(zpp_conn *c, const zpp_coll *call, uint32_t event_slot, uint64_t flag_value,
                   uint64_t *req_id);

/* Registers device memory: nfds VMM descriptors with their chunk sizes
 * (sent with SCM_RIGHTS, at most 4 per message; the caller keeps and
 * closes its descriptors), or one legacy IPC handle (ipc_len 64). */
int zpp__register_dev(zpp_conn *c, const int *fds, int nfds, const uint64_t *chunk_sizes,
                      const uint8_t *ipc, size_t ipc_len, const char *gpu_uuid, uint64_t offset,
                      uint64_t length, uint64_t *buffer_id);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t zpp__mono_ns(void);

/* The decimal value of environment variable name when it is a plain
 * number up to max (*given 1), else dflt (*given 0; given may be NULL). */
uint64_t zpp__env_uint(const char *name, uint64_t dflt, uint64_t max, int *given);
/* The same in microseconds, returned in nanoseconds. */
uint64_t zpp__env_us_ns(const char *name, uint64_t def_us, uint64_t max_us);

/* Static lower-case name of a wire DType ("fp32", "fp16", "bf16"),
 * "unknown" for values outside the enum. */
const char *zpp__dtype_name(int dtype);

#endif
