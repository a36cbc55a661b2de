/*
 * admin.h — answers to zppctl: daemon status and the jobs table.
 * A caller sees every job only if it is root or the daemon's own uid;
 * otherwise only its own tenant's jobs.
 */
#ifndef ZPPD_ADMIN_H
#define ZPPD_ADMIN_H

#include <stdint.h>

struct session;

void admin_status(struct session *s, uint64_t req_id);
void admin_jobs(struct session *s, uint64_t req_id);

#endif
