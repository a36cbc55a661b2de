/*
 * admin.c — see admin.h. Builds the protobuf replies from the loop's
 * state; nothing here changes it.
 */
#include "admin.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "hpz_store.h"
#include "job.h"
#include "session.h"
#include "zpp.h"

static int sees_all(const struct session *s)
{
    return s->uid == 0 || s->uid == s->d->uid;
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
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_STATUS;
    rep.status = &st;
    sess_send(s, &rep);
}

static const char *const rec_state[] = {"pending", "running", "done", "failed"};

void admin_jobs(struct session *s, uint64_t req_id)
{
    struct zppd *d = s->d;
    uint32_t n = 0;
    for (struct job *j = d->jobs; j; j = j->next)
        if (sees_all(s) || j->uid == s->uid)
            n++;
    Zpp__JobInfo *infos = calloc(n ? n : 1, sizeof *infos);
    Zpp__JobInfo **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    /* Per job: joined ranks, missing ranks, ring records. */
    uint32_t *ranks = NULL, *missing = NULL;
    Zpp__CallRecord *recs = calloc((size_t)(n ? n : 1) * JOB_RING, sizeof *recs);
    Zpp__CallRecord **recp = calloc((size_t)(n ? n : 1) * JOB_RING, sizeof *recp);
    size_t total_world = 0;
    for (struct job *j = d->jobs; j; j = j->next)
        if (sees_all(s) || j->uid == s->uid)
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
        if (!(sees_all(s) || j->uid == s->uid))
            continue;
        Zpp__JobInfo *ji = &infos[i];
        zpp__job_info__init(ji);
        ptrs[i] = ji;
        ji->job_id = j->id;
        ji->tenant_uid = j->uid;
        ji->world_size = j->world;
        ji->nodes = j->nodes;
        ji->state = (char *)job_state_name(j->state);
        ji->abort_reason = j->abort_reason;
        ji->store_bytes = hpz_store_job_bytes(d->store, j);
        ji->joined_ranks = ranks + rpos;
        for (uint32_t r = 0; r < j->world; r++)
            if (j->members[r])
                ranks[rpos + ji->n_joined_ranks++] = r;
        rpos += j->world;
        if (j->calls) {
            struct call *c = j->calls;
            ji->oldest_pending_seq = c->seq;
            ji->missing_ranks = missing + mpos;
            for (uint32_t r = 0; r < j->world; r++)
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
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_JOBS;
    rep.jobs = &jr;
    sess_send(s, &rep);
out:
    free(infos);
    free(ptrs);
    free(recs);
    free(recp);
    free(ranks);
    free(missing);
}
