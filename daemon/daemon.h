/*
 * daemon.h — the daemon's state, owned by the libuv loop thread.
 *
 * One struct zppd holds everything: the loop, the configuration, the
 * backend, the listening socket, the sessions, the jobs and the hpZ store.
 * It is passed explicitly; nothing else is global (signal handling goes
 * through uv_signal_t, so no handler touches it).
 */
#ifndef ZPPD_DAEMON_H
#define ZPPD_DAEMON_H

#include <stdint.h>
#include <uv.h>

#include "backend.h"
#include "config.h"

struct session;
struct job;
struct hpz_store;

struct zppd_stats {
    uint64_t calls_ok;
    uint64_t calls_failed;
    uint64_t bytes_intra;
    uint64_t bytes_inter;
    uint64_t bytes_zero3_inter;
    uint64_t aborts;
    uint64_t protocol_errors;
    uint64_t fd_budget_closes; /* sessions closed at the daemon's descriptor budget */
};

struct zppd {
    uv_loop_t *loop;
    struct zpp_config cfg;
    char config_path[CFG_PATH_MAX];
    const struct be_ops *be;
    void *be_state;
    const char *backend_name;

    int listen_fd;
    int spare_fd; /* kept open to shed a connection at EMFILE */
    /* Descriptors received and not yet claimed by their frame, across all
     * sessions, and the most the daemon holds (half the descriptor limit,
     * server_start_accepting). */
    uint32_t fds_held, fds_budget;
    uv_poll_t listen_poll;
    int listening;

    struct session *sessions;
    uint32_t nsessions;
    uint64_t next_session_id;

    struct job *jobs;
    uint32_t njobs;

    struct hpz_store *store;
    void *metrics; /* metrics.c */
    void *cluster; /* cluster.c: the peer service and jobs across daemons */

    uint64_t busy_until; /* uv_hrtime() until which the loop polls (main.c) */

    uv_timer_t tick;
    uv_timer_t reaper;        /* the queued session closes and resumed reads (server.c) */
    int reaper_ready;
    uv_timer_t form_timer;    /* polls the backend of forming jobs (job.c) */
    int form_timer_ready;
    struct session *closing;
    struct session *resuming; /* sessions to read again: their replies drained */
    uv_signal_t sig_term, sig_int, sig_hup;
    int draining; /* no new jobs */
    int stopping; /* SIGTERM: finishing in-flight work, then exit */
    uint32_t inflight;
    uint64_t start_ms;
    uint32_t uid;
    struct zppd_stats stats;
    uint32_t log_budget; /* protocol-error log lines left in this second */
};

/* Milliseconds / microseconds on the monotonic clock. */
uint64_t zppd_now_ms(void);
uint64_t zppd_now_us(void);

/* server.c: opens the listening socket (stale socket removed, mode and
 * group applied). Returns 0 or a negative ZPP_E* code with a log line. */
int server_listen(struct zppd *d);
/* Stops accepting and removes the socket file. Idempotent. */
void server_stop_listening(struct zppd *d);
/* At exit, after every session was closed: drops the references the
 * deferred close and resume lists hold, whose timers will not run again. */
void server_drop_deferred(struct zppd *d);
/* Writes the count of refused-connection lines left out, once a flood is
 * over (the daemon's tick). */
void server_log_tick(uint64_t now_ms);

/* main.c: called when in-flight work ends, to finish a graceful stop. */
void zppd_maybe_exit(struct zppd *d);

/* A request came in or a reply went out: the loop polls instead of
 * sleeping for busy_poll_us from now (main.c, "Busy polling"). */
static inline void zppd_busy(struct zppd *d)
{
    if (d->cfg.busy_poll_us)
        d->busy_until = uv_hrtime() + (uint64_t)d->cfg.busy_poll_us * 1000u;
}

#endif
