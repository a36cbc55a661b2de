/*
 * test_peer_check.c — the field checks of the zpp.peer messages
 * (proto/peer_check.c), without gRPC: good messages pass, and one named
 * case per refused field gets the documented code and a message naming
 * the field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_check.h"
#include "test.h"
#include "zpp.h"

/* ---- fixtures: one valid message of each kind, mutated per case ------------ */

typedef struct {
    Zpp__Peer__Tenant tenant;
    Zpp__Peer__JoinRequest join;
    Zpp__Peer__HeartbeatRequest hb;
    Zpp__Peer__AbortRequest ab;
    Zpp__Peer__JoinReply reply;
    uint8_t id_bytes[3][PEER_NCCL_ID_BYTES];
    ProtobufCBinaryData ids[3];
    Zpp__Peer__Member member[4];
    Zpp__Peer__Member *members[4];
    uint32_t node_count; /* the reply is checked against this */
    char big[PEER_MAX_TOPOLOGY + 64];
} fixture_t;

static void base(fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    Zpp__Peer__Tenant t = ZPP__PEER__TENANT__INIT;
    t.uid = 1000;
    t.label = "team-a";
    f->tenant = t;

    Zpp__Peer__JoinRequest j = ZPP__PEER__JOIN_REQUEST__INIT;
    j.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    j.job_id = "job-1";
    j.tenant = &f->tenant;
    j.node_count = 4;
    j.node_rank = 3;
    j.ranks_per_node = 8;
    j.world_size = 32;
    j.topology = "4 nodes x 8 H100";
    j.address = "10.0.0.4:7399";
    f->join = j;

    Zpp__Peer__HeartbeatRequest h = ZPP__PEER__HEARTBEAT_REQUEST__INIT;
    h.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    h.job_id = "job-1";
    h.tenant = &f->tenant;
    h.node_rank = PEER_MAX_NODES - 1;
    f->hb = h;

    Zpp__Peer__AbortRequest a = ZPP__PEER__ABORT_REQUEST__INIT;
    a.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    a.job_id = "job-1";
    a.tenant = &f->tenant;
    a.reason = "rank 5 lost its GPU";
    a.from_node = 2;
    f->ab = a;

    Zpp__Peer__JoinReply r = ZPP__PEER__JOIN_REPLY__INIT;
    for (int i = 0; i < 3; i++) {
        memset(f->id_bytes[i], 0xa0 + i, PEER_NCCL_ID_BYTES);
        f->ids[i].data = f->id_bytes[i];
        f->ids[i].len = PEER_NCCL_ID_BYTES;
    }
    static const char *const addrs[4] = {"10.0.0.1:7399", "10.0.0.2:7399", "10.0.0.3:7399",
                                         "10.0.0.4:7399"};
    for (int i = 0; i < 4; i++) {
        Zpp__Peer__Member m = ZPP__PEER__MEMBER__INIT;
        m.node_rank = (uint32_t)(3 - i); /* any order */
        m.address = (char *)addrs[i];
        f->member[i] = m;
        f->members[i] = &f->member[i];
    }
    r.n_nccl_ids = 3;
    r.nccl_ids = f->ids;
    r.n_members = 4;
    r.members = f->members;
    f->reply = r;
    f->node_count = 4;
}

/* A string of n copies of ch in f->big. */
static char *fill(fixture_t *f, size_t n, char ch)
{
    if (n >= sizeof(f->big))
        abort();
    memset(f->big, ch, n);
    f->big[n] = 0;
    return f->big;
}

enum kind { JOIN, REPLY, HEARTBEAT, ABORT };

typedef struct {
    const char *name;
    enum kind kind;
    void (*mutate)(fixture_t *f);
    int code;
    const char *needle; /* must appear in the message */
} vcase_t;

/* clang-format off */
static void m_bad_version(fixture_t *f) { f->join.version = 2; }
static void m_job_id_missing(fixture_t *f) { f->join.job_id = NULL; }
static void m_job_id_empty(fixture_t *f) { f->join.job_id = ""; }
static void m_job_id_too_long(fixture_t *f) { f->join.job_id = fill(f, PEER_MAX_JOB_ID + 1, 'j'); }
static void m_job_id_unprintable(fixture_t *f) { f->join.job_id = "job\x01"; }
static void m_job_id_space(fixture_t *f) { f->join.job_id = "job 1"; }
static void m_tenant_missing(fixture_t *f) { f->join.tenant = NULL; }
static void m_label_too_long(fixture_t *f) { f->tenant.label = fill(f, PEER_MAX_LABEL + 1, 'l'); }
static void m_label_bad_char(fixture_t *f) { f->tenant.label = "team;a"; }
static void m_node_count_zero(fixture_t *f) { f->join.node_count = 0; }
static void m_node_count_over(fixture_t *f) { f->join.node_count = PEER_MAX_NODES + 1; }
static void m_node_rank_eq_count(fixture_t *f) { f->join.node_rank = 4; }
static void m_rpn_zero(fixture_t *f) { f->join.ranks_per_node = 0; }
static void m_rpn_over(fixture_t *f) { f->join.ranks_per_node = PEER_MAX_RANKS_PER_NODE + 1; }
static void m_world_not_product(fixture_t *f) { f->join.world_size = 31; }
static void m_world_zero_at_limits(fixture_t *f)
{ f->join.node_count = PEER_MAX_NODES; f->join.node_rank = 0;
  f->join.ranks_per_node = PEER_MAX_RANKS_PER_NODE; f->join.world_size = 0; }
static void m_topology_too_long(fixture_t *f) { f->join.topology = fill(f, PEER_MAX_TOPOLOGY + 1, 't'); }
static void m_topology_unprintable(fixture_t *f) { f->join.topology = "4 nodes\n"; }
static void m_address_missing(fixture_t *f) { f->join.address = NULL; }
static void m_address_too_long(fixture_t *f) { f->join.address = fill(f, PEER_MAX_ADDRESS + 1, 'a'); }
static void m_address_space(fixture_t *f) { f->join.address = "10.0.0.4 :7399"; }

static void m_too_many_ids(fixture_t *f) { f->reply.n_nccl_ids = PEER_MAX_NCCL_IDS + 1; }
static void m_id_short(fixture_t *f) { f->ids[1].len = PEER_NCCL_ID_BYTES - 1; }
static void m_id_long(fixture_t *f) { f->ids[2].len = PEER_NCCL_ID_BYTES + 1; }
static void m_members_fewer(fixture_t *f) { f->reply.n_members = 3; }
static void m_members_more(fixture_t *f) { f->node_count = 3; }
static void m_member_null(fixture_t *f) { f->members[1] = NULL; }
static void m_member_rank_over(fixture_t *f) { f->member[0].node_rank = 4; }
static void m_member_twice(fixture_t *f) { f->member[0].node_rank = 2; }
static void m_member_addr_missing(fixture_t *f) { f->member[3].address = NULL; }
static void m_member_addr_too_long(fixture_t *f) { f->member[3].address = fill(f, PEER_MAX_ADDRESS + 1, 'm'); }
static void m_reply_count_over_limit(fixture_t *f) { f->node_count = PEER_MAX_NODES + 1; }

static void m_hb_bad_version(fixture_t *f) { f->hb.version = 0; }
static void m_hb_job_id_too_long(fixture_t *f) { f->hb.job_id = fill(f, PEER_MAX_JOB_ID + 1, 'h'); }
static void m_hb_tenant_missing(fixture_t *f) { f->hb.tenant = NULL; }
static void m_hb_node_rank_over(fixture_t *f) { f->hb.node_rank = PEER_MAX_NODES; }

static void m_ab_bad_version(fixture_t *f) { f->ab.version = 7; }
static void m_ab_job_id_unprintable(fixture_t *f) { f->ab.job_id = "\x7f"; }
static void m_ab_from_node_over(fixture_t *f) { f->ab.from_node = PEER_MAX_NODES; }
static void m_ab_reason_too_long(fixture_t *f) { f->ab.reason = fill(f, PEER_MAX_REASON + 1, 'r'); }
/* clang-format on */

static const vcase_t vcases[] = {
    {"join_bad_version", JOIN, m_bad_version, ZPP_EVERSION, "version 2"},
    {"join_job_id_missing", JOIN, m_job_id_missing, ZPP_EINVAL, "job_id"},
    {"join_job_id_empty", JOIN, m_job_id_empty, ZPP_EINVAL, "job_id"},
    {"join_job_id_too_long", JOIN, m_job_id_too_long, ZPP_EINVAL, "job_id"},
    {"join_job_id_unprintable", JOIN, m_job_id_unprintable, ZPP_EINVAL, "job_id"},
    {"join_job_id_space", JOIN, m_job_id_space, ZPP_EINVAL, "job_id"},
    {"join_tenant_missing", JOIN, m_tenant_missing, ZPP_EINVAL, "tenant missing"},
    {"join_tenant_label_too_long", JOIN, m_label_too_long, ZPP_EINVAL, "tenant label"},
    {"join_tenant_label_bad_char", JOIN, m_label_bad_char, ZPP_EINVAL, "tenant label"},
    {"join_node_count_zero", JOIN, m_node_count_zero, ZPP_EINVAL, "node_count 0"},
    {"join_node_count_over_limit", JOIN, m_node_count_over, ZPP_EINVAL, "node_count 4097"},
    {"join_node_rank_not_below_node_count", JOIN, m_node_rank_eq_count, ZPP_EINVAL, "node_rank 4"},
    {"join_ranks_per_node_zero", JOIN, m_rpn_zero, ZPP_EINVAL, "ranks_per_node 0"},
    {"join_ranks_per_node_over_limit", JOIN, m_rpn_over, ZPP_EINVAL, "ranks_per_node 257"},
    {"join_world_not_nodes_times_ranks", JOIN, m_world_not_product, ZPP_EINVAL, "world_size 31"},
    {"join_world_zero_at_the_limits", JOIN, m_world_zero_at_limits, ZPP_EINVAL, "world_size 0"},
    {"join_topology_too_long", JOIN, m_topology_too_long, ZPP_EINVAL, "topology"},
    {"join_topology_unprintable", JOIN, m_topology_unprintable, ZPP_EINVAL, "topology"},
    {"join_address_missing", JOIN, m_address_missing, ZPP_EINVAL, "address"},
    {"join_address_too_long", JOIN, m_address_too_long, ZPP_EINVAL, "address"},
    {"join_address_with_space", JOIN, m_address_space, ZPP_EINVAL, "address"},

    {"reply_too_many_nccl_ids", REPLY, m_too_many_ids, ZPP_EPROTO, "nccl_ids: 259 ids"},
    {"reply_nccl_id_short", REPLY, m_id_short, ZPP_EPROTO, "nccl_ids[1]: 127 bytes"},
    {"reply_nccl_id_long", REPLY, m_id_long, ZPP_EPROTO, "nccl_ids[2]: 129 bytes"},
    {"reply_fewer_members_than_nodes", REPLY, m_members_fewer, ZPP_EPROTO, "members: 3"},
    {"reply_more_members_than_nodes", REPLY, m_members_more, ZPP_EPROTO, "members: 4"},
    {"reply_member_null", REPLY, m_member_null, ZPP_EPROTO, "members[1]"},
    {"reply_member_rank_not_below_count", REPLY, m_member_rank_over, ZPP_EPROTO, "members[0]"},
    {"reply_member_rank_twice", REPLY, m_member_twice, ZPP_EPROTO, "listed twice"},
    {"reply_member_address_missing", REPLY, m_member_addr_missing, ZPP_EPROTO, "members[3]"},
    {"reply_member_address_too_long", REPLY, m_member_addr_too_long, ZPP_EPROTO, "address"},
    {"reply_node_count_over_limit_is_callers_bug", REPLY, m_reply_count_over_limit, ZPP_EINVAL,
     "node_count 4097"},

    {"heartbeat_bad_version", HEARTBEAT, m_hb_bad_version, ZPP_EVERSION, "version 0"},
    {"heartbeat_job_id_too_long", HEARTBEAT, m_hb_job_id_too_long, ZPP_EINVAL, "job_id"},
    {"heartbeat_tenant_missing", HEARTBEAT, m_hb_tenant_missing, ZPP_EINVAL, "tenant missing"},
    {"heartbeat_node_rank_over_limit", HEARTBEAT, m_hb_node_rank_over, ZPP_EINVAL,
     "node_rank 4096"},

    {"abort_bad_version", ABORT, m_ab_bad_version, ZPP_EVERSION, "version 7"},
    {"abort_job_id_unprintable", ABORT, m_ab_job_id_unprintable, ZPP_EINVAL, "job_id"},
    {"abort_from_node_over_limit", ABORT, m_ab_from_node_over, ZPP_EINVAL, "from_node 4096"},
    {"abort_reason_too_long", ABORT, m_ab_reason_too_long, ZPP_EINVAL, "reason"},
};

static int run(fixture_t *f, enum kind kind, char *why, size_t len)
{
    switch (kind) {
    case JOIN:
        return peer_check_join_request(&f->join, why, len);
    case REPLY:
        return peer_check_join_reply(&f->reply, f->node_count, why, len);
    case HEARTBEAT:
        return peer_check_heartbeat_request(&f->hb, why, len);
    default:
        return peer_check_abort_request(&f->ab, why, len);
    }
}

/* ---- tests -------------------------------------------------------------------- */

static void test_good_messages_pass_and_leave_why_untouched(void)
{
    fixture_t f;
    for (int k = JOIN; k <= ABORT; k++) {
        base(&f);
        char why[64] = "untouched";
        ASSERT_EQ(run(&f, (enum kind)k, why, sizeof(why)), 0);
        ASSERT_STR_EQ(why, "untouched");
    }
}

/* A host-backend job's reply carries no communicator ids. */
static void test_reply_without_ids_passes(void)
{
    fixture_t f;
    char why[256];
    base(&f);
    f.reply.n_nccl_ids = 0;
    ASSERT_EQ(run(&f, REPLY, why, sizeof(why)), 0);
}

static void test_limits_themselves_pass(void)
{
    fixture_t f;
    char why[256];
    base(&f);
    f.join.job_id = fill(&f, PEER_MAX_JOB_ID, 'j');
    ASSERT_EQ(peer_check_join_request(&f.join, why, sizeof(why)), 0);
    base(&f);
    f.join.node_count = PEER_MAX_NODES;
    f.join.node_rank = PEER_MAX_NODES - 1;
    f.join.ranks_per_node = PEER_MAX_RANKS_PER_NODE;
    f.join.world_size = PEER_MAX_NODES * PEER_MAX_RANKS_PER_NODE;
    f.join.topology = NULL; /* may be absent */
    ASSERT_EQ(peer_check_join_request(&f.join, why, sizeof(why)), 0);
    base(&f);
    /* label may be absent; the reason may be unprintable (sanitized later) */
    f.tenant.label = NULL;
    f.ab.reason = fill(&f, PEER_MAX_REASON, 0x01);
    ASSERT_EQ(peer_check_abort_request(&f.ab, why, sizeof(why)), 0);
    base(&f);
    f.join.address = fill(&f, PEER_MAX_ADDRESS, 'a');
    ASSERT_EQ(peer_check_join_request(&f.join, why, sizeof(why)), 0);
}

static void test_each_refused_field_is_named(void)
{
    fixture_t f;
    for (size_t i = 0; i < sizeof(vcases) / sizeof(vcases[0]); i++) {
        const vcase_t *v = &vcases[i];
        base(&f);
        v->mutate(&f);
        char why[256] = "";
        int rc = run(&f, v->kind, why, sizeof(why));
        if (rc != v->code || !strstr(why, v->needle)) {
            fprintf(stderr, "peer check case %s: got %d (%s), want %d containing \"%s\"\n", v->name,
                    rc, why, v->code, v->needle);
            exit(1);
        }
    }
}

static void test_reply_head_refuses_unknown_code_and_long_message(void)
{
    fixture_t f;
    char why[256] = "";
    ASSERT_EQ(peer_check_reply(0, NULL, why, sizeof(why)), 0);
    ASSERT_EQ(peer_check_reply(ZPP_ERRNO_MAX, "last code", why, sizeof(why)), 0);
    ASSERT_EQ(peer_check_reply(1, "", why, sizeof(why)), ZPP_EPROTO);
    ASSERT_CONTAINS(why, "unknown code 1");
    ASSERT_EQ(peer_check_reply(ZPP_ERRNO_MAX - 1, "", why, sizeof(why)), ZPP_EPROTO);
    ASSERT_CONTAINS(why, "unknown code");
    base(&f);
    ASSERT_EQ(peer_check_reply(0, fill(&f, PEER_MAX_TEXT, 'x'), why, sizeof(why)), 0);
    ASSERT_EQ(peer_check_reply(0, fill(&f, PEER_MAX_TEXT + 1, 'x'), why, sizeof(why)), ZPP_EPROTO);
    ASSERT_CONTAINS(why, "longer than 1024");
}

static void test_job_state_refuses_values_outside_the_enum(void)
{
    char why[64] = "";
    for (int s = 0; s <= ZPP__PEER__JOB_STATE__JOB_STATE_ENDED; s++)
        ASSERT_EQ(peer_check_job_state(s, why, sizeof(why)), 0);
    ASSERT_EQ(peer_check_job_state(-1, why, sizeof(why)), ZPP_EPROTO);
    ASSERT_CONTAINS(why, "bad job state -1");
    ASSERT_EQ(peer_check_job_state(ZPP__PEER__JOB_STATE__JOB_STATE_ENDED + 1, why, sizeof(why)),
              ZPP_EPROTO);
}

static void test_message_is_cut_to_the_buffer(void)
{
    fixture_t f;
    base(&f);
    f.join.node_rank = 4;
    char why[8];
    memset(why, 'z', sizeof(why));
    ASSERT_EQ(peer_check_join_request(&f.join, why, sizeof(why)), ZPP_EINVAL);
    ASSERT_EQ(strnlen(why, sizeof(why)), sizeof(why) - 1);
}

static void test_sanitize_keeps_printable_and_replaces_the_rest(void)
{
    char out[8];
    peer_check_sanitize(out, sizeof(out), "a\tb\x80");
    ASSERT_STR_EQ(out, "a?b?");
    peer_check_sanitize(out, sizeof(out), "0123456789");
    ASSERT_STR_EQ(out, "0123456");
    peer_check_sanitize(out, sizeof(out), NULL);
    ASSERT_STR_EQ(out, "");
    char in_place[] = "x\ny";
    peer_check_sanitize(in_place, sizeof(in_place), in_place);
    ASSERT_STR_EQ(in_place, "x?y");
}

int main(void)
{
    test_good_messages_pass_and_leave_why_untouched();
    test_reply_without_ids_passes();
    test_limits_themselves_pass();
    test_each_refused_field_is_named();
    test_reply_head_refuses_unknown_code_and_long_message();
    test_job_state_refuses_values_outside_the_enum();
    test_message_is_cut_to_the_buffer();
    test_sanitize_keeps_printable_and_replaces_the_rest();
    printf("test_peer_check: %zu refusal cases, all passed\n", sizeof(vcases) / sizeof(vcases[0]));
    return 0;
}
