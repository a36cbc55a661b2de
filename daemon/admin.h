/*
 * admin.h — answers to zppctl: daemon status, the jobs and sessions tables,
 * hpZ store usage, the metrics text, and drain.
 * A caller sees every job and session only if it is root or the daemon's
 * own uid; otherwise only its own tenant's. Shared hpZ replicas follow the
 * same rule widened by hpz_share: a caller also sees the replicas its uid
 * may read. The metrics text and drain are
 * for root and the daemon's uid only (ZPP_EPERM for others).
 */
#ifndef ZPPD_ADMIN_H
#define ZPPD_ADMIN_H

#include <stdint.h>

#include "zpp.pb-c.h"

struct session;

void admin_status(struct session *s, uint64_t req_id);
void admin_jobs(struct session *s, uint64_t req_id);
void admin_sessions(struct session *s, uint64_t req_id);
void admin_store(struct session *s, uint64_t req_id);
void admin_metrics(struct session *s, uint64_t req_id);
/* Sets (off = 0) or clears d->draining; logs the change. */
void admin_drain(struct session *s, uint64_t req_id, const Zpp__DrainRequest *dr);

#endif
