/*
 * job.h — jobs: membership, matching call k across ranks, execution order,
 * timeouts and abort.
 *
 * A job is named by its tenant (uid + label) and its job id, so one tenant
 * can neither join nor squat another's job. Its ranks say Hello; call k of
 * the job is matched by sequence number: every rank must submit it with
 * the same arguments, or call k ends on every rank with an error naming
 * the rank and the field that differs. Calls run one at a time in sequence
 * order. A member that disconnects, or a call that waits longer than its
 * timeout, aborts the job: every pending call ends with an error naming
 * the cause, later calls are refused, and the job is freed when its last
 * member leaves. Other jobs go on.
 *
 * A job forms in two steps: its ranks join (and, across daemons, its nodes
 * meet through the leader: cluster.c), then the backend creates its
 * communicators without blocking the loop (job_open, then job_poll from a
 * timer until ready or join_timeout_ms). Calls submitted meanwhile queue
 * and run once the job is running.
 */
#ifndef ZPPD_JOB_H
#define ZPPD_JOB_H

#include <stdint.h>
#include <uv.h>

#include "coll.h"
#include "zpp.pb-c.h"

struct zppd;
struct session;
struct buffer;

enum job_state { JOB_FORMING = 0, JOB_RUNNING = 1, JOB_ABORTED = 2 };

#define JOB_RING 32       /* recent calls kept per job for zppctl */
#define JOB_SEQ_WINDOW 4096 /* how far ahead of the running call a rank may be */

struct call_record {
    uint64_t seq;
    int op;
    uint64_t bytes;
    int state; /* 0 pending, 1 running, 2 done, 3 failed */
    uint64_t start_us, end_us;
    char msg[128];
};

/* One rank's submission of a call. */
struct call_sub {
    struct session *s; /* holds a session ref until replied */
    uint64_t req_id;
    struct buffer *in, *out; /* buffer refs */
    uint64_t in_off, out_off;
    uint32_t event_slot; /* cuda: 1 + the session's event slot; 0 none */
    uint64_t flag_value; /* cuda: written to the slot's done flag after the call */
    int submitted, replied;
};

struct call {
    uint64_t seq;
    struct coll_args args;
    int have_args;
    uint32_t first_rank;
    /* default_block and default_stages when the first rank submitted: a
     * later rank's 0 means these, so that a reload between two ranks'
     * submissions cannot make the same request differ */
    uint32_t dflt_block, dflt_stages;
    uint32_t nsub;
    struct call_sub *subs; /* world entries */
    int failed;
    int fail_code;
    char fail_msg[384];
    int running;
    /* Its enqueue failed in a job across daemons (call_enqueue): it ends
     * with the job's abort, which names the node that died. */
    int held;
    uint64_t t_first_ms;
    uint64_t t_start_us;
    uint32_t timeout_ms;
    uint32_t ring_pos; /* 1 + the ring position of this call's record; 0 none */
    struct call *next; /* sorted by seq */

    struct job *job;
    struct coll_exec x;
    struct coll_slot *slots;
    uv_work_t work;
};

struct job {
    struct zppd *d;
    char id[129];
    uint32_t uid;
    char label[65];
    uint32_t world, nodes, local;
    struct session **members;
    uint32_t njoined;
    /* A rank that left between calls may rejoin (a new connection, the
     * same rank) within rejoin_timeout_ms: the job, its communicators and
     * its hpZ slices wait for it. detached_ms[r] != 0 while rank r is away;
     * each such rank keeps its reference on the job. */
    uint64_t *detached_ms;
    uint32_t ndetached;
    enum job_state state;
    int ended_clean; /* ABORTED only because every rank left, nothing pending */
    int abort_now;   /* aborted for another node's failure: NCCL is aborted at once */
    char abort_reason[384];
    struct call *calls;
    uint32_t ncalls; /* in calls: at most (njoined + ndetached) * max_pending_per_session */
    uint64_t next_seq;
    int refs; /* members + a running call */
    struct call_record ring[JOB_RING];
    uint32_t ring_pos;
    uint64_t created_ms;
    void *be_job;  /* the backend's communicators and streams (cuda) */
    /* Formation (job.c, "formation"): be_forming while the backend's
     * job_poll says BE_FORMING; the job stays JOB_FORMING and its calls
     * wait. Aborted when not ready by form_deadline_ms (join_timeout_ms
     * after job_open). */
    int be_forming;
    uint32_t form_timeout_ms;
    uint32_t form_interval_ms; /* the current poll interval (backs off) */
    uint64_t form_deadline_ms, form_next_ms;
    uint64_t form_t0_us;
    /* Jobs across daemons (Hello.leader_addr set): this daemon hosts node
     * `node`, ranks [lo, lo + nlocal); otherwise node 0 and all ranks. */
    int multi;
    uint32_t node, lo, nlocal;
    char leader[256];
    uint64_t gen; /* daemon-unique, for answers that arrive later */
    struct cluster_job *cl;
    /* A device error (NCCL's, mostly) of a job across daemons: usually the
     * sign that another node died. The job waits until dev_err_deadline_ms
     * for the heartbeats to name it (job.c, job_tick), then aborts. */
    char dev_err[256];
    uint64_t dev_err_deadline_ms;
    int *devices;  /* rank -> daemon device index */
    struct job *next, *prev;
};

/* Handles a rank's Hello: finds or creates the job and joins it. Replies
 * on s (success or error). */
/* flags_fd: the descriptors of Hello's done flags (Hello.flags_nfds: the
 * memfd, then the pipe), -1 where none came; each set to -1 when the
 * backend took it, else the caller closes it. */
void job_hello(struct session *s, uint64_t req_id, const Zpp__Hello *h, int flags_fd[2]);

/* Handles a collective call from a member. Replies now (error) or later. */
void job_submit(struct session *s, uint64_t req_id, const Zpp__Collective *c);

/* A member's session is closing: aborts its job with the reason. */
void job_leave(struct session *s, const char *reason);

/* Aborts a job: ends every pending call with ZPP_EABORTED and reason. */
/* cause: enum metrics_abort_cause (metrics.h). */
void job_abort(struct job *j, int cause, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Periodic check (loop timer): calls waiting past their timeout. */
void job_tick(struct zppd *d);

/* A job across daemons whose ranks on this node have all left between
 * calls (it keeps running: they may rejoin within rejoin_timeout_ms). */
int job_node_idle(const struct job *j);

/* cluster.c: every node of j is idle: ends it here as a one-node job ends
 * when its last rank leaves (communicators finalized, not aborted; no
 * Abort to the others, which end their parts the same way). May free j. */
void job_end_idle(struct job *j);

/* Aborts every job (shutdown). */
void job_abort_all(struct zppd *d, const char *reason);

const char *job_state_name(enum job_state st);
/* What zppctl and the metrics show: job_state_name, or "idle" for a job
 * across daemons whose ranks here have all left between calls (it waits
 * for them to rejoin, or for the other nodes to be idle too). */
const char *job_state_label(const struct job *j);

#endif
