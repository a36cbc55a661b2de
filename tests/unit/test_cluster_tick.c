/*
 * test_cluster_tick.c — daemon/cluster.c's peer timeouts across a loop
 * stall. cluster_tick moves the peers' clocks (a forming job's start, each
 * member's last answer) on by the length of a stall, so that replies still
 * queued behind the tick do not count against them. And a Heartbeat or
 * an Abort of another formation of the same job id is not about the job. A clock read after the
 * previous tick, just before the stall, must not end up in the future:
 * `now - t` would wrap and abort a healthy job at once.
 *
 * The daemon's clock (main.c, not in zppd_core) is this test's: it moves
 * only when the test says so. One leader job of 2 nodes on the host
 * backend's shape; node 1 is a peer object of this test.
 */
#ifndef ZPP_HAVE_GRPC
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "test_cluster_tick: built without gRPC: skipped\n");
    return 77;
}
#else

#include <stdlib.h>
#include <uv.h>

#include "cluster.h"
#include "daemon.h"
#include "job.h"
#include "metrics.h"
#include "peer.h"
#include "test.h"
#include "uv_wait.h"
#include "zpp.h"

/* ---- main.c's part, faked ------------------------------------------------------ */

static uint64_t fake_ms = 1000000;

uint64_t zppd_now_ms(void)
{
    return fake_ms;
}

uint64_t zppd_now_us(void)
{
    return fake_ms * 1000;
}

void zppd_maybe_exit(struct zppd *d)
{
    (void)d;
}

/* ---- loop ------------------------------------------------------------------------ */

static uv_loop_t loop;

static void run_until(const int *flag, uint64_t ms)
{
    uv_wait_until(&loop, flag, ms);
}

struct res {
    int done, code, state;
    uint64_t formation;
    char msg[1400];
};

static void join_cb(void *arg, int code, const char *msg, const Zpp__Peer__JoinReply *reply)
{
    struct res *r = arg;
    r->done = 1;
    r->code = code;
    r->formation = reply ? reply->formation : 0;
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
}

static void hb_cb(void *arg, int code, const char *msg, int state)
{
    struct res *r = arg;
    r->done = 1;
    r->code = code;
    r->state = state;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
}

static void abort_cb(void *arg, int code, const char *msg)
{
    struct res *r = arg;
    r->done = 1;
    r->code = code;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
}

static const struct be_ops no_ids_backend; /* make_ids NULL: a job needs no ids */

static void setup(struct zppd *d, struct job *j)
{
    memset(d, 0, sizeof(*d));
    d->loop = &loop;
    snprintf(d->cfg.peer_listen, sizeof(d->cfg.peer_listen), "127.0.0.1:0");
    d->cfg.peer_heartbeat_ms = 100; /* a stall is over 2 x 100 + 1000 ms */
    d->cfg.peer_timeout_ms = 5000;
    d->cfg.join_timeout_ms = 60000;
    d->be = &no_ids_backend;
    d->backend_name = "host";
    ASSERT_EQ(cluster_start(d), 0);
    memset(j, 0, sizeof(*j));
    j->d = d;
    j->multi = 1;
    j->uid = 1000;
    snprintf(j->label, sizeof(j->label), "team-a");
    snprintf(j->id, sizeof(j->id), "job-1");
    j->node = 0;
    j->nodes = 2;
    j->local = 1;
    j->nlocal = 1;
    j->world = 2;
    snprintf(j->leader, sizeof(j->leader), "%s", cluster_address(d));
    j->gen = 1;
    /* Not FORMING: job_cluster_ready then leaves the backend alone. */
    j->state = JOB_RUNNING;
    d->jobs = j;
    d->njobs = 1;
}

static void teardown(struct zppd *d, struct job *j)
{
    cluster_job_free(j);
    d->jobs = NULL;
    cluster_stop(d);
    run_until(NULL, 1);
    cluster_free(d);
    metrics_free(d); /* an aborted job counted itself there */
}

/* Starts node 1's peer and Joins j (of 2 nodes) for it; the job forms.
 * The reply's outcome is in *r. */
static struct peer *node1_join(struct job *j, struct res *r)
{
    struct peer *node1 = NULL;
    struct peer_config pc = {.listen = "127.0.0.1:0"};
    char why[256] = "";
    ASSERT_EQ(peer_start(&loop, &pc, NULL, NULL, &node1, why, sizeof(why)), 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", peer_port(node1));
    Zpp__Peer__Tenant ten = ZPP__PEER__TENANT__INIT;
    ten.uid = 1000;
    ten.label = (char *)"team-a";
    Zpp__Peer__JoinRequest req = ZPP__PEER__JOIN_REQUEST__INIT;
    req.job_id = (char *)"job-1";
    req.tenant = &ten;
    req.node_rank = 1;
    req.node_count = 2;
    req.ranks_per_node = 1;
    req.world_size = 2;
    req.topology = (char *)"2x1 host";
    req.address = addr;
    ASSERT_EQ(peer_join(node1, j->leader, &req, 3000, join_cb, r), 0);
    run_until(&r->done, 3000);
    if (r->code)
        fprintf(stderr, "join: %s\n", r->msg);
    ASSERT_EQ(r->code, 0);
    return node1;
}

/* The leader started forming after the previous tick; then the loop
 * stalled. The join deadline is 60 s away: nothing may abort. */
static void test_forming_job_survives_a_stall(void)
{
    struct zppd d;
    struct job j;
    setup(&d, &j);
    cluster_tick(&d);
    fake_ms += 10;
    cluster_form(&j);
    fake_ms += 2000; /* the stall */
    cluster_tick(&d);
    if (j.state == JOB_ABORTED)
        fprintf(stderr, "aborted: %s\n", j.abort_reason);
    ASSERT_NE(j.state, JOB_ABORTED);
    teardown(&d, &j);
}

/* Node 1 joined (its last answer is now) after the previous tick; then
 * the loop stalled. peer_timeout_ms is 5 s: nothing may abort. */
static void test_formed_job_survives_a_stall(void)
{
    struct zppd d;
    struct job j;
    setup(&d, &j);
    fake_ms += 1000;
    cluster_tick(&d);
    cluster_form(&j);

    fake_ms += 10;
    struct res r = {0};
    struct peer *node1 = node1_join(&j, &r); /* formed: node 1's last answer is fake_ms */

    fake_ms += 2000; /* the stall */
    cluster_tick(&d);
    if (j.state == JOB_ABORTED)
        fprintf(stderr, "aborted: %s\n", j.abort_reason);
    ASSERT_NE(j.state, JOB_ABORTED);
    peer_stop(node1);
    teardown(&d, &j);
}

/* Heartbeat and Abort carry the formation id the leader's Join reply
 * gave: one of another formation of the same job id (a node that has not
 * yet heard that the job ended and formed again) is not about this job.
 * Before session 22 a stale heartbeat refreshed the new job's member and
 * a stale Abort killed the new job by name (an audit). */
static void test_other_formation_is_not_this_job(void)
{
    struct zppd d;
    struct job j;
    setup(&d, &j);
    cluster_form(&j);
    struct res r = {0};
    struct peer *node1 = node1_join(&j, &r);
    ASSERT(r.formation != 0);
    const struct peer_tenant pt = {1000, "team-a"};
    struct res hb[3];
    memset(hb, 0, sizeof hb);
    const uint64_t forms[3] = {r.formation, r.formation + 1, 0}; /* this, another, unknown */
    for (int k = 0; k < 3; k++) {
        ASSERT_EQ(peer_heartbeat(node1, j.leader, "job-1", &pt, 1, 0, forms[k], 2000, hb_cb, &hb[k]),
                  0);
        run_until(&hb[k].done, 3000);
        ASSERT_EQ(hb[k].code, 0);
    }
    /* this job's state (idle here: the test's job has no ranks) */
    ASSERT(hb[0].state == ZPP__PEER__JOB_STATE__JOB_STATE_RUNNING ||
           hb[0].state == ZPP__PEER__JOB_STATE__JOB_STATE_IDLE);
    ASSERT_EQ(hb[1].state, ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN);
    ASSERT_EQ(hb[2].state, hb[0].state); /* an older peer, without the id */
    struct res ab = {0};
    ASSERT_EQ(peer_abort_send(node1, j.leader, "job-1", &pt, "stale", 1, r.formation + 1, abort_cb,
                              &ab),
              0);
    run_until(&ab.done, 3000);
    ASSERT_EQ(ab.code, ZPP_ENOENT);
    ASSERT_CONTAINS(ab.msg, "formed again");
    ASSERT_NE(j.state, JOB_ABORTED);
    memset(&ab, 0, sizeof ab);
    ASSERT_EQ(peer_abort_send(node1, j.leader, "job-1", &pt, "this one", 1, r.formation, abort_cb,
                              &ab),
              0);
    run_until(&ab.done, 3000);
    ASSERT_EQ(ab.code, 0);
    ASSERT_EQ(j.state, JOB_ABORTED);
    peer_stop(node1);
    teardown(&d, &j);
}

int main(void)
{
    ASSERT_EQ(uv_loop_init(&loop), 0);
    test_forming_job_survives_a_stall();
    fprintf(stderr, "ok test_forming_job_survives_a_stall\n");
    test_formed_job_survives_a_stall();
    fprintf(stderr, "ok test_formed_job_survives_a_stall\n");
    test_other_formation_is_not_this_job();
    fprintf(stderr, "ok test_other_formation_is_not_this_job\n");
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    return 0;
}

#endif
