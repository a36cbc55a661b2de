/*
 * fuzz_peer.c — hostile bytes through the unpacking of every zpp.peer
 * message (proto/peer.proto): what a daemon receives from another daemon
 * over gRPC (the three requests) and what it gets back (the three replies).
 *
 * daemon/peer.c unpacks a received message under an allocation budget of
 * 4 * size + 4096 bytes, then checks its fields with static functions that
 * are not reachable from here; this target exercises what is: the
 * budgeted unpack of each message type (no crash, no leak, no read past
 * the input, the budget holds), a free of whatever came out, and
 * pack -> unpack -> pack giving the same bytes. The whole input is tried as
 * each of the six types, so one corpus serves them all. Built as a
 * libFuzzer target (clang, ZPP_FUZZ=ON) or with replay_main.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "peer.pb-c.h"

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
