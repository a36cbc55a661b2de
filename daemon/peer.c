/*
 * peer.c — the zpp.peer.Peer gRPC service, server and client, written
 * against the gRPC C core (grpc.h, completion queues). It is the only file
 * of zppd that includes a gRPC header.
 *
 * Threads: one thread per `struct peer` sits in grpc_completion_queue_next
 * for the object's life (gRPC does its network I/O only while a thread is
 * in there). It does nothing but move each completed tag onto a
 * mutex-protected list and uv_async_send the loop (wake-ups merge; the
 * loop drains the whole list). All other gRPC calls, all state and all
 * handlers and callbacks belong to the loop thread.
 *
 * Tags: every gRPC operation carries a `struct tag` embedded in the object
 * it concerns (an incoming call, an outgoing call, the server); the list is
 * intrusive, so handing a completion over never allocates.
 *
 * Incoming calls: each method (registered, payload read with the call) has
 * one request outstanding, re-armed as each call arrives. An arrived call
 * gets RECV_CLOSE_ON_SERVER at once (it tells us when the caller gives up);
 * Heartbeat and Abort are answered in the same loop turn, Join is parked
 * until peer_join_answer(). A call is freed when its close and its answer
 * (if any) have both completed.
 *
 * Outgoing calls: one batch (send metadata with wait-for-ready, message,
 * close; receive metadata, message, status) with a deadline, on a channel
 * cached per address with a short reconnect backoff.
 *
 * Untrusted input: gRPC caps message size (max_message), protobuf-c unpacks
 * under an allocation budget, and every field is checked before a handler
 * or a callback sees it.
 *
 * Until the build links gRPC (it defines ZPP_HAVE_GRPC, see docs/peers.md)
 * this file compiles to nothing.
 */
#ifndef ZPP_HAVE_GRPC
typedef int peer_c_is_empty_without_grpc;
#else

#include "peer.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "frame.h"
#include "zpp.h"

#define CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define PEER_MAX_CHANNELS 1024          /* distinct peer addresses cached */
#define PEER_MAX_PEM (1u << 20)         /* TLS files */
#define PEER_SWEEP_MS 1000              /* how often parked Joins are checked */
#define PEER_HANDSHAKE_TIMEOUT_MS 10000 /* a connection that never finishes TLS */
#define PEER_INITIAL_BACKOFF_MS 100
#define PEER_MAX_STREAMS 64 /* per connection */
#define UNPACK_OVERHEAD 64u /* bytes charged per allocation on top of its size */

/* M_OTHER: calls to any method we do not serve, answered UNIMPLEMENTED at
 * once (unrequested, gRPC would keep them pending until their deadline). */
enum { M_JOIN = 0, M_HEARTBEAT = 1, M_ABORT = 2, M_COUNT = 3, M_OTHER = 3 };
static const char *const method_names[M_COUNT + 1] = {"Join", "Heartbeat", "Abort", "unknown"};

enum { T_REQUEST, T_SRV_CLOSE, T_SRV_SEND, T_CLIENT, T_SHUTDOWN };

struct tag {
    int kind;
    int success;
    struct tag *next;
};

/* One incoming call of any method; the opaque handle of a parked Join. */
struct peer_join_call {
    struct peer *p;
    int method;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details; /* M_OTHER only */
    grpc_byte_buffer *payload;
    grpc_byte_buffer *reply;
    struct tag t_req, t_close, t_send;
    int cancelled; /* written by RECV_CLOSE_ON_SERVER */
    int close_done, send_pending, answered, parked;
    uint64_t park_until_ms;
    Zpp__Peer__JoinRequest *join; /* the checked request while parked */
    char from_peer[96];
    char from_id[128];
    struct peer_join_call *prev, *next; /* p->srv: arrived, not yet freed */
};

struct chan {
    struct chan *next;
    char addr[PEER_MAX_ADDRESS + 1];
    grpc_channel *ch;
    uint32_t calls; /* client calls on it not yet done: it stays while any */
    uint64_t used;  /* p->chan_clock when last asked for */
};

struct cli_call {
    struct peer *p;
    struct chan *ch;
    int method;
    grpc_call *call;
    struct tag t;
    grpc_metadata_array md_init, md_trail;
    grpc_byte_buffer *send, *recv;
    grpc_status_code status;
    grpc_slice details;
    uint32_t timeout_ms;
    uint32_t node_count; /* Join: to check the reply against */
    union {
        peer_join_cb join;
        peer_heartbeat_cb hb;
        peer_abort_cb abort;
    } cb;
    void *arg;
    struct cli_call *prev, *next;
};

struct peer {
    uv_loop_t *loop;
    uv_async_t async;
    uv_timer_t sweep;
    int handles_open;
    struct peer_handlers h;
    void *ctx;

    uint32_t max_message, max_calls, max_join_wait_ms, reconnect_max_ms;
    uint32_t max_parked; /* parked Joins (peer_config.max_parked) */
    int use_tls;
    char *target_override;
    int port;

    grpc_completion_queue *cq;
    grpc_server *server;
    grpc_channel_credentials *ccreds;
    void *methods[M_COUNT];
    char paths[M_COUNT][48];
    struct tag t_shutdown;
    int thread_started;
    uv_thread_t thread;

    uv_mutex_t mu; /* guards done_head/done_tail, shared with the cq thread */
    uv_cond_t cv;
    struct tag *done_head, *done_tail;

    int stopping, stopped, shutdown_done, in_dispatch, stop_deferred;
    struct peer_join_call *srv;
    uint32_t n_srv;    /* arrived calls alive */
    uint32_t n_parked; /* of them, Joins parked until their job forms */
    uint32_t n_req; /* requests outstanding */
    struct cli_call *cli;
    uint32_t n_chans;
    struct chan *chans;
    uint64_t chan_clock;
};

/* ---- log ------------------------------------------------------------------ */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static peer_log_fn log_fn;
static void *log_arg;
static int log_hooked;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static void plog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plog(int level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mu);
    peer_log_fn fn = log_fn;
    void *arg = log_arg;
    pthread_mutex_unlock(&log_mu);
    if (fn) {
        fn(arg, level, msg);
        return;
    }
    if (level > 2)
        return; /* the default sink prints no debug lines */
    /* Default: one logfmt line, quotes and control bytes escaped. */
    char esc[2048];
    size_t o = 0;
    for (const char *s = msg; *s && o + 5 < sizeof(esc); s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            esc[o++] = '\\';
            esc[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(esc + o, sizeof(esc) - o, "\\x%02x", ch);
        } else {
            esc[o++] = (char)ch;
        }
    }
    esc[o] = 0;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(tv.tv_usec / 1000));
    if (level < 0 || level > 3)
        level = 0;
    fprintf(stderr, "ts=%s level=%s mod=peer msg=\"%s\"\n", ts, level_names[level], esc);
}

static void gpr_sink(gpr_log_func_args *a)
{
    int level = a->severity == GPR_LOG_SEVERITY_ERROR  ? 0
                : a->severity == GPR_LOG_SEVERITY_INFO ? 2
                                                       : 3;
    const char *file = a->file ? strrchr(a->file, '/') : NULL;
    plog(level, "grpc: %s (%s:%d)", a->message ? a->message : "",
         file ? file + 1 : (a->file ? a->file : "?"), a->line);
}

void peer_set_log(peer_log_fn fn, void *arg)
{
    pthread_mutex_lock(&log_mu);
    log_fn = fn;
    log_arg = arg;
    pthread_mutex_unlock(&log_mu);
}

/* The field checks (peer_check_*) live in proto/peer_check.c, socket- and
 * gRPC-free, so that tests/fuzz/fuzz_peer.c runs the very same code. */

/* ---- (un)packing ------------------------------------------------------------- */

/* Unpacks a received byte buffer under a budget (what the message may cost
 * in heap: a few times its size, plus extra). NULL when it does not unpack.
 * The result is freed with protobuf_c_message_free_unpacked(m, NULL) (plain
 * free). */
static ProtobufCMessage *bb_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                                   size_t extra)
{
    grpc_byte_buffer_reader rd;
    if (!bb || !grpc_byte_buffer_reader_init(&rd, bb))
        return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    size_t n = GRPC_SLICE_LENGTH(s);
    ProtobufCMessage *m = zpp_unpack_budgeted(desc, n ? GRPC_SLICE_START_PTR(s) : NULL, n,
                                              4 * n + 4096 + extra, UNPACK_OVERHEAD);
    grpc_slice_unref(s);
    return m;
}

static grpc_byte_buffer *bb_pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = n ? grpc_slice_malloc(n) : grpc_empty_slice();
    if (n)
        protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

static uint64_t now_ms(struct peer *p)
{
    return uv_now(p->loop);
}

/* ---- server side -------------------------------------------------------------- */

static int srv_request(struct peer *p, int method)
{
    struct peer_join_call *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return ZPP_ENOMEM;
    sc->p = p;
    sc->method = method;
    sc->t_req.kind = T_REQUEST;
    sc->t_close.kind = T_SRV_CLOSE;
    sc->t_send.kind = T_SRV_SEND;
    grpc_metadata_array_init(&sc->md);
    grpc_call_details_init(&sc->details);
    grpc_call_error e = method == M_OTHER
                            ? grpc_server_request_call(p->server, &sc->call, &sc->details, &sc->md,
                                                       p->cq, p->cq, &sc->t_req)
                            : grpc_server_request_registered_call(
                                  p->server, p->methods[method], &sc->call, &sc->deadline, &sc->md,
                                  &sc->payload, p->cq, p->cq, &sc->t_req);
    if (e != GRPC_CALL_OK) {
        grpc_call_details_destroy(&sc->details);
        grpc_metadata_array_destroy(&sc->md);
        free(sc);
        return ZPP_EIO;
    }
    p->n_req++;
    return 0;
}

static void srv_free(struct peer_join_call *sc)
{
    struct peer *p = sc->p;
    if (sc->prev)
        sc->prev->next = sc->next;
    else if (p->srv == sc)
        p->srv = sc->next;
    if (sc->next)
        sc->next->prev = sc->prev;
    p->n_srv--;
    if (sc->call)
        grpc_call_unref(sc->call);
    grpc_metadata_array_destroy(&sc->md);
    grpc_call_details_destroy(&sc->details);
    if (sc->payload)
        grpc_byte_buffer_destroy(sc->payload);
    if (sc->reply)
        grpc_byte_buffer_destroy(sc->reply);
    if (sc->join)
        protobuf_c_message_free_unpacked(&sc->join->base, NULL);
    free(sc);
}

static void srv_maybe_free(struct peer_join_call *sc)
{
    if (sc->close_done && !sc->send_pending && !sc->parked)
        srv_free(sc);
}

/* Sends `m` with status OK and marks the call answered. */
static void srv_send(struct peer_join_call *sc, const ProtobufCMessage *m)
{
    sc->answered = 1;
    sc->reply = bb_pack(m);
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = sc->reply;
    ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
    if (grpc_call_start_batch(sc->call, ops, 3, &sc->t_send, NULL) == GRPC_CALL_OK)
        sc->send_pending = 1;
}

/* A method we do not serve: status UNIMPLEMENTED, no message read. */
static void srv_unimplemented(struct peer_join_call *sc)
{
    sc->answered = 1;
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[1].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
    grpc_slice det = grpc_slice_from_static_string("method not served by zppd");
    ops[1].data.send_status_from_server.status_details = &det;
    if (grpc_call_start_batch(sc->call, ops, 2, &sc->t_send, NULL) == GRPC_CALL_OK)
        sc->send_pending = 1;
}

/* Every reply starts with code = 1, message = 2 (peer.proto), so the
 * AbortReply shape refuses any method. */
static void srv_refuse(struct peer_join_call *sc, int code, const char *msg)
{
    Zpp__Peer__AbortReply r = ZPP__PEER__ABORT_REPLY__INIT;
    r.code = code;
    r.message = (char *)msg;
    plog(3, "peer: refused %s from %s: %s: %s", method_names[sc->method], sc->from_peer,
         zpp_err_name(code), msg);
    srv_send(sc, &r.base);
}

static void caller_fill(struct peer_join_call *sc)
{
    char *s = grpc_call_get_peer(sc->call);
    peer_check_sanitize(sc->from_peer, sizeof(sc->from_peer), s ? s : "?");
    gpr_free(s);
    grpc_auth_context *ac = grpc_call_auth_context(sc->call);
    if (!ac)
        return;
    grpc_auth_property_iterator it = grpc_auth_context_peer_identity(ac);
    const grpc_auth_property *prop = grpc_auth_property_iterator_next(&it);
    if (prop && prop->value) {
        char tmp[sizeof(sc->from_id)];
        size_t n = prop->value_length < sizeof(tmp) - 1 ? prop->value_length : sizeof(tmp) - 1;
        memcpy(tmp, prop->value, n);
        tmp[n] = 0;
        peer_check_sanitize(sc->from_id, sizeof(sc->from_id), tmp);
    }
    grpc_auth_context_release(ac);
}

/* A parked Join is answered, cancelled or timed out. */
static void unpark(struct peer_join_call *sc)
{
    sc->parked = 0;
    sc->p->n_parked--;
}

static void srv_join(struct peer *p, struct peer_join_call *sc, const struct peer_caller *from)
{
    Zpp__Peer__JoinRequest *req =
        (Zpp__Peer__JoinRequest *)bb_unpack(sc->payload, &zpp__peer__join_request__descriptor, 0);
    char why[256];
    int rc;
    if (!req) {
        srv_refuse(sc, ZPP_EPROTO, "Join: request does not unpack");
        return;
    }
    if ((rc = peer_check_join_request(req, why, sizeof(why))) != 0) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        srv_refuse(sc, rc, why);
        return;
    }
    if (!p->h.on_join) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        srv_refuse(sc, ZPP_EUNSUPPORTED, "this daemon leads no jobs");
        return;
    }
    sc->join = req;
    /* the request is unpacked and checked: its wire bytes (up to
     * max_message) need not wait with it */
    grpc_byte_buffer_destroy(sc->payload);
    sc->payload = NULL;
    sc->parked = 1;
    p->n_parked++; /* until unpark */
    sc->park_until_ms = now_ms(p) + p->max_join_wait_ms;
    p->h.on_join(p->ctx, sc, req, from);
}

static void srv_heartbeat(struct peer *p, struct peer_join_call *sc, const struct peer_caller *from)
{
    Zpp__Peer__HeartbeatRequest *req = (Zpp__Peer__HeartbeatRequest *)bb_unpack(
        sc->payload, &zpp__peer__heartbeat_request__descriptor, 0);
    char why[256] = "";
    int rc;
    if (!req) {
        srv_refuse(sc, ZPP_EPROTO, "Heartbeat: request does not unpack");
        return;
    }
    rc = peer_check_heartbeat_request(req, why, sizeof(why));
    if (rc) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        srv_refuse(sc, rc, why);
        return;
    }
    if (!p->h.on_heartbeat) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        srv_refuse(sc, ZPP_EUNSUPPORTED, "heartbeat not served");
        return;
    }
    int state = ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN;
    char msg[PEER_MAX_TEXT] = "";
    rc = p->h.on_heartbeat(p->ctx, req, from, &state, msg, sizeof(msg));
    protobuf_c_message_free_unpacked(&req->base, NULL);
    Zpp__Peer__HeartbeatReply r = ZPP__PEER__HEARTBEAT_REPLY__INIT;
    r.code = peer_check_code_ok(rc) ? rc : ZPP_EINVAL;
    r.message = msg;
    r.state = (state >= 0 && state <= PEER_JOB_STATE_MAX)
                  ? (Zpp__Peer__JobState)state
                  : ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN;
    srv_send(sc, &r.base);
}

static void srv_abort(struct peer *p, struct peer_join_call *sc, const struct peer_caller *from)
{
    Zpp__Peer__AbortRequest *req =
        (Zpp__Peer__AbortRequest *)bb_unpack(sc->payload, &zpp__peer__abort_request__descriptor, 0);
    char why[256] = "";
    int rc;
    if (!req) {
        srv_refuse(sc, ZPP_EPROTO, "Abort: request does not unpack");
        return;
    }
    rc = peer_check_abort_request(req, why, sizeof(why));
    if (!rc && !p->h.on_abort) {
        rc = ZPP_EUNSUPPORTED;
        snprintf(why, sizeof(why), "abort not served");
    }
    if (rc) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        srv_refuse(sc, rc, why);
        return;
    }
    /* The reason reaches users and logs: printable only. It is at most
     * PEER_MAX_REASON bytes, so it fits in place. An absent reason is
     * protobuf-c's shared read-only "": nothing to sanitise, never written. */
    if (req->reason && req->reason[0])
        peer_check_sanitize(req->reason, strlen(req->reason) + 1, req->reason);
    char msg[PEER_MAX_TEXT] = "";
    rc = p->h.on_abort(p->ctx, req, from, msg, sizeof(msg));
    protobuf_c_message_free_unpacked(&req->base, NULL);
    Zpp__Peer__AbortReply r = ZPP__PEER__ABORT_REPLY__INIT;
    r.code = peer_check_code_ok(rc) ? rc : ZPP_EINVAL;
    r.message = msg;
    srv_send(sc, &r.base);
}

static void on_request(struct peer *p, struct peer_join_call *sc, int success)
{
    p->n_req--;
    if (!success || !sc->call) {
        /* The server is shutting down: this request never got a call. */
        grpc_metadata_array_destroy(&sc->md);
        grpc_call_details_destroy(&sc->details);
        if (sc->payload)
            grpc_byte_buffer_destroy(sc->payload);
        if (sc->call)
            grpc_call_unref(sc->call);
        free(sc);
        return;
    }
    if (!p->stopping && srv_request(p, sc->method) != 0)
        plog(0, "peer: cannot wait for the next %s call: out of memory or server gone",
             method_names[sc->method]);

    sc->next = p->srv;
    if (p->srv)
        p->srv->prev = sc;
    p->srv = sc;
    p->n_srv++;

    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &sc->cancelled;
    if (grpc_call_start_batch(sc->call, &op, 1, &sc->t_close, NULL) != GRPC_CALL_OK) {
        /* Without a close we cannot learn of a cancel: answer no one. */
        sc->close_done = 1;
        grpc_call_cancel(sc->call, NULL);
        srv_maybe_free(sc);
        return;
    }
    caller_fill(sc);
    if (p->stopping) {
        srv_refuse(sc, ZPP_EDRAINING, "peer service stopping");
        return;
    }
    /* Parked Joins wait for their job; Heartbeat and Abort are answered in
     * this turn. Each kind has its own cap, so that Joins parked by forming
     * jobs (or a peer that sends many) never cost a member its heartbeats,
     * nor the job its aborts. The parked ones' cap is at least
     * PEER_MAX_NODES: a leader parks one Join per other node of a forming
     * job (max_calls alone, 256 by default, kept any job of more than 257
     * nodes from forming); each holds only its checked request. */
    uint32_t busy = p->n_srv - p->n_parked; /* this call included */
    int join_full = sc->method == M_JOIN && p->n_parked >= p->max_parked;
    if (busy > p->max_calls || join_full) {
        char why[128];
        snprintf(why, sizeof(why), "too many %scalls in progress (max %u)",
                 join_full ? "parked Join " : "", join_full ? p->max_parked : p->max_calls);
        srv_refuse(sc, ZPP_ELIMIT, why);
        return;
    }
    struct peer_caller from = {.peer = sc->from_peer, .identity = sc->from_id};
    switch (sc->method) {
    case M_OTHER:
        srv_unimplemented(sc);
        break;
    case M_JOIN:
        srv_join(p, sc, &from);
        break;
    case M_HEARTBEAT:
        srv_heartbeat(p, sc, &from);
        break;
    default:
        srv_abort(p, sc, &from);
        break;
    }
}

static void on_srv_close(struct peer *p, struct peer_join_call *sc)
{
    sc->close_done = 1;
    if (sc->parked) {
        /* Closed before we answered: the caller gave up or we are stopping. */
        unpark(sc);
        plog(3, "peer: Join from %s cancelled before an answer", sc->from_peer);
        if (p->h.on_join_cancelled)
            p->h.on_join_cancelled(p->ctx, sc);
    }
    srv_maybe_free(sc);
}

int peer_join_answer(struct peer_join_call *call, int code, const char *msg,
                     const Zpp__Peer__JoinReply *reply)
{
    if (!call || !call->parked)
        return ZPP_EINVAL;
    unpark(call);
    Zpp__Peer__JoinReply r = ZPP__PEER__JOIN_REPLY__INIT;
    char why[256], detail[200];
    int rc = 0;
    if (code > 0 || code < ZPP_ERRNO_MAX) {
        code = ZPP_EINVAL;
        msg = "leader answered with an unknown code";
        rc = ZPP_EINVAL;
    } else if (code == 0) {
        if (!reply) {
            snprintf(why, sizeof(why), "leader built a bad reply: none");
            rc = ZPP_EINVAL;
        } else if (peer_check_join_reply(reply, call->join->node_count, detail, sizeof(detail))) {
            snprintf(why, sizeof(why), "leader built a bad reply: %s", detail);
            rc = ZPP_EINVAL;
        } else {
            r = *reply;
        }
        if (rc) {
            code = ZPP_EINVAL;
            msg = why;
        }
    }
    char text[PEER_MAX_TEXT];
    peer_check_sanitize(text, sizeof(text), msg ? msg : "");
    r.code = code;
    r.message = text;
    if (code != 0) {
        r.n_nccl_ids = 0;
        r.n_members = 0;
    }
    srv_send(call, &r.base);
    srv_maybe_free(call);
    return rc;
}

const Zpp__Peer__JoinRequest *peer_join_call_request(const struct peer_join_call *call)
{
    return call ? call->join : NULL;
}

static void do_stop(struct peer *p);

static void sweep_cb(uv_timer_t *t)
{
    struct peer *p = t->data;
    uint64_t now = now_ms(p);
    struct peer_join_call *sc = p->srv;
    p->in_dispatch = 1; /* a handler's peer_stop waits until we are done */
    while (sc) {
        struct peer_join_call *next = sc->next;
        if (sc->parked && sc->park_until_ms <= now) {
            char why[128];
            snprintf(why, sizeof(why), "the job did not form within %u ms", p->max_join_wait_ms);
            /* Answer the caller, then tell the handler it is gone. */
            unpark(sc);
            Zpp__Peer__JoinReply r = ZPP__PEER__JOIN_REPLY__INIT;
            r.code = ZPP_ETIMEDOUT;
            r.message = why;
            srv_send(sc, &r.base);
            if (p->h.on_join_cancelled)
                p->h.on_join_cancelled(p->ctx, sc);
            srv_maybe_free(sc);
        }
        sc = next;
    }
    p->in_dispatch = 0;
    if (p->stop_deferred)
        do_stop(p);
}

/* ---- client side ---------------------------------------------------------------- */

static const char *conn_state_name(grpc_connectivity_state s)
{
    switch (s) {
    case GRPC_CHANNEL_IDLE:
        return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
        return "CONNECTING";
    case GRPC_CHANNEL_READY:
        return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
        return "TRANSIENT_FAILURE";
    default:
        return "SHUTDOWN";
    }
}

/* Makes room for one more channel when the cache is full: the least
 * recently asked-for one with no call on it goes. A long-lived daemon meets
 * many peers over its life (jobs come and go, nodes are replaced); only
 * PEER_MAX_CHANNELS of them busy at once is a limit. 0 when every cached
 * channel has a call in flight. */
static int chan_evict(struct peer *p)
{
    struct chan **victim = NULL;
    for (struct chan **pc = &p->chans; *pc; pc = &(*pc)->next)
        if ((*pc)->calls == 0 && (!victim || (*pc)->used < (*victim)->used))
            victim = pc;
    if (!victim)
        return 0;
    struct chan *c = *victim;
    *victim = c->next;
    grpc_channel_destroy(c->ch);
    free(c);
    p->n_chans--;
    return 1;
}

static struct chan *chan_get(struct peer *p, const char *addr)
{
    for (struct chan *c = p->chans; c; c = c->next)
        if (!strcmp(c->addr, addr)) {
            c->used = ++p->chan_clock;
            return c;
        }
    if (p->n_chans >= PEER_MAX_CHANNELS && !chan_evict(p))
        return NULL;
    struct chan *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    grpc_arg args[8];
    int n = 0;
    /* Daemons dial each other directly: gRPC would otherwise send this
     * traffic through a proxy named by grpc_proxy, https_proxy or
     * http_proxy in zppd's environment (common on cluster nodes), which
     * would fail it or carry job membership and aborts elsewhere. */
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY;
    args[n++].value.integer = 0;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[n++].value.integer = (int)p->max_message;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[n++].value.integer = (int)p->max_message;
    /* A restarted peer must be reachable within about reconnect_max_ms,
     * not gRPC's default of up to 120 s. */
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = PEER_INITIAL_BACKOFF_MS < p->reconnect_max_ms
                                  ? PEER_INITIAL_BACKOFF_MS
                                  : (int)p->reconnect_max_ms;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = (int)p->reconnect_max_ms;
    /* Each peer object keeps its own subchannels (tests run several in one
     * process; a stopped object must not share a connection). */
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[n++].value.integer = 1;
    if (p->target_override) {
        args[n].type = GRPC_ARG_STRING;
        args[n].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[n++].value.string = p->target_override;
    }
    grpc_channel_args ca = {.num_args = (size_t)n, .args = args};
    c->ch = grpc_channel_create(addr, p->ccreds, &ca);
    if (!c->ch) {
        free(c);
        return NULL;
    }
    c->used = ++p->chan_clock;
    c->next = p->chans;
    p->chans = c;
    p->n_chans++;
    return c;
}

/* Starts one unary call; on success the call is linked and its tag is in
 * flight. */
static int cli_start(struct peer *p, const char *addr, int method, const ProtobufCMessage *m,
                     uint32_t timeout_ms, struct cli_call **out)
{
    if (p->stopping)
        return ZPP_ESTATE;
    if (!peer_check_text_ok(addr, PEER_MAX_ADDRESS, 0, 0))
        return ZPP_EINVAL;
    if (timeout_ms == 0)
        return ZPP_EINVAL;
    struct cli_call *c = calloc(1, sizeof(*c));
    if (!c)
        return ZPP_ENOMEM;
    c->ch = chan_get(p, addr);
    if (!c->ch) {
        free(c);
        return p->n_chans >= PEER_MAX_CHANNELS ? ZPP_ELIMIT : ZPP_ENOMEM;
    }
    c->p = p;
    c->method = method;
    c->timeout_ms = timeout_ms;
    c->t.kind = T_CLIENT;
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                   gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN));
    grpc_slice path = grpc_slice_from_static_string(p->paths[method]);
    c->call = grpc_channel_create_call(c->ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, p->cq, path, NULL,
                                       dl, NULL);
    if (!c->call) {
        free(c);
        return ZPP_ENOMEM;
    }
    grpc_metadata_array_init(&c->md_init);
    grpc_metadata_array_init(&c->md_trail);
    c->send = bb_pack(m);
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags =
        GRPC_INITIAL_METADATA_WAIT_FOR_READY | GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->md_init;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &c->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->md_trail;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->details;
    if (grpc_call_start_batch(c->call, ops, 6, &c->t, NULL) != GRPC_CALL_OK) {
        grpc_call_unref(c->call);
        grpc_byte_buffer_destroy(c->send);
        grpc_metadata_array_destroy(&c->md_init);
        grpc_metadata_array_destroy(&c->md_trail);
        free(c);
        return ZPP_EIO;
    }
    c->ch->calls++;
    c->next = p->cli;
    if (p->cli)
        p->cli->prev = c;
    p->cli = c;
    *out = c;
    return 0;
}

/* Maps a call that did not bring a reply to a code and a message. */
static int cli_status(struct cli_call *c, const char *head, char *msg, size_t len)
{
    struct peer *p = c->p;
    char det[256];
    char *d = grpc_slice_to_c_string(c->details);
    peer_check_sanitize(det, sizeof(det), d);
    gpr_free(d);
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(c->ch->ch, 0);
    switch (c->status) {
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        if (st != GRPC_CHANNEL_READY) {
            snprintf(msg, len, "%s: unreachable within %u ms (%s%s)", head, c->timeout_ms,
                     conn_state_name(st),
                     p->use_tls ? "; a refused TLS handshake looks the same: "
                                  "see the log of both daemons"
                                : "");
            return ZPP_EIO;
        }
        snprintf(msg, len, "%s: no answer within %u ms", head, c->timeout_ms);
        return ZPP_ETIMEDOUT;
    case GRPC_STATUS_UNAUTHENTICATED:
    case GRPC_STATUS_PERMISSION_DENIED:
        snprintf(msg, len, "%s: refused our identity: %s", head, det);
        return ZPP_EPERM;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        snprintf(msg, len, "%s: limit: %s", head, det);
        return ZPP_ELIMIT;
    case GRPC_STATUS_UNIMPLEMENTED:
        snprintf(msg, len, "%s: method not served (other zppd version?): %s", head, det);
        return ZPP_EUNSUPPORTED;
    case GRPC_STATUS_CANCELLED:
        if (p->stopping) {
            snprintf(msg, len, "%s: cancelled: peer service stopping", head);
            return ZPP_ECLOSED;
        }
        snprintf(msg, len, "%s: cancelled: %s", head, det);
        return ZPP_EIO;
    case GRPC_STATUS_OK:
        snprintf(msg, len, "%s: answered without a message", head);
        return ZPP_EPROTO;
    default:
        snprintf(msg, len, "%s: %s (gRPC status %d, channel %s)", head, det, (int)c->status,
                 conn_state_name(st));
        return ZPP_EIO;
    }
}

/* What a valid Join reply for c's node count may cost to unpack beyond
 * bb_unpack's few times its size: each member is a struct, a pointer and an
 * address, three allocations for some twenty bytes on the wire, so the
 * size-based budget alone refused the reply of any job of more than about
 * 30-90 nodes (an audit). Bounded by PEER_MAX_NODES members of the longest
 * address and PEER_MAX_NCCL_IDS ids, a few MiB at most. */
static size_t join_reply_budget(const struct cli_call *c)
{
    size_t nodes = c->node_count < PEER_MAX_NODES ? c->node_count : PEER_MAX_NODES;
    size_t member = sizeof(Zpp__Peer__Member) + sizeof(void *) + PEER_MAX_ADDRESS + 1 +
                    3 * UNPACK_OVERHEAD;
    size_t id = sizeof(ProtobufCBinaryData) + PEER_NCCL_ID_BYTES + 2 * UNPACK_OVERHEAD;
    return nodes * member + PEER_MAX_NCCL_IDS * id;
}

static void cli_done(struct peer *p, struct cli_call *c, int success)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (p->cli == c)
        p->cli = c->next;
    if (c->next)
        c->next->prev = c->prev;

    char head[PEER_MAX_ADDRESS + 32];
    snprintf(head, sizeof(head), "peer %s %s", c->ch->addr, method_names[c->method]);
    char msg[PEER_MAX_TEXT + 320] = "";
    char ptext[PEER_MAX_TEXT];
    int code;
    ProtobufCMessage *m = NULL;
    const ProtobufCMessageDescriptor *desc =
        c->method == M_JOIN        ? &zpp__peer__join_reply__descriptor
        : c->method == M_HEARTBEAT ? &zpp__peer__heartbeat_reply__descriptor
                                   : &zpp__peer__abort_reply__descriptor;
    if (!success) {
        code = p->stopping ? ZPP_ECLOSED : ZPP_EIO;
        snprintf(msg, sizeof(msg), "%s: the call failed", head);
    } else if ((c->status != GRPC_STATUS_OK || !c->recv) && p->stopping) {
        /* Whatever status the cancel produced (ours, or our own server's
         * when we called ourselves), the cause is peer_stop. */
        code = ZPP_ECLOSED;
        snprintf(msg, sizeof(msg), "%s: cancelled: peer service stopping", head);
    } else if (c->status != GRPC_STATUS_OK || !c->recv) {
        code = cli_status(c, head, msg, sizeof(msg));
    } else if (!(m = bb_unpack(c->recv, desc, c->method == M_JOIN ? join_reply_budget(c) : 0))) {
        code = ZPP_EPROTO;
        snprintf(msg, sizeof(msg), "%s: reply does not unpack", head);
    } else {
        /* code and message are fields 1 and 2 of every reply. */
        const Zpp__Peer__AbortReply *gen = (const Zpp__Peer__AbortReply *)m;
        int32_t rcode = c->method == M_JOIN        ? ((Zpp__Peer__JoinReply *)m)->code
                        : c->method == M_HEARTBEAT ? ((Zpp__Peer__HeartbeatReply *)m)->code
                                                   : gen->code;
        const char *rmsg = c->method == M_JOIN        ? ((Zpp__Peer__JoinReply *)m)->message
                           : c->method == M_HEARTBEAT ? ((Zpp__Peer__HeartbeatReply *)m)->message
                                                      : gen->message;
        char why[256];
        if ((code = peer_check_reply(rcode, rmsg, why, sizeof(why))) != 0) {
            snprintf(msg, sizeof(msg), "%s: %s", head, why);
        } else {
            peer_check_sanitize(ptext, sizeof(ptext), rmsg ? rmsg : "");
            code = rcode;
            if (code)
                snprintf(msg, sizeof(msg), "%s: %s", head, ptext[0] ? ptext : zpp_strerror(code));
            else if (c->method == M_HEARTBEAT) /* an ABORTED state's reason, bare */
                snprintf(msg, sizeof(msg), "%s", ptext);
        }
        if (code == 0 && c->method == M_JOIN) {
            if (peer_check_join_reply((Zpp__Peer__JoinReply *)m, c->node_count, why, sizeof(why))) {
                code = ZPP_EPROTO;
                snprintf(msg, sizeof(msg), "%s: bad reply: %s", head, why);
            }
        }
        if (code == 0 && c->method == M_HEARTBEAT) {
            int st = (int)((Zpp__Peer__HeartbeatReply *)m)->state;
            if ((code = peer_check_job_state(st, why, sizeof(why))) != 0)
                snprintf(msg, sizeof(msg), "%s: %s", head, why);
        }
    }

    switch (c->method) {
    case M_JOIN:
        c->cb.join(c->arg, code, msg, code == 0 ? (const Zpp__Peer__JoinReply *)m : NULL);
        break;
    case M_HEARTBEAT:
        c->cb.hb(c->arg, code, msg,
                 code == 0 ? (int)((Zpp__Peer__HeartbeatReply *)m)->state
                           : ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN);
        break;
    default:
        if (c->cb.abort)
            c->cb.abort(c->arg, code, msg);
        else if (code)
            plog(1, "peer: abort not delivered: %s", msg);
        break;
    }

    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    c->ch->calls--;
    grpc_call_unref(c->call);
    grpc_metadata_array_destroy(&c->md_init);
    grpc_metadata_array_destroy(&c->md_trail);
    grpc_slice_unref(c->details);
    if (c->send)
        grpc_byte_buffer_destroy(c->send);
    if (c->recv)
        grpc_byte_buffer_destroy(c->recv);
    free(c);
}

int peer_join(struct peer *p, const char *leader_addr, const Zpp__Peer__JoinRequest *req,
              uint32_t timeout_ms, peer_join_cb cb, void *arg)
{
    if (!p || !req || !cb)
        return ZPP_EINVAL;
    Zpp__Peer__JoinRequest r = *req;
    r.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    char why[256];
    if (peer_check_join_request(&r, why, sizeof(why)) != 0) {
        plog(3, "peer: Join not sent: %s", why);
        return ZPP_EINVAL;
    }
    struct cli_call *c;
    int rc = cli_start(p, leader_addr, M_JOIN, &r.base, timeout_ms, &c);
    if (rc)
        return rc;
    c->node_count = r.node_count;
    c->cb.join = cb;
    c->arg = arg;
    return 0;
}

static int fill_common(const char *job_id, const struct peer_tenant *tenant, Zpp__Peer__Tenant *t)
{
    if (!tenant || !peer_check_name_ok(job_id, PEER_MAX_JOB_ID, 0) ||
        !peer_check_name_ok(tenant->label, PEER_MAX_LABEL, 1))
        return ZPP_EINVAL;
    t->uid = tenant->uid;
    t->label = (char *)(tenant->label ? tenant->label : "");
    return 0;
}

int peer_heartbeat(struct peer *p, const char *addr, const char *job_id,
                   const struct peer_tenant *tenant, uint32_t node_rank, int idle,
                   uint64_t formation, uint32_t timeout_ms, peer_heartbeat_cb cb, void *arg)
{
    Zpp__Peer__Tenant t = ZPP__PEER__TENANT__INIT;
    if (!p || !cb || node_rank >= PEER_MAX_NODES || fill_common(job_id, tenant, &t))
        return ZPP_EINVAL;
    Zpp__Peer__HeartbeatRequest r = ZPP__PEER__HEARTBEAT_REQUEST__INIT;
    r.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    r.job_id = (char *)job_id;
    r.tenant = &t;
    r.node_rank = node_rank;
    r.idle = idle != 0;
    r.formation = formation;
    struct cli_call *c;
    int rc = cli_start(p, addr, M_HEARTBEAT, &r.base, timeout_ms, &c);
    if (rc)
        return rc;
    c->cb.hb = cb;
    c->arg = arg;
    return 0;
}

int peer_abort_send(struct peer *p, const char *addr, const char *job_id,
                    const struct peer_tenant *tenant, const char *reason, uint32_t from_node,
                    uint64_t formation, peer_abort_cb cb, void *arg)
{
    Zpp__Peer__Tenant t = ZPP__PEER__TENANT__INIT;
    if (!p || from_node >= PEER_MAX_NODES || fill_common(job_id, tenant, &t))
        return ZPP_EINVAL;
    char why[PEER_MAX_REASON + 1];
    peer_check_sanitize(why, sizeof(why), reason ? reason : "");
    Zpp__Peer__AbortRequest r = ZPP__PEER__ABORT_REQUEST__INIT;
    r.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    r.job_id = (char *)job_id;
    r.tenant = &t;
    r.reason = why;
    r.from_node = from_node;
    r.formation = formation;
    struct cli_call *c;
    int rc = cli_start(p, addr, M_ABORT, &r.base, PEER_ABORT_TIMEOUT_MS, &c);
    if (rc)
        return rc;
    c->cb.abort = cb;
    c->arg = arg;
    return 0;
}

/* ---- the completion-queue thread and the hand-off ------------------------------ */

static void cq_thread(void *arg)
{
    struct peer *p = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct tag *t = ev.tag;
        t->success = ev.success;
        t->next = NULL;
        uv_mutex_lock(&p->mu);
        if (p->done_tail)
            p->done_tail->next = t;
        else
            p->done_head = t;
        p->done_tail = t;
        uv_cond_signal(&p->cv);
        uv_mutex_unlock(&p->mu);
        uv_async_send(&p->async);
    }
}

static struct tag *take_done(struct peer *p, int wait)
{
    uv_mutex_lock(&p->mu);
    while (wait && !p->done_head)
        uv_cond_wait(&p->cv, &p->mu);
    struct tag *t = p->done_head;
    p->done_head = p->done_tail = NULL;
    uv_mutex_unlock(&p->mu);
    return t;
}

static void dispatch(struct peer *p, struct tag *t)
{
    switch (t->kind) {
    case T_REQUEST:
        on_request(p, CONTAINER(t, struct peer_join_call, t_req), t->success);
        break;
    case T_SRV_CLOSE:
        on_srv_close(p, CONTAINER(t, struct peer_join_call, t_close));
        break;
    case T_SRV_SEND: {
        struct peer_join_call *sc = CONTAINER(t, struct peer_join_call, t_send);
        sc->send_pending = 0;
        srv_maybe_free(sc);
        break;
    }
    case T_CLIENT:
        cli_done(p, CONTAINER(t, struct cli_call, t), t->success);
        break;
    default:
        p->shutdown_done = 1;
        break;
    }
}

static void async_cb(uv_async_t *a)
{
    struct peer *p = a->data;
    if (p->stopped)
        return;
    struct tag *t = take_done(p, 0);
    p->in_dispatch = 1;
    while (t) {
        struct tag *next = t->next;
        dispatch(p, t);
        t = next;
    }
    p->in_dispatch = 0;
    if (p->stop_deferred)
        do_stop(p);
}

/* ---- life ------------------------------------------------------------------------ */

static char *read_pem(const char *path, char *why, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(why, len, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(PEER_MAX_PEM + 1);
    size_t n = buf ? fread(buf, 1, PEER_MAX_PEM + 1, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (!buf || err || n == 0 || n > PEER_MAX_PEM) {
        snprintf(why, len, "cannot read %s: %s", path,
                 !buf     ? "out of memory"
                 : err    ? "read error"
                 : n == 0 ? "empty"
                          : "over 1 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static void free_pem(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

/* Insecure mode is for loopback: say so loudly when it is not. */
static int is_loopback(const char *listen)
{
    return !strncmp(listen, "127.", 4) || !strncmp(listen, "[::1]:", 6) ||
           !strncmp(listen, "localhost:", 10) || !strncmp(listen, "ipv4:127.", 9) ||
           !strncmp(listen, "unix:", 5);
}

static void close_cb(uv_handle_t *h)
{
    struct peer *p = h->data;
    if (--p->handles_open == 0) {
        uv_mutex_destroy(&p->mu);
        uv_cond_destroy(&p->cv);
        free(p->target_override);
        free(p);
    }
}

/* Tears down whatever peer_start built; p->server started or not. */
static void teardown(struct peer *p, int server_started)
{
    for (struct cli_call *c = p->cli; c; c = c->next)
        grpc_call_cancel(c->call, NULL);
    if (p->server && server_started) {
        grpc_server_shutdown_and_notify(p->server, p->cq, &p->t_shutdown);
        grpc_server_cancel_all_calls(p->server);
    }
    /* Drain: every tag in flight comes back (cancelled calls at once). */
    while ((server_started && p->server && !p->shutdown_done) || p->n_req || p->srv || p->cli) {
        struct tag *t = take_done(p, 1);
        while (t) {
            struct tag *next = t->next;
            dispatch(p, t);
            t = next;
        }
    }
    if (p->server)
        grpc_server_destroy(p->server);
    p->server = NULL;
    while (p->chans) {
        struct chan *c = p->chans;
        p->chans = c->next;
        grpc_channel_destroy(c->ch);
        free(c);
    }
    if (p->ccreds)
        grpc_channel_credentials_release(p->ccreds);
    p->ccreds = NULL;
    grpc_completion_queue_shutdown(p->cq);
    if (p->thread_started) {
        uv_thread_join(&p->thread);
    } else {
        for (;;) {
            grpc_event ev =
                grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (ev.type == GRPC_QUEUE_SHUTDOWN)
                break;
        }
    }
    grpc_completion_queue_destroy(p->cq);
    p->cq = NULL;
    grpc_shutdown();
}

static void do_stop(struct peer *p)
{
    p->stop_deferred = 0;
    p->stopping = 1;
    teardown(p, 1);
    p->stopped = 1;
    uv_close((uv_handle_t *)&p->async, close_cb);
    uv_close((uv_handle_t *)&p->sweep, close_cb);
}

void peer_stop(struct peer *p)
{
    if (!p || p->stopping || p->stop_deferred)
        return;
    if (p->in_dispatch) {
        /* Called from a handler: finish this drain first. */
        p->stop_deferred = 1;
        p->stopping = 1;
        return;
    }
    do_stop(p);
}

int peer_port(const struct peer *p)
{
    return p ? p->port : 0;
}

int peer_start(uv_loop_t *loop, const struct peer_config *cfg, const struct peer_handlers *handlers,
               void *ctx, struct peer **out, char *why, size_t len)
{
    char dummy[1];
    if (!why || len == 0) {
        why = dummy;
        len = sizeof(dummy);
    }
    why[0] = 0;
    if (!loop || !cfg || !out) {
        snprintf(why, len, "peer_start: loop, config and out are required");
        return ZPP_EINVAL;
    }
    if (!peer_check_text_ok(cfg->listen, PEER_MAX_ADDRESS, 0, 0)) {
        snprintf(why, len, "peer listen address: 1 to %d printable bytes, no spaces",
                 PEER_MAX_ADDRESS);
        return ZPP_EINVAL;
    }
    if (cfg->use_tls && (!cfg->tls.ca_file || !cfg->tls.cert_file || !cfg->tls.key_file)) {
        snprintf(why, len, "peer TLS needs ca_file, cert_file and key_file");
        return ZPP_EINVAL;
    }
    if (cfg->max_message > (1u << 30) || cfg->max_calls > 1000000 || cfg->max_parked > 1000000 ||
        cfg->reconnect_max_ms > 3600000) {
        snprintf(why, len,
                 "peer limits out of range (max_message <= 1 GiB, max_calls and max_parked "
                 "<= 1e6, "
                 "reconnect_max_ms <= 1 h)");
        return ZPP_EINVAL;
    }

    int rc = ZPP_ENOMEM;
    char *ca = NULL, *cert = NULL, *key = NULL;
    struct peer *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(why, len, "out of memory");
        return ZPP_ENOMEM;
    }
    p->loop = loop;
    p->ctx = ctx;
    if (handlers)
        p->h = *handlers;
    p->max_message = cfg->max_message ? cfg->max_message : PEER_DEFAULT_MAX_MESSAGE;
    p->max_calls = cfg->max_calls ? cfg->max_calls : PEER_DEFAULT_MAX_CALLS;
    p->max_parked = cfg->max_parked                  ? cfg->max_parked
                    : p->max_calls > PEER_MAX_NODES ? p->max_calls
                                                    : PEER_MAX_NODES;
    p->max_join_wait_ms =
        cfg->max_join_wait_ms ? cfg->max_join_wait_ms : PEER_DEFAULT_MAX_JOIN_WAIT_MS;
    p->reconnect_max_ms =
        cfg->reconnect_max_ms ? cfg->reconnect_max_ms : PEER_DEFAULT_RECONNECT_MAX_MS;
    p->use_tls = cfg->use_tls;
    p->t_shutdown.kind = T_SHUTDOWN;
    const ProtobufCServiceDescriptor *sd = &zpp__peer__peer__descriptor;
    for (int m = 0; m < M_COUNT; m++)
        snprintf(p->paths[m], sizeof(p->paths[m]), "/%s/%s", sd->name, sd->methods[m].name);

    if (cfg->use_tls) {
        rc = ZPP_EIO;
        if (!(ca = read_pem(cfg->tls.ca_file, why, len)) ||
            !(cert = read_pem(cfg->tls.cert_file, why, len)) ||
            !(key = read_pem(cfg->tls.key_file, why, len)))
            goto fail_pem;
        if (cfg->tls.target_name_override &&
            !(p->target_override = strdup(cfg->tls.target_name_override))) {
            rc = ZPP_ENOMEM;
            snprintf(why, len, "out of memory");
            goto fail_pem;
        }
    }
    if (uv_mutex_init(&p->mu) != 0) {
        snprintf(why, len, "cannot create a mutex");
        goto fail_pem;
    }
    if (uv_cond_init(&p->cv) != 0) {
        uv_mutex_destroy(&p->mu);
        snprintf(why, len, "cannot create a condition variable");
        goto fail_pem;
    }

    /* gRPC's log is process-wide: hook it once, before gRPC starts. */
    pthread_mutex_lock(&log_mu);
    if (!log_hooked) {
        gpr_set_log_function(gpr_sink);
        log_hooked = 1;
    }
    pthread_mutex_unlock(&log_mu);
    grpc_init();
    p->cq = grpc_completion_queue_create_for_next(NULL);

    grpc_arg sargs[5];
    sargs[0].type = GRPC_ARG_INTEGER;
    sargs[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    sargs[0].value.integer = (int)p->max_message;
    sargs[1].type = GRPC_ARG_INTEGER;
    sargs[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    sargs[1].value.integer = (int)p->max_message;
    sargs[2].type = GRPC_ARG_INTEGER;
    sargs[2].key = (char *)GRPC_ARG_MAX_CONCURRENT_STREAMS;
    sargs[2].value.integer = PEER_MAX_STREAMS;
    sargs[3].type = GRPC_ARG_INTEGER;
    sargs[3].key = (char *)GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS;
    sargs[3].value.integer = PEER_HANDSHAKE_TIMEOUT_MS;
    /* gRPC sets SO_REUSEPORT by default: a second daemon would share the
     * port silently and take half the calls. One daemon per port. */
    sargs[4].type = GRPC_ARG_INTEGER;
    sargs[4].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    sargs[4].value.integer = 0;
    grpc_channel_args sa = {.num_args = 5, .args = sargs};
    p->server = grpc_server_create(&sa, NULL);
    grpc_server_register_completion_queue(p->server, p->cq, NULL);
    for (int m = 0; m < M_COUNT; m++)
        p->methods[m] = grpc_server_register_method(p->server, p->paths[m], NULL,
                                                    GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);

    grpc_server_credentials *screds;
    if (cfg->use_tls) {
        grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
        screds = grpc_ssl_server_credentials_create_ex(
            ca, &pair, 1, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
        p->ccreds = grpc_ssl_credentials_create(ca, &pair, NULL, NULL);
    } else {
        screds = grpc_insecure_server_credentials_create();
        p->ccreds = grpc_insecure_credentials_create();
    }
    free_pem(ca);
    free_pem(cert);
    free_pem(key);
    ca = cert = key = NULL;
    if (!screds || !p->ccreds) {
        if (screds)
            grpc_server_credentials_release(screds);
        rc = ZPP_EINVAL;
        snprintf(why, len, "peer credentials refused by gRPC (bad PEM?)");
        goto fail_grpc;
    }
    p->port = grpc_server_add_http2_port(p->server, cfg->listen, screds);
    grpc_server_credentials_release(screds);
    if (p->port <= 0) {
        rc = ZPP_EIO;
        snprintf(why, len,
                 "cannot listen on %s (in use, bad address or bad TLS files: see the log)",
                 cfg->listen);
        goto fail_grpc;
    }
    if (uv_async_init(loop, &p->async, async_cb) != 0) {
        rc = ZPP_EIO;
        snprintf(why, len, "uv_async_init failed");
        goto fail_grpc;
    }
    p->async.data = p;
    uv_timer_init(loop, &p->sweep);
    p->sweep.data = p;
    p->handles_open = 2;
    grpc_server_start(p->server);
    for (int m = 0; m <= M_OTHER; m++)
        if (srv_request(p, m) != 0) {
            rc = ZPP_ENOMEM;
            snprintf(why, len, "cannot wait for calls");
            goto fail_started;
        }
    if (uv_thread_create(&p->thread, cq_thread, p) != 0) {
        rc = ZPP_ENOMEM;
        snprintf(why, len, "cannot start the completion-queue thread");
        goto fail_started;
    }
    p->thread_started = 1;
    uv_timer_start(&p->sweep, sweep_cb, PEER_SWEEP_MS, PEER_SWEEP_MS);
    uv_unref((uv_handle_t *)&p->sweep); /* the daemon's life is not ours to hold */
    plog(2, "peer: serving on %s (port %d, %s)", cfg->listen, p->port,
         cfg->use_tls ? "mutual TLS" : "insecure");
    if (!cfg->use_tls && !is_loopback(cfg->listen))
        plog(1,
             "peer: insecure peer service on %s, not loopback: anyone who reaches it can join "
             "or abort jobs; configure mutual TLS (docs/peers.md)",
             cfg->listen);
    *out = p;
    return 0;

fail_started:
    /* No thread yet: teardown drains the queue itself through take_done,
     * so feed it by hand. */
    p->stopping = 1;
    grpc_server_shutdown_and_notify(p->server, p->cq, &p->t_shutdown);
    grpc_server_cancel_all_calls(p->server);
    while (!p->shutdown_done || p->n_req) {
        grpc_event ev = grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            struct tag *t = ev.tag;
            t->success = ev.success;
            dispatch(p, t);
        }
    }
    teardown(p, 0);
    p->stopped = 1;
    uv_close((uv_handle_t *)&p->async, close_cb);
    uv_close((uv_handle_t *)&p->sweep, close_cb);
    return rc;

fail_grpc:
    teardown(p, 0);
    uv_mutex_destroy(&p->mu);
    uv_cond_destroy(&p->cv);
fail_pem:
    free_pem(ca);
    free_pem(cert);
    free_pem(key);
    free(p->target_override);
    free(p);
    return rc;
}

#endif /* ZPP_HAVE_GRPC */
