/*
 * frame.h — framing and checked (un)packing of zpp.proto messages.
 *
 * Socket-free: the daemon, the client library and the fuzz targets all use
 * this one module. A frame is a 4-byte big-endian length followed by the
 * packed message. Unpacking runs under a per-message allocation budget
 * (protobuf-c sizes its allocations from the input), so a hostile frame can
 * cost at most `budget` bytes of heap.
 */
#ifndef ZPP_FRAME_H
#define ZPP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "zpp.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZPP_FRAME_HDR 4u
#define ZPP_FRAME_DEFAULT_MAX (1u << 20)
#define ZPP_FRAME_MIN_MAX 256u

/* Looks for one complete frame at the start of data[0..len).
 * Returns 1 and sets *body_off (= ZPP_FRAME_HDR) and *body_len when a whole
 * frame is there (the frame occupies ZPP_FRAME_HDR + *body_len bytes);
 * 0 when more bytes are needed; ZPP_EPROTO (negative) when the announced
 * length exceeds max_frame (the connection must be closed). A zero-length
 * body is a valid (empty) message. */
int zpp_frame_peek(const uint8_t *data, size_t len, size_t max_frame, size_t *body_off,
                   size_t *body_len);

/* Unpacks any protobuf-c message from data[0..len) under an allocation
 * budget: every allocation is charged its size plus overhead_per_alloc
 * bytes (what the heap spends beyond the bytes asked for), and the unpack
 * fails once the budget would be spent. data may be NULL when len is 0.
 * Returns the message (the caller frees it with
 * protobuf_c_message_free_unpacked(m, NULL): plain free) or NULL when the
 * bytes do not unpack or exceed the budget. Keeps no state; any thread. */
ProtobufCMessage *zpp_unpack_budgeted(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                      size_t len, size_t budget, size_t overhead_per_alloc);

/* Unpacks a Request/Reply body with an allocation budget in bytes.
 * Returns 0 and *out (free with zpp_request_free / zpp_reply_free), or
 * ZPP_EPROTO when the bytes do not unpack or exceed the budget. */
int zpp_request_unpack(const uint8_t *body, size_t len, size_t budget, Zpp__Request **out);
void zpp_request_free(Zpp__Request *req);
int zpp_reply_unpack(const uint8_t *body, size_t len, size_t budget, Zpp__Reply **out);
void zpp_reply_free(Zpp__Reply *rep);

/* Packs a message with its 4-byte header into a malloc'd buffer the caller
 * frees. Returns 0, ZPP_ENOMEM, or ZPP_ELIMIT if it exceeds max_frame. */
int zpp_request_pack(const Zpp__Request *req, size_t max_frame, uint8_t **out, size_t *out_len);
int zpp_reply_pack(const Zpp__Reply *rep, size_t max_frame, uint8_t **out, size_t *out_len);

/* Checks the fields of an unpacked Request that the framing layer can check
 * alone (version, body set, string lengths, enum ranges). Returns 0 or a
 * negative code and a static message in *why. */
int zpp_request_validate(const Zpp__Request *req, const char **why);

#define ZPP_MAX_JOB_ID 128u
#define ZPP_MAX_KEY 256u
#define ZPP_MAX_UUID 64u
#define ZPP_MAX_ADDR 256u
#define ZPP_MAX_LABEL 64u
#define ZPP_MAX_EVENTS 64u /* interprocess events per session */
/* Hello's done flags (zpp.proto): ready flag i at this byte offset + 4 i */
#define ZPP_FLAGS_READY_OFF 256u

#ifdef __cplusplus
}
#endif
#endif
