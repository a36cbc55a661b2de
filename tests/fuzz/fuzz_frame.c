/*
 * fuzz_frame.c — hostile bytes through the framing and unpacking module
 * that the daemon, libzpp and zppctl share (proto/frame.c), and through the
 * JSON rendering of admin replies (client/zpp_admin.c).
 *
 * The input is read two ways: as a stream of frames (each body unpacked as
 * a Request and as a Reply) and as one bare body. Whatever unpacks must
 * validate without crashing, give a message with every refusal, and survive
 * pack -> unpack -> pack with the same bytes and the same verdict. Built as a
 * libFuzzer target (clang, ZPP_FUZZ=ON) or with replay_main.c.
 */
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "zpp_int.h"

#define FUZZ_BUDGET (1u << 20)
#define FUZZ_MAX_FRAME ZPP_FRAME_DEFAULT_MAX

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 if m or any message inside it kept unknown fields. */
static int has_unknown(const ProtobufCMessage *m)
{
    if (!m)
        return 0;
    if (m->n_unknown_fields)
        return 1;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        const char *base = (const char *)m;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (has_unknown(v[k]))
                    return 1;
            continue;
        }
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue;
        if (has_unknown(*(ProtobufCMessage *const *)(base + f->offset)))
            return 1;
    }
    return 0;
}

static void check_request(const uint8_t *body, size_t len)
{
    Zpp__Request *req = NULL;
    if (zpp_request_unpack(body, len, FUZZ_BUDGET, &req) != 0)
        return;
    const char *why = NULL;
    int rc = zpp_request_validate(req, &why);
    if (rc > 0 || (rc < 0 && (!why || !why[0])))
        abort();
    /* protobuf-c keeps unknown fields and packs them back as they came,
     * even a field number 0 it accepted in a non-canonical varint and then
     * refuses in canonical form: round trips hold only without them. Neither
     * side of zppd repacks what it received. */
    if (has_unknown(&req->base)) {
        zpp_request_free(req);
        return;
    }
    uint8_t *p1 = NULL, *p2 = NULL;
    size_t l1 = 0, l2 = 0;
    Zpp__Request *again = NULL;
    if (zpp_request_pack(req, SIZE_MAX, &p1, &l1) != 0)
        abort();
    /* The packed form never costs more to unpack than the input did, bar
     * the budget's slack: give it room. */
    if (zpp_request_unpack(p1 + ZPP_FRAME_HDR, l1 - ZPP_FRAME_HDR, 4 * FUZZ_BUDGET, &again) != 0)
        abort();
    const char *why2 = NULL;
    if (zpp_request_validate(again, &why2) != rc)
        abort();
    if (zpp_request_pack(again, SIZE_MAX, &p2, &l2) != 0 || l1 != l2 || memcmp(p1, p2, l1) != 0)
        abort();
    free(p1);
    free(p2);
    zpp_request_free(again);
    zpp_request_free(req);
}

static void check_reply(const uint8_t *body, size_t len)
{
    Zpp__Reply *rep = NULL;
    if (zpp_reply_unpack(body, len, FUZZ_BUDGET, &rep) != 0)
        return;
    char *json = NULL;
    if (rep->body_case == ZPP__REPLY__BODY_STATUS && zpp__status_json(rep->status, &json) == 0) {
        if (json[0] != '{')
            abort();
        free(json);
    }
    if (rep->body_case == ZPP__REPLY__BODY_JOBS && zpp__jobs_json(rep->jobs, &json) == 0) {
        /* Escaping leaves no raw control character in the output. */
        for (const char *p = json; *p; p++)
            if ((unsigned char)*p < 0x20)
                abort();
        free(json);
    }
    uint8_t *p1 = NULL;
    size_t l1 = 0;
    if (zpp_reply_pack(rep, SIZE_MAX, &p1, &l1) != 0)
        abort();
    free(p1);
    zpp_reply_free(rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pos = 0;
    while (pos < size) {
        size_t off = 0, len = 0;
        int r = zpp_frame_peek(data + pos, size - pos, FUZZ_MAX_FRAME, &off, &len);
        if (r < 0 && zpp_frame_peek(data + pos, size - pos, SIZE_MAX, &off, &len) < 0)
            abort(); /* nothing is too long for an unlimited reader */
        if (r <= 0)
            break;
        if (off != ZPP_FRAME_HDR || len > size - pos - off)
            abort();
        check_request(data + pos + off, len);
        check_reply(data + pos + off, len);
        pos += off + len;
    }
    check_request(data, size);
    check_reply(data, size);
    return 0;
}
