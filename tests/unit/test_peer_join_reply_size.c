/*
 * test_peer_join_reply_size.c — a valid Join reply unpacks at the member
 * for jobs of many nodes: 40 nodes of one GPU ("10.0.0.N:7399", 2 ids),
 * 1024 nodes of eight GPUs (10 ids) and 2048 nodes named by 40-character
 * host names. Before session 22 the member unpacked replies under a
 * budget of a few times their size, which protobuf-c's three allocations
 * per member exceed: no job of more than about 30-90 nodes could form
 * ("reply does not unpack", ZPP_EPROTO). Also a leader parks the Joins
 * of a 301-node job from five member daemons at once: the parked Joins'
 * cap was max_calls (256 by default), so no job of more than 257 nodes
 * could form either.
 */
#ifndef ZPP_HAVE_GRPC
int main(void)
{
    return 77;
}
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "peer.h"
#include "test.h"
#include "uv_wait.h"
#include "zpp.h"

#define MAX_NODES 2048
#define MAX_IDS 10

static uv_loop_t loop;
static uint32_t g_nodes, g_ids;
static int g_long_names;

static int g_park; /* park every Join until g_nodes - 1 have come */
static struct peer_join_call *g_parked[MAX_NODES];
static uint32_t g_nparked;
static void answer(struct peer_join_call *call);

static void on_join(void *ctx, struct peer_join_call *call, const Zpp__Peer__JoinRequest *req,
                    const struct peer_caller *from)
{
    (void)ctx;
    (void)req;
    (void)from;
    if (!g_park) {
        answer(call);
        return;
    }
    g_parked[g_nparked++] = call;
    if (g_nparked == g_nodes - 1)
        for (uint32_t i = 0; i < g_nparked; i++)
            answer(g_parked[i]);
}

static void answer(struct peer_join_call *call)
{
    static uint8_t ids[MAX_IDS][PEER_NCCL_ID_BYTES];
    static ProtobufCBinaryData bins[MAX_IDS];
    static Zpp__Peer__Member mem[MAX_NODES], *mp[MAX_NODES];
    static char addr[MAX_NODES][64];
    for (uint32_t i = 0; i < g_ids; i++) {
        memset(ids[i], (int)i + 1, PEER_NCCL_ID_BYTES);
        bins[i] = (ProtobufCBinaryData){PEER_NCCL_ID_BYTES, ids[i]};
    }
    for (uint32_t i = 0; i < g_nodes; i++) {
        Zpp__Peer__Member m0 = ZPP__PEER__MEMBER__INIT;
        mem[i] = m0;
        mem[i].node_rank = i;
        if (g_long_names)
            snprintf(addr[i], sizeof addr[i], "gpu-node-%05u.rack-17.cluster.example:7399", i);
        else
            snprintf(addr[i], sizeof addr[i], "10.0.%u.%u:7399", i / 250, i % 250 + 1);
        mem[i].address = addr[i];
        mp[i] = &mem[i];
    }
    Zpp__Peer__JoinReply r = ZPP__PEER__JOIN_REPLY__INIT;
    r.n_nccl_ids = g_ids;
    r.nccl_ids = bins;
    r.n_members = g_nodes;
    r.members = mp;
    ASSERT_EQ(peer_join_answer(call, 0, NULL, &r), 0);
}

struct res {
    int done, code;
    char msg[1400];
    size_t n_members, n_ids;
};

static void join_cb(void *arg, int code, const char *msg, const Zpp__Peer__JoinReply *reply)
{
    struct res *r = arg;
    r->done = 1;
    r->code = code;
    snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
    r->n_members = reply ? reply->n_members : 0;
    r->n_ids = reply ? reply->n_nccl_ids : 0;
}

static void shape(uint32_t nodes, uint32_t ids, int long_names)
{
    g_nodes = nodes;
    g_ids = ids;
    g_long_names = long_names;
    struct peer_handlers h = {.on_join = on_join};
    struct peer_config pc = {.listen = "127.0.0.1:0"};
    struct peer *leader = NULL, *member = NULL;
    char why[256];
    ASSERT_EQ(peer_start(&loop, &pc, &h, NULL, &leader, why, sizeof why), 0);
    ASSERT_EQ(peer_start(&loop, &pc, NULL, NULL, &member, why, sizeof why), 0);
    char la[64], ma[64], topo[64];
    snprintf(la, sizeof la, "127.0.0.1:%d", peer_port(leader));
    snprintf(ma, sizeof ma, "127.0.0.1:%d", peer_port(member));
    snprintf(topo, sizeof topo, "%ux%u cuda", nodes, ids - 2 ? ids - 2 : 1);
    Zpp__Peer__Tenant ten = ZPP__PEER__TENANT__INIT;
    ten.uid = 1000;
    ten.label = (char *)"";
    Zpp__Peer__JoinRequest req = ZPP__PEER__JOIN_REQUEST__INIT;
    req.job_id = (char *)"big";
    req.tenant = &ten;
    req.node_rank = 1;
    req.node_count = nodes;
    req.ranks_per_node = 1;
    req.world_size = nodes;
    req.topology = topo;
    req.address = ma;
    struct res r = {0};
    ASSERT_EQ(peer_join(member, la, &req, 10000, join_cb, &r), 0);
    uv_wait_until(&loop, &r.done, 12000);
    printf("%u nodes, %u ids, %s names: code %d (%s), %zu members, %zu ids\n", nodes, ids,
           long_names ? "long" : "short", r.code, r.msg, r.n_members, r.n_ids);
    ASSERT_EQ(r.code, 0);
    ASSERT_EQ(r.n_members, nodes);
    ASSERT_EQ(r.n_ids, ids);
    peer_stop(member);
    peer_stop(leader);
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

/* nodes - 1 Joins (node ranks 1..nodes-1) from `members` member peers
 * at once, parked by the leader until the last, then all answered. */
static void parked(uint32_t nodes, int members)
{
    g_nodes = nodes;
    g_ids = 2;
    g_long_names = 0;
    g_park = 1;
    g_nparked = 0;
    struct peer_handlers h = {.on_join = on_join};
    struct peer_config pc = {.listen = "127.0.0.1:0"};
    struct peer *leader = NULL, *member[8] = {0};
    char why[256], la[64], ma[8][64];
    ASSERT_EQ(peer_start(&loop, &pc, &h, NULL, &leader, why, sizeof why), 0);
    snprintf(la, sizeof la, "127.0.0.1:%d", peer_port(leader));
    for (int m = 0; m < members; m++) {
        ASSERT_EQ(peer_start(&loop, &pc, NULL, NULL, &member[m], why, sizeof why), 0);
        snprintf(ma[m], sizeof ma[m], "127.0.0.1:%d", peer_port(member[m]));
    }
    Zpp__Peer__Tenant ten = ZPP__PEER__TENANT__INIT;
    ten.uid = 1000;
    ten.label = (char *)"";
    static struct res r[MAX_NODES];
    memset(r, 0, sizeof r);
    for (uint32_t i = 1; i < nodes; i++) {
        int m = (int)(i % (uint32_t)members);
        Zpp__Peer__JoinRequest req = ZPP__PEER__JOIN_REQUEST__INIT;
        req.job_id = (char *)"many";
        req.tenant = &ten;
        req.node_rank = i;
        req.node_count = nodes;
        req.ranks_per_node = 1;
        req.world_size = nodes;
        req.topology = (char *)"many x1 cuda";
        req.address = ma[m];
        ASSERT_EQ(peer_join(member[m], la, &req, 20000, join_cb, &r[i]), 0);
    }
    uint32_t ok = 0, done = 0;
    for (int spin = 0; spin < 400 && done < nodes - 1; spin++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(50000);
        done = ok = 0;
        for (uint32_t i = 1; i < nodes; i++) {
            done += (uint32_t)r[i].done;
            ok += r[i].done && r[i].code == 0 && r[i].n_members == nodes;
        }
    }
    printf("%u nodes from %d member daemons: %u Joins parked at once, %u answered well\n",
           nodes, members, g_nparked, ok);
    for (uint32_t i = 1; i < nodes && ok != nodes - 1; i++)
        if (r[i].done && r[i].code) {
            printf("node %u: %d %s\n", i, r[i].code, r[i].msg);
            break;
        }
    ASSERT_EQ(ok, nodes - 1);
    for (int m = 0; m < members; m++)
        peer_stop(member[m]);
    peer_stop(leader);
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    g_park = 0;
}

int main(void)
{
    ASSERT_EQ(uv_loop_init(&loop), 0);
    shape(40, 2, 0);
    shape(1024, 10, 0);
    shape(2048, 10, 1);
    parked(301, 5);
    uv_loop_close(&loop);
    printf("test_peer_join_reply_size: ok\n");
    return 0;
}
#endif
