/*
 * test_peer.c — the daemon <-> daemon gRPC service (daemon/peer.c): several
 * peer objects in this one process on 127.0.0.1:0, one uv loop. Job
 * formation through a parked Join, unreachable leaders and dead peers,
 * Abort and Heartbeat, hostile requests (sent raw, past the client-side
 * checks) and bad leader replies, the call cap, mutual TLS with
 * certificates made here by peer_certs.sh (and a certificate of another CA
 * refused), and a peer restarted on the same port.
 */
#ifndef ZPP_HAVE_GRPC
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "test_peer: built without gRPC: skipped\n");
    return 77;
}
#else

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <libgen.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include "peer.h"
#include "test.h"
#include "uv_wait.h"
#include "zpp.h"

static uv_loop_t loop;
static Zpp__Peer__Tenant tenant = {PROTOBUF_C_MESSAGE_INIT(&zpp__peer__tenant__descriptor), 1000,
                                   (char *)"team-a"};
static const struct peer_tenant ptenant = {1000, "team-a"};

/* ---- loop helpers ---------------------------------------------------------- */

static uint64_t run_until(const int *flag, uint64_t ms)
{
    return uv_wait_until(&loop, flag, ms);
}

static void pump(uint64_t ms)
{
    run_until(NULL, ms);
}

/* ---- a leader: parks Joins until all nodes are in ----------------------------- */

struct leader {
    uint32_t expect; /* node_count */
    struct peer_join_call *calls[8];
    char addrs[8][64];
    uint32_t ranks[8];
    uint32_t n;
    int joins, cancelled, heartbeats, aborts;
    int bad_reply; /* answer with a 100-byte id */
    int answer_rc;
    char abort_job[130], abort_reason[600], identity[128];
    uint32_t abort_from;
};

static void leader_answer_all(struct leader *L)
{
    uint8_t ids[3][PEER_NCCL_ID_BYTES];
    ProtobufCBinaryData bins[3];
    for (int i = 0; i < 3; i++) {
        memset(ids[i], 0xA0 + i, sizeof(ids[i]));
        bins[i].data = ids[i];
        bins[i].len = L->bad_reply && i == 1 ? 100 : sizeof(ids[i]);
    }
    Zpp__Peer__Member mem[8], *mp[8];
    for (uint32_t i = 0; i < L->n; i++) {
        Zpp__Peer__Member m0 = ZPP__PEER__MEMBER__INIT;
        mem[i] = m0;
        mem[i].node_rank = L->ranks[i];
        mem[i].address = L->addrs[i];
        mp[i] = &mem[i];
    }
    Zpp__Peer__JoinReply r = ZPP__PEER__JOIN_REPLY__INIT;
    r.n_nccl_ids = 3;
    r.nccl_ids = bins;
    r.n_members = L->n;
    r.members = mp;
    uint32_t n = L->n;
    L->n = 0;
    for (uint32_t i = 0; i < n; i++)
        L->answer_rc = peer_join_answer(L->calls[i], 0, NULL, &r);
}

static void on_join(void *ctx, struct peer_join_call *call, const Zpp__Peer__JoinRequest *req,
                    const struct peer_caller *from)
{
    struct leader *L = ctx;
    ASSERT(peer_join_call_request(call) == req);
    ASSERT(from && from->peer && from->identity);
    snprintf(L->identity, sizeof(L->identity), "%s", from->identity);
    L->joins++;
    ASSERT_LT(L->n, 8);
    L->calls[L->n] = call;
    L->ranks[L->n] = req->node_rank;
    snprintf(L->addrs[L->n], sizeof(L->addrs[0]), "%s", req->address);
    L->n++;
    if (L->n == L->expect)
        leader_answer_all(L);
}

static void on_join_cancelled(void *ctx, struct peer_join_call *call)
{
    struct leader *L = ctx;
    L->cancelled++;
    for (uint32_t i = 0; i < L->n; i++)
        if (L->calls[i] == call) {
            L->calls[i] = L->calls[--L->n];
            L->ranks[i] = L->ranks[L->n];
            memcpy(L->addrs[i], L->addrs[L->n], sizeof(L->addrs[0]));
            return;
        }
    ASSERT(!"cancelled a call the leader did not hold");
}

static int on_heartbeat(void *ctx, const Zpp__Peer__HeartbeatRequest *req,
                        const struct peer_caller *from, int *state, char *msg, size_t len)
{
    struct leader *L = ctx;
    L->heartbeats++;
    snprintf(L->identity, sizeof(L->identity), "%s", from->identity);
    if (!strcmp(req->job_id, "nojob")) {
        snprintf(msg, len, "no job %s here", req->job_id);
        return ZPP_ENOENT;
    }
    /* the sender's idle flag travels: answered as the IDLE state */
    *state = req->idle ? ZPP__PEER__JOB_STATE__JOB_STATE_IDLE : ZPP__PEER__JOB_STATE__JOB_STATE_RUNNING;
    return 0;
}

static int on_abort(void *ctx, const Zpp__Peer__AbortRequest *req, const struct peer_caller *from,
                    char *msg, size_t len)
{
    struct leader *L = ctx;
    (void)from;
    L->aborts++;
    snprintf(L->abort_job, sizeof(L->abort_job), "%s", req->job_id);
    snprintf(L->abort_reason, sizeof(L->abort_reason), "%s", req->reason);
    L->abort_from = req->from_node;
    snprintf(msg, len, "aborting");
    return 0;
}

static const struct peer_handlers handlers = {on_join, on_join_cancelled, on_heartbeat, on_abort};

static struct peer *start_peer(struct leader *L, const char *listen, const struct peer_config *tls)
{
    struct peer_config cfg;
    if (tls)
        cfg = *tls;
    else
        memset(&cfg, 0, sizeof(cfg));
    cfg.listen = listen;
    struct peer *p = NULL;
    char why[256] = "";
    int rc = peer_start(&loop, &cfg, &handlers, L, &p, why, sizeof(why));
    if (rc)
        fprintf(stderr, "peer_start: %s\n", why);
    ASSERT_EQ(rc, 0);
    ASSERT_GT(peer_port(p), 0);
    return p;
}

static void stop_peer(struct peer *p)
{
    peer_stop(p);
    pump(1); /* let uv_close free it */
}

static char *addr_of(struct peer *p, char *buf, size_t len)
{
    snprintf(buf, len, "127.0.0.1:%d", peer_port(p));
    return buf;
}

/* ---- client results --------------------------------------------------------- */

struct res {
    int done, code, state;
    char msg[1400];
    size_t n_ids, n_members;
    uint8_t id1;
    uint64_t t_done;
};

static void join_cb(void *arg, int code, const char *msg, const Zpp__Peer__JoinReply *reply)
{
    struct res *r = arg;
    ASSERT(!r->done);
    r->done = 1;
    r->code = code;
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
    ASSERT((reply != NULL) == (code == 0));
    if (reply) {
        r->n_ids = reply->n_nccl_ids;
        r->n_members = reply->n_members;
        r->id1 = reply->nccl_ids[1].data[0];
    }
    r->t_done = uv_now(&loop);
}

static void hb_cb(void *arg, int code, const char *msg, int state)
{
    struct res *r = arg;
    ASSERT(!r->done);
    r->done = 1;
    r->code = code;
    r->state = state;
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
}

static void abort_cb(void *arg, int code, const char *msg)
{
    struct res *r = arg;
    r->done = 1;
    r->code = code;
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
}

static Zpp__Peer__JoinRequest mkjoin(const char *job, uint32_t rank, uint32_t nodes,
                                     const char *addr)
{
    Zpp__Peer__JoinRequest r = ZPP__PEER__JOIN_REQUEST__INIT;
    r.job_id = (char *)job;
    r.tenant = &tenant;
    r.node_rank = rank;
    r.node_count = nodes;
    r.ranks_per_node = 2;
    r.world_size = 2 * nodes;
    r.topology = (char *)"2 gpus nvlink";
    r.address = (char *)addr;
    return r;
}

/* ---- tests ---------------------------------------------------------------------- */

static void test_join_parked_until_all_nodes_joined(void)
{
    struct leader L = {.expect = 3}, LB = {0}, LC = {0};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    struct peer *b = start_peer(&LB, "127.0.0.1:0", NULL);
    struct peer *c = start_peer(&LC, "127.0.0.1:0", NULL);
    char aa[64], ba[64], ca[64];
    addr_of(a, aa, sizeof(aa));
    addr_of(b, ba, sizeof(ba));
    addr_of(c, ca, sizeof(ca));
    struct res ra = {0}, rb = {0}, rc = {0};
    Zpp__Peer__JoinRequest ja = mkjoin("job-1", 0, 3, aa), jb = mkjoin("job-1", 1, 3, ba),
                           jc = mkjoin("job-1", 2, 3, ca);
    ASSERT_EQ(peer_join(a, aa, &ja, 5000, join_cb, &ra), 0); /* the leader joins itself */
    ASSERT_EQ(peer_join(b, aa, &jb, 5000, join_cb, &rb), 0);
    pump(300);
    ASSERT_EQ(L.joins, 2);        /* both arrived ... */
    ASSERT(!ra.done && !rb.done); /* ... and are parked */
    ASSERT_EQ(peer_join(c, aa, &jc, 5000, join_cb, &rc), 0);
    int *all = &rc.done;
    run_until(all, 5000);
    run_until(&ra.done, 1000);
    run_until(&rb.done, 1000);
    struct res *rs[3] = {&ra, &rb, &rc};
    for (int i = 0; i < 3; i++) {
        if (rs[i]->code)
            fprintf(stderr, "join %d: %s\n", i, rs[i]->msg);
        ASSERT_EQ(rs[i]->code, 0);
        ASSERT_EQ(rs[i]->n_ids, 3);
        ASSERT_EQ(rs[i]->id1, 0xA1);
        ASSERT_EQ(rs[i]->n_members, 3);
    }
    ASSERT_EQ(L.cancelled, 0);
    ASSERT_STR_EQ(L.identity, ""); /* insecure: no identity */
    stop_peer(c);
    stop_peer(b);
    stop_peer(a);
}

static void test_leader_unreachable_fails_within_deadline(void)
{
    struct leader L = {0};
    struct peer *dead = start_peer(&L, "127.0.0.1:0", NULL);
    char da[64];
    addr_of(dead, da, sizeof(da));
    stop_peer(dead); /* nothing listens there now */
    struct peer *b = start_peer(&L, "127.0.0.1:0", NULL);
    struct res r = {0};
    Zpp__Peer__JoinRequest j = mkjoin("job-2", 1, 2, "127.0.0.1:1");
    uv_update_time(&loop);
    uint64_t t0 = uv_now(&loop);
    ASSERT_EQ(peer_join(b, da, &j, 500, join_cb, &r), 0);
    ASSERT(!r.done); /* never called back from inside peer_join */
    run_until(&r.done, 3000);
    ASSERT(r.done);
    ASSERT_EQ(r.code, ZPP_EIO);
    ASSERT_CONTAINS(r.msg, da);
    ASSERT_CONTAINS(r.msg, "unreachable");
    ASSERT_GE(r.t_done - t0, 400);
    ASSERT_LE(r.t_done - t0, 1500);
    stop_peer(b);
}

static void test_join_not_answered_is_cancelled_on_both_sides(void)
{
    struct leader L = {.expect = 2};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r = {0};
    Zpp__Peer__JoinRequest j = mkjoin("job-3", 1, 2, "127.0.0.1:9");
    ASSERT_EQ(peer_join(a, aa, &j, 400, join_cb, &r), 0);
    run_until(&r.done, 3000);
    ASSERT_EQ(r.code, ZPP_ETIMEDOUT); /* reached, but no answer */
    ASSERT_CONTAINS(r.msg, "no answer within 400 ms");
    run_until(&L.cancelled, 2000);
    ASSERT_EQ(L.cancelled, 1);
    ASSERT_EQ(L.n, 0);
    stop_peer(a);
}

static void test_parked_join_cancelled_by_stop(void)
{
    struct leader L = {.expect = 9};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    struct peer *b = start_peer(&L, "127.0.0.1:0", NULL);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r = {0}, r2 = {0};
    Zpp__Peer__JoinRequest j = mkjoin("job-4", 1, 2, "127.0.0.1:9");
    ASSERT_EQ(peer_join(b, aa, &j, 5000, join_cb, &r), 0);
    run_until(&L.joins, 2000);
    ASSERT_EQ(L.joins, 1);
    /* b's own outgoing call is cancelled by b's stop: callback inside stop. */
    Zpp__Peer__JoinRequest j2 = mkjoin("job-4b", 1, 2, "127.0.0.1:9");
    ASSERT_EQ(peer_join(b, aa, &j2, 5000, join_cb, &r2), 0);
    pump(300);
    ASSERT_EQ(L.joins, 2);
    peer_stop(b);
    ASSERT(r.done && r2.done);
    ASSERT_EQ(r.code, ZPP_ECLOSED);
    ASSERT_EQ(peer_join(b, aa, &j2, 5000, join_cb, &r2), ZPP_ESTATE); /* freed only later */
    pump(1);
    run_until(&L.cancelled, 2000);
    for (int i = 0; i < 100 && L.cancelled < 2; i++)
        pump(10);
    ASSERT_EQ(L.cancelled, 2); /* the leader learnt that both callers left */
    peer_stop(a);
    ASSERT_EQ(L.n, 0);
    pump(1);
}

static void test_heartbeat_ok_and_to_dead_peer_fails(void)
{
    struct leader L = {0};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    struct peer *b = start_peer(&L, "127.0.0.1:0", NULL);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r = {0};
    ASSERT_EQ(peer_heartbeat(b, aa, "job-5", &ptenant, 1, 0, 0, 2000, hb_cb, &r), 0);
    run_until(&r.done, 3000);
    ASSERT_EQ(r.code, 0);
    ASSERT_EQ(r.state, ZPP__PEER__JOB_STATE__JOB_STATE_RUNNING);
    struct res ri = {0};
    ASSERT_EQ(peer_heartbeat(b, aa, "job-5", &ptenant, 1, 1, 0, 2000, hb_cb, &ri), 0);
    run_until(&ri.done, 3000);
    ASSERT_EQ(ri.code, 0);
    ASSERT_EQ(ri.state, ZPP__PEER__JOB_STATE__JOB_STATE_IDLE);
    struct res rn = {0};
    ASSERT_EQ(peer_heartbeat(b, aa, "nojob", &ptenant, 1, 0, 0, 2000, hb_cb, &rn), 0);
    run_until(&rn.done, 3000);
    ASSERT_EQ(rn.code, ZPP_ENOENT);
    ASSERT_CONTAINS(rn.msg, "no job nojob here");
    ASSERT_CONTAINS(rn.msg, aa);

    /* Round trip on loopback, for docs/peers.md (printed, not asserted). */
    enum { N_RTT = 200 };
    static uint64_t rtt[N_RTT];
    for (int i = 0; i < N_RTT; i++) {
        struct res rr = {0};
        uint64_t t = uv_hrtime();
        ASSERT_EQ(peer_heartbeat(b, aa, "job-5", &ptenant, 1, 0, 0, 2000, hb_cb, &rr), 0);
        while (!rr.done)
            uv_run(&loop, UV_RUN_ONCE);
        rtt[i] = uv_hrtime() - t;
        ASSERT_EQ(rr.code, 0);
    }
    for (int i = 1; i < N_RTT; i++) /* insertion sort: 200 values */
        for (int k = i; k > 0 && rtt[k - 1] > rtt[k]; k--) {
            uint64_t x = rtt[k];
            rtt[k] = rtt[k - 1];
            rtt[k - 1] = x;
        }
    fprintf(stderr, "  heartbeat round trip: median %llu us, p90 %llu us (%d calls)\n",
            (unsigned long long)rtt[N_RTT / 2] / 1000,
            (unsigned long long)rtt[N_RTT * 9 / 10] / 1000, N_RTT);

    stop_peer(a);
    struct res rd = {0};
    uv_update_time(&loop);
    uint64_t t0 = uv_now(&loop);
    ASSERT_EQ(peer_heartbeat(b, aa, "job-5", &ptenant, 1, 0, 0, 500, hb_cb, &rd), 0);
    uint64_t spent = run_until(&rd.done, 3000);
    ASSERT_EQ(rd.code, ZPP_EIO);
    ASSERT_CONTAINS(rd.msg, aa);
    ASSERT_LE(spent, 1500);
    (void)t0;
    /* Bad arguments are refused at once; the callback never runs. */
    ASSERT_EQ(peer_heartbeat(b, aa, "bad job", &ptenant, 1, 0, 0, 500, hb_cb, &rd), ZPP_EINVAL);
    ASSERT_EQ(peer_heartbeat(b, "", "job-5", &ptenant, 1, 0, 0, 500, hb_cb, &rd), ZPP_EINVAL);
    stop_peer(b);
}

static void test_abort_delivered(void)
{
    struct leader L = {0};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    struct peer *b = start_peer(&L, "127.0.0.1:0", NULL);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r = {0};
    ASSERT_EQ(peer_abort_send(b, aa, "job-6", &ptenant, "rank 3 died\n(SIGKILL)", 1, 0, abort_cb, &r),
              0);
    run_until(&r.done, 3000);
    ASSERT_EQ(r.code, 0);
    ASSERT_EQ(L.aborts, 1);
    ASSERT_STR_EQ(L.abort_job, "job-6");
    ASSERT_STR_EQ(L.abort_reason, "rank 3 died?(SIGKILL)"); /* sanitised */
    ASSERT_EQ(L.abort_from, 1);
    /* Fire and forget: no callback at all. */
    ASSERT_EQ(peer_abort_send(b, aa, "job-6", &ptenant, "again", 1, 0, NULL, NULL), 0);
    for (int i = 0; i < 200 && L.aborts < 2; i++)
        pump(10);
    ASSERT_EQ(L.aborts, 2);
    stop_peer(b);
    stop_peer(a);
}

/* A raw unary call from this test, past every client-side check. Returns
 * the gRPC status; *code/msg from the reply (fields 1 and 2). */
static grpc_status_code raw_call(const char *addr, const char *method, const uint8_t *data,
                                 size_t len, int *code, char *msg, size_t msglen)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(addr, cr, NULL);
    gpr_timespec dl =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(3000, GPR_TIMESPAN));
    grpc_call *call =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                 grpc_slice_from_static_string(method), NULL, dl, NULL);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)data, len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&s, 1), *recv = NULL;
    grpc_slice_unref(s);
    grpc_metadata_array mi, mt;
    grpc_metadata_array_init(&mi);
    grpc_metadata_array_init(&mt);
    grpc_status_code st = GRPC_STATUS_UNKNOWN;
    grpc_slice details;
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &mi;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &mt;
    ops[5].data.recv_status_on_client.status = &st;
    ops[5].data.recv_status_on_client.status_details = &details;
    int tag = 1;
    ASSERT_EQ(grpc_call_start_batch(call, ops, 6, &tag, NULL), GRPC_CALL_OK);
    /* The server answers from our loop: keep it turning while we wait. */
    for (;;) {
        uv_run(&loop, UV_RUN_NOWAIT);
        grpc_event ev = grpc_completion_queue_next(
            cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(5, GPR_TIMESPAN)),
            NULL);
        if (ev.type == GRPC_OP_COMPLETE)
            break;
    }
    *code = 1;
    msg[0] = 0;
    if (st == GRPC_STATUS_OK && recv) {
        grpc_byte_buffer_reader rd;
        ASSERT(grpc_byte_buffer_reader_init(&rd, recv));
        grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        Zpp__Peer__AbortReply *r =
            zpp__peer__abort_reply__unpack(NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
        ASSERT(r);
        *code = r->code;
        snprintf(msg, msglen, "%s", r->message);
        zpp__peer__abort_reply__free_unpacked(r, NULL);
        grpc_slice_unref(all);
    }
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&mi);
    grpc_metadata_array_destroy(&mt);
    grpc_call_unref(call);
    grpc_channel_destroy(ch);
    grpc_channel_credentials_release(cr);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return st;
}

static void expect_join_refused(const char *addr, Zpp__Peer__JoinRequest *j, int code,
                                const char *needle)
{
    size_t n = zpp__peer__join_request__get_packed_size(j);
    uint8_t *buf = malloc(n + 1);
    zpp__peer__join_request__pack(j, buf);
    int got;
    char msg[1100];
    ASSERT_EQ(raw_call(addr, "/zpp.peer.Peer/Join", buf, n, &got, msg, sizeof(msg)),
              GRPC_STATUS_OK);
    free(buf);
    if (got != code)
        fprintf(stderr, "expected %s, got %d: %s\n", zpp_err_name(code), got, msg);
    ASSERT_EQ(got, code);
    ASSERT_CONTAINS(msg, needle);
}

static void test_join_with_bad_fields_refused(void)
{
    struct leader L = {.expect = 9};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    Zpp__Peer__JoinRequest j;
    char longid[201];
    memset(longid, 'x', 200);
    longid[200] = 0;

#define BAD(field_stmt, code, needle)                                                              \
    do {                                                                                           \
        j = mkjoin("job-7", 1, 2, "127.0.0.1:9");                                                  \
        j.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;                                         \
        field_stmt;                                                                                \
        expect_join_refused(aa, &j, code, needle);                                                 \
    } while (0)
    BAD(j.version = 99, ZPP_EVERSION, "version 99");
    BAD(j.job_id = longid, ZPP_EINVAL, "job_id");
    BAD(j.job_id = (char *)"job 7", ZPP_EINVAL, "job_id");
    BAD(j.job_id = (char *)"", ZPP_EINVAL, "job_id");
    BAD(j.tenant = NULL, ZPP_EINVAL, "tenant");
    BAD(j.node_rank = 2, ZPP_EINVAL, "node_rank 2: must be below node_count 2");
    BAD(j.node_count = 0, ZPP_EINVAL, "node_count");
    BAD(j.node_count = 100000, ZPP_EINVAL, "node_count");
    BAD(j.ranks_per_node = 0, ZPP_EINVAL, "ranks_per_node");
    BAD(j.world_size = 5, ZPP_EINVAL, "world_size 5");
    BAD(j.address = (char *)"", ZPP_EINVAL, "address");
    BAD(j.address = (char *)"10.0.0.1:1\n", ZPP_EINVAL, "address");
    BAD(j.topology = (char *)"nv\x01link", ZPP_EINVAL, "topology");
#undef BAD
    /* Bytes that are no JoinRequest at all. */
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    int got;
    char msg[1100];
    ASSERT_EQ(raw_call(aa, "/zpp.peer.Peer/Join", junk, sizeof(junk), &got, msg, sizeof(msg)),
              GRPC_STATUS_OK);
    ASSERT_EQ(got, ZPP_EPROTO);
    ASSERT_CONTAINS(msg, "does not unpack");
    /* Over the message limit: gRPC itself refuses it. */
    size_t big = PEER_DEFAULT_MAX_MESSAGE + 100;
    uint8_t *huge = calloc(1, big);
    ASSERT_EQ(raw_call(aa, "/zpp.peer.Peer/Join", huge, big, &got, msg, sizeof(msg)),
              GRPC_STATUS_RESOURCE_EXHAUSTED);
    free(huge);
    /* An unknown method. */
    ASSERT_EQ(raw_call(aa, "/zpp.peer.Peer/Nope", junk, 1, &got, msg, sizeof(msg)),
              GRPC_STATUS_UNIMPLEMENTED);
    ASSERT_EQ(L.joins, 0); /* the handler never saw any of them */

    /* The client-side twin of the checks: refused before sending. */
    struct res r = {0};
    j = mkjoin("job-7", 2, 2, "127.0.0.1:9");
    ASSERT_EQ(peer_join(a, aa, &j, 1000, join_cb, &r), ZPP_EINVAL);
    pump(20);
    ASSERT(!r.done);
    stop_peer(a);
}

static void test_bad_leader_reply_refused(void)
{
    struct leader L = {.expect = 1, .bad_reply = 1};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r = {0};
    Zpp__Peer__JoinRequest j = mkjoin("job-8", 0, 1, aa);
    ASSERT_EQ(peer_join(a, aa, &j, 2000, join_cb, &r), 0);
    run_until(&r.done, 3000);
    ASSERT_EQ(L.answer_rc, ZPP_EINVAL);
    ASSERT_EQ(r.code, ZPP_EINVAL);
    ASSERT_CONTAINS(r.msg, "nccl_ids[1]: 100 bytes, expected 128");
    stop_peer(a);
}

static void test_call_cap_refuses_extra_calls(void)
{
    struct leader L = {.expect = 9};
    struct peer_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.max_calls = 2;
    cfg.max_parked = 2; /* by default at least PEER_MAX_NODES */
    struct peer *a = start_peer(&L, "127.0.0.1:0", &cfg);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r[3];
    memset(r, 0, sizeof(r));
    for (uint32_t i = 0; i < 3; i++) {
        Zpp__Peer__JoinRequest j = mkjoin("job-9", i, 9, "127.0.0.1:9");
        ASSERT_EQ(peer_join(a, aa, &j, 3000, join_cb, &r[i]), 0);
        pump(100);
    }
    ASSERT_EQ(L.joins, 2);
    ASSERT(r[2].done);
    ASSERT_EQ(r[2].code, ZPP_ELIMIT);
    ASSERT_CONTAINS(r[2].msg, "too many parked Join calls");
    /* The parked Joins fill only their own cap: a Heartbeat and an Abort
     * are still answered (before, both got ZPP_ELIMIT, and a member could
     * be taken for dead while jobs formed). */
    struct res hb = {0}, ab = {0};
    ASSERT_EQ(peer_heartbeat(a, aa, "job-5", &ptenant, 1, 0, 0, 2000, hb_cb, &hb), 0);
    run_until(&hb.done, 3000);
    ASSERT_EQ(hb.code, 0);
    ASSERT_EQ(peer_abort_send(a, aa, "job-9", &ptenant, "test", 1, 0, abort_cb, &ab), 0);
    run_until(&ab.done, 3000);
    ASSERT_EQ(ab.code, 0);
    peer_stop(a); /* cancels the two parked ones on both sides */
    ASSERT_EQ(L.cancelled, 2);
    ASSERT(r[0].done && r[1].done);
    ASSERT_EQ(r[0].code, ZPP_ECLOSED);
    pump(1);
}

static void test_join_parked_too_long_times_out(void)
{
    struct leader L = {.expect = 9};
    struct peer_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.max_join_wait_ms = 200; /* checked by a 1 s sweep */
    struct peer *a = start_peer(&L, "127.0.0.1:0", &cfg);
    char aa[64];
    addr_of(a, aa, sizeof(aa));
    struct res r = {0};
    Zpp__Peer__JoinRequest j = mkjoin("job-10", 1, 2, "127.0.0.1:9");
    ASSERT_EQ(peer_join(a, aa, &j, 5000, join_cb, &r), 0);
    run_until(&r.done, 3000);
    ASSERT_EQ(r.code, ZPP_ETIMEDOUT);
    ASSERT_CONTAINS(r.msg, "the job did not form within 200 ms");
    ASSERT_EQ(L.cancelled, 1);
    ASSERT_EQ(L.n, 0);
    stop_peer(a);
}

static void test_start_refuses_bad_config_and_taken_port(void)
{
    struct leader L = {0};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL), *b = NULL;
    char listen[64], why[256];
    addr_of(a, listen, sizeof(listen));
    struct peer_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.listen = listen; /* taken by a: no silent SO_REUSEPORT sharing */
    ASSERT_EQ(peer_start(&loop, &cfg, &handlers, &L, &b, why, sizeof(why)), ZPP_EIO);
    ASSERT(b == NULL);
    ASSERT_CONTAINS(why, listen);
    cfg.listen = "";
    ASSERT_EQ(peer_start(&loop, &cfg, &handlers, &L, &b, why, sizeof(why)), ZPP_EINVAL);
    cfg.listen = "127.0.0.1:0";
    cfg.use_tls = 1; /* without files */
    ASSERT_EQ(peer_start(&loop, &cfg, &handlers, &L, &b, why, sizeof(why)), ZPP_EINVAL);
    ASSERT_CONTAINS(why, "ca_file");
    ASSERT(b == NULL);
    pump(1);
    stop_peer(a);
}

/* ---- TLS -------------------------------------------------------------------------- */

static char certdir[128];

static int make_certs(void)
{
    if (system("openssl version >/dev/null 2>&1") != 0)
        return 0;
    char script[1024];
    snprintf(script, sizeof(script), "%s", __FILE__);
    snprintf(certdir, sizeof(certdir), "/tmp/zpp-peer-certs-XXXXXX");
    ASSERT(mkdtemp(certdir));
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "sh '%s/peer_certs.sh' '%s'", dirname(script), certdir);
    ASSERT_EQ(system(cmd), 0);
    return 1;
}

static void rm_certs(void)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", certdir);
    ASSERT_EQ(system(cmd), 0);
}

static struct peer_config tls_cfg(char paths[3][192], const char *ca, const char *node)
{
    struct peer_config c;
    memset(&c, 0, sizeof(c));
    c.use_tls = 1;
    snprintf(paths[0], 192, "%s/%s.pem", certdir, ca);
    snprintf(paths[1], 192, "%s/%s.pem", certdir, node);
    snprintf(paths[2], 192, "%s/%s.key", certdir, node);
    c.tls.ca_file = paths[0];
    c.tls.cert_file = paths[1];
    c.tls.key_file = paths[2];
    return c;
}

static void test_mutual_tls_works_and_other_ca_refused(void)
{
    if (!make_certs()) {
        fprintf(stderr, "SKIP tls: no openssl\n");
        return;
    }
    char pa[3][192], pb[3][192], pi[3][192];
    struct peer_config ca = tls_cfg(pa, "ca1", "node-a"), cb = tls_cfg(pb, "ca1", "node-b");
    /* The intruder trusts our CA (it would accept our server) but shows a
     * certificate of another CA. */
    struct peer_config ci = tls_cfg(pi, "ca1", "intruder");
    ci.tls.ca_file = pa[0];
    struct leader L = {.expect = 2}, LB = {0}, LI = {0};
    struct peer *a = start_peer(&L, "127.0.0.1:0", &ca);
    struct peer *b = start_peer(&LB, "127.0.0.1:0", &cb);
    struct peer *in = start_peer(&LI, "127.0.0.1:0", &ci);
    char aa[64], ba[64];
    addr_of(a, aa, sizeof(aa));
    addr_of(b, ba, sizeof(ba));

    struct res ra = {0}, rb = {0};
    Zpp__Peer__JoinRequest ja = mkjoin("job-tls", 0, 2, aa), jb = mkjoin("job-tls", 1, 2, ba);
    ASSERT_EQ(peer_join(a, aa, &ja, 5000, join_cb, &ra), 0);
    ASSERT_EQ(peer_join(b, aa, &jb, 5000, join_cb, &rb), 0);
    run_until(&ra.done, 6000);
    run_until(&rb.done, 6000);
    if (ra.code || rb.code)
        fprintf(stderr, "tls join: %s / %s\n", ra.msg, rb.msg);
    ASSERT_EQ(ra.code, 0);
    ASSERT_EQ(rb.code, 0);
    ASSERT_EQ(rb.n_members, 2);
    ASSERT(strlen(L.identity) > 0); /* the verified client certificate */

    struct res rh = {0};
    ASSERT_EQ(peer_heartbeat(b, aa, "job-tls", &ptenant, 1, 0, 0, 2000, hb_cb, &rh), 0);
    run_until(&rh.done, 3000);
    ASSERT_EQ(rh.code, 0);

    struct res ri = {0};
    uv_update_time(&loop);
    ASSERT_EQ(peer_heartbeat(in, aa, "job-tls", &ptenant, 1, 0, 0, 1000, hb_cb, &ri), 0);
    uint64_t spent = run_until(&ri.done, 4000);
    ASSERT(ri.done);
    ASSERT_EQ(ri.code, ZPP_EIO);
    ASSERT_CONTAINS(ri.msg, aa);
    ASSERT_CONTAINS(ri.msg, "TLS");
    ASSERT_LE(spent, 2500);
    ASSERT_EQ(L.heartbeats, 1); /* the intruder never reached the handler */

    /* An insecure client cannot talk to a TLS peer either. */
    struct leader LP = {0};
    struct peer *plain = start_peer(&LP, "127.0.0.1:0", NULL);
    struct res rp = {0};
    ASSERT_EQ(peer_heartbeat(plain, aa, "job-tls", &ptenant, 1, 0, 0, 500, hb_cb, &rp), 0);
    run_until(&rp.done, 3000);
    ASSERT_EQ(rp.code, ZPP_EIO);
    ASSERT_EQ(L.heartbeats, 1);

    /* A missing key file is a clear start error. */
    struct peer_config bad = ca;
    bad.tls.key_file = "/nonexistent/key.pem";
    bad.listen = "127.0.0.1:0";
    struct peer *nope = NULL;
    char why[256];
    ASSERT_EQ(peer_start(&loop, &bad, &handlers, &L, &nope, why, sizeof(why)), ZPP_EIO);
    ASSERT(nope == NULL);
    ASSERT_CONTAINS(why, "/nonexistent/key.pem");

    stop_peer(plain);
    stop_peer(in);
    stop_peer(b);
    stop_peer(a);
    rm_certs();
}

/* ---- restart ------------------------------------------------------------------------ */

static void test_restart_same_port_then_join_works(void)
{
    struct leader L = {.expect = 1}, LB = {0};
    struct peer *a = start_peer(&L, "127.0.0.1:0", NULL);
    struct peer *b = start_peer(&LB, "127.0.0.1:0", NULL);
    char aa[64], listen[64];
    addr_of(a, aa, sizeof(aa));
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", peer_port(a));
    struct res r1 = {0};
    ASSERT_EQ(peer_heartbeat(b, aa, "job-r", &ptenant, 1, 0, 0, 2000, hb_cb, &r1), 0);
    run_until(&r1.done, 3000);
    ASSERT_EQ(r1.code, 0); /* b now has a connected channel to a */

    stop_peer(a);
    struct res r2 = {0};
    ASSERT_EQ(peer_heartbeat(b, aa, "job-r", &ptenant, 1, 0, 0, 300, hb_cb, &r2), 0);
    run_until(&r2.done, 2000);
    ASSERT_EQ(r2.code, ZPP_EIO); /* b's channel is now failing and backing off */
    pump(600);                   /* ... for a while */

    struct leader L2 = {.expect = 1};
    struct peer *a2 = start_peer(&L2, listen, NULL);
    ASSERT_EQ(peer_port(a2), atoi(strrchr(listen, ':') + 1));
    struct res r3 = {0};
    Zpp__Peer__JoinRequest j = mkjoin("job-r2", 0, 1, "127.0.0.1:9");
    uv_update_time(&loop);
    uint64_t t0 = uv_now(&loop);
    ASSERT_EQ(peer_join(b, aa, &j, 5000, join_cb, &r3), 0);
    run_until(&r3.done, 6000);
    if (r3.code)
        fprintf(stderr, "join after restart: %s\n", r3.msg);
    ASSERT_EQ(r3.code, 0);
    ASSERT_LE(r3.t_done - t0, 2000);
    fprintf(stderr, "  join after restart answered in %llu ms\n",
            (unsigned long long)(r3.t_done - t0));
    stop_peer(b);
    stop_peer(a2);
}

/* ---- main ----------------------------------------------------------------------------- */

static void log_sink(void *arg, int level, const char *msg)
{
    int *n = arg;
    __atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
    if (level <= 1 || getenv("PEER_TEST_VERBOSE"))
        fprintf(stderr, "  [log %d] %s\n", level, msg);
}

#define RUN(t)                                                                                     \
    do {                                                                                           \
        uv_update_time(&loop);                                                                     \
        uint64_t t0_ = uv_now(&loop);                                                              \
        t();                                                                                       \
        uv_update_time(&loop);                                                                     \
        fprintf(stderr, "ok %s (%llu ms)\n", #t, (unsigned long long)(uv_now(&loop) - t0_));       \
    } while (0)

int main(void)
{
    static int log_lines;
    peer_set_log(log_sink, &log_lines);
    ASSERT_EQ(uv_loop_init(&loop), 0);
    RUN(test_join_parked_until_all_nodes_joined);
    RUN(test_leader_unreachable_fails_within_deadline);
    RUN(test_join_not_answered_is_cancelled_on_both_sides);
    RUN(test_parked_join_cancelled_by_stop);
    RUN(test_heartbeat_ok_and_to_dead_peer_fails);
    RUN(test_abort_delivered);
    RUN(test_join_with_bad_fields_refused);
    RUN(test_bad_leader_reply_refused);
    RUN(test_call_cap_refuses_extra_calls);
    RUN(test_join_parked_too_long_times_out);
    RUN(test_start_refuses_bad_config_and_taken_port);
    RUN(test_mutual_tls_works_and_other_ca_refused);
    RUN(test_restart_same_port_then_join_works);
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(uv_loop_close(&loop), 0); /* every handle closed */
    peer_set_log(NULL, NULL);
    return 0;
}

#endif
