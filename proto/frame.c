/*
 * frame.c — framing, budgeted unpacking and field validation of zpp.proto
 * messages (the contract is in frame.h).
 *
 * Nothing here touches a socket, logs or keeps state: the daemon, libzpp and
 * the fuzz targets feed it bytes. protobuf-c sizes its allocations from the
 * input (a 2-byte empty sub-message becomes a struct of ~100 bytes), so every
 * unpack runs under an allocator that refuses to go past a byte budget; the
 * accounting charges a fixed overhead per allocation to approximate what the
 * heap really spends. The same allocator serves the peer messages of
 * daemon/peer.c (zpp_unpack_budgeted, with its own overhead).
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#include "zpp.h"

/* What one malloc costs beyond the bytes asked for (glibc: 8-16 bytes). */
#define BUDGET_ALLOC_OVERHEAD 16u

/* Collective.count bound: count times the largest element size (4 bytes)
 * must fit in 64 bits with room to pad to a multiple of the world size. */
#define MAX_COUNT (UINT64_C(1) << 60)
#define BLOCK_QUANTUM 32u
#define BLOCK_MAX 8192u
#define CUDA_IPC_HANDLE_BYTES 64u
#define KNOWN_FLAGS                                                                                \
    (ZPP__COLL_FLAG__FLAG_FORCE_QUANT | ZPP__COLL_FLAG__FLAG_INVALIDATE_ALL |                      \
     ZPP__COLL_FLAG__FLAG_PUBLISH | ZPP__COLL_FLAG__FLAG_KEEP_SHARED)
/* content_key is shorter than this ("sha256:" + 64 hex digits); the daemon
 * checks its form. */
#define CONTENT_KEY_LIMIT 72u

typedef struct {
    size_t left;
    size_t overhead;
} budget_t;

static void *budget_alloc(void *data, size_t size)
{
    budget_t *b = data;
    if (size == 0)
        size = 1;
    if (size > b->left || b->left - size < b->overhead)
        return NULL;
    void *p = malloc(size);
    if (p)
        b->left -= size + b->overhead;
    return p;
}

static void budget_free(void *data, void *ptr)
{
    (void)data;
    free(ptr);
}

/* Unpacks any message under a budget; NULL when it does not unpack. */
ProtobufCMessage *zpp_unpack_budgeted(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                      size_t len, size_t budget, size_t overhead_per_alloc)
{
    budget_t b = {.left = budget, .overhead = overhead_per_alloc};
    ProtobufCAllocator alloc = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    /* protobuf-c reads nothing for len 0 but wants a non-NULL pointer. */
    static const uint8_t empty[1];
    return protobuf_c_message_unpack(desc, &alloc, len, data ? data : empty);
}

/* Frame: 4-byte big-endian body length, then the body. */
int zpp_frame_peek(const uint8_t *data, size_t len, size_t max_frame, size_t *body_off,
                   size_t *body_len)
{
    if (!data || len < ZPP_FRAME_HDR)
        return 0;
    uint32_t n = ((uint32_t)data[0] << 24) | ((uint32_t)data[1] << 16) | ((uint32_t)data[2] << 8) |
                 (uint32_t)data[3];
    if ((size_t)n > max_frame)
        return ZPP_EPROTO;
    if (len - ZPP_FRAME_HDR < (size_t)n)
        return 0;
    *body_off = ZPP_FRAME_HDR;
    *body_len = n;
    return 1;
}

/* Unpacks a Request under a budget; *out is set only on success. */
int zpp_request_unpack(const uint8_t *body, size_t len, size_t budget, Zpp__Request **out)
{
    if (!out || (!body && len))
        return ZPP_EINVAL;
    ProtobufCMessage *m =
        zpp_unpack_budgeted(&zpp__request__descriptor, body, len, budget, BUDGET_ALLOC_OVERHEAD);
    if (!m)
        return ZPP_EPROTO;
    *out = (Zpp__Request *)m;
    return 0;
}

/* Frees an unpacked Request; accepts NULL. */
void zpp_request_free(Zpp__Request *req)
{
    if (req)
        protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* Unpacks a Reply under a budget; *out is set only on success. */
int zpp_reply_unpack(const uint8_t *body, size_t len, size_t budget, Zpp__Reply **out)
{
    if (!out || (!body && len))
        return ZPP_EINVAL;
    ProtobufCMessage *m =
        zpp_unpack_budgeted(&zpp__reply__descriptor, body, len, budget, BUDGET_ALLOC_OVERHEAD);
    if (!m)
        return ZPP_EPROTO;
    *out = (Zpp__Reply *)m;
    return 0;
}

/* Frees an unpacked Reply; accepts NULL. */
void zpp_reply_free(Zpp__Reply *rep)
{
    if (rep)
        protobuf_c_message_free_unpacked(&rep->base, NULL);
}

static int pack_frame(const ProtobufCMessage *m, size_t max_frame, uint8_t **out, size_t *out_len)
{
    if (!m || !out || !out_len)
        return ZPP_EINVAL;
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > max_frame || n > UINT32_MAX)
        return ZPP_ELIMIT;
    uint8_t *buf = malloc(ZPP_FRAME_HDR + n);
    if (!buf)
        return ZPP_ENOMEM;
    buf[0] = (uint8_t)(n >> 24);
    buf[1] = (uint8_t)(n >> 16);
    buf[2] = (uint8_t)(n >> 8);
    buf[3] = (uint8_t)n;
    if (protobuf_c_message_pack(m, buf + ZPP_FRAME_HDR) != n) {
        free(buf);
        return ZPP_EPROTO;
    }
    *out = buf;
    *out_len = ZPP_FRAME_HDR + n;
    return 0;
}

/* Packs header + Request into one malloc'd buffer (caller frees). */
int zpp_request_pack(const Zpp__Request *req, size_t max_frame, uint8_t **out, size_t *out_len)
{
    return pack_frame(req ? &req->base : NULL, max_frame, out, out_len);
}

/* Packs header + Reply into one malloc'd buffer (caller frees). */
int zpp_reply_pack(const Zpp__Reply *rep, size_t max_frame, uint8_t **out, size_t *out_len)
{
    return pack_frame(rep ? &rep->base : NULL, max_frame, out, out_len);
}

/* ---- validation ---------------------------------------------------------- */

/* Unpacked strings are NUL-terminated by protobuf-c; "under" = strictly
 * shorter than the limit, so a daemon may copy into a char[limit]. */
static int str_ok(const char *s, size_t limit)
{
    return !s || strnlen(s, limit) < limit;
}

/* A peer address (host:port): at most 255 bytes of printable ASCII without
 * spaces, what the peer service checks it against before it dials or
 * names it to other nodes. NULL and "" are fine (no leader). */
static int addr_ok(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if ((unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f)
            return 0;
    return n < ZPP_MAX_ADDR;
}

static int str_empty(const char *s)
{
    return !s || !s[0];
}

#define CHECK(cond, code, msg)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            *why = (msg);                                                                          \
            return (code);                                                                         \
        }                                                                                          \
    } while (0)

#define ZPP_MAX_FLAGS_BYTES (64u << 10) /* Hello.flags_size cap: pinned by the daemon per session */

static int validate_hello(const Zpp__Hello *h, const char **why)
{
    CHECK(h->n_ready_events <= ZPP_MAX_EVENTS, ZPP_EINVAL, "hello.ready_events: too many events");
    for (size_t i = 0; i < h->n_ready_events; i++)
        CHECK(h->ready_events[i].len == CUDA_IPC_HANDLE_BYTES, ZPP_EINVAL,
              "hello.ready_events: each event handle must be 64 bytes");
    CHECK(h->flags_nfds <= 2, ZPP_EINVAL,
          "hello.flags_nfds: a flag array and at most one pipe");
    CHECK(h->nslots <= ZPP_MAX_EVENTS, ZPP_EINVAL, "hello.nslots: too many flag slots");
    CHECK(h->flag_bits == 0 || h->flag_bits == 32, ZPP_EINVAL, "hello.flag_bits: 32 (or 0)");
    if (h->flags_nfds) {
        CHECK(h->nslots >= 1 && h->nslots == h->n_ready_events, ZPP_EINVAL,
              "hello.nslots: one done flag per ready event");
        CHECK(h->flags_size >= ZPP_FLAGS_READY_OFF + 4u * (uint64_t)h->nslots &&
                  h->flags_size <= ZPP_MAX_FLAGS_BYTES,
              ZPP_EINVAL,
              "hello.flags_size: must hold the done and the ready flags (at most 64 KiB)");
    } else {
        CHECK(h->nslots == 0 && h->flags_size == 0, ZPP_EINVAL,
              "hello.nslots: flag slots without a flag array");
    }
    CHECK(h->role == ZPP__ROLE__ROLE_RANK || h->role == ZPP__ROLE__ROLE_ADMIN, ZPP_EINVAL,
          "hello.role: unknown role");
    CHECK(str_ok(h->job_id, ZPP_MAX_JOB_ID), ZPP_EINVAL, "hello.job_id: too long");
    CHECK(str_ok(h->gpu_uuid, ZPP_MAX_UUID), ZPP_EINVAL, "hello.gpu_uuid: too long");
    CHECK(addr_ok(h->leader_addr), ZPP_EINVAL,
          "hello.leader_addr: host:port, at most 255 bytes of printable ASCII without spaces");
    CHECK(str_ok(h->tenant_label, ZPP_MAX_LABEL), ZPP_EINVAL, "hello.tenant_label: too long");
    if (h->role == ZPP__ROLE__ROLE_ADMIN)
        return 0;
    CHECK(!str_empty(h->job_id), ZPP_EINVAL, "hello.job_id: empty");
    CHECK(h->world_size >= 1, ZPP_EINVAL, "hello.world_size: must be at least 1");
    CHECK(h->rank < h->world_size, ZPP_EINVAL, "hello.rank: not below world_size");
    CHECK(h->local_rank < h->world_size, ZPP_EINVAL, "hello.local_rank: not below world_size");
    CHECK(h->node_count >= 1, ZPP_EINVAL, "hello.node_count: must be at least 1");
    CHECK(h->world_size % h->node_count == 0, ZPP_EINVAL,
          "hello.node_count: does not divide world_size");
    uint32_t local_size = h->world_size / h->node_count;
    CHECK(h->local_rank < local_size, ZPP_EINVAL,
          "hello.local_rank: not below world_size / node_count");
    CHECK(h->rank % local_size == h->local_rank, ZPP_EINVAL,
          "hello.local_rank: rank must be node * (world_size / node_count) + local_rank");
    return 0;
}

static int validate_register(const Zpp__RegisterBuffer *r, const char **why)
{
    CHECK(r->length > 0, ZPP_EINVAL, "register_buffer.length: zero");
    CHECK(r->offset <= UINT64_MAX - r->length, ZPP_EINVAL,
          "register_buffer.offset: offset + length overflows");
    CHECK(r->ipc_handle.len == 0 || r->ipc_handle.len == CUDA_IPC_HANDLE_BYTES, ZPP_EINVAL,
          "register_buffer.ipc_handle: must be empty or 64 bytes");
    CHECK((r->nfds > 0) != (r->ipc_handle.len > 0), ZPP_EINVAL,
          "register_buffer: exactly one of nfds and ipc_handle must be given");
    if (r->n_chunk_sizes > 0) {
        CHECK(r->nfds == r->n_chunk_sizes, ZPP_EINVAL,
              "register_buffer.chunk_sizes: one size per descriptor");
        uint64_t total = 0;
        for (size_t i = 0; i < r->n_chunk_sizes; i++) {
            CHECK(r->chunk_sizes[i] > 0, ZPP_EINVAL, "register_buffer.chunk_sizes: zero size");
            CHECK(r->chunk_sizes[i] <= UINT64_MAX - total, ZPP_EINVAL,
                  "register_buffer.chunk_sizes: sum overflows");
            total += r->chunk_sizes[i];
        }
        CHECK(r->offset + r->length <= total, ZPP_ERANGE,
              "register_buffer: range past the end of the chunks");
    }
    CHECK(str_ok(r->gpu_uuid, ZPP_MAX_UUID), ZPP_EINVAL, "register_buffer.gpu_uuid: too long");
    return 0;
}

static int dtype_ok(Zpp__DType d)
{
    return d == ZPP__DTYPE__FP32 || d == ZPP__DTYPE__FP16 || d == ZPP__DTYPE__BF16;
}

static int validate_collective(const Zpp__Collective *c, const char **why)
{
    CHECK(c->op >= ZPP__OP__QWZ_ALLGATHER && c->op <= ZPP__OP__BARRIER, ZPP_EINVAL,
          "collective.op: unknown operation");
    int quantized = c->op == ZPP__OP__QWZ_ALLGATHER || c->op == ZPP__OP__QGZ_REDUCE_SCATTER;
    int moves_data = c->op != ZPP__OP__HPZ_INVALIDATE && c->op != ZPP__OP__BARRIER;
    int has_input = moves_data && c->op != ZPP__OP__HPZ_GATHER;
    int is_rs = c->op == ZPP__OP__QGZ_REDUCE_SCATTER || c->op == ZPP__OP__REDUCE_SCATTER;

    if (moves_data)
        CHECK(dtype_ok(c->dtype), ZPP_EINVAL, "collective.dtype: must be fp32, fp16 or bf16");
    else
        CHECK(c->dtype == ZPP__DTYPE__DTYPE_UNSPECIFIED || dtype_ok(c->dtype), ZPP_EINVAL,
              "collective.dtype: unknown dtype");
    CHECK(c->out_dtype == ZPP__DTYPE__DTYPE_UNSPECIFIED || dtype_ok(c->out_dtype), ZPP_EINVAL,
          "collective.out_dtype: unknown dtype");
    CHECK(c->reduce == ZPP__REDUCE_OP__SUM || c->reduce == ZPP__REDUCE_OP__MEAN, ZPP_EINVAL,
          "collective.reduce: unknown reduction");
    if (quantized)
        CHECK(c->bits == 8 || c->bits == 4, ZPP_EINVAL, "collective.bits: must be 8 or 4");
    else
        CHECK(c->bits == 0 || c->bits == 8 || c->bits == 4, ZPP_EINVAL,
              "collective.bits: must be 0, 8 or 4");
    CHECK(c->block % BLOCK_QUANTUM == 0, ZPP_EINVAL, "collective.block: not a multiple of 32");
    CHECK(c->block <= BLOCK_MAX, ZPP_EINVAL, "collective.block: larger than 8192");
    CHECK(c->count <= MAX_COUNT, ZPP_EINVAL, "collective.count: too large");
    if (moves_data)
        CHECK(c->count >= 1, ZPP_EINVAL, "collective.count: must be at least 1");
    CHECK(c->event_slot <= ZPP_MAX_EVENTS, ZPP_EINVAL, "collective.event_slot: out of range");
    CHECK((c->flags & ~(uint32_t)KNOWN_FLAGS) == 0, ZPP_EINVAL, "collective.flags: unknown flag");
    CHECK(str_ok(c->hpz_key, ZPP_MAX_KEY), ZPP_EINVAL, "collective.hpz_key: too long");
    CHECK(str_ok(c->content_key, CONTENT_KEY_LIMIT), ZPP_EINVAL,
          "collective.content_key: too long (\"sha256:\" + 64 hex digits)");
    /* A content key (shared hpZ replica) stands in for hpz_key. */
    int keyed = !str_empty(c->hpz_key) || !str_empty(c->content_key);
    if (c->op == ZPP__OP__HPZ_GATHER)
        CHECK(keyed, ZPP_EINVAL, "collective.hpz_key: hpZ gather needs a key or a content key");
    if (c->op == ZPP__OP__HPZ_INVALIDATE && !(c->flags & ZPP__COLL_FLAG__FLAG_INVALIDATE_ALL))
        CHECK(keyed, ZPP_EINVAL,
              "collective.hpz_key: invalidate needs a key, a content key or FLAG_INVALIDATE_ALL");
    if (!is_rs)
        CHECK(c->out_dtype == ZPP__DTYPE__DTYPE_UNSPECIFIED || c->out_dtype == c->dtype, ZPP_EINVAL,
              "collective.out_dtype: only reduce-scatters convert");
    if (has_input)
        CHECK(c->input != NULL, ZPP_EINVAL, "collective.input: missing");
    if (moves_data)
        CHECK(c->output != NULL, ZPP_EINVAL, "collective.output: missing");
    return 0;
}

/* Checks what a Request says about itself; *why gets a static message. */
int zpp_request_validate(const Zpp__Request *req, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    CHECK(req != NULL, ZPP_EINVAL, "no request");
    CHECK(req->version == ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION, ZPP_EVERSION,
          "request.version: protocol version not supported");
    switch (req->body_case) {
    case ZPP__REQUEST__BODY_HELLO:
        CHECK(req->hello != NULL, ZPP_EPROTO, "request.hello: missing");
        return validate_hello(req->hello, why);
    case ZPP__REQUEST__BODY_REGISTER_BUFFER:
        CHECK(req->register_buffer != NULL, ZPP_EPROTO, "request.register_buffer: missing");
        return validate_register(req->register_buffer, why);
    case ZPP__REQUEST__BODY_DEREGISTER_BUFFER:
        CHECK(req->deregister_buffer != NULL, ZPP_EPROTO, "request.deregister_buffer: missing");
        return 0;
    case ZPP__REQUEST__BODY_COLLECTIVE:
        CHECK(req->collective != NULL, ZPP_EPROTO, "request.collective: missing");
        return validate_collective(req->collective, why);
    case ZPP__REQUEST__BODY_STATUS:
    case ZPP__REQUEST__BODY_JOBS:
    case ZPP__REQUEST__BODY_CHECK:
    case ZPP__REQUEST__BODY_SESSIONS:
    case ZPP__REQUEST__BODY_STORE:
    case ZPP__REQUEST__BODY_METRICS:
    case ZPP__REQUEST__BODY_GOODBYE:
        return 0;
    case ZPP__REQUEST__BODY_DRAIN:
        CHECK(req->drain != NULL, ZPP_EPROTO, "request.drain: missing");
        return 0;
    default:
        *why = "request.body: not set or unknown";
        return ZPP_EPROTO;
    }
}
