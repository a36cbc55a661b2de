/*
 * peer_check.h — the field checks applied to every zpp.peer message
 * (proto/peer.proto) that one daemon receives from another, and the limits
 * they enforce.
 *
 * Socket-free and gRPC-free: daemon/peer.c runs these on every request it
 * unpacks (before a handler sees it) and every reply it gets back (before a
 * callback sees it); tests/fuzz/fuzz_peer.c runs them on whatever hostile
 * bytes unpack; tests/unit/test_peer_check.c names one case per refused
 * field. Nothing here allocates, logs or keeps state: every function may be
 * called from any thread.
 *
 * The message checks return 0, or a negative ZPP_E* code (client/include/
 * zpp.h) and a NUL-terminated message naming the field in why[0..len)
 * (untouched on success). The message never copies untrusted text: it
 * carries only numbers and lengths, so it is safe to log and to send back.
 */
#ifndef ZPP_PEER_CHECK_H
#define ZPP_PEER_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "peer.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits on what a peer may send (checked on every message). */
#define PEER_MAX_JOB_ID 128
#define PEER_MAX_LABEL 64
#define PEER_MAX_TOPOLOGY 1024
#define PEER_MAX_ADDRESS 255
#define PEER_MAX_REASON 512
#define PEER_MAX_TEXT 1024 /* reply messages */
#define PEER_MAX_NODES 4096
#define PEER_MAX_RANKS_PER_NODE 256
#define PEER_NCCL_ID_BYTES 128
#define PEER_MAX_NCCL_IDS (2 + PEER_MAX_RANKS_PER_NODE) /* global, intra, one inter per local */

/* 1 if s is a job id or label: 1 to max bytes (0 allowed, and NULL, when
 * may_be_empty) of [A-Za-z0-9._:@/+=-], the alphabet of the local protocol;
 * else 0. */
int peer_check_name_ok(const char *s, size_t max, int may_be_empty);

/* 1 if s is at most max bytes of printable ASCII (spaces allowed only when
 * `spaces`; empty or NULL only when may_be_empty); else 0. */
int peer_check_text_ok(const char *s, size_t max, int spaces, int may_be_empty);

/* 1 if a code from a peer is one of ours (0 or a ZPP_E* code); else 0. */
int peer_check_code_ok(int32_t code);

/* Copies untrusted text for display into dst[0..cap): printable ASCII kept,
 * every other byte replaced by '?', cut at cap - 1 bytes. src may be NULL
 * (gives ""); dst may be src (in place). */
void peer_check_sanitize(char *dst, size_t cap, const char *src);

/* The tenant of a request: present, label a name of at most
 * PEER_MAX_LABEL bytes (may be empty). ZPP_EINVAL. */
int peer_check_tenant(const Zpp__Peer__Tenant *t, char *why, size_t len);

/* What every request carries: the version this daemon speaks
 * (ZPP_EVERSION), a job id of 1 to PEER_MAX_JOB_ID name bytes and a valid
 * tenant (ZPP_EINVAL). */
int peer_check_common(uint32_t version, const char *job_id, const Zpp__Peer__Tenant *t, char *why,
                      size_t len);

/* A Join request: common fields, 1 <= node_count <= PEER_MAX_NODES,
 * node_rank < node_count, 1 <= ranks_per_node <= PEER_MAX_RANKS_PER_NODE,
 * world_size == node_count * ranks_per_node, topology printable (may be
 * empty), address 1 to PEER_MAX_ADDRESS printable bytes without spaces.
 * ZPP_EVERSION or ZPP_EINVAL; r must not be NULL. */
int peer_check_join_request(const Zpp__Peer__JoinRequest *r, char *why, size_t len);

/* A successful Join reply for a job of node_count nodes (the count of the
 * checked request): 1 to PEER_MAX_NCCL_IDS ids of PEER_NCCL_ID_BYTES each,
 * exactly one member per node rank below node_count, each with a valid
 * address. ZPP_EPROTO; ZPP_EINVAL if r is NULL or node_count exceeds
 * PEER_MAX_NODES (a caller's bug, never a peer's). */
int peer_check_join_reply(const Zpp__Peer__JoinReply *r, uint32_t node_count, char *why,
                          size_t len);

/* A Heartbeat request: common fields, node_rank < PEER_MAX_NODES.
 * ZPP_EVERSION or ZPP_EINVAL; r must not be NULL. */
int peer_check_heartbeat_request(const Zpp__Peer__HeartbeatRequest *r, char *why, size_t len);

/* An Abort request: common fields, from_node < PEER_MAX_NODES, reason at
 * most PEER_MAX_REASON bytes (may be absent). ZPP_EVERSION or ZPP_EINVAL;
 * r must not be NULL. The reason may still hold non-printable bytes: pass
 * it through peer_check_sanitize before showing it. */
int peer_check_abort_request(const Zpp__Peer__AbortRequest *r, char *why, size_t len);

/* The code and message every reply carries: message at most PEER_MAX_TEXT
 * bytes (may be absent), code one of ours. ZPP_EPROTO. */
int peer_check_reply(int32_t code, const char *message, char *why, size_t len);

/* The JobState of a Heartbeat reply: a value the enum defines (0 ..
 * PEER_JOB_STATE_MAX). ZPP_EPROTO. */
#define PEER_JOB_STATE_MAX ZPP__PEER__JOB_STATE__JOB_STATE_ENDED
int peer_check_job_state(int state, char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif
