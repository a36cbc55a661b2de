/*
 * peer_check.c — field checks of the zpp.peer messages (the contract is in
 * peer_check.h).
 *
 * Moved out of daemon/peer.c so that the fuzz target and the unit tests
 * reach exactly the code the daemon runs, without gRPC or a socket. Every
 * string field was NUL-terminated by protobuf-c, but its length is the
 * peer's choice: lengths are measured with strnlen bounded by the limit.
 */
#include "peer_check.h"

#include <stdio.h>
#include <string.h>

#include "zpp.h"

int peer_check_name_ok(const char *s, size_t max, int may_be_empty)
{
    if (!s)
        return may_be_empty;
    size_t n = strnlen(s, max + 1);
    if (n > max || (n == 0 && !may_be_empty))
        return 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("._:@/+=-", ch)))
            return 0;
    }
    return 1;
}

int peer_check_text_ok(const char *s, size_t max, int spaces, int may_be_empty)
{
    if (!s)
        return may_be_empty;
    size_t n = strnlen(s, max + 1);
    if (n > max || (n == 0 && !may_be_empty))
        return 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch > 0x7e || (ch == ' ' && !spaces))
            return 0;
    }
    return 1;
}

int peer_check_code_ok(int32_t code)
{
    return code <= 0 && code >= ZPP_ERRNO_MAX;
}

void peer_check_sanitize(char *dst, size_t cap, const char *src)
{
    size_t o = 0;
    for (; src && *src && o + 1 < cap; src++) {
        unsigned char ch = (unsigned char)*src;
        dst[o++] = (ch >= 0x20 && ch <= 0x7e) ? (char)ch : '?';
    }
    if (cap)
        dst[o] = 0;
}

int peer_check_tenant(const Zpp__Peer__Tenant *t, char *why, size_t len)
{
    if (!t) {
        snprintf(why, len, "tenant missing");
        return ZPP_EINVAL;
    }
    if (!peer_check_name_ok(t->label, PEER_MAX_LABEL, 1)) {
        snprintf(why, len, "tenant label: at most %d of [A-Za-z0-9._:@/+=-]", PEER_MAX_LABEL);
        return ZPP_EINVAL;
    }
    return 0;
}

int peer_check_common(uint32_t version, const char *job_id, const Zpp__Peer__Tenant *t, char *why,
                      size_t len)
{
    if (version != ZPP__PEER__PEER_VERSION__PEER_VERSION) {
        snprintf(why, len, "peer protocol version %u not spoken (this daemon speaks %d)", version,
                 ZPP__PEER__PEER_VERSION__PEER_VERSION);
        return ZPP_EVERSION;
    }
    if (!peer_check_name_ok(job_id, PEER_MAX_JOB_ID, 0)) {
        snprintf(why, len, "job_id: 1 to %d of [A-Za-z0-9._:@/+=-] (got %zu bytes)",
                 PEER_MAX_JOB_ID, job_id ? strnlen(job_id, 4096) : 0);
        return ZPP_EINVAL;
    }
    return peer_check_tenant(t, why, len);
}

int peer_check_join_request(const Zpp__Peer__JoinRequest *r, char *why, size_t len)
{
    int rc = peer_check_common(r->version, r->job_id, r->tenant, why, len);
    if (rc)
        return rc;
    if (r->node_count == 0 || r->node_count > PEER_MAX_NODES) {
        snprintf(why, len, "node_count %u: 1 to %d", r->node_count, PEER_MAX_NODES);
        return ZPP_EINVAL;
    }
    if (r->node_rank >= r->node_count) {
        snprintf(why, len, "node_rank %u: must be below node_count %u", r->node_rank,
                 r->node_count);
        return ZPP_EINVAL;
    }
    if (r->ranks_per_node == 0 || r->ranks_per_node > PEER_MAX_RANKS_PER_NODE) {
        snprintf(why, len, "ranks_per_node %u: 1 to %d", r->ranks_per_node,
                 PEER_MAX_RANKS_PER_NODE);
        return ZPP_EINVAL;
    }
    if ((uint64_t)r->world_size != (uint64_t)r->node_count * r->ranks_per_node) {
        snprintf(why, len, "world_size %u: must be node_count %u x ranks_per_node %u",
                 r->world_size, r->node_count, r->ranks_per_node);
        return ZPP_EINVAL;
    }
    if (!peer_check_text_ok(r->topology, PEER_MAX_TOPOLOGY, 1, 1)) {
        snprintf(why, len, "topology: at most %d printable bytes", PEER_MAX_TOPOLOGY);
        return ZPP_EINVAL;
    }
    if (!peer_check_text_ok(r->address, PEER_MAX_ADDRESS, 0, 0)) {
        snprintf(why, len, "address: 1 to %d printable bytes, no spaces", PEER_MAX_ADDRESS);
        return ZPP_EINVAL;
    }
    return 0;
}

int peer_check_join_reply(const Zpp__Peer__JoinReply *r, uint32_t node_count, char *why,
                          size_t len)
{
    /* The bitmap below is sized for PEER_MAX_NODES; the daemon passes the
     * count of a checked request, so this refuses only a caller's bug. */
    if (!r || node_count > PEER_MAX_NODES) {
        snprintf(why, len, "join reply check: node_count %u: at most %d", node_count,
                 PEER_MAX_NODES);
        return ZPP_EINVAL;
    }
    /* 0 ids: a job whose backend makes no communicators (host). Whether a
     * member got the ids its own backend needs is the member's check. */
    if (r->n_nccl_ids > PEER_MAX_NCCL_IDS) {
        snprintf(why, len, "nccl_ids: %zu ids, expected at most %d", r->n_nccl_ids,
                 PEER_MAX_NCCL_IDS);
        return ZPP_EPROTO;
    }
    for (size_t i = 0; i < r->n_nccl_ids; i++)
        if (r->nccl_ids[i].len != PEER_NCCL_ID_BYTES) {
            snprintf(why, len, "nccl_ids[%zu]: %zu bytes, expected %d", i, r->nccl_ids[i].len,
                     PEER_NCCL_ID_BYTES);
            return ZPP_EPROTO;
        }
    if (r->n_members != node_count) {
        snprintf(why, len, "members: %zu, expected one per node (%u)", r->n_members, node_count);
        return ZPP_EPROTO;
    }
    /* node_count <= PEER_MAX_NODES: a bitmap on the stack finds duplicates. */
    uint8_t seen[(PEER_MAX_NODES + 7) / 8];
    memset(seen, 0, sizeof(seen));
    for (size_t i = 0; i < r->n_members; i++) {
        const Zpp__Peer__Member *m = r->members[i];
        if (!m || m->node_rank >= node_count) {
            snprintf(why, len, "members[%zu]: node_rank %u not below %u", i, m ? m->node_rank : 0,
                     node_count);
            return ZPP_EPROTO;
        }
        if (seen[m->node_rank / 8] & (1u << (m->node_rank % 8))) {
            snprintf(why, len, "members[%zu]: node_rank %u listed twice", i, m->node_rank);
            return ZPP_EPROTO;
        }
        seen[m->node_rank / 8] |= (uint8_t)(1u << (m->node_rank % 8));
        if (!peer_check_text_ok(m->address, PEER_MAX_ADDRESS, 0, 0)) {
            snprintf(why, len, "members[%zu]: address must be 1 to %d printable bytes", i,
                     PEER_MAX_ADDRESS);
            return ZPP_EPROTO;
        }
    }
    return 0;
}

int peer_check_heartbeat_request(const Zpp__Peer__HeartbeatRequest *r, char *why, size_t len)
{
    int rc = peer_check_common(r->version, r->job_id, r->tenant, why, len);
    if (rc)
        return rc;
    if (r->node_rank >= PEER_MAX_NODES) {
        snprintf(why, len, "node_rank %u: at most %d", r->node_rank, PEER_MAX_NODES - 1);
        return ZPP_EINVAL;
    }
    return 0;
}

int peer_check_abort_request(const Zpp__Peer__AbortRequest *r, char *why, size_t len)
{
    int rc = peer_check_common(r->version, r->job_id, r->tenant, why, len);
    if (rc)
        return rc;
    if (r->from_node >= PEER_MAX_NODES) {
        snprintf(why, len, "from_node %u: at most %d", r->from_node, PEER_MAX_NODES - 1);
        return ZPP_EINVAL;
    }
    if (r->reason && strnlen(r->reason, PEER_MAX_REASON + 1) > PEER_MAX_REASON) {
        snprintf(why, len, "reason: at most %d bytes", PEER_MAX_REASON);
        return ZPP_EINVAL;
    }
    return 0;
}

int peer_check_reply(int32_t code, const char *message, char *why, size_t len)
{
    if (message && strnlen(message, PEER_MAX_TEXT + 1) > PEER_MAX_TEXT) {
        snprintf(why, len, "reply message longer than %d bytes", PEER_MAX_TEXT);
        return ZPP_EPROTO;
    }
    if (!peer_check_code_ok(code)) {
        snprintf(why, len, "unknown code %d in reply", (int)code);
        return ZPP_EPROTO;
    }
    return 0;
}

int peer_check_job_state(int state, char *why, size_t len)
{
    if (state < 0 || state > PEER_JOB_STATE_MAX) {
        snprintf(why, len, "bad job state %d", state);
        return ZPP_EPROTO;
    }
    return 0;
}
