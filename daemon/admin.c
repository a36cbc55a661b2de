/*
 * admin.c — see admin.h. Builds the protobuf replies from the loop's
 * state; nothing here changes it.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cluster.h"
#include "daemon.h"
#include "hpz_store.h"
#include "job.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "zpp.h"

/* Sends a reply to req_id whose body is `msg` (a pointer) in the Reply
 * field `member`, case ZPP__REPLY__BODY_<CASE>; one that cannot be sent
 * gets an error reply instead (send_failed). */
#define SEND_REPLY(s, req_id, CASE, member, msg)                                                   \
    do {                                                                                           \
        Zpp__Reply rep_ = ZPP__REPLY__INIT;                                                        \
        rep_.req_id = (req_id);                                                                    \
        rep_.body_case = ZPP__REPLY__BODY_##CASE;                                                  \
        rep_.member = (msg);                                                                       \
        int rc_ = sess_send((s), &rep_);                                                           \
        if (rc_ < 0)                                                                               \
            send_failed((s), (req_id), rc_);                                                       \
    } while (0)

/* A listing that sess_send could not queue: too large to pack (a reply
 * frame carries at most 64 MiB: some twenty jobs of a million ranks, each
 * listing the ranks missing from its oldest call) or out of memory.
 * Without an answer the caller would wait forever. On a session that is
 * closing sess_send_error drops it. */
static void send_failed(struct session *s, uint64_t req_id, int rc)
{
    if (rc == ZPP_ELIMIT)
        sess_send_error(s, req_id, ZPP_ELIMIT,
                        "the reply is larger than 64 MiB, the most one frame may carry");
    else
        sess_send_error(s, req_id, rc, "the reply cannot be sent (%s)", zpp_err_name(rc));
}

#define ADMIN_MAX_GPUS 64

static int sees_all(const struct session *s)
{
    return s->uid == 0 || s->uid == s->d->uid;
}

/* Whether s may see what belongs to uid (a job, a session). */
static int sees_uid(const struct session *s, uint32_t uid)
{
    return sees_all(s) || uid == s->uid;
}

/* The jobs s may see. */
static uint32_t visible_jobs(const struct session *s)
{
    uint32_t n = 0;
    for (const struct job *j = s->d->jobs; j; j = j->next)
        if (sees_uid(s, j->uid))
            n++;
    return n;
}

static uint32_t running_jobs(const struct zppd *d)
{
    uint32_t n = 0;
    for (const struct job *j = d->jobs; j; j = j->next)
        if (j->state != JOB_ABORTED)
            n++;
    return n;
}

/* The running jobs and the open sessions s may see. */
static uint32_t visible_running_jobs(const struct session *s)
{
    uint32_t n = 0;
    for (const struct job *j = s->d->jobs; j; j = j->next)
        if (j->state != JOB_ABORTED && sees_uid(s, j->uid))
            n++;
    return n;
}
static uint32_t visible_sessions(const struct session *s)
{
    uint32_t n = 0;
    for (const struct session *x = s->d->sessions; x; x = x->next)
        if (x->state == SESS_OPEN && sees_uid(s, x->uid))
            n++;
    return n;
}

void admin_status(struct session *s, uint64_t req_id)
{
    struct zppd *d = s->d;
    Zpp__StatusReply st = ZPP__STATUS_REPLY__INIT;
    st.daemon_version = (char *)ZPPD_VERSION;
    st.backend = (char *)d->backend_name;
    st.uptime_s = (zppd_now_ms() - d->start_ms) / 1000;
    st.sessions = d->nsessions;
    st.jobs = d->njobs;
    uint64_t used = 0, entries = 0, hits = 0, misses = 0;
    hpz_store_stats(d->store, &used, &entries, &hits, &misses);
    st.store_bytes = used;
    st.store_budget = d->cfg.store_budget;
    st.calls_ok = d->stats.calls_ok;
    st.calls_failed = d->stats.calls_failed;
    st.bytes_intra = d->stats.bytes_intra;
    st.bytes_inter = d->stats.bytes_inter;
    st.draining = d->draining;
    st.pid = (uint32_t)getpid();
    st.peer_address = (char *)cluster_address(d);
    st.stopping = d->stopping;
    st.running_jobs = running_jobs(d);
    if (!sees_all(s)) {
        /* Another tenant's activity is not this caller's to see: its own
         * sessions, jobs, calls, bytes and store bytes instead. */
        struct metrics_totals mt;
        metrics_tenant_totals(d, s->uid, &mt);
        st.own_uid_only = 1;
        st.sessions = visible_sessions(s);
        st.jobs = visible_jobs(s);
        st.running_jobs = visible_running_jobs(s);
        st.calls_ok = mt.calls_ok;
        st.calls_failed = mt.calls_failed;
        st.bytes_intra = mt.bytes_intra;
        st.bytes_inter = mt.bytes_inter;
        st.store_bytes = hpz_store_tenant_bytes(d->store, s->uid);
    }
    struct be_dev_stat ds[ADMIN_MAX_GPUS];
    Zpp__GpuInfo gi[ADMIN_MAX_GPUS], *gp[ADMIN_MAX_GPUS];
    int ng = d->be->dev_stats ? d->be->dev_stats(d->be_state, ds, ADMIN_MAX_GPUS) : 0;
    if (ng > ADMIN_MAX_GPUS)
        ng = ADMIN_MAX_GPUS;
    for (int i = 0; i < ng; i++) {
        zpp__gpu_info__init(&gi[i]);
        gi[i].index = (uint32_t)i;
        gi[i].uuid = ds[i].uuid;
        gi[i].name = ds[i].name;
        gi[i].mps = ds[i].mps;
        gi[i].imports = ds[i].imports;
        gi[i].imported_bytes = ds[i].imported_bytes;
        gi[i].deferred_releases = ds[i].deferred;
        gi[i].deferred_oldest_ms = ds[i].deferred_oldest_ms;
        gi[i].used_bytes = ds[i].used_bytes;
        gi[i].total_bytes = ds[i].total_bytes;
        gp[i] = &gi[i];
    }
    st.n_gpus = (size_t)(ng > 0 ? ng : 0);
    st.gpus = gp;
    SEND_REPLY(s, req_id, STATUS, status, &st);
}

static const char *const rec_state[] = {"pending", "running", "done", "failed"};

void admin_jobs(struct session *s, uint64_t req_id)
{
    struct zppd *d = s->d;
    uint32_t n = visible_jobs(s);
    Zpp__JobInfo *infos = calloc(n ? n : 1, sizeof *infos);
    Zpp__JobInfo **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    /* Per job: joined ranks, missing ranks, ring records. */
    uint32_t *ranks = NULL, *missing = NULL;
    Zpp__CallRecord *recs = calloc((size_t)(n ? n : 1) * JOB_RING, sizeof *recs);
    Zpp__CallRecord **recp = calloc((size_t)(n ? n : 1) * JOB_RING, sizeof *recp);
    size_t total_world = 0;
    for (struct job *j = d->jobs; j; j = j->next)
        if (sees_uid(s, j->uid))
            total_world += j->world;
    ranks = calloc(total_world ? total_world : 1, sizeof *ranks);
    missing = calloc(total_world ? total_world : 1, sizeof *missing);
    if (!infos || !ptrs || !recs || !recp || !ranks || !missing) {
        sess_send_error(s, req_id, ZPP_ENOMEM, "out of memory listing jobs");
        goto out;
    }
    uint32_t i = 0;
    size_t rpos = 0, mpos = 0;
    for (struct job *j = d->jobs; j; j = j->next) {
        if (!sees_uid(s, j->uid))
            continue;
        Zpp__JobInfo *ji = &infos[i];
        zpp__job_info__init(ji);
        ptrs[i] = ji;
        ji->job_id = j->id;
        ji->tenant_label = j->label;
        ji->tenant_uid = j->uid;
        ji->world_size = j->world;
        ji->nodes = j->nodes;
        ji->state = (char *)job_state_label(j);
        ji->abort_reason = j->abort_reason;
        ji->store_bytes = hpz_store_job_bytes(d->store, j);
        ji->device_memory =
            j->be_job && d->be->job_memory ? d->be->job_memory(d->be_state, j->be_job) : 0;
        ji->joined_ranks = ranks + rpos;
        for (uint32_t r = 0; r < j->world; r++)
            if (j->members[r])
                ranks[rpos + ji->n_joined_ranks++] = r;
        /* a rank is joined or away, never both: the two lists share its span */
        ji->away_ranks = ranks + rpos + ji->n_joined_ranks;
        for (uint32_t r = 0; j->detached_ms && r < j->world; r++)
            if (j->detached_ms[r] && !j->members[r])
                ji->away_ranks[ji->n_away_ranks++] = r;
        rpos += j->world;
        if (j->calls) {
            struct call *c = j->calls;
            ji->oldest_pending_seq = c->seq;
            ji->missing_ranks = missing + mpos;
            for (uint32_t r = j->lo; r < j->lo + j->nlocal; r++)
                if (!c->subs[r].submitted)
                    missing[mpos + ji->n_missing_ranks++] = r;
            mpos += j->world;
        }
        Zpp__CallRecord **rp = recp + (size_t)i * JOB_RING;
        Zpp__CallRecord *rr = recs + (size_t)i * JOB_RING;
        ji->recent = rp;
        uint32_t cnt = j->ring_pos < JOB_RING ? j->ring_pos : JOB_RING;
        for (uint32_t k = 0; k < cnt; k++) {
            const struct call_record *src = &j->ring[(j->ring_pos - cnt + k) % JOB_RING];
            zpp__call_record__init(&rr[k]);
            rr[k].seq = src->seq;
            rr[k].op = src->op;
            rr[k].bytes = src->bytes;
            rr[k].state = (char *)rec_state[src->state & 3];
            rr[k].start_us = src->start_us;
            rr[k].end_us = src->end_us;
            rr[k].message = (char *)src->msg;
            rp[k] = &rr[k];
        }
        ji->n_recent = cnt;
        i++;
    }
    Zpp__JobsReply jr = ZPP__JOBS_REPLY__INIT;
    jr.n_jobs = n;
    jr.jobs = ptrs;
    SEND_REPLY(s, req_id, JOBS, jobs, &jr);
out:
    free(infos);
    free(ptrs);
    free(recs);
    free(recp);
    free(ranks);
    free(missing);
}

static const char *role_name(enum sess_role r)
{
    return r == SESS_ROLE_RANK ? "rank" : r == SESS_ROLE_ADMIN ? "admin" : "none";
}

void admin_sessions(struct session *s, uint64_t req_id)
{
    struct zppd *d = s->d;
    uint32_t n = 0;
    for (struct session *x = d->sessions; x; x = x->next)
        if (x->state == SESS_OPEN && sees_uid(s, x->uid))
            n++;
    Zpp__SessionInfo *infos = calloc(n ? n : 1, sizeof *infos);
    Zpp__SessionInfo **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    if (!infos || !ptrs) {
        sess_send_error(s, req_id, ZPP_ENOMEM, "out of memory listing sessions");
        goto out;
    }
    uint64_t now = zppd_now_ms();
    uint32_t i = 0;
    for (struct session *x = d->sessions; x && i < n; x = x->next) {
        if (x->state != SESS_OPEN || !sees_uid(s, x->uid))
            continue;
        Zpp__SessionInfo *si = &infos[i];
        zpp__session_info__init(si);
        ptrs[i++] = si;
        si->session_id = x->id;
        si->uid = x->uid;
        si->gid = x->gid;
        si->pid = x->pid;
        si->role = (char *)role_name(x->role);
        si->tenant_label = x->label;
        si->job_id = x->job ? x->job->id : (char *)"";
        si->rank = x->rank;
        si->pending = x->pending;
        si->buffers = x->nbufs;
        si->connected_s = (now - x->connected_ms) / 1000;
        si->output_bytes = x->out_bytes;
        si->sync = (char *)(x->flag_sync ? "flags" : x->events ? "events" : "");
    }
    Zpp__SessionsReply sr = ZPP__SESSIONS_REPLY__INIT;
    sr.n_sessions = i;
    sr.sessions = ptrs;
    SEND_REPLY(s, req_id, SESSIONS, sessions, &sr);
out:
    free(infos);
    free(ptrs);
}

/* Collects the shared replicas a session may see, for admin_store: a first
 * pass (rows == NULL) counts them, a second fills rows and copies the keys
 * into keys (one HPZ_KEY_MAX + 1 slot per row: a key is only valid during
 * the callback). */
struct replica_walk {
    const struct session *s;
    Zpp__StoreReplica *rows;
    char *keys;
    size_t n, cap;
};

static void replica_row(const struct hpz_shared_info *in, void *arg)
{
    struct replica_walk *w = arg;
    if (!sees_all(w->s) && !hpz_store_may_read(w->s->d->store, w->s->uid, in->owner))
        return;
    if (!w->rows) {
        w->n++;
        return;
    }
    if (w->n == w->cap) /* the store cannot change between the passes */
        return;
    Zpp__StoreReplica *r = &w->rows[w->n];
    char *key = w->keys + w->n * (HPZ_KEY_MAX + 1);
    snprintf(key, HPZ_KEY_MAX + 1, "%s", in->key);
    zpp__store_replica__init(r);
    r->content_key = key;
    r->owner_uid = in->owner;
    r->count = in->count;
    r->dtype = (Zpp__DType)in->dtype;
    r->slots = (uint32_t)in->nslots;
    r->bytes = in->bytes;
    r->attached_jobs = (uint32_t)in->attachments;
    r->pins = (uint32_t)in->pins;
    r->idle_ops = in->idle_for;
    w->n++;
}

void admin_store(struct session *s, uint64_t req_id)
{
    struct zppd *d = s->d;
    Zpp__StoreReply sr = ZPP__STORE_REPLY__INIT;
    hpz_store_stats(d->store, &sr.bytes, &sr.entries, &sr.hits, &sr.misses);
    sr.budget_per_device = d->cfg.store_budget;
    sr.budget_per_tenant = d->cfg.store_budget_per_tenant;
    uint32_t n = visible_jobs(s);
    /* Tenants: the callers' uid, and every uid with a job that the caller
     * may see (at most one row per job, plus one). */
    Zpp__StoreJob *jobs = calloc(n ? n : 1, sizeof *jobs);
    Zpp__StoreJob **jp = calloc(n ? n : 1, sizeof *jp);
    Zpp__StoreTenant *ten = calloc(n + 1, sizeof *ten);
    Zpp__StoreTenant **tp = calloc(n + 1, sizeof *tp);
    struct replica_walk rw = {.s = s};
    hpz_store_shared_foreach(d->store, replica_row, &rw);
    rw.cap = rw.n;
    rw.n = 0;
    rw.rows = calloc(rw.cap ? rw.cap : 1, sizeof *rw.rows);
    rw.keys = calloc(rw.cap ? rw.cap : 1, HPZ_KEY_MAX + 1);
    Zpp__StoreReplica **rp = calloc(rw.cap ? rw.cap : 1, sizeof *rp);
    if (!jobs || !jp || !ten || !tp || !rw.rows || !rw.keys || !rp) {
        sess_send_error(s, req_id, ZPP_ENOMEM, "out of memory listing the store");
        goto out;
    }
    uint32_t nj = 0, nt = 0;
    for (struct job *j = d->jobs; j; j = j->next) {
        if (!sees_uid(s, j->uid))
            continue;
        zpp__store_job__init(&jobs[nj]);
        jobs[nj].job_id = j->id;
        jobs[nj].tenant_uid = j->uid;
        jobs[nj].bytes = hpz_store_job_bytes(d->store, j);
        jp[nj] = &jobs[nj];
        nj++;
    }
    for (uint32_t k = 0; k <= nj; k++) {
        uint32_t uid = k < nj ? jobs[k].tenant_uid : s->uid;
        int seen = 0;
        for (uint32_t t = 0; t < nt; t++)
            seen |= ten[t].uid == uid;
        if (seen)
            continue;
        zpp__store_tenant__init(&ten[nt]);
        ten[nt].uid = uid;
        ten[nt].bytes = hpz_store_tenant_bytes(d->store, uid);
        ten[nt].budget = d->cfg.store_budget_per_tenant;
        tp[nt] = &ten[nt];
        nt++;
    }
    sr.n_jobs = nj;
    sr.jobs = jp;
    sr.n_tenants = nt;
    sr.tenants = tp;
    hpz_store_shared_foreach(d->store, replica_row, &rw);
    for (size_t k = 0; k < rw.n; k++)
        rp[k] = &rw.rows[k];
    sr.n_replicas = rw.n;
    sr.replicas = rp;
    if (!sees_all(s)) { /* the caller's uid's bytes and the replicas it may read */
        sr.own_uid_only = 1;
        sr.bytes = hpz_store_tenant_bytes(d->store, s->uid);
        sr.entries = hpz_store_tenant_entries(d->store, s->uid);
        sr.hits = sr.misses = 0;
    }
    SEND_REPLY(s, req_id, STORE, store, &sr);
out:
    free(jobs);
    free(jp);
    free(ten);
    free(tp);
    free(rw.rows);
    free(rw.keys);
    free(rp);
}

void admin_metrics(struct session *s, uint64_t req_id)
{
    if (!sees_all(s)) {
        sess_send_error(s, req_id, ZPP_EPERM,
                        "the metrics cover every tenant: only root or uid %u may read them",
                        s->d->uid);
        return;
    }
    size_t len = 0;
    char *text = metrics_render(s->d, &len);
    if (!text) {
        sess_send_error(s, req_id, ZPP_ENOMEM, "out of memory rendering the metrics");
        return;
    }
    Zpp__MetricsReply mr = ZPP__METRICS_REPLY__INIT;
    mr.text = text;
    SEND_REPLY(s, req_id, METRICS, metrics, &mr);
    free(text);
}

void admin_drain(struct session *s, uint64_t req_id, const Zpp__DrainRequest *dr)
{
    struct zppd *d = s->d;
    if (!sees_all(s)) {
        sess_send_error(s, req_id, ZPP_EPERM, "only root or uid %u may drain zppd", d->uid);
        return;
    }
    int want = !dr->off;
    if (d->draining != want)
        ZLOG_I("admin", want ? "draining: no new jobs" : "drain ended: taking new jobs",
               "by_uid=%u by_pid=%u running_jobs=%u", s->uid, s->pid, running_jobs(d));
    d->draining = want;
    Zpp__DrainReply r = ZPP__DRAIN_REPLY__INIT;
    r.draining = d->draining;
    r.running_jobs = running_jobs(d);
    SEND_REPLY(s, req_id, DRAIN, drain, &r);
}
