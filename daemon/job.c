/*
 * job.c — see job.h. The loop thread owns every field here; a running call
 * lives on a worker thread only between uv_queue_work and its after-work
 * callback, and touches nothing but its coll_exec and the mapped buffers.
 */
#include "job.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "cluster.h"
#include "daemon.h"
#include "frame.h"
#include "hpz_store.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "zpp.h"

static void job_pump(struct job *j);
static void job_device_error(struct job *j, const char *why);

const char *job_state_name(enum job_state st)
{
    switch (st) {
    case JOB_FORMING:
        return "forming";
    case JOB_RUNNING:
        return "running";
    case JOB_ABORTED:
        return "aborted";
    }
    return "?";
}

const char *job_state_label(const struct job *j)
{
    return job_node_idle(j) ? "idle" : job_state_name(j->state);
}

static const char *dtype_name(int dt)
{
    return dt == ZPP_FP32 ? "fp32" : dt == ZPP_FP16 ? "fp16" : dt == ZPP_BF16 ? "bf16" : "?";
}

/* Job ids and labels: printable, no spaces or quotes (they reach logs,
 * metrics labels and JSON); 1 to max characters. */
static int name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("._:@/+=-", ch)))
            return 0;
    }
    return 1;
}

static struct job *job_find(struct zppd *d, uint32_t uid, const char *label, const char *id)
{
    for (struct job *j = d->jobs; j; j = j->next)
        if (j->uid == uid && !strcmp(j->label, label) && !strcmp(j->id, id))
            return j;
    return NULL;
}

static void job_free(struct job *j)
{
    struct zppd *d = j->d;
    hpz_store_drop_job(d->store, j);
    cluster_job_free(j);
    /* how the backend's state ends: "graceful" (cuda: finalize, then
     * destroy), "abort" (ncclCommAbort), or "none" (job_abort closed it already, or it never had
     * one) */
    const char *closed = "none";
    if (j->be_job) {
        int abort = j->state == JOB_ABORTED && !j->ended_clean;
        d->be->job_close(d->be_state, j->be_job,
                         !abort         ? 0
                         : j->abort_now ? BE_CLOSE_ABORT_NOW
                                        : BE_CLOSE_ABORT);
        closed = abort ? "abort" : "graceful";
    }
    free(j->devices);
    if (j->prev)
        j->prev->next = j->next;
    else
        d->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    d->njobs--;
    ZLOG_I("job", "job freed", "job=%s uid=%u backend=%s", j->id, j->uid, closed);
    free(j->members);
    free(j->detached_ms);
    free(j);
}

/* ---- tenant quotas (tenant_max_*; 0 = none) ------------------------------ */

static uint32_t tenant_jobs(const struct zppd *d, uint32_t uid)
{
    uint32_t n = 0;
    for (const struct job *j = d->jobs; j; j = j->next)
        n += j->uid == uid;
    return n;
}

static uint32_t tenant_rank_sessions(const struct zppd *d, uint32_t uid)
{
    uint32_t n = 0;
    for (const struct session *s = d->sessions; s; s = s->next)
        n += s->uid == uid && s->role == SESS_ROLE_RANK && s->state == SESS_OPEN;
    return n;
}

/* Device memory the backend holds for the tenant's jobs (host: 0). */
static uint64_t tenant_device_memory(const struct zppd *d, uint32_t uid)
{
    uint64_t sum = 0;
    if (!d->be->job_memory)
        return 0;
    for (const struct job *j = d->jobs; j; j = j->next)
        if (j->uid == uid && j->be_job)
            sum += d->be->job_memory(d->be_state, j->be_job);
    return sum;
}

static void job_unref(struct job *j)
{
    if (--j->refs == 0)
        job_free(j);
}

/* ---- Hello --------------------------------------------------------------- */

static void reply_hello(struct session *s, uint64_t req_id, struct job *j, uint8_t (*done)[64],
                        uint32_t ndone)
{
    struct zppd *d = s->d;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    Zpp__HelloReply hr = ZPP__HELLO_REPLY__INIT;
    Zpp__Limits lim = ZPP__LIMITS__INIT;
    lim.max_frame = d->cfg.max_frame;
    lim.max_buffers = d->cfg.max_buffers_per_session;
    lim.max_pending = d->cfg.max_pending_per_session;
    lim.store_budget = d->cfg.store_budget;
    lim.call_timeout_ms = d->cfg.call_timeout_ms;
    hr.session_id = s->id;
    hr.daemon_version = (char *)ZPPD_VERSION;
    hr.backend = (char *)d->backend_name;
    hr.limits = &lim;
    if (j) {
        hr.nodes = j->nodes;
        hr.local_size = j->local;
        hr.next_seq = j->next_seq;
    }
    ProtobufCBinaryData ev[ZPP_MAX_EVENTS];
    for (uint32_t i = 0; i < ndone && i < ZPP_MAX_EVENTS; i++) {
        ev[i].data = done[i];
        ev[i].len = 64;
    }
    hr.n_done_events = ndone;
    hr.done_events = ev;
    hr.device = s->device;
    hr.flag_sync = s->flag_sync != 0;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_HELLO;
    rep.hello = &hr;
    sess_send(s, &rep);
}

/* ---- formation: the backend's communicators ------------------------------
 *
 * Creating a job's communicators can take as long as the network does
 * (across daemons NCCL connects to the peers), so it never runs to its end
 * on the loop: job_open only starts it, and the job stays JOB_FORMING,
 * with the calls that arrive meanwhile queued in j->calls (job_pump runs
 * none before JOB_RUNNING), while one daemon-wide timer polls job_poll of
 * every forming job, first after FORM_POLL_FIRST_MS, backing off to
 * FORM_POLL_MAX_MS. Ready: the device-memory quotas are checked and the
 * job runs its queue. A backend error, or join_timeout_ms passing first,
 * aborts the job the usual way (job_abort): every queued call and every
 * rank learn the cause, the other nodes are told (cluster_abort), and the
 * backend's half-made state is closed with abort = 1 (cuda: ncclCommAbort
 * on the in-progress communicators). A rank that leaves while its job
 * forms aborts it the same way (job_leave). */
#define FORM_POLL_FIRST_MS 1
#define FORM_POLL_MAX_MS 20

static void form_timer_cb(uv_timer_t *t);

/* (Re)arms the formation timer for the forming job due first; stops it
 * when none is forming. */
static void form_schedule(struct zppd *d)
{
    uint64_t next = UINT64_MAX;
    for (const struct job *j = d->jobs; j; j = j->next)
        if (j->be_forming && j->form_next_ms < next)
            next = j->form_next_ms;
    if (!d->form_timer_ready) {
        if (next == UINT64_MAX)
            return;
        uv_timer_init(d->loop, &d->form_timer);
        d->form_timer.data = d;
        d->form_timer_ready = 1;
    }
    if (next == UINT64_MAX) {
        uv_timer_stop(&d->form_timer);
        return;
    }
    uint64_t now = zppd_now_ms();
    uv_timer_start(&d->form_timer, form_timer_cb, next > now ? next - now : 0, 0);
}

/* The backend says the job is ready: quotas, then the job runs. */
static void job_formed(struct job *j)
{
    struct zppd *d = j->d;
    if (j->be_job) {
        ZLOG_I("job", "communicators ready", "job=%s ms=%" PRIu64, j->id,
               (zppd_now_us() - j->form_t0_us) / 1000);
        uint64_t mine = d->be->job_memory ? d->be->job_memory(d->be_state, j->be_job) : 0;
        if (d->cfg.job_max_device_memory && mine > d->cfg.job_max_device_memory) {
            job_abort(j, MET_ABORT_OTHER,
                      "the job would hold %" PRIu64 " bytes of device memory on this node "
                      "(communicators and staging; job_max_device_memory = %" PRIu64 ")",
                      mine, d->cfg.job_max_device_memory);
            return;
        }
        uint64_t quota = d->cfg.tenant_max_device_memory;
        uint64_t held = tenant_device_memory(d, j->uid);
        if (quota && held > quota) {
            job_abort(j, MET_ABORT_OTHER,
                      "tenant uid %u would hold %" PRIu64 " bytes of device memory "
                      "(tenant_max_device_memory = %" PRIu64 ")",
                      j->uid, held, quota);
            return;
        }
    }
    j->state = JOB_RUNNING;
    ZLOG_I("job", "job formed", "job=%s uid=%u world=%u nodes=%u node=%u", j->id, j->uid, j->world,
           j->nodes, j->node);
}

/* Polls a forming job's backend once. Returns 1 when the job has left
 * forming (running, or aborted), 0 while it still forms. */
static int form_poll(struct job *j, uint64_t now)
{
    struct zppd *d = j->d;
    char why[256] = "";
    int rc = d->be->job_poll(d->be_state, j->be_job, why, sizeof why);
    if (rc == BE_FORMING) {
        if (now < j->form_deadline_ms) {
            j->form_interval_ms = j->form_interval_ms * 2 < FORM_POLL_MAX_MS
                                      ? j->form_interval_ms * 2
                                      : FORM_POLL_MAX_MS;
            j->form_next_ms = now + j->form_interval_ms;
            return 0;
        }
        j->be_forming = 0;
        job_abort(j, MET_ABORT_TIMEOUT,
                  "the job's communicators were not ready within %u ms (join_timeout_ms)",
                  j->form_timeout_ms);
        return 1;
    }
    j->be_forming = 0;
    if (rc) {
        job_abort(j, MET_ABORT_DEVICE, "cannot create the job's communicators: %s", why);
        return 1;
    }
    job_formed(j);
    return 1;
}

static void form_timer_cb(uv_timer_t *t)
{
    struct zppd *d = t->data;
    uint64_t now = zppd_now_ms();
    struct job *next;
    /* Neither form_poll nor job_pump frees a job (sessions close through
     * sess_close_later), so `next` stays valid. */
    for (struct job *j = d->jobs; j; j = next) {
        next = j->next;
        if (j->be_forming && j->form_next_ms <= now && form_poll(j, now))
            job_pump(j);
    }
    form_schedule(d);
}

/* Starts the backend's side of the job for the hosted ranks (ids from the
 * leader for a job across daemons). The job runs once the backend reports
 * it ready: at once on a backend that has nothing to wait for, otherwise
 * from the formation timer. The caller runs job_pump afterwards. */
static void job_open_backend(struct job *j, const uint8_t *ids, int nids)
{
    struct zppd *d = j->d;
    if (!d->be->job_open) {
        job_formed(j);
        return;
    }
    /* Device indices only on a device backend: the host backend's store
     * accounting takes a NULL device table as "slot s is device s". */
    if (d->be->device_of_uuid) {
        j->devices = calloc(j->world, sizeof *j->devices);
        if (!j->devices) {
            job_abort(j, MET_ABORT_OTHER, "out of memory forming the job");
            return;
        }
        for (uint32_t r = j->lo; r < j->lo + j->nlocal; r++)
            j->devices[r] = j->members[r]->device;
    }
    struct be_topo t = {.world = (int)j->world,
                        .nodes = (int)j->nodes,
                        .local = (int)j->local,
                        .nslots = (int)j->nlocal,
                        .rank0 = (int)j->lo};
    const int *devices = j->devices ? j->devices + j->lo : NULL;
    char why[256] = "";
    int rc;
    j->form_t0_us = zppd_now_us();
    if (j->multi && !d->be->job_open_ids) {
        snprintf(why, sizeof why, "the %s backend cannot join communicators across daemons",
                 d->backend_name);
        rc = ZPP_EUNSUPPORTED;
    } else if (j->multi) {
        rc = d->be->job_open_ids(d->be_state, &t, devices, ids, nids, &j->be_job, why, sizeof why);
    } else {
        rc = d->be->job_open(d->be_state, &t, devices, &j->be_job, why, sizeof why);
    }
    if (rc) {
        j->be_job = NULL;
        job_abort(j, MET_ABORT_DEVICE, "cannot create the job's communicators: %s", why);
        return;
    }
    uint64_t now = zppd_now_ms();
    j->be_forming = 1;
    j->form_timeout_ms = d->cfg.join_timeout_ms;
    j->form_deadline_ms = now + j->form_timeout_ms;
    j->form_interval_ms = FORM_POLL_FIRST_MS;
    j->form_next_ms = now + FORM_POLL_FIRST_MS;
    if (form_poll(j, now))
        return;
    ZLOG_I("job", "communicators forming: calls wait until they are ready", "job=%s deadline_ms=%u",
           j->id, j->form_timeout_ms);
    form_schedule(d);
}

void job_cluster_ready(struct job *j, const uint8_t *ids, int nids)
{
    if (j->state != JOB_FORMING || j->be_job || j->be_forming)
        return;
    job_open_backend(j, ids, nids);
    job_pump(j);
}

/* The hosted ranks have all joined: a job of this daemon alone runs now;
 * a job across daemons first forms through its leader (cluster.c). */
static void job_form(struct job *j)
{
    if (j->multi) {
        cluster_form(j);
        return;
    }
    job_open_backend(j, NULL, 0);
}

/* Hello's flags (proto: Hello.flags_nfds): fd[0] a client memfd as any
 * (sess_map_memfd's checks) of at least flags_size bytes, and fd[1], if
 * announced, the write end of a pipe. The backend then runs the session on
 * them, taking the mapping and the pipe (s->flag_sync); one that cannot (a
 * driver that refuses the memory: logged) closes the pipe, which tells the
 * client that nothing will write them, and a device backend opens the
 * client's events instead. 0 (on them or not), or -1 after an error reply. */
static int hello_flags(struct session *s, const Zpp__Hello *h, int fd[2], uint64_t req_id)
{
    struct zppd *d = s->d;
    struct stat st;
    if (fd[0] < 0 || (h->flags_nfds == 2 && fd[1] < 0)) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "hello: flags_nfds is %u but the frame carried fewer descriptors",
                        h->flags_nfds);
        return -1;
    }
    if (fd[1] >= 0 && (fstat(fd[1], &st) != 0 || !S_ISFIFO(st.st_mode) ||
                       (fcntl(fd[1], F_GETFL) & O_ACCMODE) != O_WRONLY)) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "hello: the flags' second descriptor is not a pipe's write end");
        return -1;
    }
    void *map = NULL;
    size_t map_len = 0;
    uint8_t *ptr = NULL;
    char why[256] = "";
    int rc = sess_map_memfd(s, fd[0], 0, h->flags_size, &map, &map_len, &ptr, why, sizeof why);
    if (rc) {
        sess_send_error(s, req_id, rc, "hello: the flags' memfd: %s", why);
        return -1;
    }
    if (!d->be->events_open_flags) {
        munmap(map, map_len);
        return 0;
    }
    rc = d->be->events_open_flags(d->be_state, s->device, (int)h->nslots, map, map_len, fd[1],
                                  &s->events, why, sizeof why);
    fd[1] = -1; /* the backend took the mapping and the pipe, opened or not */
    if (rc) {
        ZLOG_W("job", "cannot use a client's flags: it waits on interprocess events", "pid=%u why=\"%s\"",
               h->pid, why);
        return 0;
    }
    s->nevents = h->nslots;
    s->flag_sync = 1;
    return 0;
}

void job_hello(struct session *s, uint64_t req_id, const Zpp__Hello *h, int flags_fd[2])
{
    struct zppd *d = s->d;
    if (s->role != SESS_ROLE_NONE) {
        sess_send_error(s, req_id, ZPP_ESTATE, "this connection already said Hello");
        return;
    }
    if (h->role == ZPP__ROLE__ROLE_ADMIN) {
        s->role = SESS_ROLE_ADMIN;
        reply_hello(s, req_id, NULL, NULL, 0);
        return;
    }
    s->says_goodbye = h->says_goodbye;
    if (d->stopping) {
        sess_send_error(s, req_id, ZPP_EDRAINING, "zppd is stopping: it takes no new jobs");
        return;
    }
    /* The frame's limits count the NUL (frame.c str_ok: strictly shorter
     * than ZPP_MAX_*), so the longest name is one less. */
    if (!name_ok(h->job_id, ZPP_MAX_JOB_ID - 1)) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "job_id must be 1..%u characters of [A-Za-z0-9._:@/+=-]",
                        ZPP_MAX_JOB_ID - 1);
        return;
    }
    if (h->tenant_label[0] && !name_ok(h->tenant_label, ZPP_MAX_LABEL - 1)) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "tenant_label must be 1..%u characters of [A-Za-z0-9._:@/+=-]",
                        ZPP_MAX_LABEL - 1);
        return;
    }
    uint32_t world = h->world_size, nodes = h->node_count;
    if (world == 0 || world > d->cfg.max_world_size) {
        sess_send_error(s, req_id, ZPP_ELIMIT, "world_size %u is outside 1..%u (max_world_size)",
                        world, d->cfg.max_world_size);
        return;
    }
    if (d->cfg.virtual_nodes && nodes != d->cfg.virtual_nodes) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "node_count %u differs from this daemon's virtual_nodes %u", nodes,
                        d->cfg.virtual_nodes);
        return;
    }
    if (nodes == 0 || world % nodes) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "node_count %u must divide world_size %u (ranks per node are equal)", nodes,
                        world);
        return;
    }
    uint32_t local = world / nodes;
    if (h->rank >= world || h->local_rank != h->rank % local) {
        sess_send_error(s, req_id, ZPP_EINVAL,
                        "rank %u / local_rank %u do not fit %u nodes x %u ranks (rank = node * "
                        "%u + local_rank)",
                        h->rank, h->local_rank, nodes, local, local);
        return;
    }
    if (h->gpu_uuid[0] && strcmp(h->gpu_uuid, "host") && !strcmp(d->backend_name, "host")) {
        sess_send_error(s, req_id, ZPP_EUNSUPPORTED,
                        "this zppd runs the host backend; gpu_uuid must be \"host\"");
        return;
    }
    static uint8_t done[ZPP_MAX_EVENTS][64];
    uint32_t ndone = 0;
    /* A Hello refused after its events were opened leaves them on the
     * session (role still none); a retry opens them again. */
    if (s->events && d->be->events_close)
        d->be->events_close(d->be_state, s->events);
    s->events = NULL;
    s->nevents = 0;
    s->flag_sync = 0;
    if (d->be->device_of_uuid) {
        s->device = d->be->device_of_uuid(d->be_state, h->gpu_uuid);
        if (s->device < 0) {
            sess_send_error(s, req_id, ZPP_EINVAL, "GPU '%s' is not one of this zppd's GPUs",
                            h->gpu_uuid);
            return;
        }
        if (h->n_ready_events > ZPP_MAX_EVENTS) {
            sess_send_error(s, req_id, ZPP_ELIMIT, "at most %u events per session", ZPP_MAX_EVENTS);
            return;
        }
        if (h->flags_nfds && hello_flags(s, h, flags_fd, req_id))
            return;
        if (s->flag_sync) {
            /* the client's flags, no events: its done events are not sent */
        } else if (h->n_ready_events) {
            const uint8_t *ready[ZPP_MAX_EVENTS];
            for (size_t i = 0; i < h->n_ready_events; i++) {
                if (h->ready_events[i].len != 64) {
                    sess_send_error(s, req_id, ZPP_EINVAL, "event handle %zu is not 64 bytes", i);
                    return;
                }
                ready[i] = h->ready_events[i].data;
            }
            char why[256];
            int rc = d->be->events_open(d->be_state, s->device, ready, (int)h->n_ready_events, done,
                                        &s->events, why, sizeof why);
            if (rc) {
                sess_send_error(s, req_id, rc, "cannot open the session's events: %s", why);
                return;
            }
            s->nevents = ndone = (uint32_t)h->n_ready_events;
        }
    } else if (h->flags_nfds && hello_flags(s, h, flags_fd, req_id)) {
        return; /* a backend without devices (host): the same sessions on flags */
    }

    int multi = h->leader_addr[0] != 0 && nodes > 1;
    uint32_t node = multi ? h->rank / local : 0;
    struct job *j = job_find(d, s->uid, h->tenant_label, h->job_id);
    if (j && j->state == JOB_ABORTED) {
        sess_send_error(s, req_id, ZPP_EABORTED,
                        "job %s was aborted (%s); it can be started again once all its ranks "
                        "have disconnected",
                        j->id, j->abort_reason);
        return;
    }
    if (j && (j->world != world || j->nodes != nodes)) {
        sess_send_error(s, req_id, ZPP_EMISMATCH,
                        "job %s has world_size %u and node_count %u; rank %u says %u and %u", j->id,
                        j->world, j->nodes, h->rank, world, nodes);
        return;
    }
    if (j &&
        (j->multi != multi || (multi && (j->node != node || strcmp(j->leader, h->leader_addr))))) {
        sess_send_error(s, req_id, ZPP_EMISMATCH,
                        "rank %u of job %s: this zppd hosts node %u of the job (leader %s); rank "
                        "%u is on node %u (leader %s)",
                        h->rank, j->id, j->node, j->multi ? j->leader : "none", h->rank, node,
                        multi ? h->leader_addr : "none");
        return;
    }
    /* A rank that rejoins opens a rank session too. */
    uint32_t qs = d->cfg.tenant_max_sessions;
    if (qs && tenant_rank_sessions(d, s->uid) >= qs) {
        sess_send_error(s, req_id, ZPP_ELIMIT,
                        "tenant uid %u has %u rank sessions (tenant_max_sessions = %u)", s->uid,
                        tenant_rank_sessions(d, s->uid), qs);
        return;
    }
    if (j && j->detached_ms && j->detached_ms[h->rank]) {
        /* A rank that left between calls comes back: same job, same
         * communicators and hpZ slices; it resumes at the job's next call. */
        if (j->devices && s->device != j->devices[h->rank]) {
            sess_send_error(s, req_id, ZPP_EMISMATCH,
                            "rank %u of job %s was on device %d; it must rejoin on the same GPU",
                            h->rank, j->id, j->devices[h->rank]);
            return;
        }
        j->detached_ms[h->rank] = 0;
        j->ndetached--;
        j->members[h->rank] = s;
        j->njoined++; /* the detached rank's job reference passes to s */
        s->job = j;
        s->rank = h->rank;
        s->role = SESS_ROLE_RANK;
        snprintf(s->label, sizeof s->label, "%s", h->tenant_label);
        ZLOG_I("job", "rank rejoined", "job=%s rank=%u next_seq=%" PRIu64, j->id, h->rank,
               j->next_seq);
        reply_hello(s, req_id, j, done, ndone);
        /* a job still forming: the rank that came back may be the last */
        if (j->state == JOB_FORMING && !j->be_forming && !j->be_job && j->njoined == j->nlocal)
            job_form(j);
        job_pump(j);
        return;
    }
    if (j && j->members[h->rank]) {
        sess_send_error(s, req_id, ZPP_EEXIST, "rank %u of job %s has already joined (pid %u)",
                        h->rank, j->id, j->members[h->rank]->pid);
        return;
    }
    if (!j) {
        /* A drain refuses new jobs; ranks of a job already forming still
         * join it, so that it can run to its end. */
        if (d->draining) {
            sess_send_error(s, req_id, ZPP_EDRAINING, "zppd is draining: it takes no new jobs");
            return;
        }
        if (d->njobs >= d->cfg.max_jobs) {
            sess_send_error(s, req_id, ZPP_ELIMIT, "this zppd runs %u jobs (max_jobs)", d->njobs);
            return;
        }
        uint32_t qj = d->cfg.tenant_max_jobs;
        if (qj && tenant_jobs(d, s->uid) >= qj) {
            sess_send_error(s, req_id, ZPP_ELIMIT,
                            "tenant uid %u runs %u jobs (tenant_max_jobs = %u)", s->uid,
                            tenant_jobs(d, s->uid), qj);
            return;
        }
        uint64_t qm = d->cfg.tenant_max_device_memory;
        uint64_t held = qm ? tenant_device_memory(d, s->uid) : 0;
        if (qm && held >= qm) {
            sess_send_error(s, req_id, ZPP_ELIMIT,
                            "tenant uid %u holds %" PRIu64 " bytes of device memory "
                            "(tenant_max_device_memory = %" PRIu64 ")",
                            s->uid, held, qm);
            return;
        }
        j = calloc(1, sizeof *j);
        struct session **m = calloc(world, sizeof *m);
        if (!j || !m) {
            free(j);
            free(m);
            sess_send_error(s, req_id, ZPP_ENOMEM, "out of memory for a job of %u ranks", world);
            return;
        }
        j->d = d;
        snprintf(j->id, sizeof j->id, "%s", h->job_id);
        snprintf(j->label, sizeof j->label, "%s", h->tenant_label);
        j->uid = s->uid;
        j->world = world;
        j->nodes = nodes;
        j->local = local;
        j->members = m;
        j->next_seq = 1;
        static uint64_t generation;
        j->gen = ++generation;
        j->multi = multi;
        j->node = node;
        j->lo = multi ? node * local : 0;
        j->nlocal = multi ? local : world;
        snprintf(j->leader, sizeof j->leader, "%s", multi ? h->leader_addr : "");
        j->created_ms = zppd_now_ms();
        j->next = d->jobs;
        if (d->jobs)
            d->jobs->prev = j;
        d->jobs = j;
        d->njobs++;
        ZLOG_I("job", "job created", "job=%s uid=%u world=%u nodes=%u", j->id, j->uid, world,
               nodes);
    }
    j->members[h->rank] = s;
    j->njoined++;
    j->refs++;
    s->job = j;
    s->rank = h->rank;
    s->role = SESS_ROLE_RANK;
    snprintf(s->label, sizeof s->label, "%s", h->tenant_label);
    reply_hello(s, req_id, j, done, ndone);
    if (j->njoined == j->nlocal)
        job_form(j);
    job_pump(j);
}

/* ---- replies ------------------------------------------------------------- */

/* Records call c's state in the job's ring: a running call's record is
 * updated in place when it ends, so each call appears once. */
static void ring_push(struct job *j, struct call *c, int state, const char *msg)
{
    struct call_record *r = NULL;
    if (c->ring_pos && j->ring_pos - c->ring_pos < JOB_RING &&
        j->ring[(c->ring_pos - 1) % JOB_RING].seq == c->seq)
        r = &j->ring[(c->ring_pos - 1) % JOB_RING];
    if (!r) {
        r = &j->ring[j->ring_pos++ % JOB_RING];
        c->ring_pos = j->ring_pos;
        memset(r, 0, sizeof *r);
        r->start_us = c->t_start_us ? c->t_start_us : zppd_now_us();
    }
    r->seq = c->seq;
    r->op = c->have_args ? c->args.op : 0;
    r->bytes = c->x.result.logical_bytes;
    r->state = state;
    r->end_us = state >= 2 ? zppd_now_us() : 0;
    snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
}

/* A collective answered: on the client's flags, one whose done flag no
 * stream of ours will write (refused, or failed before its work was
 * enqueued) has it raised now, so that the client, which reuses a slot
 * once its done flag has come up, does not wait for it for ever. */
static void flag_settle(struct session *s, uint32_t event_slot, uint64_t value)
{
    struct zppd *d = s->d;
    if (s->flag_sync && s->events && event_slot && event_slot <= s->nevents &&
        d->be->events_settle)
        d->be->events_settle(d->be_state, s->events, (int)event_slot - 1, value);
}

/* Ends one submission: drops its refs, and replies if asked (rep NULL:
 * an error with code/msg). */
static void sub_finish(struct call_sub *sub, const Zpp__Reply *rep, uint64_t req_id, int code,
                       const char *msg)
{
    if (!sub->submitted || sub->replied)
        return;
    sub->replied = 1;
    struct session *s = sub->s;
    flag_settle(s, sub->event_slot, sub->flag_value);
    if (rep)
        sess_send(s, rep);
    else
        sess_send_error(s, req_id, code, "%s", msg);
    if (s->pending)
        s->pending--;
    if (sub->in)
        buffer_unref(sub->in);
    if (sub->out)
        buffer_unref(sub->out);
    sub->in = sub->out = NULL;
    sess_unref(s);
}

static void call_free(struct call *c)
{
    c->job->ncalls--;
    free(c->subs);
    free(c->slots);
    free(c);
}

/* Unlinks c from its job's list. */
static void call_unlink(struct job *j, struct call *c)
{
    for (struct call **pp = &j->calls; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

/* "call failed" lines at info: at most CALL_FAIL_LOG_BURST a second for
 * the whole daemon (as server.c's protocol errors), then one line with the
 * count left out (job_tick flushes it once the flood stops). Loop thread. */
#define CALL_FAIL_LOG_BURST 10u
static struct zlog_limit call_fail_log =
    ZLOG_LIMIT_INIT(ZLOG_INFO, "job", "call failed", CALL_FAIL_LOG_BURST, 1000u);

/* Fails call c on every rank that submitted it (and, through c->failed,
 * on every rank that submits it later). */
static void call_fail(struct job *j, struct call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void call_fail(struct job *j, struct call *c, int code, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    c->fail_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fail_msg, sizeof c->fail_msg, fmt, ap);
    va_end(ap);
    /* A client can fail calls as fast as it sends them: past the limit the
     * line goes to debug (the count, the metrics and the job's recent calls
     * still have them). */
    int lvl = zlog_limit_pass(&call_fail_log, zppd_now_ms()) ? ZLOG_INFO : ZLOG_DEBUG;
    zlog(lvl, "job", "call failed", "job=%s seq=%" PRIu64 " code=%d why=\"%s\"", j->id, c->seq,
         code, c->fail_msg);
    j->d->stats.calls_failed++;
    metrics_call(j->d, j->uid, c->have_args ? c->args.op : 0,
                 code == ZPP_EABORTED ? MET_ABORTED : MET_ERROR, NULL, 0);
    for (uint32_t r = 0; r < j->world; r++)
        sub_finish(&c->subs[r], NULL, c->subs[r].req_id, code, c->fail_msg);
    ring_push(j, c, 3, c->fail_msg);
}

/* ---- matching ------------------------------------------------------------ */

/* The call for seq, made when it is the first rank's; NULL with *code set
 * when it cannot be. A call lives until every hosted rank has submitted it,
 * also one refused at once (the ranks still to come must get the same
 * answer), so the job's calls are capped: a rank alone could otherwise
 * hold JOB_SEQ_WINDOW of them, each with a world-sized array, answered and
 * so not counted by max_pending. The cap counts the ranks that have joined
 * (or are away and may rejoin), not the hosted ones: a rank alone in a
 * forming job of a large world would otherwise hold world x max_pending
 * calls (4096 x 64 arrays of 4096 entries: a GiB per session, found by an
 * audit). In a live job a rank is at most max_pending calls ahead of the
 * slowest, so the cap never binds there. */
static struct call *call_get(struct job *j, uint64_t seq, int *code)
{
    struct call **pp = &j->calls;
    for (; *pp && (*pp)->seq < seq; pp = &(*pp)->next)
        ;
    if (*pp && (*pp)->seq == seq)
        return *pp;
    uint32_t present = j->njoined + j->ndetached;
    if (j->ncalls >= (present ? present : 1) * j->d->cfg.max_pending_per_session) {
        *code = ZPP_ELIMIT;
        return NULL;
    }
    *code = ZPP_ENOMEM;
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->subs = calloc(j->world, sizeof *c->subs);
    if (!c->subs) {
        free(c);
        return NULL;
    }
    c->seq = seq;
    c->job = j;
    c->t_first_ms = zppd_now_ms();
    c->next = *pp;
    *pp = c;
    j->ncalls++;
    return c;
}

/* Resolves the wire arguments into coll_args with the daemon's defaults. */
static void args_from_wire(uint32_t dflt_block, uint32_t dflt_stages, const Zpp__Collective *w,
                           struct coll_args *a)
{
    memset(a, 0, sizeof *a);
    a->op = w->op;
    a->dtype = w->dtype;
    a->out_dtype = w->out_dtype ? (int)w->out_dtype : (int)w->dtype;
    a->bits = (int)w->bits;
    a->reduce = w->reduce;
    a->block = w->block ? w->block : dflt_block;
    a->stages = w->stages ? w->stages : dflt_stages;
    a->flags = w->flags;
    a->count = w->count;
    snprintf(a->hpz_key, sizeof a->hpz_key, "%s", w->hpz_key ? w->hpz_key : "");
    snprintf(a->content_key, sizeof a->content_key, "%s", w->content_key ? w->content_key : "");
}

/* Names the first field where a differs from b, or NULL. */
static const char *args_diff(const struct coll_args *a, const struct coll_args *b, char *va,
                             char *vb, size_t len)
{
#define CMP_INT(field, name, fmtfn)                                                                \
    if (a->field != b->field) {                                                                    \
        fmtfn(va, len, a->field);                                                                  \
        fmtfn(vb, len, b->field);                                                                  \
        return name;                                                                               \
    }
#define FMT_U(buf, l, v) snprintf(buf, l, "%" PRIu64, (uint64_t)(v))
#define FMT_OP(buf, l, v) snprintf(buf, l, "%s", zpp_op_name(v))
#define FMT_DT(buf, l, v) snprintf(buf, l, "%s", dtype_name(v))
    CMP_INT(op, "op", FMT_OP)
    CMP_INT(dtype, "dtype", FMT_DT)
    CMP_INT(count, "count", FMT_U)
    CMP_INT(bits, "bits", FMT_U)
    CMP_INT(block, "block", FMT_U)
    CMP_INT(stages, "stages", FMT_U)
    CMP_INT(reduce, "reduce", FMT_U)
    CMP_INT(out_dtype, "out_dtype", FMT_DT)
    CMP_INT(flags, "flags", FMT_U)
    if (strcmp(a->hpz_key, b->hpz_key)) {
        snprintf(va, len, "'%s'", a->hpz_key);
        snprintf(vb, len, "'%s'", b->hpz_key);
        return "hpz_key";
    }
    if (strcmp(a->content_key, b->content_key)) {
        snprintf(va, len, "'%s'", a->content_key);
        snprintf(vb, len, "'%s'", b->content_key);
        return "content_key";
    }
    return NULL;
#undef CMP_INT
#undef FMT_U
#undef FMT_OP
#undef FMT_DT
}

/* Resolves a buffer reference of s for `need` bytes. Returns 0 or a code
 * with a message. */
static int resolve_buf(struct session *s, const Zpp__BufRef *ref, size_t need, const char *what,
                       struct buffer **out, uint64_t *off, char *why, size_t why_len)
{
    *out = NULL;
    *off = 0;
    if (need == 0)
        return 0;
    if (!ref) {
        snprintf(why, why_len, "no %s buffer given (%zu bytes needed)", what, need);
        return ZPP_EINVAL;
    }
    struct buffer *b = sess_find_buffer(s, ref->buffer_id);
    if (!b) {
        snprintf(why, why_len, "%s buffer id %" PRIu64 " is not registered on this session", what,
                 ref->buffer_id);
        return ZPP_ENOENT;
    }
    if (ref->offset > b->len || need > b->len - ref->offset) {
        snprintf(why, why_len,
                 "%s buffer %" PRIu64 " too small: needs %zu bytes at offset %" PRIu64
                 ", has %" PRIu64,
                 what, ref->buffer_id, need, ref->offset, b->len);
        return ZPP_ERANGE;
    }
    buffer_ref(b);
    *out = b;
    *off = ref->offset;
    return 0;
}

/* Refuses a collective before it becomes a call of its job, counting it
 * once (zppctl status's failed calls, the metrics' "error" outcome, or
 * "aborted" when its job is): refusals for limits and bad numbering are
 * what an operator looks for. */
static void refuse(struct session *s, uint64_t req_id, const Zpp__Collective *w, int code,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void refuse(struct session *s, uint64_t req_id, const Zpp__Collective *w, int code,
                   const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->d->stats.calls_failed++;
    metrics_call(s->d, s->job ? s->job->uid : s->uid, w->op,
                 code == ZPP_EABORTED ? MET_ABORTED : MET_ERROR, NULL, 0);
    flag_settle(s, w->event_slot, w->flag_value);
    sess_send_error(s, req_id, code, "%s", msg);
}

void job_submit(struct session *s, uint64_t req_id, const Zpp__Collective *w)
{
    struct zppd *d = s->d;
    struct job *j = s->job;
    if (!j || s->role != SESS_ROLE_RANK) {
        refuse(s, req_id, w, ZPP_ESTATE, "say Hello as a rank of a job before collectives");
        return;
    }
    if (j->state == JOB_ABORTED) {
        refuse(s, req_id, w, ZPP_EABORTED, "job %s was aborted: %s", j->id, j->abort_reason);
        return;
    }
    if (w->seq < j->next_seq || w->seq >= j->next_seq + JOB_SEQ_WINDOW) {
        refuse(s, req_id, w, ZPP_EINVAL,
               "seq %" PRIu64 " is outside the job's window [%" PRIu64 ", %" PRIu64 ")", w->seq,
               j->next_seq, j->next_seq + JOB_SEQ_WINDOW);
        return;
    }
    if (s->pending >= d->cfg.max_pending_per_session) {
        refuse(s, req_id, w, ZPP_ELIMIT, "%u calls pending on this session (max_pending)",
               s->pending);
        return;
    }
    if (w->event_slot > s->nevents) {
        refuse(s, req_id, w, ZPP_EINVAL, "event_slot %u: this session has %u events",
               w->event_slot, s->nevents);
        return;
    }
    int code = 0;
    struct call *c = call_get(j, w->seq, &code);
    if (!c) {
        if (code == ZPP_ELIMIT)
            refuse(s, req_id, w, code,
                   "job %s holds %u calls that wait for other ranks (%u ranks joined "
                   "x max_pending_per_session)",
                   j->id, j->ncalls, j->njoined + j->ndetached);
        else
            refuse(s, req_id, w, ZPP_ENOMEM, "out of memory for a call");
        return;
    }
    struct call_sub *sub = &c->subs[s->rank];
    if (sub->submitted) {
        refuse(s, req_id, w, ZPP_EINVAL, "rank %u already submitted call %" PRIu64, s->rank,
               w->seq);
        return;
    }
    sub->submitted = 1;
    sub->s = s;
    sub->req_id = req_id;
    sub->event_slot = w->event_slot;
    sub->flag_value = w->flag_value;
    sess_ref(s);
    s->pending++;
    c->nsub++;
    uint32_t timeout = w->timeout_ms ? w->timeout_ms : d->cfg.call_timeout_ms;
    if (!c->timeout_ms || timeout < c->timeout_ms)
        c->timeout_ms = timeout;

    if (c->failed) {
        sub_finish(sub, NULL, req_id, c->fail_code, c->fail_msg);
        job_pump(j);
        return;
    }
    struct coll_args a;
    if (!c->have_args) {
        c->dflt_block = d->cfg.default_block;
        c->dflt_stages = d->cfg.default_stages;
    }
    args_from_wire(c->dflt_block, c->dflt_stages, w, &a);
    if (c->have_args) {
        char va[300], vb[300];
        const char *field = args_diff(&a, &c->args, va, vb, sizeof va);
        if (field) {
            call_fail(j, c, ZPP_EMISMATCH,
                      "call %" PRIu64 " differs across ranks: rank %u has %s=%s, rank %u has %s=%s",
                      c->seq, s->rank, field, va, c->first_rank, field, vb);
            job_pump(j);
            return;
        }
    } else {
        c->args = a;
        c->have_args = 1;
        c->first_rank = s->rank;
    }
    struct be_topo topo = {.world = (int)j->world,
                           .nodes = (int)j->nodes,
                           .local = (int)j->local,
                           .nslots = (int)j->nlocal,
                           .rank0 = (int)j->lo};
    size_t in_need = 0, out_need = 0;
    char why[300];
    int rc = coll_buffer_needs(&a, &topo, &in_need, &out_need, why, sizeof why);
    if (!rc)
        rc = resolve_buf(s, w->input, in_need, "input", &sub->in, &sub->in_off, why, sizeof why);
    if (!rc)
        rc = resolve_buf(s, w->output, out_need, "output", &sub->out, &sub->out_off, why,
                         sizeof why);
    if (rc) {
        call_fail(j, c, rc, "call %" PRIu64 " (%s) refused for rank %u: %s", c->seq,
                  zpp_op_name(a.op), s->rank, why);
        job_pump(j);
        return;
    }
    job_pump(j);
}

/* ---- execution ----------------------------------------------------------- */

/* Counts a call ended by its job's abort (zppctl status, the metrics'
 * "aborted" outcome), once: the abort answers it, not call_fail. */
static void count_aborted(struct job *j, struct call *c)
{
    j->d->stats.calls_failed++;
    metrics_call(j->d, j->uid, c->have_args ? c->args.op : 0, MET_ABORTED, NULL, 0);
}

static void reply_done(struct job *j, struct call *c)
{
    struct zppd *d = j->d;
    struct coll_exec *x = &c->x;
    uint64_t now = zppd_now_us();
    if (x->status == 0 && j->state != JOB_ABORTED) {
        Zpp__CollectiveReply cr = ZPP__COLLECTIVE_REPLY__INIT;
        cr.algo = x->result.algo;
        cr.logical_bytes = x->result.logical_bytes;
        cr.bytes_intra = x->result.bytes_intra;
        cr.bytes_inter = x->result.bytes_inter;
        cr.bytes_zero3_inter = x->result.bytes_zero3_inter;
        cr.nonfinite_blocks = x->result.nonfinite_blocks;
        cr.elapsed_us = now - c->t_start_us;
        cr.seq = c->seq;
        d->stats.calls_ok++;
        metrics_call(d, j->uid, c->args.op, MET_OK, &x->result, now - c->t_start_us);
        d->stats.bytes_intra += x->result.bytes_intra;
        d->stats.bytes_inter += x->result.bytes_inter;
        d->stats.bytes_zero3_inter += x->result.bytes_zero3_inter;
        for (uint32_t r = 0; r < j->world; r++) {
            Zpp__Reply rep = ZPP__REPLY__INIT;
            rep.req_id = c->subs[r].req_id;
            rep.body_case = ZPP__REPLY__BODY_COLLECTIVE;
            rep.collective = &cr;
            sub_finish(&c->subs[r], &rep, 0, 0, NULL);
        }
        ring_push(j, c, 2, NULL);
    } else if (x->status == 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "job %s was aborted: %s", j->id, j->abort_reason);
        count_aborted(j, c);
        for (uint32_t r = 0; r < j->world; r++)
            sub_finish(&c->subs[r], NULL, c->subs[r].req_id, ZPP_EABORTED, msg);
        ring_push(j, c, 3, msg); /* its record said running */
    } else {
        c->running = 0;
        call_fail(j, c, x->status, "call %" PRIu64 " (%s) failed: %s", c->seq,
                  zpp_op_name(c->args.op), x->msg);
    }
}

static void work_cb(uv_work_t *w)
{
    struct call *c = w->data;
    coll_run(&c->x);
}

/* An aborted job's backend side, closed as soon as no call of it runs:
 * at the abort, or when the call that was running then ends (a publish's
 * content-key check on a worker, a host call on the thread pool). Left
 * open until the last rank leaves, its communicators would keep GPU work
 * queued behind a peer that will never come, and every release fenced by
 * its streams would wait with it (job_abort). */
static void close_aborted(struct job *j)
{
    if (j->state != JOB_ABORTED || !j->be_job)
        return;
    for (struct call *c = j->calls; c; c = c->next)
        if (c->running)
            return;
    j->d->be->job_close(j->d->be_state, j->be_job,
                        j->abort_now ? BE_CLOSE_ABORT_NOW : BE_CLOSE_ABORT);
    j->be_job = NULL;
}

/* The call has run (or was enqueued, on a device backend): reply, drop
 * it, and move the job on. */
static void call_complete(struct job *j, struct call *c)
{
    /* A job aborted while the call ran: its ranks get ZPP_EABORTED
     * (reply_done), so nothing the call stored is kept either; a publish
     * they were told failed leaves no replica. */
    c->x.discard = j->state == JOB_ABORTED;
    coll_finish(&c->x);
    reply_done(j, c);
    if (j->d->be->call_replied)
        j->d->be->call_replied(&c->x.call);
    c->running = 0;
    call_unlink(j, c);
    if (c->seq == j->next_seq)
        j->next_seq++;
    call_free(c);
    close_aborted(j);
}

static void after_work_cb(uv_work_t *w, int status)
{
    struct call *c = w->data;
    struct job *j = c->job;
    struct zppd *d = j->d;
    if (status == UV_ECANCELED && !c->x.status) {
        c->x.status = ZPP_EABORTED;
        snprintf(c->x.msg, sizeof c->x.msg, "cancelled");
    }
    call_complete(j, c);
    d->inflight--;
    job_pump(j);
    job_unref(j);
    zppd_maybe_exit(d);
}

static void call_enqueued(struct job *j, struct call *c, int rc);

/* A worker thread: the content key of a publish (or of a publish whose
 * replica is already there), checked against the bytes the call gathered. */
static void verify_work_cb(uv_work_t *w)
{
    struct call *c = w->data;
    coll_verify(&c->x);
}

static void verify_after_cb(uv_work_t *w, int status)
{
    struct call *c = w->data;
    struct job *j = c->job;
    struct zppd *d = j->d;
    struct coll_exec *x = &c->x;
    if (status == UV_ECANCELED) {
        x->verify_pending = 0;
        x->status = ZPP_EABORTED;
        snprintf(x->msg, sizeof x->msg, "cancelled before the content key was checked");
    }
    call_enqueued(j, c, x->status);
    d->inflight--;
    job_pump(j);
    job_unref(j);
    zppd_maybe_exit(d);
}

/* Device backends: orders slot streams after the clients' events, enqueues
 * the algorithm, and records the daemon's events; no CPU waits on the loop.
 * A publish's content key is checked on a worker thread (the bytes copied
 * back and hashed: seconds for a large tensor, during which the loop keeps
 * serving every other job); its done events are recorded only after that,
 * since a dedup reads the client's own output. The job's next call waits
 * for it, as calls run one at a time (job_pump): c stays running, and holds
 * the job (and so its backend state, job_abort) until it ends. */
static void call_enqueue(struct job *j, struct call *c)
{
    struct zppd *d = j->d;
    struct coll_exec *x = &c->x;
    int rc = 0;
    for (uint32_t s = 0; s < j->nlocal && !rc; s++) {
        struct call_sub *sub = &c->subs[j->lo + s];
        if (sub->event_slot && d->be->call_wait)
            rc = d->be->call_wait(&x->call, (int)s, sub->s->events, (int)sub->event_slot - 1,
                                  sub->flag_value);
    }
    if (!rc)
        rc = coll_run(x);
    else
        snprintf(x->msg, sizeof x->msg, "cannot wait on the client's event: %s", x->call.err);
    if (!rc && x->verify_pending) {
        c->work.data = c;
        j->refs++;
        d->inflight++;
        if (uv_queue_work(d->loop, &c->work, verify_work_cb, verify_after_cb) == 0)
            return;
        j->refs--;
        d->inflight--;
        rc = ZPP_EBACKEND; /* coll_finish rolls the store entry back */
        snprintf(x->msg, sizeof x->msg, "cannot queue the content key's check");
    }
    call_enqueued(j, c, rc);
}

/* The end of call_enqueue, once the call's work is enqueued (and a publish's
 * key checked): records every rank's done event and completes the call. */
static void call_enqueued(struct job *j, struct call *c, int rc)
{
    struct zppd *d = j->d;
    struct coll_exec *x = &c->x;
    /* Every rank's done event is recorded, after a failure too: what the
     * call enqueued before it failed may still read or write the client's
     * buffers, and the client's stream waits on the done event, failed
     * call or not, before it uses them again (zpp_wait_stream). Recording
     * also ends the backend's note of the call (cu_call_done_note). */
    for (uint32_t s = 0; s < j->nlocal; s++) {
        struct call_sub *sub = &c->subs[j->lo + s];
        if (!sub->event_slot || !d->be->call_record)
            continue;
        int r = d->be->call_record(&x->call, (int)s, sub->s->events, (int)sub->event_slot - 1,
                                   sub->flag_value);
        if (r && !rc) {
            rc = r;
            snprintf(x->msg, sizeof x->msg, "cannot record the done event: %s", x->call.err);
        }
    }
    if (rc == ZPP_EBACKEND && j->cl && j->state == JOB_RUNNING) {
        /* Across daemons NCCL refusing a collective mostly means another
         * node died, and NCCL may see it before the heartbeats and before
         * job_poll does: treated as that device error (job_tick), the call
         * ends with the job's abort, which names the node once its
         * heartbeat fails, within dev_err_grace_ms; not at once with
         * NCCL's words alone. */
        job_device_error(j, x->msg);
        ZLOG_W("job", "a call failed across daemons: waiting for the heartbeats to name a node",
               "job=%s seq=%" PRIu64 " why=\"%s\"", j->id, c->seq, x->msg);
        x->status = rc; /* coll_finish rolls back what a failed call stored */
        coll_finish(x);
        if (d->be->call_replied) /* nothing held back waits for the reply */
            d->be->call_replied(&x->call);
        c->running = 0;
        c->held = 1;
        return;
    }
    x->status = rc;
    call_complete(j, c);
}

/* Starts call c (all ranks submitted, arguments agreed). */
static void call_start(struct job *j, struct call *c)
{
    struct zppd *d = j->d;
    /* A backend that makes no communicator ids (host) forms jobs across
     * daemons but moves no data between them. */
    if (j->multi && !d->be->make_ids && c->args.op != ZPP_OP_HPZ_INVALIDATE) {
        call_fail(j, c, ZPP_EUNSUPPORTED,
                  "call %" PRIu64 " (%s): the %s backend moves data inside one daemon only; jobs "
                  "across daemons need the cuda backend",
                  c->seq, zpp_op_name(c->args.op), d->backend_name);
        return;
    }
    c->slots = calloc(j->nlocal, sizeof *c->slots);
    if (!c->slots) {
        call_fail(j, c, ZPP_ENOMEM, "out of memory starting call %" PRIu64, c->seq);
        return;
    }
    for (uint32_t s = 0; s < j->nlocal; s++) {
        struct call_sub *sub = &c->subs[j->lo + s];
        if (sub->in) {
            c->slots[s].in = sub->in->ptr + sub->in_off;
            c->slots[s].in_len = sub->in->len - sub->in_off;
        }
        if (sub->out) {
            c->slots[s].out = sub->out->ptr + sub->out_off;
            c->slots[s].out_len = sub->out->len - sub->out_off;
        }
    }
    struct coll_exec *x = &c->x;
    memset(x, 0, sizeof *x);
    x->args = c->args;
    x->topo = (struct be_topo){.world = (int)j->world,
                               .nodes = (int)j->nodes,
                               .local = (int)j->local,
                               .nslots = (int)j->nlocal,
                               .rank0 = (int)j->lo};
    x->slots = c->slots;
    x->owner.tenant_uid = j->uid;
    x->owner.job_id = j->id;
    x->owner.job = j;
    x->devices = j->devices ? j->devices + j->lo : NULL;
    x->store = d->store;
    x->call.ops = d->be;
    x->call.topo = x->topo;
    x->call.priv = j->be_job;
    for (uint32_t s = 0; s < j->nlocal; s++)
        x->call.in_private |= c->subs[j->lo + s].in && c->subs[j->lo + s].in->private_;
    c->t_start_us = zppd_now_us();
    int rc = coll_prepare(x);
    if (rc) {
        coll_finish(x);
        call_fail(j, c, rc, "call %" PRIu64 " (%s) refused: %s", c->seq, zpp_op_name(c->args.op),
                  x->msg);
        return;
    }
    if (d->be->enqueue_only) {
        /* "running" until every rank has had its reply. Nothing below
         * closes a session synchronously (sess_close_later), so the job
         * outlives this call. */
        ring_push(j, c, 1, NULL);
        c->running = 1;
        call_enqueue(j, c);
        return;
    }
    c->running = 1;
    c->work.data = c;
    j->refs++;
    d->inflight++;
    ring_push(j, c, 1, NULL);
    if (uv_queue_work(d->loop, &c->work, work_cb, after_work_cb) != 0) {
        c->running = 0;
        j->refs--;
        d->inflight--;
        coll_finish(x);
        call_fail(j, c, ZPP_EBACKEND, "cannot queue call %" PRIu64, c->seq);
    }
}

/* Whether c may start: a call whose key check waits for the gathered bytes
 * (an hpZ publish's or dedup's hash, cu_to_host on a worker thread) starts
 * only once every rank's ready event has completed, so that wait covers the
 * daemon's own work alone, never a client's stalled stream (an audit: a
 * stuck or killed client stopped the whole daemon there, when the check
 * still ran on the loop thread). */
static int ranks_ready(struct job *j, struct call *c)
{
    const struct be_ops *be = j->d->be;
    if (!be->events_ready || !be->enqueue_only || !c->args.content_key[0] ||
        (c->args.op != ZPP_OP_ALLGATHER && c->args.op != ZPP_OP_QWZ_ALLGATHER))
        return 1;
    for (uint32_t r = 0; r < j->world; r++) {
        const struct call_sub *sub = &c->subs[r];
        if (sub->submitted && sub->event_slot && sub->s &&
            !be->events_ready(j->d->be_state, sub->s->events, (int)sub->event_slot - 1,
                              sub->flag_value))
            return 0;
    }
    return 1;
}

/* Advances the job: drops finished failed calls, starts the next ready
 * one (none once zppd is stopping). Calls run one at a time, in sequence
 * order. */
static void job_pump(struct job *j)
{
    while (j->calls && j->calls->seq == j->next_seq && !j->calls->running) {
        struct call *c = j->calls;
        if (c->held)
            return; /* ends with the job's abort (call_enqueue) */
        if (c->failed) {
            if (c->nsub < j->nlocal)
                return; /* the others still have to submit (and get the error) */
            j->calls = c->next;
            call_free(c);
            j->next_seq++;
            continue;
        }
        if (j->state != JOB_RUNNING || c->nsub < j->nlocal)
            return;
        /* Stopping: the calls running finish, none starts; the queued ones
         * end with the jobs' abort once in-flight work is done (else a
         * pipelining rank keeps it from ever being done). */
        if (j->d->stopping)
            return;
        if (!ranks_ready(j, c))
            return; /* job_tick pumps again */
        uint64_t seq = c->seq;
        call_start(j, c); /* may complete and free c */
        if (j->calls && j->calls->seq == seq && j->calls->running)
            return;
    }
}

/* ---- abort, leave, timeouts ---------------------------------------------- */

void job_abort(struct job *j, int cause, const char *fmt, ...)
{
    if (j->state == JOB_ABORTED)
        return;
    struct zppd *d = j->d;
    j->state = JOB_ABORTED;
    j->be_forming = 0; /* the formation timer forgets it; be_job closes below */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->abort_reason, sizeof j->abort_reason, fmt, ap);
    va_end(ap);
    /* Another node died or aborted (or NCCL failed across nodes): the GPU
     * work queued here waits for that node's part, which will not come. */
    j->abort_now = cause == MET_ABORT_PEER || (cause == MET_ABORT_DEVICE && j->multi);
    d->stats.aborts++;
    metrics_abort(d, j->uid, cause);
    if (j->multi)
        cluster_abort(j);
    ZLOG_W("job", "job aborted", "job=%s uid=%u reason=\"%s\"", j->id, j->uid, j->abort_reason);
    char msg[512];
    snprintf(msg, sizeof msg, "job %s was aborted: %s", j->id, j->abort_reason);
    /* The calls that were waiting learn why: a timeout is ZPP_ETIMEDOUT. */
    int code = cause == MET_ABORT_TIMEOUT ? ZPP_ETIMEDOUT : ZPP_EABORTED;
    struct call **pp = &j->calls;
    while (*pp) {
        struct call *c = *pp;
        if (c->running) { /* its after-work callback replies */
            pp = &c->next;
            continue;
        }
        if (c->held) /* its record said running */
            ring_push(j, c, 3, msg);
        if (!c->failed) /* a failed call was counted when it failed */
            count_aborted(j, c);
        for (uint32_t r = 0; r < j->world; r++)
            sub_finish(&c->subs[r], NULL, c->subs[r].req_id, code, msg);
        *pp = c->next;
        call_free(c);
    }
    /* Close the backend's side now rather than when the last rank leaves:
     * GPU work already queued may wait for a peer that will never come
     * (another node's ranks, a dead rank), and a client whose stream waits
     * behind it would never leave. The cuda backend drains what it can and
     * aborts the communicators after 10 s, or at once when another node is
     * the cause (docs/cuda.md, "Failure"). The output of calls already
     * answered is then undefined; their ranks learn of the abort at their
     * next call. */
    /* Its streams stop waiting for the members' ready events: a client that
     * stays connected with a stuck stream would otherwise hold them, and
     * every later release on its GPU, for as long as it lives. */
    if (d->be->events_release)
        for (uint32_t r = 0; r < j->world; r++)
            if (j->members[r] && j->members[r]->events)
                d->be->events_release(d->be_state, j->members[r]->events);
    close_aborted(j);
}

/* Drops the references of the ranks still away (an aborted job, or one
 * whose ranks did not come back); may free the job. */
static void drop_detached(struct job *j)
{
    uint32_t n = 0;
    for (uint32_t r = 0; j->detached_ms && r < j->world; r++) {
        if (j->detached_ms[r]) {
            j->detached_ms[r] = 0;
            n++;
        }
    }
    j->ndetached = 0;
    while (n--)
        job_unref(j);
}

/* Keeps rank r's place (and its reference on the job) for
 * rejoin_timeout_ms after its session s left with nothing queued; 0 when
 * it cannot (calls pending, rejoining off, no memory). */
static int detach_rank(struct job *j, uint32_t r, const struct session *s, const char *reason)
{
    const struct zppd *d = j->d;
    if (j->calls || !d->cfg.rejoin_timeout_ms ||
        !(j->detached_ms || (j->detached_ms = calloc(j->world, sizeof *j->detached_ms))))
        return 0;
    j->detached_ms[r] = zppd_now_ms();
    j->ndetached++;
    ZLOG_I("job", "rank left: it may rejoin",
           "job=%s state=%s rank=%u pid=%u joined=%u of %u rejoin_timeout_ms=%u why=\"%s\"", j->id,
           job_state_name(j->state), r, s->pid, j->njoined, j->world, d->cfg.rejoin_timeout_ms,
           reason);
    return 1;
}

void job_leave(struct session *s, const char *reason)
{
    struct job *j = s->job;
    struct zppd *d = j ? j->d : NULL;
    if (!j)
        return;
    uint32_t r = s->rank;
    j->members[r] = NULL;
    j->njoined--;
    s->job = NULL;
    /* A rank of a job that is still waiting for some of its ranks leaves
     * with nothing queued (a launcher's rank that crashed or restarts
     * early): its place is kept for rejoin_timeout_ms, as between calls.
     * A new process for it may take it; the ranks that join meanwhile join
     * this job, and if nobody comes back their calls fail naming the rank
     * after rejoin_timeout_ms, not after call_timeout_ms waiting for a job
     * that had ended before they came. (Once every rank has joined, the
     * communicators form: a rank that leaves then aborts the job, below.) */
    if (j->state == JOB_FORMING && !j->multi && !j->be_forming && !j->be_job &&
        detach_rank(j, r, s, reason))
        return;
    if (j->njoined == 0 && !j->multi) {
        /* The last rank connected here left: the job ends, and the ranks
         * that were away will not find it. Calls it queued (the job still
         * forming, or waiting for a rank that is away) end with it. */
        if (j->state != JOB_ABORTED && j->calls)
            job_abort(j, MET_ABORT_DISCONNECT, "rank %u (pid %u) left: %s", r, s->pid, reason);
        if (j->state != JOB_ABORTED) {
            /* Nothing was pending (a rank that leaves during a call aborts
             * the job first): the backend may end the job gracefully
             * (cuda: finalize, not abort, the communicators). */
            j->state = JOB_ABORTED;
            j->ended_clean = 1;
            snprintf(j->abort_reason, sizeof j->abort_reason, "every rank left");
            ZLOG_I("job", "job ended", "job=%s uid=%u", j->id, j->uid);
            metrics_job_ended(d, j->uid);
        }
        drop_detached(j);
        job_unref(j);
        return;
    }
    /* Between calls, with nobody waiting on it: the rank may come back on
     * a new connection. Across daemons this is also how a job ends well:
     * each node's ranks leave after their last call, whose NCCL work on the
     * other nodes may still be running; aborting at the first leave would
     * fail those calls. A node whose ranks are all away is idle: it says so
     * in its heartbeats, and once every node is idle each ends its part
     * well (cluster_idle, job_end_idle). An idle node whose ranks stay away
     * while another node's do not ends the job after rejoin_timeout_ms and
     * tells the others. */
    /* (A rank that leaves while calls are pending aborts the job at once:
     * its peers would otherwise hang.) A client that promised a Goodbye
     * (Hello.says_goodbye) and closed without one is dead - killed,
     * crashed, or its connection broken - and will not come back: waiting
     * rejoin_timeout_ms for it would hold every other rank, on every node,
     * that long. Abort at once, as for a death inside a call. */
    int dead = s->says_goodbye && !s->goodbye;
    if (j->state == JOB_RUNNING && !dead && detach_rank(j, r, s, reason)) {
        if (job_node_idle(j))
            cluster_idle(j); /* tells the others now; may end (free) j */
        return;
    }
    if (j->state != JOB_ABORTED) {
        if (dead)
            job_abort(j, MET_ABORT_DISCONNECT,
                      "rank %u (pid %u) is gone without a goodbye (killed or crashed?): %s", r,
                      s->pid, reason);
        else
            job_abort(j, MET_ABORT_DISCONNECT, "rank %u (pid %u) left: %s", r, s->pid, reason);
    }
    job_unref(j);
}

int job_node_idle(const struct job *j)
{
    return j->multi && j->state == JOB_RUNNING && j->njoined == 0 && !j->calls;
}

void job_end_idle(struct job *j)
{
    ZLOG_I("job", "job ended", "job=%s uid=%u node=%u why=\"every rank of every node left\"", j->id,
           j->uid, j->node);
    j->state = JOB_ABORTED;
    j->ended_clean = 1;
    snprintf(j->abort_reason, sizeof j->abort_reason, "every rank of every node left");
    metrics_job_ended(j->d, j->uid);
    drop_detached(j); /* may free j */
}

void job_abort_all(struct zppd *d, const char *reason)
{
    struct job *next;
    for (struct job *j = d->jobs; j; j = next) {
        next = j->next;
        job_abort(j, MET_ABORT_SHUTDOWN, "%s", reason);
        drop_detached(j); /* may free j */
    }
}

/* How long a device error of a job across daemons waits for the
 * heartbeats to name a dead node: as long as a member may stay silent
 * (cluster_silence_ms), never past peer_timeout_ms (when the heartbeats
 * name it anyway). A dead member's heartbeat fails well within it. */
static uint64_t dev_err_grace_ms(const struct zppd *d)
{
    uint64_t g = cluster_silence_ms(d);
    return g < d->cfg.peer_timeout_ms ? g : d->cfg.peer_timeout_ms;
}

/* A device error of job j: on one daemon it aborts the job. Across
 * daemons an NCCL error mostly means another node died, and NCCL sees it
 * before the heartbeats do: they are asked now, and job_tick names the node
 * whose heartbeat fails within dev_err_grace_ms, or aborts with the error
 * alone after it. */
static void job_device_error(struct job *j, const char *why)
{
    if (!j->cl) {
        job_abort(j, MET_ABORT_DEVICE, "device error: %s", why);
        return;
    }
    if (j->dev_err[0])
        return;
    snprintf(j->dev_err, sizeof j->dev_err, "%s", why);
    j->dev_err_deadline_ms = zppd_now_ms() + dev_err_grace_ms(j->d);
    cluster_probe(j);
}

void job_tick(struct zppd *d)
{
    uint64_t now = zppd_now_ms();
    zlog_limit_flush(&call_fail_log, now);
    struct job *next;
    for (struct job *j = d->jobs; j; j = next) {
        next = j->next;
        if (j->ndetached) {
            uint32_t late = UINT32_MAX;
            for (uint32_t r = 0; r < j->world && late == UINT32_MAX; r++)
                if (j->detached_ms[r] && now - j->detached_ms[r] > d->cfg.rejoin_timeout_ms)
                    late = r;
            if (j->state == JOB_ABORTED || late != UINT32_MAX) {
                if (j->state != JOB_ABORTED && j->multi && j->njoined == 0) {
                    /* every rank of this node is gone: its part of the job
                     * is over; the other nodes learn it (cluster_abort) */
                    ZLOG_I("job", "job ended on this node", "job=%s uid=%u node=%u", j->id, j->uid,
                           j->node);
                    job_abort(j, MET_ABORT_DISCONNECT,
                              "every rank of node %u left and none came back within %u ms", j->node,
                              d->cfg.rejoin_timeout_ms);
                } else if (j->state == JOB_FORMING) {
                    job_abort(j, MET_ABORT_DISCONNECT,
                              "rank %u left before every rank had joined and did not come back "
                              "within %u ms (rejoin_timeout_ms)",
                              late, d->cfg.rejoin_timeout_ms);
                } else if (j->state != JOB_ABORTED) {
                    job_abort(j, MET_ABORT_DISCONNECT,
                              "rank %u left and did not rejoin within %u ms", late,
                              d->cfg.rejoin_timeout_ms);
                }
                drop_detached(j); /* may free j */
                continue;
            }
        }
        if (j->state == JOB_ABORTED)
            continue;
        if (j->be_forming) {
            /* The formation timer polls it; this only makes sure the
             * deadline holds should the timer be late. */
            if (now >= j->form_deadline_ms && form_poll(j, now)) {
                job_pump(j);
                continue;
            }
        } else if (j->be_job && d->be->job_poll) {
            char why[256], who[256];
            if (!j->dev_err[0] && d->be->job_poll(d->be_state, j->be_job, why, sizeof why)) {
                job_device_error(j, why);
                if (j->state == JOB_ABORTED)
                    continue;
            }
            if (j->dev_err[0] && cluster_suspect(j, now, who, sizeof who)) {
                job_abort(j, MET_ABORT_PEER, "device error: %s; %s", j->dev_err, who);
                continue;
            }
            if (j->dev_err[0] && now >= j->dev_err_deadline_ms) {
                job_abort(j, MET_ABORT_DEVICE,
                          "device error: %s (every other node still answers heartbeats)",
                          j->dev_err);
                continue;
            }
        }
        for (struct call *c = j->calls; c; c = c->next) {
            if (c->running || c->nsub == 0 || now - c->t_first_ms < c->timeout_ms)
                continue;
            char missing[256] = "";
            size_t o = 0;
            for (uint32_t r = j->lo; r < j->lo + j->nlocal && o + 12 < sizeof missing; r++)
                if (!c->subs[r].submitted)
                    o += (size_t)snprintf(missing + o, sizeof missing - o, "%s%u", o ? "," : "", r);
            if (!missing[0])
                snprintf(missing, sizeof missing, "%s",
                         j->state == JOB_FORMING ? "none (the job is still forming)"
                         : c == j->calls && !ranks_ready(j, c)
                             ? "none (a rank's stream has not reached the call: its ready "
                               "event never completed)"
                             : "none (earlier calls still pending)");
            job_abort(j, MET_ABORT_TIMEOUT,
                      "call %" PRIu64 " (%s) timed out after %u ms waiting for ranks %s", c->seq,
                      c->have_args ? zpp_op_name(c->args.op) : "?", c->timeout_ms, missing);
            break;
        }
        /* a call held back by ranks_ready starts once the events complete */
        if (j->state == JOB_RUNNING && j->calls && !j->calls->running && d->be->events_ready)
            job_pump(j);
    }
}
