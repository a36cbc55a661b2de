/*
 * fuzz_peer.c — hostile bytes through the unpacking and the field checks of
 * every zpp.peer message (proto/peer.proto): what a daemon receives from
 * another daemon over gRPC (the three requests) and what it gets back (the
 * three replies).
 *
 * daemon/peer.c unpacks a received message under an allocation budget of
 * 4 * size + 4096 bytes, then runs the checks of proto/peer_check.c on it
 * before a handler or callback sees it. This target does the same: the
 * budgeted unpack of each message type (no crash, no leak, no read past
 * the input, the budget holds), the peer_check_* functions peer.c applies
 * to that type, held to their contract (a message they pass really is
 * within the limits; a refusal has a known code and a printable message),
 * a free of whatever came out, and pack -> unpack -> pack giving the same
 * bytes. The whole input is tried as each of the six types, so one corpus
 * serves them all. Built as a libFuzzer target (clang, ZPP_FUZZ=ON) or
 * with replay_main.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "peer.pb-c.h"
#include "peer_check.h"
#include "zpp.h"

/* peer.c's budget for a message of n bytes, and what it charges per
 * allocation beyond the bytes asked for. */
#define PEER_FUZZ_BUDGET(n) (4 * (n) + 4096)
#define PEER_FUZZ_OVERHEAD 64u /* peer.c's UNPACK_OVERHEAD */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 if m or a message inside it kept unknown fields (protobuf-c packs them
 * back as they came, so byte-exact round trips hold only without them). */
static int has_unknown(const ProtobufCMessage *m)
{
    if (!m)
        return 0;
    if (m->n_unknown_fields)
        return 1;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (has_unknown(v[k]))
                    return 1;
            continue;
        }
        if (has_unknown(*(ProtobufCMessage *const *)(base + f->offset)))
            return 1;
    }
    return 0;
}

/* Strings and bytes of an unpacked message are readable to their end:
 * ASan catches a string that is not NUL-terminated or a short bytes field. */
static size_t touch(const ProtobufCMessage *m)
{
    size_t sum = 0;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        int rep = f->label == PROTOBUF_C_LABEL_REPEATED;
        size_t n = rep ? *(const size_t *)(base + f->quantifier_offset) : 1;
        const void *at = base + f->offset;
        if (rep)
            at = *(const void *const *)at;
        for (size_t k = 0; k < n; k++) {
            switch (f->type) {
            case PROTOBUF_C_TYPE_STRING: {
                const char *s = ((const char *const *)at)[k];
                sum += s ? strlen(s) : 0;
                break;
            }
            case PROTOBUF_C_TYPE_BYTES: {
                const ProtobufCBinaryData *b = &((const ProtobufCBinaryData *)at)[k];
                for (size_t j = 0; j < b->len; j++)
                    sum += b->data[j];
                break;
            }
            case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessage *sub = ((const ProtobufCMessage *const *)at)[k];
                if (sub)
                    sum += touch(sub);
                else if (rep)
                    abort(); /* repeated messages are never NULL */
                break;
            }
            default:
                break;
            }
        }
    }
    return sum;
}

/* ---- the checks peer.c runs, held to their contract ------------------------- */

#define WHY_CAP 256 /* peer.c's buffer for a check's message */

/* A refusal: a code the check documents, a message that is non-empty,
 * NUL-terminated inside the buffer and printable (no untrusted bytes). */
static void refused(int rc, const char *why, int c1, int c2)
{
    if (rc != c1 && rc != c2)
        abort();
    size_t n = strnlen(why, WHY_CAP);
    if (n == 0 || n == WHY_CAP)
        abort();
    for (size_t i = 0; i < n; i++)
        if (why[i] < 0x20 || why[i] > 0x7e)
            abort();
}

/* What the common fields must be once a request passed. */
static void common_ok(uint32_t version, const char *job_id, const Zpp__Peer__Tenant *t)
{
    if (version != ZPP__PEER__PEER_VERSION__PEER_VERSION || !job_id || !t)
        abort();
    size_t n = strlen(job_id);
    if (n == 0 || n > PEER_MAX_JOB_ID || (t->label && strlen(t->label) > PEER_MAX_LABEL))
        abort();
}

static void check_join_request(const Zpp__Peer__JoinRequest *r)
{
    char why[WHY_CAP];
    memset(why, 0, sizeof(why));
    int rc = peer_check_join_request(r, why, sizeof(why));
    if (rc) {
        refused(rc, why, ZPP_EINVAL, ZPP_EVERSION);
        return;
    }
    common_ok(r->version, r->job_id, r->tenant);
    if (r->node_count == 0 || r->node_count > PEER_MAX_NODES || r->node_rank >= r->node_count ||
        r->ranks_per_node == 0 || r->ranks_per_node > PEER_MAX_RANKS_PER_NODE ||
        (uint64_t)r->world_size != (uint64_t)r->node_count * r->ranks_per_node || !r->address ||
        strlen(r->address) == 0 || strlen(r->address) > PEER_MAX_ADDRESS ||
        strchr(r->address, ' ') || (r->topology && strlen(r->topology) > PEER_MAX_TOPOLOGY))
        abort();
}

static void check_join_reply_for(const Zpp__Peer__JoinReply *r, uint32_t node_count)
{
    char why[WHY_CAP];
    memset(why, 0, sizeof(why));
    int rc = peer_check_join_reply(r, node_count, why, sizeof(why));
    if (rc) {
        refused(rc, why, ZPP_EPROTO, node_count > PEER_MAX_NODES ? ZPP_EINVAL : ZPP_EPROTO);
        return;
    }
    if (node_count > PEER_MAX_NODES || r->n_members != node_count ||
        r->n_nccl_ids > PEER_MAX_NCCL_IDS)
        abort();
    for (size_t i = 0; i < r->n_nccl_ids; i++)
        if (r->nccl_ids[i].len != PEER_NCCL_ID_BYTES)
            abort();
    /* One member per rank: n_members == node_count ranks, all below
     * node_count, all distinct, means each rank exactly once. */
    uint64_t sum = 0;
    for (size_t i = 0; i < r->n_members; i++) {
        const Zpp__Peer__Member *m = r->members[i];
        if (!m || m->node_rank >= node_count || !m->address || !m->address[0] ||
            strlen(m->address) > PEER_MAX_ADDRESS)
            abort();
        sum += m->node_rank;
    }
    if (sum != (uint64_t)node_count * (node_count ? node_count - 1 : 0) / 2)
        abort();
}

static void check_reply_head(int32_t code, const char *message)
{
    char why[WHY_CAP];
    memset(why, 0, sizeof(why));
    int rc = peer_check_reply(code, message, why, sizeof(why));
    if (rc) {
        refused(rc, why, ZPP_EPROTO, ZPP_EPROTO);
        return;
    }
    if (code > 0 || code < ZPP_ERRNO_MAX || (message && strlen(message) > PEER_MAX_TEXT))
        abort();
    /* What a callback is shown: printable, cut to fit. */
    char text[PEER_MAX_TEXT];
    peer_check_sanitize(text, sizeof(text), message);
    for (const char *c = text; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            abort();
}

static void check_join_reply(const Zpp__Peer__JoinReply *r)
{
    check_reply_head(r->code, r->message);
    /* The job's node count comes from the caller's checked request: try
     * the one the members suggest (reaches the member checks), a small one,
     * and one past the limit (the caller's-bug refusal). */
    uint32_t guess = r->n_members <= PEER_MAX_NODES ? (uint32_t)r->n_members : PEER_MAX_NODES;
    check_join_reply_for(r, guess);
    check_join_reply_for(r, 1);
    check_join_reply_for(r, PEER_MAX_NODES + 1);
}

static void check_heartbeat_request(const Zpp__Peer__HeartbeatRequest *r)
{
    char why[WHY_CAP];
    memset(why, 0, sizeof(why));
    int rc = peer_check_heartbeat_request(r, why, sizeof(why));
    if (rc) {
        refused(rc, why, ZPP_EINVAL, ZPP_EVERSION);
        return;
    }
    common_ok(r->version, r->job_id, r->tenant);
    if (r->node_rank >= PEER_MAX_NODES)
        abort();
}

static void check_heartbeat_reply(const Zpp__Peer__HeartbeatReply *r)
{
    check_reply_head(r->code, r->message);
    char why[WHY_CAP];
    memset(why, 0, sizeof(why));
    int rc = peer_check_job_state((int)r->state, why, sizeof(why));
    if (rc)
        refused(rc, why, ZPP_EPROTO, ZPP_EPROTO);
    else if ((int)r->state < 0 || (int)r->state > ZPP__PEER__JOB_STATE__JOB_STATE_ENDED)
        abort(); /* the enum's last value, not the checker's own constant */
}

static void check_abort_request(const Zpp__Peer__AbortRequest *r)
{
    char why[WHY_CAP];
    memset(why, 0, sizeof(why));
    int rc = peer_check_abort_request(r, why, sizeof(why));
    if (rc) {
        refused(rc, why, ZPP_EINVAL, ZPP_EVERSION);
        return;
    }
    common_ok(r->version, r->job_id, r->tenant);
    if (r->from_node >= PEER_MAX_NODES)
        abort();
    if (!r->reason)
        return;
    size_t n = strlen(r->reason);
    if (n > PEER_MAX_REASON)
        abort();
    /* peer.c sanitizes the reason in place; it keeps its length. */
    char reason[PEER_MAX_REASON + 1];
    memcpy(reason, r->reason, n + 1);
    peer_check_sanitize(reason, n + 1, reason);
    if (strlen(reason) != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if (reason[i] < 0x20 || reason[i] > 0x7e)
            abort();
}

static void check_abort_reply(const Zpp__Peer__AbortReply *r)
{
    check_reply_head(r->code, r->message);
}

/* Runs on m the checks peer.c runs on a message of its type. */
static void run_checks(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (d == &zpp__peer__join_request__descriptor)
        check_join_request((const Zpp__Peer__JoinRequest *)m);
    else if (d == &zpp__peer__join_reply__descriptor)
        check_join_reply((const Zpp__Peer__JoinReply *)m);
    else if (d == &zpp__peer__heartbeat_request__descriptor)
        check_heartbeat_request((const Zpp__Peer__HeartbeatRequest *)m);
    else if (d == &zpp__peer__heartbeat_reply__descriptor)
        check_heartbeat_reply((const Zpp__Peer__HeartbeatReply *)m);
    else if (d == &zpp__peer__abort_request__descriptor)
        check_abort_request((const Zpp__Peer__AbortRequest *)m);
    else if (d == &zpp__peer__abort_reply__descriptor)
        check_abort_reply((const Zpp__Peer__AbortReply *)m);
    else
        abort();
}

static void check(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t size)
{
    ProtobufCMessage *m =
        zpp_unpack_budgeted(d, data, size, PEER_FUZZ_BUDGET(size), PEER_FUZZ_OVERHEAD);
    if (!m)
        return;
    if (m->descriptor != d)
        abort();
    volatile size_t sink = touch(m);
    (void)sink;
    run_checks(m);
    size_t n1 = protobuf_c_message_get_packed_size(m);
    uint8_t *p1 = malloc(n1 ? n1 : 1);
    if (!p1)
        abort();
    if (protobuf_c_message_pack(m, p1) != n1)
        abort();
    if (has_unknown(m)) {
        free(p1);
        protobuf_c_message_free_unpacked(m, NULL);
        return;
    }
    /* The canonical form is never bigger than the input plus what a
     * default-valued field costs: give the second unpack a generous budget. */
    ProtobufCMessage *again =
        zpp_unpack_budgeted(d, p1, n1, 4 * PEER_FUZZ_BUDGET(size + n1), PEER_FUZZ_OVERHEAD);
    if (!again)
        abort();
    size_t n2 = protobuf_c_message_get_packed_size(again);
    uint8_t *p2 = malloc(n2 ? n2 : 1);
    if (!p2 || n2 != n1 || protobuf_c_message_pack(again, p2) != n2 || memcmp(p1, p2, n1) != 0)
        abort();
    free(p1);
    free(p2);
    protobuf_c_message_free_unpacked(again, NULL);
    protobuf_c_message_free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const ProtobufCMessageDescriptor *const types[] = {
        &zpp__peer__join_request__descriptor,      &zpp__peer__join_reply__descriptor,
        &zpp__peer__heartbeat_request__descriptor, &zpp__peer__heartbeat_reply__descriptor,
        &zpp__peer__abort_request__descriptor,     &zpp__peer__abort_reply__descriptor,
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        check(types[i], data, size);
    return 0;
}
