/*
 * cluster.c — see cluster.h. Loop thread only. Asynchronous answers find
 * their job again by its generation number (a job can be freed, and a new
 * one of the same name created, while an RPC is in flight).
 */
#include "cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon.h"
#include "job.h"
#include "log.h"
#include "metrics.h"
#include "peer.h"
#include "session.h"
#include "zpp.h"

struct cl_member {
    char addr[PEER_MAX_ADDRESS + 1];
    uint64_t last_ok_ms;
    uint64_t last_sent_ms;
    uint64_t last_fail_ms; /* a heartbeat that failed (the RPC, not the job) */
    int idle;              /* its last word: every rank of that node has left */
    char fail[128];        /* its error */
    int hb_inflight;
    struct peer_join_call *parked; /* leader: this node's Join, until answered */
};

struct cluster_job {
    uint32_t nodes;
    struct cl_member *m; /* one per node */
    int formed;
    int join_inflight;
    int abort_sent;
    uint64_t form_start_ms;
    /* The leader's random id of this formation (JoinReply.formation), 0
     * until known: Heartbeat and Abort carry it, and one of another
     * formation of the same job id is not about this job. */
    uint64_t formation;
};

/* A Join that arrived before its job formed here. */
struct orphan {
    struct peer_join_call *call;
    uint32_t uid;
    char label[PEER_MAX_LABEL + 1];
    char job_id[PEER_MAX_JOB_ID + 1];
    uint32_t node, nodes, per_node, world;
    char topology[64];
    char addr[PEER_MAX_ADDRESS + 1];
    struct orphan *next;
};

/* A job this daemon ended well (every node was idle), remembered for
 * peer_timeout_ms: a heartbeat from a member that has not yet heard this
 * node go idle (its heartbeat crossed ours, or ours was not sent because
 * one was in flight) is answered ENDED, not UNKNOWN, which would read as
 * "this zppd restarted" and abort the job there. A job that was aborted
 * here and then freed (its ranks left) is remembered longer,
 * CL_ABORTED_KEEP_MS, and answered ABORTED with its reason: a member that
 * was stopped meanwhile (SIGSTOP, a frozen container) and missed the Abort
 * then learns why, not that this zppd "restarted". */
#define CL_ENDED 64
#define CL_ABORTED_KEEP_MS 600000u
struct cl_ended {
    uint64_t at_ms; /* 0: empty */
    uint32_t uid;
    char label[PEER_MAX_LABEL + 1];
    char job_id[PEER_MAX_JOB_ID + 1];
    uint64_t formation;
    int aborted;                                        /* 0: ended well */
    char reason[sizeof((struct job *)0)->abort_reason]; /* aborted: why */
};

struct cl_state {
    struct peer *peer;
    char addr[PEER_MAX_ADDRESS + 1];
    struct orphan *orphans;
    uint64_t last_tick_ms; /* cluster_tick's previous run */
    struct cl_ended ended[CL_ENDED]; /* a ring, the oldest overwritten */
    unsigned ended_next;
    int no_idle_notice; /* test hook: ZPPD_TEST_NO_IDLE_NOTICE */
};

/* An RPC's way back to its job. */
struct cl_ref {
    struct zppd *d;
    uint64_t gen;
    uint32_t node;
};

static struct cl_state *cls(const struct zppd *d)
{
    return d->cluster;
}

/* Communicator ids a job needs from its leader: the global one and one per
 * local index (the inter-node communicators; each daemon makes its
 * intra-node id itself), or none on a backend without communicators. */
static int cluster_ids_needed(const struct job *j)
{
    return j->d->be->make_ids ? 1 + (int)j->local : 0;
}

/* What a node says of its part of the job in Join; the leader requires
 * its own string (same shape, same backend). */
static void topology_of(const struct job *j, char *out, size_t len)
{
    snprintf(out, len, "%ux%u %s", j->nodes, j->local, j->d->backend_name);
}

static struct job *job_by_gen(struct zppd *d, uint64_t gen)
{
    for (struct job *j = d->jobs; j; j = j->next)
        if (j->gen == gen)
            return j;
    return NULL;
}

static struct job *job_by_name(struct zppd *d, uint32_t uid, const char *label, const char *id)
{
    for (struct job *j = d->jobs; j; j = j->next)
        if (j->multi && j->uid == uid && !strcmp(j->label, label) && !strcmp(j->id, id))
            return j;
    return NULL;
}

static struct cl_ref *ref_new(struct job *j, uint32_t node)
{
    struct cl_ref *r = malloc(sizeof *r);
    if (r) {
        r->d = j->d;
        r->gen = j->gen;
        r->node = node;
    }
    return r;
}

static struct cluster_job *cj_get(struct job *j)
{
    if (j->cl)
        return j->cl;
    struct cluster_job *c = calloc(1, sizeof *c);
    struct cl_member *m = calloc(j->nodes, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return NULL;
    }
    c->nodes = j->nodes;
    c->m = m;
    c->form_start_ms = zppd_now_ms();
    snprintf(m[0].addr, sizeof m[0].addr, "%s", j->leader);
    if (j->node != 0)
        snprintf(m[j->node].addr, sizeof m[j->node].addr, "%s", cls(j->d)->addr);
    j->cl = c;
    return c;
}

/* ---- leader ---------------------------------------------------------------- */

/* A random, nonzero formation id (getrandom; the clock and a counter if
 * that fails: it only has to differ from the job id's earlier formations). */
static uint64_t new_formation(void)
{
    static uint64_t n;
    uint64_t f = 0;
    if (getrandom(&f, sizeof f, 0) != (ssize_t)sizeof f)
        f = zppd_now_us() * 0x9E3779B97F4A7C15ull + ++n;
    return f ? f : 1;
}

/* Answers every parked Join and forms the job here, once all nodes are in. */
static void leader_try(struct job *j)
{
    struct zppd *d = j->d;
    struct cluster_job *c = j->cl;
    if (!c || c->formed || j->state == JOB_ABORTED)
        return;
    for (uint32_t n = 1; n < c->nodes; n++)
        if (!c->m[n].parked)
            return;
    /* Communicator ids: the global one and one per local index (the
     * inter-node communicators); each daemon makes its intra id itself. */
    int nids = cluster_ids_needed(j);
    uint8_t *ids = calloc((size_t)(nids ? nids : 1), CLUSTER_NCCL_ID_BYTES);
    char why[256] = "";
    if (!ids)
        snprintf(why, sizeof why, "out of memory");
    if (!ids || (nids && d->be->make_ids(d->be_state, nids, ids, why, sizeof why))) {
        free(ids);
        job_abort(j, MET_ABORT_DEVICE, "cannot make communicator ids: %s", why);
        return;
    }
    ProtobufCBinaryData *bin = calloc((size_t)(nids ? nids : 1), sizeof *bin);
    Zpp__Peer__Member *mem = calloc(c->nodes, sizeof *mem);
    Zpp__Peer__Member **memp = calloc(c->nodes, sizeof *memp);
    if (!bin || !mem || !memp) {
        free(ids);
        free(bin);
        free(mem);
        free(memp);
        job_abort(j, MET_ABORT_OTHER, "out of memory forming the job");
        return;
    }
    for (int i = 0; i < nids; i++) {
        bin[i].data = ids + (size_t)i * CLUSTER_NCCL_ID_BYTES;
        bin[i].len = CLUSTER_NCCL_ID_BYTES;
    }
    for (uint32_t n = 0; n < c->nodes; n++) {
        zpp__peer__member__init(&mem[n]);
        mem[n].node_rank = n;
        mem[n].address = c->m[n].addr;
        memp[n] = &mem[n];
    }
    Zpp__Peer__JoinReply rep = ZPP__PEER__JOIN_REPLY__INIT;
    rep.n_nccl_ids = (size_t)nids;
    rep.nccl_ids = bin;
    rep.n_members = c->nodes;
    rep.members = memp;
    rep.formation = c->formation = new_formation();
    uint64_t now = zppd_now_ms();
    uint32_t bad = 0; /* nodes whose answer failed (they were told why) */
    for (uint32_t n = 1; n < c->nodes; n++) {
        struct peer_join_call *call = c->m[n].parked;
        c->m[n].parked = NULL;
        c->m[n].last_ok_ms = now;
        bad += peer_join_answer(call, 0, NULL, &rep) != 0;
    }
    free(bin);
    free(mem);
    free(memp);
    if (bad) {
        /* The reply failed its own check (e.g. a member's address): those
         * nodes hold no ids, so the job cannot run; abort it now, with the
         * cause, rather than start communicators nobody will join. */
        free(ids);
        job_abort(j, MET_ABORT_OTHER,
                  "the leader could not answer %u node(s)' Join: its reply failed the peer "
                  "checks (the leader address \"%s\" or a member's)",
                  bad, c->m[0].addr);
        return;
    }
    c->formed = 1;
    ZLOG_I("cluster", "all nodes joined", "job=%s nodes=%u ms=%" PRIu64, j->id, c->nodes,
           now - c->form_start_ms);
    job_cluster_ready(j, ids, nids);
    free(ids);
}

/* Checks an orphan Join against the leader's job; answers errors. Returns 1
 * if it was taken (parked on the job or refused), 0 if it stays orphan. */
static int adopt(struct job *j, struct orphan *o)
{
    struct cluster_job *c = j->cl;
    if (!c || j->node != 0)
        return 0;
    char msg[384];
    if (j->state == JOB_ABORTED) {
        snprintf(msg, sizeof msg, "job %s was aborted on the leader: %s", j->id, j->abort_reason);
        peer_join_answer(o->call, ZPP_EABORTED, msg, NULL);
        return 1;
    }
    if (o->world != j->world || o->nodes != j->nodes || o->per_node != j->local) {
        snprintf(msg, sizeof msg,
                 "job %s on the leader has %u nodes x %u ranks (world %u); node %u says %u x %u "
                 "(world %u)",
                 j->id, j->nodes, j->local, j->world, o->node, o->nodes, o->per_node, o->world);
        peer_join_answer(o->call, ZPP_EMISMATCH, msg, NULL);
        ZLOG_W("cluster", "join refused", "job=%s node=%u why=\"%s\"", j->id, o->node, msg);
        return 1;
    }
    char mine[64];
    topology_of(j, mine, sizeof mine);
    if (strcmp(o->topology, mine)) {
        /* e.g. a host-backend node in a cuda job: it could not use the ids */
        snprintf(msg, sizeof msg, "job %s on the leader is '%s'; node %u says '%s'", j->id, mine,
                 o->node, o->topology);
        peer_join_answer(o->call, ZPP_EMISMATCH, msg, NULL);
        ZLOG_W("cluster", "join refused", "job=%s node=%u why=\"%s\"", j->id, o->node, msg);
        return 1;
    }
    if (o->node == 0 || o->node >= c->nodes || c->m[o->node].parked || c->formed) {
        snprintf(msg, sizeof msg, "node %u of job %s has already joined (or is the leader)",
                 o->node, j->id);
        peer_join_answer(o->call, ZPP_EEXIST, msg, NULL);
        return 1;
    }
    c->m[o->node].parked = o->call;
    snprintf(c->m[o->node].addr, sizeof c->m[o->node].addr, "%s", o->addr);
    ZLOG_I("cluster", "node joined", "job=%s node=%u addr=%s", j->id, o->node, o->addr);
    return 1;
}

/* Moves the orphan Joins of j onto it. */
static void adopt_orphans(struct job *j)
{
    struct cl_state *st = cls(j->d);
    struct orphan **pp = &st->orphans;
    while (*pp) {
        struct orphan *o = *pp;
        if (o->uid == j->uid && !strcmp(o->label, j->label) && !strcmp(o->job_id, j->id) &&
            adopt(j, o)) {
            *pp = o->next;
            free(o);
            continue;
        }
        pp = &o->next;
    }
    leader_try(j);
}

static void on_join(void *ctx, struct peer_join_call *call, const Zpp__Peer__JoinRequest *req,
                    const struct peer_caller *from)
{
    struct zppd *d = ctx;
    struct orphan *o = calloc(1, sizeof *o);
    if (!o) {
        peer_join_answer(call, ZPP_ENOMEM, "leader out of memory", NULL);
        return;
    }
    o->call = call;
    o->uid = req->tenant ? req->tenant->uid : 0;
    snprintf(o->label, sizeof o->label, "%s", req->tenant && req->tenant->label ? req->tenant->label : "");
    snprintf(o->job_id, sizeof o->job_id, "%s", req->job_id);
    o->node = req->node_rank;
    o->nodes = req->node_count;
    o->per_node = req->ranks_per_node;
    o->world = req->world_size;
    snprintf(o->topology, sizeof o->topology, "%s", req->topology ? req->topology : "");
    snprintf(o->addr, sizeof o->addr, "%s", req->address);
    ZLOG_D("cluster", "join arrived", "job=%s node=%u from=%s", o->job_id, o->node, from->peer);
    struct job *j = job_by_name(d, o->uid, o->label, o->job_id);
    if (j && j->node != 0) {
        peer_join_answer(call, ZPP_EINVAL, "this daemon is not the job's leader (node 0)", NULL);
        free(o);
        return;
    }
    o->next = cls(d)->orphans;
    cls(d)->orphans = o;
    if (j && j->cl)
        adopt_orphans(j);
}

static void on_join_cancelled(void *ctx, struct peer_join_call *call)
{
    struct zppd *d = ctx;
    for (struct orphan **pp = &cls(d)->orphans; *pp; pp = &(*pp)->next) {
        if ((*pp)->call == call) {
            struct orphan *o = *pp;
            *pp = o->next;
            free(o);
            return;
        }
    }
    for (struct job *j = d->jobs; j; j = j->next) {
        if (!j->cl)
            continue;
        for (uint32_t n = 0; n < j->cl->nodes; n++) {
            if (j->cl->m[n].parked == call) {
                j->cl->m[n].parked = NULL;
                ZLOG_W("cluster", "a node gave up joining", "job=%s node=%u", j->id, n);
            }
        }
    }
}

/* ---- member ---------------------------------------------------------------- */

static void on_join_reply(void *arg, int code, const char *msg, const Zpp__Peer__JoinReply *rep)
{
    struct cl_ref *r = arg;
    struct job *j = job_by_gen(r->d, r->gen);
    free(r);
    if (!j || !j->cl || j->state == JOB_ABORTED)
        return;
    j->cl->join_inflight = 0;
    if (code) {
        /* A refused node ends its own job but does not tell the others: a
         * misconfigured or stray daemon must not abort a healthy job. */
        j->cl->abort_sent = 1;
        job_abort(j, MET_ABORT_PEER, "joining the leader (node 0, %s) failed: %s", j->leader, msg);
        return;
    }
    struct cluster_job *c = j->cl;
    if (rep->n_members != c->nodes) {
        job_abort(j, MET_ABORT_PEER, "the leader answered with %zu members for %u nodes",
                  rep->n_members, c->nodes);
        return;
    }
    uint64_t now = zppd_now_ms();
    for (size_t i = 0; i < rep->n_members; i++) {
        uint32_t n = rep->members[i]->node_rank;
        if (n >= c->nodes)
            continue;
        if (n != j->node)
            snprintf(c->m[n].addr, sizeof c->m[n].addr, "%s", rep->members[i]->address);
        c->m[n].last_ok_ms = now;
    }
    uint8_t *ids = NULL;
    int nids = (int)rep->n_nccl_ids;
    if (nids != cluster_ids_needed(j)) {
        job_abort(j, MET_ABORT_PEER, "the leader sent %d communicator ids; the %s backend needs %d",
                  nids, j->d->backend_name, cluster_ids_needed(j));
        return;
    }
    if (nids) {
        ids = calloc((size_t)nids, CLUSTER_NCCL_ID_BYTES);
        if (!ids) {
            job_abort(j, MET_ABORT_OTHER, "out of memory");
            return;
        }
        for (int i = 0; i < nids; i++) {
            if (rep->nccl_ids[i].len != CLUSTER_NCCL_ID_BYTES) {
                free(ids);
                job_abort(j, MET_ABORT_PEER, "the leader sent a malformed communicator id");
                return;
            }
            memcpy(ids + (size_t)i * CLUSTER_NCCL_ID_BYTES, rep->nccl_ids[i].data,
                   CLUSTER_NCCL_ID_BYTES);
        }
    }
    c->formation = rep->formation; /* 0 from a leader that predates it */
    c->formed = 1;
    ZLOG_I("cluster", "joined the leader", "job=%s node=%u leader=%s", j->id, j->node, j->leader);
    job_cluster_ready(j, ids, nids);
    free(ids);
}

void cluster_form(struct job *j)
{
    struct zppd *d = j->d;
    struct cl_state *st = cls(d);
    if (!st || !st->peer) {
        job_abort(j, MET_ABORT_PEER,
                  "this zppd has no peer service (peer_listen is empty): it cannot join jobs "
                  "across nodes");
        return;
    }
    struct cluster_job *c = cj_get(j);
    if (!c) {
        job_abort(j, MET_ABORT_OTHER, "out of memory forming the job");
        return;
    }
    if (j->node == 0) {
        ZLOG_I("cluster", "leading the job: waiting for the other nodes", "job=%s nodes=%u",
               j->id, j->nodes);
        adopt_orphans(j);
        return;
    }
    Zpp__Peer__JoinRequest req = ZPP__PEER__JOIN_REQUEST__INIT;
    Zpp__Peer__Tenant ten = ZPP__PEER__TENANT__INIT;
    char topo[64];
    topology_of(j, topo, sizeof topo);
    ten.uid = j->uid;
    ten.label = j->label;
    req.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    req.job_id = j->id;
    req.tenant = &ten;
    req.node_rank = j->node;
    req.node_count = j->nodes;
    req.ranks_per_node = j->local;
    req.world_size = j->world;
    req.topology = topo;
    req.address = st->addr;
    struct cl_ref *r = ref_new(j, 0);
    if (!r) {
        job_abort(j, MET_ABORT_OTHER, "out of memory");
        return;
    }
    int rc = peer_join(st->peer, j->leader, &req, d->cfg.join_timeout_ms, on_join_reply, r);
    if (rc) {
        free(r);
        job_abort(j, MET_ABORT_PEER, "cannot send Join to the leader %s (code %d)", j->leader, rc);
        return;
    }
    c->join_inflight = 1;
    ZLOG_I("cluster", "joining the leader", "job=%s node=%u leader=%s", j->id, j->node, j->leader);
}

/* ---- heartbeats and aborts ------------------------------------------------- */

static void ended_note(struct job *j, int aborted)
{
    struct cl_state *st = cls(j->d);
    if (!st)
        return;
    struct cl_ended *e = &st->ended[st->ended_next++ % CL_ENDED];
    e->at_ms = zppd_now_ms();
    e->uid = j->uid;
    snprintf(e->label, sizeof e->label, "%s", j->label);
    snprintf(e->job_id, sizeof e->job_id, "%s", j->id);
    e->formation = j->cl ? j->cl->formation : 0;
    e->aborted = aborted;
    snprintf(e->reason, sizeof e->reason, "%s", aborted ? j->abort_reason : "");
}

/* Two formation ids name the same formation, or one is not known. */
static int same_formation(uint64_t a, uint64_t b)
{
    return !a || !b || a == b;
}

/* The newest note of the job (ended well within peer_timeout_ms, or
 * aborted within CL_ABORTED_KEEP_MS), or NULL. */
static const struct cl_ended *ended_recently(const struct zppd *d, uint32_t uid, const char *label,
                                             const char *id, uint64_t formation)
{
    const struct cl_state *st = cls(d);
    const struct cl_ended *best = NULL;
    uint64_t now = zppd_now_ms();
    for (unsigned i = 0; st && i < CL_ENDED; i++) {
        const struct cl_ended *e = &st->ended[i];
        uint64_t keep = e->aborted ? CL_ABORTED_KEEP_MS : d->cfg.peer_timeout_ms;
        if (e->at_ms && now - e->at_ms <= keep && e->uid == uid && !strcmp(e->label, label) &&
            !strcmp(e->job_id, id) && same_formation(e->formation, formation) &&
            (!best || e->at_ms >= best->at_ms))
            best = e;
    }
    return best;
}

/* Ends j here, well: every node was idle. May free j. */
static void end_idle(struct job *j)
{
    ended_note(j, 0);
    job_end_idle(j);
}

/* Ends j here when this node and every other one are idle (the others'
 * last heartbeat, request or reply, said so). May free j. */
static void try_end_idle(struct job *j)
{
    struct cluster_job *c = j->cl;
    if (!c || !c->formed || !job_node_idle(j))
        return;
    for (uint32_t n = 0; n < c->nodes; n++)
        if (n != j->node && !c->m[n].idle)
            return;
    end_idle(j);
}

static void on_hb_reply(void *arg, int code, const char *msg, int state)
{
    struct cl_ref *r = arg;
    struct job *j = job_by_gen(r->d, r->gen);
    uint32_t n = r->node;
    free(r);
    if (!j || !j->cl || n >= j->cl->nodes)
        return;
    struct cl_member *m = &j->cl->m[n];
    m->hb_inflight = 0;
    if (code && j->state != JOB_ABORTED) { /* the timeout decides; a device error asks */
        m->last_fail_ms = zppd_now_ms();
        snprintf(m->fail, sizeof m->fail, "%s: %s", zpp_strerror(code), msg ? msg : "");
    }
    if (j->state == JOB_ABORTED || code)
        return;
    if (state == ZPP__PEER__JOB_STATE__JOB_STATE_ENDED) {
        /* n saw every node idle, this one included, and ended its part */
        m->last_ok_ms = zppd_now_ms();
        if (job_node_idle(j))
            end_idle(j);
        else
            job_abort(j, MET_ABORT_PEER,
                      "node %u (%s) ended the job when every node was idle, "
                      "but a rank of this node came back",
                      n, m->addr);
        return;
    }
    if (state == ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN && m->idle && job_node_idle(j)) {
        /* it was idle and ended its part: every node was */
        m->last_ok_ms = zppd_now_ms();
        try_end_idle(j);
        return;
    }
    if (state == ZPP__PEER__JOB_STATE__JOB_STATE_ABORTED ||
        state == ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN) {
        int aborted = state == ZPP__PEER__JOB_STATE__JOB_STATE_ABORTED;
        int why = aborted && msg && msg[0]; /* the peer's reason, sanitized in peer.c */
        job_abort(j, MET_ABORT_PEER, "node %u (%s) %s%s%s", n, m->addr,
                  aborted ? "has aborted the job" : "no longer knows the job (its zppd restarted?)",
                  why ? ": " : "", why ? msg : "");
        return;
    }
    m->last_ok_ms = zppd_now_ms();
    m->idle = state == ZPP__PEER__JOB_STATE__JOB_STATE_IDLE;
    if (m->idle)
        try_end_idle(j);
}

static int on_heartbeat(void *ctx, const Zpp__Peer__HeartbeatRequest *req,
                        const struct peer_caller *from, int *state, char *msg, size_t len)
{
    struct zppd *d = ctx;
    uint32_t uid = req->tenant ? req->tenant->uid : 0;
    const char *label = req->tenant && req->tenant->label ? req->tenant->label : "";
    struct job *j = job_by_name(d, uid, label, req->job_id);
    if (j && j->cl && !same_formation(j->cl->formation, req->formation))
        j = NULL; /* about an earlier formation of this job id, not this one */
    if (!j) {
        const struct cl_ended *e = ended_recently(d, uid, label, req->job_id, req->formation);
        *state = !e           ? ZPP__PEER__JOB_STATE__JOB_STATE_UNKNOWN
                 : e->aborted ? ZPP__PEER__JOB_STATE__JOB_STATE_ABORTED
                              : ZPP__PEER__JOB_STATE__JOB_STATE_ENDED;
        if (e && e->aborted)
            snprintf(msg, len, "%s", e->reason);
        return 0;
    }
    if (j->state == JOB_ABORTED && !j->ended_clean)
        snprintf(msg, len, "%s", j->abort_reason);
    *state = j->state == JOB_ABORTED   ? ZPP__PEER__JOB_STATE__JOB_STATE_ABORTED
             : job_node_idle(j)        ? ZPP__PEER__JOB_STATE__JOB_STATE_IDLE
             : j->state == JOB_RUNNING ? ZPP__PEER__JOB_STATE__JOB_STATE_RUNNING
                                       : ZPP__PEER__JOB_STATE__JOB_STATE_FORMING;
    if (j->cl && req->node_rank < j->cl->nodes && req->node_rank != j->node) {
        struct cl_member *m = &j->cl->m[req->node_rank];
        m->last_ok_ms = zppd_now_ms();
        m->idle = req->idle;
        if (m->idle)
            try_end_idle(j); /* the answer is already decided: j may go */
    }
    return 0;
}

static int on_abort(void *ctx, const Zpp__Peer__AbortRequest *req, const struct peer_caller *from,
                    char *msg, size_t len)
{
    struct zppd *d = ctx;
    struct job *j = job_by_name(d, req->tenant ? req->tenant->uid : 0,
                                req->tenant && req->tenant->label ? req->tenant->label : "",
                                req->job_id);
    if (j && j->cl && !same_formation(j->cl->formation, req->formation)) {
        /* an abort of an earlier formation of this job id: not this job's */
        snprintf(msg, len, "no such job here (the job id formed again since)");
        return ZPP_ENOENT;
    }
    if (!j) {
        snprintf(msg, len, "no such job here");
        return ZPP_ENOENT;
    }
    if (j->state != JOB_ABORTED) {
        if (j->cl)
            j->cl->abort_sent = 1; /* the sender tells the others */
        job_abort(j, MET_ABORT_PEER, "node %u: %s", req->from_node, req->reason);
    }
    return 0;
}

void cluster_abort(struct job *j)
{
    struct cl_state *st = cls(j->d);
    struct cluster_job *c = j->cl;
    if (!st || !st->peer || !c)
        return;
    char msg[512];
    snprintf(msg, sizeof msg, "job %s was aborted on node %u: %s", j->id, j->node, j->abort_reason);
    for (uint32_t n = 0; n < c->nodes; n++) {
        if (c->m[n].parked) { /* leader: Joins still parked learn it now */
            peer_join_answer(c->m[n].parked, ZPP_EABORTED, msg, NULL);
            c->m[n].parked = NULL;
        }
    }
    if (c->abort_sent)
        return;
    c->abort_sent = 1;
    struct peer_tenant ten = {.uid = j->uid, .label = j->label};
    for (uint32_t n = 0; n < c->nodes; n++)
        if (n != j->node && c->m[n].addr[0])
            peer_abort_send(st->peer, c->m[n].addr, j->id, &ten, j->abort_reason, j->node,
                            c->formation, NULL, NULL);
}

/* Heartbeats member n of j now, unless one is in flight. */
static void heartbeat(struct cl_state *st, struct job *j, uint32_t n, uint64_t now)
{
    struct cl_member *m = &j->cl->m[n];
    struct peer_tenant ten = {.uid = j->uid, .label = j->label};
    if (m->hb_inflight)
        return;
    struct cl_ref *r = ref_new(j, n);
    if (!r)
        return;
    if (peer_heartbeat(st->peer, m->addr, j->id, &ten, j->node, job_node_idle(j),
                       j->cl->formation, j->d->cfg.peer_heartbeat_ms, on_hb_reply, r)) {
        free(r);
        return;
    }
    m->hb_inflight = 1;
    m->last_sent_ms = now;
}

void cluster_probe(struct job *j)
{
    struct cl_state *st = cls(j->d);
    struct cluster_job *c = j->cl;
    if (!st || !st->peer || !c || !c->formed)
        return;
    uint64_t now = zppd_now_ms();
    for (uint32_t n = 0; n < c->nodes; n++)
        if (n != j->node && c->m[n].addr[0])
            heartbeat(st, j, n, now);
}

void cluster_idle(struct job *j)
{
    /* The notice is a heartbeat, and skipped while one to that node is in
     * flight: the others may learn it only from their own heartbeats,
     * after this node has ended the job (the ENDED answer). The test hook
     * makes that the rule (tests/integration/test_multinode.c, 16). */
    struct cl_state *st = cls(j->d);
    if (!st || !st->no_idle_notice)
        cluster_probe(j);
    try_end_idle(j);
}

uint64_t cluster_silence_ms(const struct zppd *d)
{
    return 2u * (uint64_t)d->cfg.peer_heartbeat_ms + 1000u;
}

int cluster_suspect(const struct job *j, uint64_t now, char *buf, size_t len)
{
    const struct cluster_job *c = j->cl;
    uint64_t quiet = cluster_silence_ms(j->d);
    if (!c || !c->formed)
        return 0;
    for (uint32_t n = 0; n < c->nodes; n++) {
        const struct cl_member *m = &c->m[n];
        if (n == j->node || !m->addr[0])
            continue;
        if (m->last_fail_ms && m->last_fail_ms >= m->last_ok_ms) {
            snprintf(buf, len, "node %u (%s): its heartbeat failed %" PRIu64 " ms ago (%s)", n,
                     m->addr, now - m->last_fail_ms, m->fail);
            return 1;
        }
        if (m->last_ok_ms && now - m->last_ok_ms > quiet) {
            snprintf(buf, len, "node %u (%s): no heartbeat answered for %" PRIu64 " ms", n,
                     m->addr, now - m->last_ok_ms);
            return 1;
        }
    }
    return 0;
}

/* A peer clock moved on by a loop stall of `gap` ms, never past now: one
 * read after the previous tick, just before the stall, would otherwise lie
 * in the future and `now - t` wrap around. */
static uint64_t stall_shift(uint64_t t, uint64_t gap, uint64_t now)
{
    return t + gap < now ? t + gap : now;
}

void cluster_tick(struct zppd *d)
{
    struct cl_state *st = cls(d);
    if (!st || !st->peer)
        return;
    uint64_t now = zppd_now_ms();
    /* The loop thread can still be held up (a job's first collective
     * connecting lazily, ZPP_NCCL_BLOCKING, a slow machine; communicator
     * creation no longer does: job.c, "formation"). Replies that arrived
     * meanwhile are still queued behind this tick, so the stall must not
     * count against the peers: their clocks move on by its length. */
    uint64_t gap = st->last_tick_ms && now > st->last_tick_ms ? now - st->last_tick_ms : 0;
    st->last_tick_ms = now;
    if (gap > 2u * d->cfg.peer_heartbeat_ms + 1000u) {
        ZLOG_W("cluster", "the loop was held up: peer timeouts restart", "ms=%" PRIu64, gap);
        for (struct job *j = d->jobs; j; j = j->next) {
            if (!j->cl)
                continue;
            if (!j->cl->formed)
                j->cl->form_start_ms = stall_shift(j->cl->form_start_ms, gap, now);
            for (uint32_t n = 0; n < j->cl->nodes; n++)
                if (j->cl->m[n].last_ok_ms)
                    j->cl->m[n].last_ok_ms = stall_shift(j->cl->m[n].last_ok_ms, gap, now);
        }
    }
    for (struct job *j = d->jobs; j; j = j->next) {
        struct cluster_job *c = j->cl;
        if (!c || j->state == JOB_ABORTED)
            continue;
        if (!c->formed) {
            if (now - c->form_start_ms <= d->cfg.join_timeout_ms)
                continue;
            char missing[256] = "";
            size_t o = 0;
            for (uint32_t n = 1; n < c->nodes && o + 12 < sizeof missing; n++)
                if (!c->m[n].parked)
                    o += (size_t)snprintf(missing + o, sizeof missing - o, "%s%u", o ? "," : "", n);
            if (j->node == 0)
                job_abort(j, MET_ABORT_PEER, "nodes %s did not join within %u ms (join_timeout_ms)",
                          missing, d->cfg.join_timeout_ms);
            else if (!c->join_inflight)
                job_abort(j, MET_ABORT_PEER, "the leader %s did not answer within %u ms", j->leader,
                          d->cfg.join_timeout_ms);
            continue;
        }
        for (uint32_t n = 0; n < c->nodes; n++) {
            struct cl_member *m = &c->m[n];
            if (n == j->node || !m->addr[0])
                continue;
            if (now - m->last_ok_ms > d->cfg.peer_timeout_ms) {
                job_abort(j, MET_ABORT_PEER, "node %u (%s) stopped answering heartbeats for %" PRIu64
                          " ms", n, m->addr, now - m->last_ok_ms);
                break;
            }
            if (now - m->last_sent_ms >= d->cfg.peer_heartbeat_ms)
                heartbeat(st, j, n, now);
        }
    }
}

void cluster_job_free(struct job *j)
{
    struct cluster_job *c = j->cl;
    if (!c)
        return;
    if (c->formed && j->state == JOB_ABORTED && !j->ended_clean)
        ended_note(j, 1); /* a late member's heartbeat learns why */
    for (uint32_t n = 0; n < c->nodes; n++)
        if (c->m[n].parked)
            peer_join_answer(c->m[n].parked, ZPP_EABORTED, "the job ended on the leader", NULL);
    free(c->m);
    free(c);
    j->cl = NULL;
}

/* ---- service --------------------------------------------------------------- */

static void peer_log(void *arg, int level, const char *msg)
{
    (void)arg;
    zlog(level, "peer", msg, NULL);
}

int cluster_start(struct zppd *d)
{
    struct cl_state *st = calloc(1, sizeof *st);
    if (!st)
        return ZPP_ENOMEM;
    d->cluster = st;
    const char *hook = getenv("ZPPD_TEST_NO_IDLE_NOTICE");
    st->no_idle_notice = hook && !strcmp(hook, "1");
    if (!d->cfg.peer_listen[0]) {
        ZLOG_I("cluster", "peer service off (peer_listen empty): single-node jobs only", NULL);
        return 0;
    }
    peer_set_log(peer_log, NULL);
    struct peer_config pc = {.listen = d->cfg.peer_listen,
                             .use_tls = d->cfg.peer_tls,
                             .tls = {.ca_file = d->cfg.peer_tls_ca,
                                     .cert_file = d->cfg.peer_tls_cert,
                                     .key_file = d->cfg.peer_tls_key,
                                     .target_name_override = d->cfg.peer_tls_target_override[0]
                                                                 ? d->cfg.peer_tls_target_override
                                                                 : NULL},
                             .max_join_wait_ms = d->cfg.join_timeout_ms};
    static const struct peer_handlers handlers = {.on_join = on_join,
                                                  .on_join_cancelled = on_join_cancelled,
                                                  .on_heartbeat = on_heartbeat,
                                                  .on_abort = on_abort};
    char why[256];
    int rc = peer_start(d->loop, &pc, &handlers, d, &st->peer, why, sizeof why);
    if (rc) {
        ZLOG_E("cluster", "cannot start the peer service", "listen=%s why=\"%s\"",
               d->cfg.peer_listen, why);
        return rc;
    }
    if (d->cfg.peer_advertise[0]) {
        snprintf(st->addr, sizeof st->addr, "%s", d->cfg.peer_advertise);
    } else {
        char host[200];
        snprintf(host, sizeof host, "%s", d->cfg.peer_listen);
        char *colon = strrchr(host, ':');
        if (colon)
            *colon = 0;
        snprintf(st->addr, sizeof st->addr, "%s:%d", host, peer_port(st->peer));
    }
    ZLOG_I("cluster", "peer service listening", "listen=%s address=%s tls=%d", d->cfg.peer_listen,
           st->addr, d->cfg.peer_tls);
    return 0;
}

void cluster_stop(struct zppd *d)
{
    struct cl_state *st = cls(d);
    if (!st)
        return;
    while (st->orphans) {
        struct orphan *o = st->orphans;
        st->orphans = o->next;
        peer_join_answer(o->call, ZPP_EABORTED, "the leader's zppd is stopping", NULL);
        free(o);
    }
    peer_stop(st->peer);
    st->peer = NULL;
}

void cluster_free(struct zppd *d)
{
    free(d->cluster);
    d->cluster = NULL;
}

const char *cluster_address(const struct zppd *d)
{
    return cls(d) ? cls(d)->addr : "";
}
