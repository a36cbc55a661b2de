/*
 * metrics.h — counters by tenant and collective, and the Prometheus text
 * endpoint that exposes them (off by default; loopback when on).
 *
 * The job layer records every finished call (metrics_call), every abort
 * (metrics_abort) and every job that ended well (metrics_job_ended); the
 * endpoint renders these counters together with gauges read from the live
 * state (sessions, jobs, hpZ store, device memory per job) at scrape
 * time. Everything runs on the loop thread.
 */
#ifndef ZPPD_METRICS_H
#define ZPPD_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct zppd;
struct coll_result;

enum metrics_outcome { MET_OK = 0, MET_ERROR = 1, MET_ABORTED = 2, MET_OUTCOMES = 3 };
enum metrics_abort_cause {
    MET_ABORT_DISCONNECT = 0,
    MET_ABORT_TIMEOUT = 1,
    MET_ABORT_DEVICE = 2,
    MET_ABORT_PEER = 3,
    MET_ABORT_SHUTDOWN = 4,
    MET_ABORT_OTHER = 5,
    MET_ABORT_CAUSES = 6
};

/* Records one finished call of tenant uid (res may be NULL on failure). */
void metrics_call(struct zppd *d, uint32_t uid, int op, int outcome, const struct coll_result *res,
                  uint64_t latency_us);
/* Records a job abort. */
void metrics_abort(struct zppd *d, uint32_t uid, int cause);
/* Records a job that ended well: every rank left between calls (across
 * daemons: every node's). */
void metrics_job_ended(struct zppd *d, uint32_t uid);

/* Tenant uid's finished calls (ok, and failed or aborted) and the bytes
 * its successful calls moved inside and across nodes. */
struct metrics_totals {
    uint64_t calls_ok, calls_failed, bytes_intra, bytes_inter;
};
void metrics_tenant_totals(struct zppd *d, uint32_t uid, struct metrics_totals *out);

/* Renders the whole exposition into a malloc'd buffer (caller frees). */
char *metrics_render(struct zppd *d, size_t *len);

/* Starts the HTTP endpoint on cfg.metrics_listen ("host:port"); no-op when
 * empty. Returns 0 or a negative ZPP_E* code (logged). */
int metrics_start(struct zppd *d);
/* Stops the endpoint: closes the listening socket and every connection
 * still open (answers not yet written are dropped; each connection is freed
 * in its close callback). Idempotent; call it before the loop's last
 * uv_walk. */
void metrics_stop(struct zppd *d);
/* Frees the counters (after the loop ended). */
void metrics_free(struct zppd *d);

#endif
