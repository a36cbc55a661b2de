/*
 * peer.h — the daemon <-> daemon control plane: the zpp.peer.Peer gRPC
 * service (proto/peer.proto) served and called by one `struct peer` per
 * daemon.
 *
 * One gRPC server listens on the daemon's peer address; the same object
 * calls other daemons (Join on a job's leader, Heartbeat, Abort) over
 * channels cached per address. Everything gRPC lives in peer.c: one thread
 * sits in grpc_completion_queue_next for the object's life and hands every
 * completion to the libuv loop with uv_async_send; all state is owned by
 * the loop thread, and every handler and callback below runs on it.
 *
 * Incoming Join calls are parked: the handler receives a `struct
 * peer_join_call *` and answers it later with peer_join_answer() (the
 * leader answers when all nodes have joined). A parked call that the
 * caller cancels, whose deadline passes, or that peer_stop() cancels ends
 * with on_join_cancelled(); the handle is dead after that.
 *
 * Every message from a peer is untrusted: requests are checked (sizes,
 * string lengths and characters, counts, node_rank < node_count ...)
 * before a handler sees them, and a bad one is refused with a code and a
 * message naming the field. Replies are checked the same way before a
 * callback sees them. docs/peers.md describes limits, TLS and errors.
 *
 * Errors are negative ZPP_E* codes of client/include/zpp.h.
 */
#ifndef ZPPD_PEER_H
#define ZPPD_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "peer.pb-c.h"
#include "peer_check.h"

#define PEER_DEFAULT_PORT 7399                /* documented default peer port */
#define PEER_DEFAULT_MAX_MESSAGE (1u << 20)   /* bytes, each direction */
#define PEER_DEFAULT_MAX_CALLS 256            /* incoming calls alive at once */
#define PEER_DEFAULT_MAX_JOIN_WAIT_MS 600000u /* a parked Join ends after this */
#define PEER_DEFAULT_RECONNECT_MAX_MS 1000u   /* cap of the reconnect backoff */
#define PEER_ABORT_TIMEOUT_MS 2000u           /* deadline of peer_abort_send */

/* The limits on what a peer may send (PEER_MAX_*, PEER_NCCL_ID_BYTES) and
 * the checks that enforce them are in proto/peer_check.h. */

struct peer;           /* opaque: one per daemon */
struct peer_join_call; /* opaque: one parked incoming Join */

/* Mutual TLS. The same certificate serves as server certificate (peers
 * dial us) and client certificate (we dial peers), so it needs both the
 * serverAuth and clientAuth extended key usages, and a SAN naming the
 * address peers dial (IP SAN for an IP address). `ca_file` is the CA that
 * signed every peer's certificate: we verify servers and require and verify
 * client certificates against it. */
struct peer_tls {
    const char *ca_file;   /* PEM */
    const char *cert_file; /* PEM chain */
    const char *key_file;  /* PEM, unencrypted */
    /* Tests only: the name the server's certificate must carry instead of
     * the dialled host (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG). NULL = the host. */
    const char *target_name_override;
};

struct peer_config {
    const char *listen; /* "host:port" to serve on; port 0 = any (see peer_port) */
    int use_tls;        /* 0: insecure (loopback only, the default); 1: mutual TLS */
    struct peer_tls tls;
    uint32_t max_message;      /* bytes per message; 0 = PEER_DEFAULT_MAX_MESSAGE */
    uint32_t max_calls;        /* incoming calls alive at once; 0 = PEER_DEFAULT_MAX_CALLS */
    /* Joins parked until their job forms, a cap of their own; 0 = max_calls
     * or PEER_MAX_NODES, the larger (a leader parks one per other node) */
    uint32_t max_parked;
    uint32_t max_join_wait_ms; /* parked Join limit; 0 = PEER_DEFAULT_MAX_JOIN_WAIT_MS */
    uint32_t reconnect_max_ms; /* reconnect backoff cap; 0 = PEER_DEFAULT_RECONNECT_MAX_MS */
};

/* Who called us: gRPC's peer string ("ipv4:10.0.0.2:41234") and, with TLS,
 * the verified identity of the client certificate (its first SAN or CN;
 * "" when insecure). Valid only during the handler. */
struct peer_caller {
    const char *peer;
    const char *identity;
};

/* The server side, all called on the loop thread. Requests passed to a
 * handler are already checked (version, lengths, characters, ranges) and
 * are valid only during the call: copy what you keep. Any handler may be
 * NULL: the method is then answered ZPP_EUNSUPPORTED. */
struct peer_handlers {
    /* A Join arrived. The handler must eventually call peer_join_answer()
     * exactly once on `call` (inside the handler or later), unless
     * on_join_cancelled(call) comes first. */
    void (*on_join)(void *ctx, struct peer_join_call *call, const Zpp__Peer__JoinRequest *req,
                    const struct peer_caller *from);
    /* A parked Join ended without an answer: the caller gave up (its
     * deadline or a cancel), max_join_wait_ms passed, or peer_stop() runs.
     * `call` is freed when this returns; forget it. */
    void (*on_join_cancelled)(void *ctx, struct peer_join_call *call);
    /* Heartbeat: return 0 or a ZPP_E* code, set *state (a
     * ZPP__PEER__JOB_STATE__* value) and optionally a message in msg. */
    int (*on_heartbeat)(void *ctx, const Zpp__Peer__HeartbeatRequest *req,
                        const struct peer_caller *from, int *state, char *msg, size_t len);
    /* Abort: return 0 or a ZPP_E* code, optionally a message in msg. The
     * reason has been sanitised (printable ASCII only). */
    int (*on_abort)(void *ctx, const Zpp__Peer__AbortRequest *req, const struct peer_caller *from,
                    char *msg, size_t len);
};

/* ---- log ------------------------------------------------------------------ */

/* A log sink; level is 0 error, 1 warn, 2 info, 3 debug (zlog's values).
 * It receives gRPC's own log lines (through gpr_set_log_function) and this
 * module's few events (refused requests, channel failures). It is called
 * from ANY thread, gRPC's included: it must be thread-safe and must not
 * call into this module. */
typedef void (*peer_log_fn)(void *arg, int level, const char *msg);

/* Sets the process-wide sink; fn NULL restores the default (one logfmt
 * line on stderr: `level=... mod=grpc msg="..."`). gRPC's log is global,
 * so this is too: call it before the first peer_start(). Thread: any. */
void peer_set_log(peer_log_fn fn, void *arg);

/* ---- life ----------------------------------------------------------------- */

/* Starts the peer service on `loop`: reads the TLS files, starts gRPC, the
 * server on cfg->listen and the completion-queue thread. `handlers` is
 * copied; `ctx` is passed to every handler. Returns 0 and sets *out, or a
 * ZPP_E* code with a message in why (ZPP_EINVAL bad config, ZPP_EIO the
 * address cannot be bound or a TLS file cannot be read, ZPP_ENOMEM); *out
 * is untouched on failure. Thread: the loop thread. Free with peer_stop(). */
int peer_start(uv_loop_t *loop, const struct peer_config *cfg, const struct peer_handlers *handlers,
               void *ctx, struct peer **out, char *why, size_t len);

/* The port the server is bound to (useful with port 0). Thread: loop. */
int peer_port(const struct peer *p);

/* Stops the service in order: server shutdown_and_notify, cancel all
 * calls (incoming and outgoing), drain the queue (every parked Join gets
 * on_join_cancelled, every outgoing call's callback runs with
 * ZPP_ECLOSED, inside this function), destroy server and channels, shut
 * the queue down, join the thread, grpc_shutdown. Blocks the loop only for
 * that drain (cancelled calls complete at once). The memory is freed when
 * the loop next runs (uv_close): run the loop before uv_loop_close.
 * Callbacks that run inside peer_stop must not start new calls (they
 * would get ZPP_ESTATE). Accepts NULL. Thread: the loop thread. */
void peer_stop(struct peer *p);

/* ---- server side: answering a parked Join --------------------------------- */

/* Answers a parked Join. code 0: `reply` (required) carries the nccl ids
 * and the member list, checked here (each id PEER_NCCL_ID_BYTES, members
 * one per node, ranks < node_count); code < 0: `msg` says why and `reply`
 * may be NULL. reply->code/message are ignored (code and msg are used).
 * The call is consumed in every case: if the reply fails the check, the
 * caller gets ZPP_EINVAL "leader built a bad reply" and this returns
 * ZPP_EINVAL. Never call it after on_join_cancelled(call). Thread: loop. */
int peer_join_answer(struct peer_join_call *call, int code, const char *msg,
                     const Zpp__Peer__JoinReply *reply);

/* The checked request of a parked call (valid until it is answered or
 * cancelled). Thread: loop. */
const Zpp__Peer__JoinRequest *peer_join_call_request(const struct peer_join_call *call);

/* ---- client side ------------------------------------------------------------ */

/* Callbacks of outgoing calls; run on the loop thread, always on a later
 * loop iteration than the call that started them, exactly once. code is 0
 * or a ZPP_E* code; msg names the peer address and the cause; what else is
 * passed is valid only during the callback:
 *  ZPP_ETIMEDOUT  the peer was reachable but did not answer in time;
 *  ZPP_EIO        unreachable (refused, no route, TLS handshake refused by
 *                 either side: see the log for which) within the deadline;
 *  ZPP_EPERM      the peer refused our identity after the handshake;
 *  ZPP_EPROTO     the peer's reply broke the protocol (msg says how);
 *  ZPP_ECLOSED    peer_stop() ran before an answer came;
 *  anything else  the peer's own answer (e.g. ZPP_EINVAL from its checks). */
typedef void (*peer_join_cb)(void *arg, int code, const char *msg,
                             const Zpp__Peer__JoinReply *reply /* non-NULL iff code == 0 */);
typedef void (*peer_heartbeat_cb)(void *arg, int code, const char *msg, int state);
typedef void (*peer_abort_cb)(void *arg, int code, const char *msg);

/* The tenant of a job, as it travels. label may be "" or NULL. */
struct peer_tenant {
    uint32_t uid;
    const char *label;
};

/* Sends Join to the job's leader at `leader_addr` ("host:port") and waits
 * for its answer, at most timeout_ms (wait-for-ready: a leader that comes
 * up within the deadline is reached). req->version is set by this
 * function; req is checked like an incoming one and copied. The reply is
 * checked against req (one member per node, ids of PEER_NCCL_ID_BYTES).
 * Returns 0 (cb will run) or ZPP_EINVAL / ZPP_ESTATE (stopping) /
 * ZPP_ENOMEM, and then cb never runs. Thread: loop. */
int peer_join(struct peer *p, const char *leader_addr, const Zpp__Peer__JoinRequest *req,
              uint32_t timeout_ms, peer_join_cb cb, void *arg);

/* Sends Heartbeat(job, tenant, node_rank, idle: every rank of this node
 * has left the job between calls, formation: JoinReply.formation, 0 if
 * not known) to `addr`; cb gets the peer's code and its JobState. Returns
 * like peer_join. Thread: loop. */
int peer_heartbeat(struct peer *p, const char *addr, const char *job_id,
                   const struct peer_tenant *tenant, uint32_t node_rank, int idle,
                   uint64_t formation, uint32_t timeout_ms, peer_heartbeat_cb cb, void *arg);

/* Sends Abort(job, tenant, reason, from_node, formation) to `addr` with a deadline
 * of PEER_ABORT_TIMEOUT_MS; fire and forget: cb may be NULL (a failure is
 * then logged at warn level). reason longer than PEER_MAX_REASON is cut,
 * non-printable bytes are replaced. Returns like peer_join. Thread: loop. */
int peer_abort_send(struct peer *p, const char *addr, const char *job_id,
                    const struct peer_tenant *tenant, const char *reason, uint32_t from_node,
                    uint64_t formation, peer_abort_cb cb, void *arg);

#endif
