/*
 * test_frame.c — the socket-free framing module (proto/frame.c): frame
 * boundaries, hostile bodies, the unpack budget, pack/unpack round trips,
 * and one named validation case per malformed field.
 */
#include "frame.h"
#include "test.h"
#include "zpp.h"

#define BIG_BUDGET (64u << 20)

/* ---- framing ---------------------------------------------------------------- */

static void test_peek_needs_whole_header(void)
{
    uint8_t hdr[4] = {0, 0, 0, 1};
    size_t off = 99, len = 99;
    for (size_t n = 0; n < 4; n++)
        ASSERT_EQ(zpp_frame_peek(hdr, n, 1024, &off, &len), 0);
    ASSERT_EQ(zpp_frame_peek(NULL, 0, 1024, &off, &len), 0);
    ASSERT_EQ(off, 99); /* untouched */
    ASSERT_EQ(len, 99);
}

static void test_peek_waits_for_truncated_body(void)
{
    uint8_t f[4 + 10] = {0, 0, 0, 10};
    size_t off = 0, len = 0;
    for (size_t n = 4; n < sizeof(f); n++)
        ASSERT_EQ(zpp_frame_peek(f, n, 1024, &off, &len), 0);
    ASSERT_EQ(zpp_frame_peek(f, sizeof(f), 1024, &off, &len), 1);
    ASSERT_EQ(off, ZPP_FRAME_HDR);
    ASSERT_EQ(len, 10);
}

static void test_peek_refuses_oversized_length(void)
{
    uint8_t f[4] = {0, 0, 4, 1}; /* 1025 */
    size_t off = 0, len = 0;
    ASSERT_EQ(zpp_frame_peek(f, 4, 1024, &off, &len), ZPP_EPROTO);
    uint8_t g[4] = {0xff, 0xff, 0xff, 0xff};
    ASSERT_EQ(zpp_frame_peek(g, 4, ZPP_FRAME_DEFAULT_MAX, &off, &len), ZPP_EPROTO);
    /* Refused from the header alone, before the body arrives. */
    uint8_t h[4] = {0, 0, 4, 0}; /* exactly 1024: allowed, needs the body */
    ASSERT_EQ(zpp_frame_peek(h, 4, 1024, &off, &len), 0);
}

static void test_peek_accepts_zero_length_body(void)
{
    uint8_t f[4] = {0, 0, 0, 0};
    size_t off = 9, len = 9;
    ASSERT_EQ(zpp_frame_peek(f, 4, 1024, &off, &len), 1);
    ASSERT_EQ(len, 0);
    Zpp__Request *req = NULL;
    ASSERT_EQ(zpp_request_unpack(f + off, len, 4096, &req), 0);
    const char *why = NULL;
    ASSERT_EQ(zpp_request_validate(req, &why), ZPP_EVERSION);
    zpp_request_free(req);
}

static void test_peek_finds_first_of_two_frames(void)
{
    uint8_t f[] = {0, 0, 0, 2, 'a', 'b', 0, 0, 0, 1, 'c'};
    size_t off = 0, len = 0;
    ASSERT_EQ(zpp_frame_peek(f, sizeof(f), 1024, &off, &len), 1);
    ASSERT_EQ(len, 2);
    ASSERT_EQ(zpp_frame_peek(f + off + len, sizeof(f) - off - len, 1024, &off, &len), 1);
    ASSERT_EQ(len, 1);
}

/* ---- unpacking ---------------------------------------------------------------- */

static Zpp__Collective *fill_collective(Zpp__Collective *c, Zpp__BufRef *in, Zpp__BufRef *out)
{
    Zpp__Collective c0 = ZPP__COLLECTIVE__INIT;
    Zpp__BufRef b0 = ZPP__BUF_REF__INIT;
    *c = c0;
    *in = b0;
    *out = b0;
    in->buffer_id = 3;
    in->offset = 128;
    out->buffer_id = 4;
    c->seq = 42;
    c->op = ZPP__OP__QGZ_REDUCE_SCATTER;
    c->dtype = ZPP__DTYPE__BF16;
    c->out_dtype = ZPP__DTYPE__FP32;
    c->count = UINT64_C(5000000000);
    c->bits = 4;
    c->block = 256;
    c->stages = 2;
    c->reduce = ZPP__REDUCE_OP__MEAN;
    c->input = in;
    c->output = out;
    c->flags = ZPP__COLL_FLAG__FLAG_FORCE_QUANT;
    c->timeout_ms = 5000;
    return c;
}

static void test_pack_unpack_round_trip_request(void)
{
    Zpp__Collective co;
    Zpp__BufRef in, out;
    fill_collective(&co, &in, &out);
    co.hpz_key = (char *)"layer.7.weight";
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = UINT64_MAX;
    req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
    req.collective = &co;
    uint8_t *buf = NULL;
    size_t len = 0, off = 0, blen = 0;
    ASSERT_EQ(zpp_request_pack(&req, ZPP_FRAME_DEFAULT_MAX, &buf, &len), 0);
    ASSERT_EQ(zpp_frame_peek(buf, len, ZPP_FRAME_DEFAULT_MAX, &off, &blen), 1);
    ASSERT_EQ(off + blen, len);
    Zpp__Request *r = NULL;
    ASSERT_EQ(zpp_request_unpack(buf + off, blen, 1u << 16, &r), 0);
    ASSERT_EQ(r->req_id == UINT64_MAX, 1);
    ASSERT_EQ(r->body_case, ZPP__REQUEST__BODY_COLLECTIVE);
    ASSERT_EQ(r->collective->count == UINT64_C(5000000000), 1);
    ASSERT_EQ(r->collective->op, ZPP__OP__QGZ_REDUCE_SCATTER);
    ASSERT_EQ(r->collective->bits, 4);
    ASSERT_EQ(r->collective->input->offset, 128);
    ASSERT_EQ(r->collective->output->buffer_id, 4);
    ASSERT_STR_EQ(r->collective->hpz_key, "layer.7.weight");
    const char *why = "unset";
    ASSERT_EQ(zpp_request_validate(r, &why), 0);
    zpp_request_free(r);
    free(buf);
}

static void test_pack_unpack_round_trip_reply(void)
{
    Zpp__CollectiveReply cr = ZPP__COLLECTIVE_REPLY__INIT;
    cr.algo = ZPP__ALGO__ALGO_QGZ_HIER;
    cr.bytes_inter = 12345;
    cr.seq = 9;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = 7;
    rep.code = ZPP_EMISMATCH;
    rep.message = (char *)"rank 3: count differs";
    rep.body_case = ZPP__REPLY__BODY_COLLECTIVE;
    rep.collective = &cr;
    uint8_t *buf = NULL;
    size_t len = 0;
    ASSERT_EQ(zpp_reply_pack(&rep, ZPP_FRAME_DEFAULT_MAX, &buf, &len), 0);
    Zpp__Reply *r = NULL;
    ASSERT_EQ(zpp_reply_unpack(buf + ZPP_FRAME_HDR, len - ZPP_FRAME_HDR, 1u << 16, &r), 0);
    ASSERT_EQ(r->code, ZPP_EMISMATCH); /* sint32 keeps the sign */
    ASSERT_STR_EQ(r->message, "rank 3: count differs");
    ASSERT_EQ(r->collective->algo, ZPP__ALGO__ALGO_QGZ_HIER);
    ASSERT_EQ(r->collective->bytes_inter, 12345);
    zpp_reply_free(r);
    free(buf);
}

static void test_pack_refuses_over_max_frame(void)
{
    char key[200];
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = 0;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.message = key;
    size_t body = protobuf_c_message_get_packed_size(&rep.base);
    uint8_t *buf = (uint8_t *)"sentinel";
    size_t len = 7;
    ASSERT_EQ(zpp_reply_pack(&rep, body - 1, &buf, &len), ZPP_ELIMIT);
    ASSERT_EQ(len, 7); /* untouched */
    ASSERT_EQ(zpp_reply_pack(&rep, body, &buf, &len), 0);
    ASSERT_EQ(len, body + ZPP_FRAME_HDR);
    /* What pack accepts at a limit, peek accepts at the same limit. */
    size_t off, blen;
    ASSERT_EQ(zpp_frame_peek(buf, len, body, &off, &blen), 1);
    free(buf);
    ASSERT_EQ(zpp_request_pack(NULL, 1024, &buf, &len), ZPP_EINVAL);
}

static void test_unpack_refuses_garbage(void)
{
    static const uint8_t junk[][8] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* endless varint */
        {0x0a, 0x7f, 'x'},                                /* field 1 as bytes: wrong wire type */
        {0x52, 0x05, 0x12, 0x10, 'a'},                    /* hello with truncated job_id */
        {0x07},                                           /* wire type 7 */
        {0x52, 0x80},                                     /* length varint cut */
    };
    static const size_t lens[] = {8, 3, 5, 1, 2};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        Zpp__Request *req = (Zpp__Request *)0x1;
        ASSERT_EQ(zpp_request_unpack(junk[i], lens[i], 1u << 16, &req), ZPP_EPROTO);
        ASSERT_EQ((uintptr_t)req, 1); /* untouched */
        Zpp__Reply *rep = NULL;
        ASSERT_EQ(zpp_reply_unpack(junk[i], lens[i], 1u << 16, &rep), ZPP_EPROTO);
    }
}

static void test_unpack_every_truncation_of_a_valid_body(void)
{
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = (char *)"job-truncate";
    h.world_size = 4;
    h.node_count = 2;
    h.gpu_uuid = (char *)"host";
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = 1;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    uint8_t *buf = NULL;
    size_t len = 0;
    ASSERT_EQ(zpp_request_pack(&req, 1024, &buf, &len), 0);
    int refused = 0;
    for (size_t n = 0; n < len - ZPP_FRAME_HDR; n++) {
        Zpp__Request *r = NULL;
        int rc = zpp_request_unpack(buf + ZPP_FRAME_HDR, n, 1u << 16, &r);
        ASSERT(rc == 0 || rc == ZPP_EPROTO);
        refused += rc != 0;
        zpp_request_free(r);
    }
    ASSERT_GT(refused, 0);
    free(buf);
}

static void test_budget_refuses_many_small_submessages(void)
{
    /* 20000 empty JobInfo entries: ~40 KB on the wire, megabytes unpacked. */
    size_t n = 20000;
    Zpp__JobInfo *jobs = calloc(n, sizeof(*jobs));
    Zpp__JobInfo **ptrs = calloc(n, sizeof(*ptrs));
    ASSERT(jobs && ptrs);
    for (size_t i = 0; i < n; i++) {
        Zpp__JobInfo j0 = ZPP__JOB_INFO__INIT;
        jobs[i] = j0;
        ptrs[i] = &jobs[i];
    }
    Zpp__JobsReply jr = ZPP__JOBS_REPLY__INIT;
    jr.n_jobs = n;
    jr.jobs = ptrs;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.body_case = ZPP__REPLY__BODY_JOBS;
    rep.jobs = &jr;
    uint8_t *buf = NULL;
    size_t len = 0;
    ASSERT_EQ(zpp_reply_pack(&rep, ZPP_FRAME_DEFAULT_MAX, &buf, &len), 0);
    ASSERT_LT(len, 64 * 1024);
    Zpp__Reply *r = NULL;
    ASSERT_EQ(zpp_reply_unpack(buf + 4, len - 4, 256 * 1024, &r), ZPP_EPROTO);
    ASSERT_EQ(zpp_reply_unpack(buf + 4, len - 4, BIG_BUDGET, &r), 0);
    ASSERT_EQ(r->jobs->n_jobs, n);
    zpp_reply_free(r);
    free(buf);
    free(ptrs);
    free(jobs);
}

static void test_budget_refuses_long_string_and_packed_array(void)
{
    size_t n = 100000;
    char *s = malloc(n + 1);
    ASSERT(s);
    memset(s, 'j', n);
    s[n] = 0;
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = s;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = 1;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    uint8_t *buf = NULL;
    size_t len = 0;
    ASSERT_EQ(zpp_request_pack(&req, ZPP_FRAME_DEFAULT_MAX, &buf, &len), 0);
    Zpp__Request *r = NULL;
    ASSERT_EQ(zpp_request_unpack(buf + 4, len - 4, 10000, &r), ZPP_EPROTO);
    ASSERT_EQ(zpp_request_unpack(buf + 4, len - 4, 4 * n, &r), 0);
    const char *why = NULL;
    ASSERT_EQ(zpp_request_validate(r, &why), ZPP_EINVAL);
    ASSERT_CONTAINS(why, "hello.job_id");
    zpp_request_free(r);
    free(buf);
    free(s);

    uint32_t *ranks = calloc(n, sizeof(*ranks));
    ASSERT(ranks);
    Zpp__JobInfo j = ZPP__JOB_INFO__INIT;
    j.n_joined_ranks = n;
    j.joined_ranks = ranks;
    Zpp__JobInfo *jp = &j;
    Zpp__JobsReply jr = ZPP__JOBS_REPLY__INIT;
    jr.n_jobs = 1;
    jr.jobs = &jp;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.body_case = ZPP__REPLY__BODY_JOBS;
    rep.jobs = &jr;
    ASSERT_EQ(zpp_reply_pack(&rep, ZPP_FRAME_DEFAULT_MAX, &buf, &len), 0);
    Zpp__Reply *rr = NULL;
    ASSERT_EQ(zpp_reply_unpack(buf + 4, len - 4, 64 * 1024, &rr), ZPP_EPROTO);
    ASSERT_EQ(zpp_reply_unpack(buf + 4, len - 4, BIG_BUDGET, &rr), 0);
    ASSERT_EQ(rr->jobs->jobs[0]->n_joined_ranks, n);
    zpp_reply_free(rr);
    free(buf);
    free(ranks);
}

static void test_free_accepts_null(void)
{
    zpp_request_free(NULL);
    zpp_reply_free(NULL);
}

/* ---- validation: one named case per malformed field --------------------------- */

typedef struct {
    Zpp__Request req;
    Zpp__Hello hello;
    Zpp__RegisterBuffer reg;
    Zpp__Collective coll;
    Zpp__BufRef in, out;
    uint8_t handle[64];
    uint64_t chunks[2];
    ProtobufCBinaryData events[ZPP_MAX_EVENTS + 1];
    char longstr[1024];
} fixture_t;

enum { K_HELLO, K_REG, K_COLL };

static void base(fixture_t *f, int kind)
{
    memset(f, 0, sizeof(*f));
    Zpp__Request r0 = ZPP__REQUEST__INIT;
    Zpp__Hello h0 = ZPP__HELLO__INIT;
    Zpp__RegisterBuffer g0 = ZPP__REGISTER_BUFFER__INIT;
    f->req = r0;
    f->hello = h0;
    f->reg = g0;
    memset(f->longstr, 'x', sizeof(f->longstr) - 1);
    f->chunks[0] = 4096;
    f->chunks[1] = 4096;
    for (size_t i = 0; i <= ZPP_MAX_EVENTS; i++) {
        f->events[i].len = 64;
        f->events[i].data = f->handle;
    }
    f->req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    f->req.req_id = 1;
    switch (kind) {
    case K_HELLO:
        f->hello.job_id = (char *)"job";
        f->hello.rank = 3;
        f->hello.world_size = 4;
        f->hello.local_rank = 1;
        f->hello.node_count = 2;
        f->hello.gpu_uuid = (char *)"host";
        f->req.body_case = ZPP__REQUEST__BODY_HELLO;
        f->req.hello = &f->hello;
        break;
    case K_REG:
        f->reg.offset = 0;
        f->reg.length = 4096;
        f->reg.nfds = 1;
        f->req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
        f->req.register_buffer = &f->reg;
        break;
    default:
        fill_collective(&f->coll, &f->in, &f->out);
        f->req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
        f->req.collective = &f->coll;
        break;
    }
}

#define VCASE(name, kind, code, needle, mutation)                                                  \
    static void mut_##name(fixture_t *f)                                                           \
    {                                                                                              \
        mutation;                                                                                  \
    }
#define VCASES(X)                                                                                  \
    X(version_zero, K_HELLO, ZPP_EVERSION, "version", f->req.version = 0)                          \
    X(version_future, K_COLL, ZPP_EVERSION, "version", f->req.version = 2)                         \
    X(body_not_set, K_HELLO, ZPP_EPROTO, "body", f->req.body_case = ZPP__REQUEST__BODY__NOT_SET)   \
    X(body_unknown, K_HELLO, ZPP_EPROTO, "body", f->req.body_case = 99)                            \
    X(hello_role_unknown, K_HELLO, ZPP_EINVAL, "hello.role", f->hello.role = 7)                    \
    X(hello_job_id_too_long, K_HELLO, ZPP_EINVAL, "hello.job_id", f->hello.job_id = f->longstr)    \
    X(hello_job_id_empty, K_HELLO, ZPP_EINVAL, "hello.job_id", f->hello.job_id = (char *)"")       \
    X(hello_world_size_zero, K_HELLO, ZPP_EINVAL, "hello.world_size", f->hello.world_size = 0)     \
    X(hello_rank_past_world, K_HELLO, ZPP_EINVAL, "hello.rank", f->hello.rank = 4)                 \
    X(hello_local_rank_past_world, K_HELLO, ZPP_EINVAL, "hello.local_rank",                        \
      f->hello.local_rank = 4)                                                                     \
    X(hello_node_count_zero, K_HELLO, ZPP_EINVAL, "hello.node_count", f->hello.node_count = 0)     \
    X(hello_node_count_not_divisor, K_HELLO, ZPP_EINVAL, "hello.node_count",                       \
      f->hello.node_count = 3)                                                                     \
    X(hello_local_rank_past_node, K_HELLO, ZPP_EINVAL, "hello.local_rank",                         \
      (f->hello.local_rank = 2, f->hello.rank = 2))                                                \
    X(hello_local_rank_disagrees, K_HELLO, ZPP_EINVAL, "hello.local_rank",                         \
      f->hello.local_rank = 0)                                                                     \
    X(hello_gpu_uuid_too_long, K_HELLO, ZPP_EINVAL, "hello.gpu_uuid",                              \
      f->hello.gpu_uuid = f->longstr)                                                              \
    X(hello_leader_addr_too_long, K_HELLO, ZPP_EINVAL, "hello.leader_addr",                        \
      f->hello.leader_addr = f->longstr)                                                           \
    X(hello_leader_addr_space, K_HELLO, ZPP_EINVAL, "hello.leader_addr",                           \
      f->hello.leader_addr = (char *)"10.0.0.1:7399 x")                                            \
    X(hello_leader_addr_control, K_HELLO, ZPP_EINVAL, "hello.leader_addr",                         \
      f->hello.leader_addr = (char *)"10.0.0.1:7399\n")                                            \
    X(hello_tenant_label_too_long, K_HELLO, ZPP_EINVAL, "hello.tenant_label",                      \
      f->hello.tenant_label = f->longstr)                                                          \
    X(register_length_zero, K_REG, ZPP_EINVAL, "register_buffer.length", f->reg.length = 0)        \
    X(register_range_overflows, K_REG, ZPP_EINVAL, "register_buffer.offset",                       \
      f->reg.offset = UINT64_MAX - 10)                                                             \
    X(register_handle_wrong_size, K_REG, ZPP_EINVAL, "register_buffer.ipc_handle",                 \
      (f->reg.nfds = 0, f->reg.ipc_handle.len = 10, f->reg.ipc_handle.data = f->handle))           \
    X(register_fd_and_handle, K_REG, ZPP_EINVAL, "exactly one",                                    \
      (f->reg.ipc_handle.len = 64, f->reg.ipc_handle.data = f->handle))                            \
    X(register_neither_fd_nor_handle, K_REG, ZPP_EINVAL, "exactly one", f->reg.nfds = 0)           \
    X(register_chunks_disagree_with_nfds, K_REG, ZPP_EINVAL, "register_buffer.chunk_sizes",        \
      (f->reg.n_chunk_sizes = 2, f->reg.chunk_sizes = f->chunks))                                  \
    X(register_chunk_size_zero, K_REG, ZPP_EINVAL, "register_buffer.chunk_sizes",                  \
      (f->reg.n_chunk_sizes = 1, f->reg.chunk_sizes = f->chunks, f->chunks[0] = 0))                \
    X(register_chunk_sizes_overflow, K_REG, ZPP_EINVAL, "register_buffer.chunk_sizes",             \
      (f->reg.nfds = 2, f->reg.n_chunk_sizes = 2, f->reg.chunk_sizes = f->chunks,                  \
       f->chunks[1] = UINT64_MAX))                                                                 \
    X(register_range_past_chunks, K_REG, ZPP_ERANGE, "past the end",                               \
      (f->reg.n_chunk_sizes = 1, f->reg.chunk_sizes = f->chunks, f->reg.offset = 1))               \
    X(hello_too_many_ready_events, K_HELLO, ZPP_EINVAL, "hello.ready_events",                      \
      (f->hello.n_ready_events = ZPP_MAX_EVENTS + 1, f->hello.ready_events = f->events))           \
    X(hello_ready_event_wrong_size, K_HELLO, ZPP_EINVAL, "hello.ready_events",                     \
      (f->hello.n_ready_events = 1, f->hello.ready_events = f->events, f->events[0].len = 63))     \
    X(coll_count_zero, K_COLL, ZPP_EINVAL, "collective.count", f->coll.count = 0)                  \
    X(coll_event_slot_out_of_range, K_COLL, ZPP_EINVAL, "collective.event_slot",                   \
      f->coll.event_slot = ZPP_MAX_EVENTS + 1)                                                     \
    X(register_gpu_uuid_too_long, K_REG, ZPP_EINVAL, "register_buffer.gpu_uuid",                   \
      f->reg.gpu_uuid = f->longstr)                                                                \
    X(coll_op_unspecified, K_COLL, ZPP_EINVAL, "collective.op", f->coll.op = 0)                    \
    X(coll_op_unknown, K_COLL, ZPP_EINVAL, "collective.op", f->coll.op = 99)                       \
    X(coll_dtype_unspecified, K_COLL, ZPP_EINVAL, "collective.dtype", f->coll.dtype = 0)           \
    X(coll_dtype_unknown, K_COLL, ZPP_EINVAL, "collective.dtype", f->coll.dtype = 9)               \
    X(coll_out_dtype_unknown, K_COLL, ZPP_EINVAL, "collective.out_dtype", f->coll.out_dtype = 4)   \
    X(coll_reduce_unknown, K_COLL, ZPP_EINVAL, "collective.reduce", f->coll.reduce = 2)            \
    X(coll_bits_five, K_COLL, ZPP_EINVAL, "collective.bits", f->coll.bits = 5)                     \
    X(coll_bits_zero_quantized, K_COLL, ZPP_EINVAL, "collective.bits", f->coll.bits = 0)           \
    X(coll_bits_sixteen_plain, K_COLL, ZPP_EINVAL, "collective.bits",                              \
      (f->coll.op = ZPP__OP__REDUCE_SCATTER, f->coll.bits = 16))                                   \
    X(coll_block_not_multiple_of_32, K_COLL, ZPP_EINVAL, "collective.block", f->coll.block = 33)   \
    X(coll_block_too_large, K_COLL, ZPP_EINVAL, "collective.block", f->coll.block = 8192 + 32)     \
    X(coll_count_too_large, K_COLL, ZPP_EINVAL, "collective.count", f->coll.count = UINT64_MAX)    \
    X(coll_flags_unknown, K_COLL, ZPP_EINVAL, "collective.flags", f->coll.flags = 16)              \
    X(coll_hpz_key_too_long, K_COLL, ZPP_EINVAL, "collective.hpz_key",                             \
      f->coll.hpz_key = f->longstr)                                                                \
    X(coll_content_key_too_long, K_COLL, ZPP_EINVAL, "collective.content_key",                     \
      f->coll.content_key = f->longstr)                                                            \
    X(coll_hpz_gather_without_key, K_COLL, ZPP_EINVAL, "collective.hpz_key",                       \
      f->coll.op = ZPP__OP__HPZ_GATHER)                                                            \
    X(coll_invalidate_without_key, K_COLL, ZPP_EINVAL, "collective.hpz_key",                       \
      (f->coll.op = ZPP__OP__HPZ_INVALIDATE, f->coll.flags = 0))                                   \
    X(coll_out_dtype_on_allgather, K_COLL, ZPP_EINVAL, "collective.out_dtype",                     \
      f->coll.op = ZPP__OP__ALLGATHER)                                                             \
    X(coll_input_missing, K_COLL, ZPP_EINVAL, "collective.input", f->coll.input = NULL)            \
    X(coll_output_missing, K_COLL, ZPP_EINVAL, "collective.output", f->coll.output = NULL)         \
    X(hello_flags_nfds_three, K_HELLO, ZPP_EINVAL, "hello.flags_nfds",                             \
      (f->hello.flags_nfds = 3, f->hello.nslots = 1, f->hello.flags_size = 260))                   \
    X(hello_nslots_too_many, K_HELLO, ZPP_EINVAL, "hello.nslots",                                  \
      (f->hello.flags_nfds = 1, f->hello.nslots = ZPP_MAX_EVENTS + 1,                              \
       f->hello.flags_size = 512))                                                                 \
    X(hello_flag_bits_sixteen, K_HELLO, ZPP_EINVAL, "hello.flag_bits", f->hello.flag_bits = 16)    \
    X(hello_flag_bits_one, K_HELLO, ZPP_EINVAL, "hello.flag_bits", f->hello.flag_bits = 1)         \
    X(hello_flag_bits_sixty_four, K_HELLO, ZPP_EINVAL, "hello.flag_bits",                          \
      f->hello.flag_bits = 64)                                                                     \
    X(hello_flags_array_without_slots, K_HELLO, ZPP_EINVAL, "hello.nslots",                        \
      (f->hello.flags_nfds = 1, f->hello.nslots = 0, f->hello.flags_size = 4096))                  \
    X(hello_flags_nslots_not_ready_events, K_HELLO, ZPP_EINVAL, "hello.nslots",                    \
      (f->hello.flags_nfds = 1, f->hello.nslots = 4, f->hello.flags_size = 272,                    \
       f->hello.n_ready_events = 3, f->hello.ready_events = f->events))                            \
    X(hello_flags_size_below_the_ready_flags, K_HELLO, ZPP_EINVAL, "hello.flags_size",             \
      (f->hello.flags_nfds = 1, f->hello.nslots = 4, f->hello.flags_size = 271,                    \
       f->hello.n_ready_events = 4, f->hello.ready_events = f->events))                            \
    X(hello_flags_size_zero_with_array, K_HELLO, ZPP_EINVAL, "hello.flags_size",                   \
      (f->hello.flags_nfds = 1, f->hello.nslots = 1, f->hello.flags_size = 0,                      \
       f->hello.n_ready_events = 1, f->hello.ready_events = f->events))                            \
    X(hello_flags_size_over_64_kib, K_HELLO, ZPP_EINVAL, "hello.flags_size",                       \
      (f->hello.flags_nfds = 1, f->hello.nslots = 1, f->hello.flags_size = (64u << 10) + 1,        \
       f->hello.n_ready_events = 1, f->hello.ready_events = f->events))                            \
    X(hello_nslots_without_flag_array, K_HELLO, ZPP_EINVAL, "hello.nslots", f->hello.nslots = 1)   \
    X(hello_flags_size_without_flag_array, K_HELLO, ZPP_EINVAL, "hello.nslots",                    \
      f->hello.flags_size = 4096)                                                                  \
    X(coll_flags_publish_with_unknown_bit, K_COLL, ZPP_EINVAL, "collective.flags",                 \
      f->coll.flags = ZPP__COLL_FLAG__FLAG_PUBLISH | 16)                                           \
    X(coll_content_key_one_past_sha256_form, K_COLL, ZPP_EINVAL, "collective.content_key",         \
      (f->longstr[72] = '\0', f->coll.content_key = f->longstr))                                   \
    X(coll_event_slot_huge, K_COLL, ZPP_EINVAL, "collective.event_slot",                           \
      f->coll.event_slot = UINT32_MAX)                                                             \
    X(coll_hpz_gather_empty_content_key, K_COLL, ZPP_EINVAL, "collective.hpz_key",                 \
      (f->coll.op = ZPP__OP__HPZ_GATHER, f->coll.content_key = (char *)""))                        \
    X(coll_invalidate_publish_flag_is_no_key, K_COLL, ZPP_EINVAL, "collective.hpz_key",            \
      (f->coll.op = ZPP__OP__HPZ_INVALIDATE, f->coll.flags = ZPP__COLL_FLAG__FLAG_PUBLISH))        \
    X(hello_ready_event_too_long, K_HELLO, ZPP_EINVAL, "hello.ready_events",                       \
      (f->hello.n_ready_events = 2, f->hello.ready_events = f->events, f->events[1].len = 65))     \
    X(hello_ready_event_empty, K_HELLO, ZPP_EINVAL, "hello.ready_events",                          \
      (f->hello.n_ready_events = 1, f->hello.ready_events = f->events, f->events[0].len = 0))

#define VROW(name, kind, code, needle, mutation) {#name, kind, code, needle, mut_##name},
VCASES(VCASE)

typedef struct {
    const char *name;
    int kind;
    int code;
    const char *needle;
    void (*mutate)(fixture_t *f);
} vcase_t;

static const vcase_t vcases[] = {VCASES(VROW)};

static void test_validate_accepts_good_requests(void)
{
    fixture_t f;
    const char *why = NULL;
    for (int k = K_HELLO; k <= K_COLL; k++) {
        base(&f, k);
        ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    }
    /* An admin hello needs no job. */
    base(&f, K_HELLO);
    f.hello.role = ZPP__ROLE__ROLE_ADMIN;
    f.hello.job_id = (char *)"";
    f.hello.world_size = 0;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* Barrier and invalidate-all carry no buffers and no dtype. */
    base(&f, K_COLL);
    f.coll.op = ZPP__OP__BARRIER;
    f.coll.dtype = 0;
    f.coll.out_dtype = 0;
    f.coll.input = f.coll.output = NULL;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.coll.op = ZPP__OP__HPZ_INVALIDATE;
    f.coll.flags = ZPP__COLL_FLAG__FLAG_INVALIDATE_ALL;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* A single rank; block at its bounds; a legacy handle alone. */
    base(&f, K_HELLO);
    f.hello.rank = f.hello.local_rank = 0;
    f.hello.world_size = f.hello.node_count = 1;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    base(&f, K_COLL);
    f.coll.block = 8192;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    base(&f, K_REG);
    f.reg.nfds = 0;
    f.reg.ipc_handle.len = 64;
    f.reg.ipc_handle.data = f.handle;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* VMM: two chunks, two descriptors, the range inside them. */
    base(&f, K_REG);
    f.reg.nfds = 2;
    f.reg.n_chunk_sizes = 2;
    f.reg.chunk_sizes = f.chunks;
    f.reg.offset = 4096;
    f.reg.length = 4096;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    base(&f, K_HELLO);
    f.hello.n_ready_events = ZPP_MAX_EVENTS;
    f.hello.ready_events = f.events;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    base(&f, K_COLL);
    f.coll.event_slot = ZPP_MAX_EVENTS;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    Zpp__Request st = ZPP__REQUEST__INIT;
    st.version = 1;
    st.body_case = ZPP__REQUEST__BODY_STATUS;
    st.status = &sq;
    ASSERT_EQ(zpp_request_validate(&st, NULL), 0);
}

/* The fields added for stream-memory-op flags (Hello) and shared hpZ
 * replicas (Collective), at and inside their bounds. */
static void test_validate_accepts_flag_array_and_content_key_fields(void)
{
    fixture_t f;
    const char *why = NULL;
    static const uint32_t bits[] = {0, 32};
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
        base(&f, K_HELLO);
        f.hello.flag_bits = bits[i];
        ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    }
    /* One flag array beside the event pool: the ready flags of nslots
     * slots end exactly at its end; the most slots; the largest array. */
    base(&f, K_HELLO);
    f.hello.flags_nfds = 1;
    f.hello.nslots = 1;
    f.hello.flags_size = 260;
    f.hello.flag_bits = 32;
    f.hello.n_ready_events = 1;
    f.hello.ready_events = f.events;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.hello.nslots = f.hello.n_ready_events = ZPP_MAX_EVENTS;
    f.hello.flags_size = 512;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.hello.flags_size = 64u << 10;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* with the pipe that says when the daemon is done with them */
    f.hello.flags_nfds = 2;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* An admin hello is held to the same flag rules (they come first). */
    base(&f, K_HELLO);
    f.hello.role = ZPP__ROLE__ROLE_ADMIN;
    f.hello.nslots = 1;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), ZPP_EINVAL);
    ASSERT_EQ(strstr(why, "hello.nslots") != NULL, 1);

    /* flag_value is not bounded: it grows with every call and wraps. */
    base(&f, K_COLL);
    f.coll.flag_value = UINT64_MAX;
    f.coll.event_slot = 1;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.coll.event_slot = 0;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);

    /* "sha256:" + 64 hex digits (71 bytes) is the longest content key the
     * framing lets through; its form is the daemon's to check, so any text
     * under the limit passes here. */
    char key[72];
    memcpy(key, "sha256:", 7);
    memset(key + 7, 'a', 64);
    key[71] = '\0';
    base(&f, K_COLL);
    f.coll.op = ZPP__OP__ALLGATHER;
    f.coll.out_dtype = ZPP__DTYPE__DTYPE_UNSPECIFIED;
    f.coll.bits = 0;
    f.coll.flags = ZPP__COLL_FLAG__FLAG_PUBLISH;
    f.coll.content_key = key;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.coll.op = ZPP__OP__QWZ_ALLGATHER;
    f.coll.bits = 8;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.coll.content_key = (char *)"NOT-A-KEY";
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* FLAG_PUBLISH with every other known flag. */
    f.coll.content_key = key;
    f.coll.flags = ZPP__COLL_FLAG__FLAG_PUBLISH | ZPP__COLL_FLAG__FLAG_FORCE_QUANT |
                   ZPP__COLL_FLAG__FLAG_INVALIDATE_ALL;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    /* A content key stands in for hpz_key on a read and a detach. */
    base(&f, K_COLL);
    f.coll.op = ZPP__OP__HPZ_GATHER;
    f.coll.out_dtype = ZPP__DTYPE__DTYPE_UNSPECIFIED;
    f.coll.bits = 0;
    f.coll.flags = 0;
    f.coll.input = NULL;
    f.coll.content_key = key;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
    f.coll.op = ZPP__OP__HPZ_INVALIDATE;
    f.coll.output = NULL;
    f.coll.count = 0;
    ASSERT_EQ(zpp_request_validate(&f.req, &why), 0);
}

static void test_validate_refuses_each_malformed_field(void)
{
    fixture_t f;
    for (size_t i = 0; i < sizeof(vcases) / sizeof(vcases[0]); i++) {
        const vcase_t *v = &vcases[i];
        base(&f, v->kind);
        v->mutate(&f);
        const char *why = NULL;
        int rc = zpp_request_validate(&f.req, &why);
        if (rc != v->code || !why || !strstr(why, v->needle)) {
            fprintf(stderr, "validate case %s: got %d (%s), want %d containing \"%s\"\n", v->name,
                    rc, why ? why : "(null)", v->code, v->needle);
            exit(1);
        }
    }
    ASSERT_EQ(zpp_request_validate(NULL, NULL), ZPP_EINVAL);
}

int main(void)
{
    test_peek_needs_whole_header();
    test_peek_waits_for_truncated_body();
    test_peek_refuses_oversized_length();
    test_peek_accepts_zero_length_body();
    test_peek_finds_first_of_two_frames();
    test_pack_unpack_round_trip_request();
    test_pack_unpack_round_trip_reply();
    test_pack_refuses_over_max_frame();
    test_unpack_refuses_garbage();
    test_unpack_every_truncation_of_a_valid_body();
    test_budget_refuses_many_small_submessages();
    test_budget_refuses_long_string_and_packed_array();
    test_free_accepts_null();
    test_validate_accepts_good_requests();
    test_validate_accepts_flag_array_and_content_key_fields();
    test_validate_refuses_each_malformed_field();
    printf("test_frame: %zu validation cases, all passed\n", sizeof(vcases) / sizeof(vcases[0]));
    return 0;
}
