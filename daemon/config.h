/*
 * config.h — zppd's configuration: defaults, the config file, overrides.
 *
 * The file is `key = value` lines with '#' comments; sizes take K/M/G
 * suffixes (binary). A table maps each key to a parser and an offset in
 * struct zpp_config (systemd's gperf tables do the same). A bad line is
 * reported with file:line and ignored. Keys marked reloadable are applied
 * again on SIGHUP; the others need a restart. deploy/zppd.conf lists every
 * key with its default; docs/configuration.md explains them.
 */
#ifndef ZPPD_CONFIG_H
#define ZPPD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#define CFG_PATH_MAX 256
#define CFG_SHARE_MAX 64 /* hpz_share pairs (= HPZ_SHARE_MAX) */

struct zpp_config {
    char socket[CFG_PATH_MAX];
    uint32_t socket_mode;
    char socket_group[64];
    char backend[16]; /* host, cuda, auto */
    int log_level;
    int log_json;
    uint64_t max_frame;
    uint32_t max_connections;
    uint32_t max_connections_per_uid;
    uint32_t max_buffers_per_session;
    uint32_t max_pending_per_session;
    uint32_t max_jobs;
    uint32_t max_world_size;
    uint32_t call_timeout_ms;
    uint64_t store_budget;
    uint64_t store_budget_per_tenant;
    uint32_t store_max_entries_per_tenant; /* hpZ entries (keys x jobs) per uid; 0: no cap */
    /* hpz_share: {owner uid, reader uid} pairs; the reader's jobs may read
     * the owner's shared hpZ replicas (docs/hpz-sharing.md). */
    struct cfg_share {
        uint32_t n;
        uint32_t pair[CFG_SHARE_MAX][2];
    } hpz_share;
    uint32_t virtual_nodes;
    uint32_t default_block;
    uint32_t default_stages;
    int allow_legacy_ipc;
    uint32_t cuda_start_wait_ms; /* at start, how long a GPU that is not ready yet is waited for */
    uint32_t host_threads;
    char metrics_listen[128]; /* host:port of the Prometheus endpoint; empty = off */
    /* Per-tenant (uid) quotas; 0 = none. */
    uint32_t tenant_max_jobs;
    uint32_t tenant_max_sessions;      /* rank sessions (connections in a job) */
    uint64_t tenant_max_device_memory; /* bytes the backend holds for the tenant's jobs */
    uint64_t job_max_device_memory;    /* bytes the backend may hold for one job */
    /* Test switch, host backend only: "" or "sticky_error_after_calls:N". */
    char fault_inject[64];
    char peer_listen[128];    /* host:port of the peer (gRPC) service; empty = off */
    char peer_advertise[256]; /* how other daemons reach this one; empty = derived */
    int peer_tls;
    char peer_tls_ca[CFG_PATH_MAX];
    char peer_tls_cert[CFG_PATH_MAX];
    char peer_tls_key[CFG_PATH_MAX];
    char peer_tls_target_override[128]; /* tests only */
    uint32_t peer_heartbeat_ms;
    uint32_t peer_timeout_ms;
    uint32_t join_timeout_ms;
    uint32_t rejoin_timeout_ms; /* a rank that left between calls may rejoin */
    uint32_t busy_poll_us;      /* the loop polls this long after a request or reply */
};

/* Fills c with the defaults. */
void cfg_defaults(struct zpp_config *c);

/* Sets one key from its text value. Returns 0, or -1 with a message in
 * why (unknown key, bad value). */
int cfg_set(struct zpp_config *c, const char *key, const char *value, char *why, size_t why_len);

/* Reads a config file into c (keys not in the file keep their value).
 * Bad lines are logged as warnings with file:line and ignored; returns 0,
 * or -1 if the file cannot be read (message in why). *nbad counts the
 * ignored lines (may be NULL). */
int cfg_load(struct zpp_config *c, const char *path, int *nbad, char *why, size_t why_len);

/* Copies the reloadable keys of src into dst (SIGHUP). */
void cfg_apply_reloadable(struct zpp_config *dst, const struct zpp_config *src);
/* The keys that differ between a and b but take effect only at start,
 * comma-separated into out (truncated to len); returns how many. */
int cfg_static_changes(const struct zpp_config *a, const struct zpp_config *b, char *out,
                       size_t len);

/* Parses a fault_inject value "sticky_error_after_calls:N" into *n.
 * Returns 0, or -1 if it is anything else. */
int cfg_fault_after_calls(const char *value, uint64_t *n);

/* Writes every key = value to f, in the file format. */
void cfg_print(const struct zpp_config *c, FILE *f);

/* The checks between keys, after the file and the flags: 0, or -1 with the
 * reason in why (zppd then does not start, and a reload is refused). */
int cfg_check(const struct zpp_config *c, char *why, size_t why_len);

#endif
