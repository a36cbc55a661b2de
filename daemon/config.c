/*
 * config.c — see config.h. One table says, per key, how to parse it, where
 * it lives in struct zpp_config, and whether SIGHUP reloads it.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

enum cfg_type {
    T_STR,
    T_U32,
    T_SIZE,
    T_MODE,
    T_BOOL,
    T_LEVEL,
    T_FORMAT,
    T_BACKEND,
    T_FAULT,
    T_SHARE
};

struct cfg_key {
    const char *name;
    enum cfg_type type;
    size_t off;
    size_t len; /* strings: buffer size */
    uint64_t min, max; /* numbers: the range; T_STR: min is the shortest length */
    int reloadable;
    uint32_t step; /* numbers: a multiple of it (0: any) */
};

#define F(field) offsetof(struct zpp_config, field)
#define SZ(field) sizeof(((struct zpp_config *)0)->field)
static const struct cfg_key keys[] = {
    {"socket", T_STR, F(socket), SZ(socket), 1, 0, 0},
    {"socket_mode", T_MODE, F(socket_mode), 0, 0, 0777, 0},
    {"socket_group", T_STR, F(socket_group), SZ(socket_group), 0, 0, 0},
    {"backend", T_BACKEND, F(backend), SZ(backend), 0, 0, 0},
    {"log_level", T_LEVEL, F(log_level), 0, 0, 0, 1},
    {"log_format", T_FORMAT, F(log_json), 0, 0, 0, 1},
    {"max_frame", T_SIZE, F(max_frame), 0, 256, 64u << 20, 1},
    {"max_connections", T_U32, F(max_connections), 0, 1, 1000000, 1},
    {"max_connections_per_uid", T_U32, F(max_connections_per_uid), 0, 1, 1000000, 1},
    {"max_buffers_per_session", T_U32, F(max_buffers_per_session), 0, 1, 1u << 20, 1},
    {"max_pending_per_session", T_U32, F(max_pending_per_session), 0, 1, 65536, 1},
    {"max_jobs", T_U32, F(max_jobs), 0, 1, 1000000, 1},
    {"max_world_size", T_U32, F(max_world_size), 0, 1, 1u << 20, 1},
    {"call_timeout_ms", T_U32, F(call_timeout_ms), 0, 10, 86400000, 1},
    {"busy_poll_us", T_U32, F(busy_poll_us), 0, 0, 1000000, 1},
    {"store_budget", T_SIZE, F(store_budget), 0, 0, UINT64_MAX, 1},
    {"store_budget_per_tenant", T_SIZE, F(store_budget_per_tenant), 0, 0, UINT64_MAX, 1},
    {"store_max_entries_per_tenant", T_U32, F(store_max_entries_per_tenant), 0, 0, 1u << 24, 1},
    {"hpz_share", T_SHARE, F(hpz_share), SZ(hpz_share), 0, 0, 1},
    {"virtual_nodes", T_U32, F(virtual_nodes), 0, 0, 65536, 0},
    {"default_block", T_U32, F(default_block), 0, 32, 8192, 1, 32},
    {"default_stages", T_U32, F(default_stages), 0, 1, 64, 1},
    {"allow_legacy_ipc", T_BOOL, F(allow_legacy_ipc), 0, 0, 1, 0},
    {"cuda_start_wait_ms", T_U32, F(cuda_start_wait_ms), 0, 0, 600000, 0},
    {"host_threads", T_U32, F(host_threads), 0, 1, 128, 0},
    {"metrics_listen", T_STR, F(metrics_listen), SZ(metrics_listen), 0, 0, 0},
    {"tenant_max_jobs", T_U32, F(tenant_max_jobs), 0, 0, 1000000, 1},
    {"tenant_max_sessions", T_U32, F(tenant_max_sessions), 0, 0, 1000000, 1},
    {"tenant_max_device_memory", T_SIZE, F(tenant_max_device_memory), 0, 0, UINT64_MAX, 1},
    {"job_max_device_memory", T_SIZE, F(job_max_device_memory), 0, 0, UINT64_MAX, 1},
    {"fault_inject", T_FAULT, F(fault_inject), SZ(fault_inject), 0, 0, 0},
    {"peer_listen", T_STR, F(peer_listen), SZ(peer_listen), 0, 0, 0},
    {"peer_advertise", T_STR, F(peer_advertise), SZ(peer_advertise), 0, 0, 0},
    {"peer_tls", T_BOOL, F(peer_tls), 0, 0, 1, 0},
    {"peer_tls_ca", T_STR, F(peer_tls_ca), SZ(peer_tls_ca), 0, 0, 0},
    {"peer_tls_cert", T_STR, F(peer_tls_cert), SZ(peer_tls_cert), 0, 0, 0},
    {"peer_tls_key", T_STR, F(peer_tls_key), SZ(peer_tls_key), 0, 0, 0},
    {"peer_tls_target_override", T_STR, F(peer_tls_target_override),
     SZ(peer_tls_target_override), 0, 0, 0},
    {"peer_heartbeat_ms", T_U32, F(peer_heartbeat_ms), 0, 50, 600000, 1},
    {"peer_timeout_ms", T_U32, F(peer_timeout_ms), 0, 100, 3600000, 1},
    /* static: the peer service takes it once at start (its parked Joins'
     * limit), and a job's nodes must agree on it */
    {"join_timeout_ms", T_U32, F(join_timeout_ms), 0, 100, 86400000, 0},
    {"rejoin_timeout_ms", T_U32, F(rejoin_timeout_ms), 0, 0, 86400000, 1},
};
#undef F
#undef SZ

void cfg_defaults(struct zpp_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->socket, sizeof c->socket, "%s", "/run/zppd/zppd.sock");
    c->socket_mode = 0660;
    snprintf(c->backend, sizeof c->backend, "%s", "auto");
    c->log_level = ZLOG_INFO;
    c->max_frame = 1u << 20;
    c->max_connections = 1024;
    c->max_connections_per_uid = 256;
    c->max_buffers_per_session = 4096;
    c->max_pending_per_session = 64;
    c->store_max_entries_per_tenant = 16384;
    c->max_jobs = 256;
    c->max_world_size = 4096;
    c->call_timeout_ms = 300000;
    c->busy_poll_us = 100;
    c->store_budget = 1ull << 30;
    c->default_block = 256;
    c->default_stages = 2;
    c->host_threads = 4;
    c->cuda_start_wait_ms = 30000;
    snprintf(c->peer_listen, sizeof c->peer_listen, "%s", "127.0.0.1:7399");
    c->peer_heartbeat_ms = 1000;
    c->peer_timeout_ms = 5000;
    c->join_timeout_ms = 60000;
    c->rejoin_timeout_ms = 30000;
}

/* Parses an unsigned integer with an optional K/M/G suffix. */
static int parse_size(const char *s, int allow_suffix, uint64_t *out)
{
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    if (allow_suffix && *end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: return -1;
        }
        end++;
        if (toupper((unsigned char)*end) == 'B' || toupper((unsigned char)*end) == 'I')
            end++;
    }
    if (*end)
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcmp(s, "1") || !strcasecmp(s, "on"))
        *out = 1;
    else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcmp(s, "0") ||
             !strcasecmp(s, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

int cfg_fault_after_calls(const char *value, uint64_t *n)
{
    static const char prefix[] = "sticky_error_after_calls:";
    if (strncmp(value, prefix, sizeof prefix - 1))
        return -1;
    return parse_size(value + sizeof prefix - 1, 0, n);
}

/* hpz_share: "OWNER:READER" uid pairs separated by spaces or commas; ""
 * for none. *out is untouched on error. */
static int parse_share(const char *s, struct cfg_share *out, char *why, size_t why_len)
{
    struct cfg_share sh = {0};
    while (*s) {
        if (isspace((unsigned char)*s) || *s == ',') {
            s++;
            continue;
        }
        unsigned long uid[2];
        for (int i = 0; i < 2; i++) {
            char *end;
            errno = 0;
            uid[i] = strtoul(s, &end, 10);
            if (!isdigit((unsigned char)*s) || errno || uid[i] > UINT32_MAX ||
                (i == 0 ? *end != ':' : (*end && !isspace((unsigned char)*end) && *end != ','))) {
                snprintf(why, why_len,
                         "hpz_share: expected OWNER:READER uid pairs (e.g. 1000:1001 1000:1002) "
                         "at '%.40s'",
                         s);
                return -1;
            }
            s = i == 0 ? end + 1 : end;
        }
        if (sh.n == CFG_SHARE_MAX) {
            snprintf(why, why_len, "hpz_share: more than %d pairs", CFG_SHARE_MAX);
            return -1;
        }
        sh.pair[sh.n][0] = (uint32_t)uid[0];
        sh.pair[sh.n][1] = (uint32_t)uid[1];
        sh.n++;
    }
    *out = sh;
    return 0;
}

int cfg_set(struct zpp_config *c, const char *key, const char *value, char *why, size_t why_len)
{
    const struct cfg_key *k = NULL;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i].name, key) == 0)
            k = &keys[i];
    if (!k) {
        snprintf(why, why_len, "unknown key '%s'", key);
        return -1;
    }
    char *p = (char *)c + k->off;
    uint64_t v = 0;
    int b;
    switch (k->type) {
    case T_SHARE:
        return parse_share(value, (struct cfg_share *)p, why, why_len);
    case T_STR:
        if (strlen(value) >= k->len) {
            snprintf(why, why_len, "%s: value longer than %zu bytes", key, k->len - 1);
            return -1;
        }
        if (strlen(value) < k->min) {
            snprintf(why, why_len, "%s: must not be empty", key);
            return -1;
        }
        snprintf(p, k->len, "%s", value);
        return 0;
    case T_FAULT:
        if (*value && cfg_fault_after_calls(value, &v)) {
            snprintf(why, why_len, "%s: '%s' is not empty or sticky_error_after_calls:N", key,
                     value);
            return -1;
        }
        snprintf(p, k->len, "%s", value);
        return 0;
    case T_BACKEND:
        if (strcmp(value, "host") && strcmp(value, "cuda") && strcmp(value, "auto")) {
            snprintf(why, why_len, "backend: '%s' is not host, cuda or auto", value);
            return -1;
        }
        snprintf(p, k->len, "%s", value);
        return 0;
    case T_LEVEL:
        if ((b = zlog_parse_level(value)) < 0) {
            snprintf(why, why_len, "log_level: '%s' is not error, warn, info or debug", value);
            return -1;
        }
        *(int *)p = b;
        return 0;
    case T_FORMAT:
        if (strcmp(value, "text") && strcmp(value, "json")) {
            snprintf(why, why_len, "log_format: '%s' is not text or json", value);
            return -1;
        }
        *(int *)p = strcmp(value, "json") == 0;
        return 0;
    case T_BOOL:
        if (parse_bool(value, &b)) {
            snprintf(why, why_len, "%s: '%s' is not true or false", key, value);
            return -1;
        }
        *(int *)p = b;
        return 0;
    case T_MODE: {
        char *end;
        errno = 0;
        unsigned long m = strtoul(value, &end, 8);
        if (errno || *end || !*value || m > k->max) {
            snprintf(why, why_len, "%s: '%s' is not an octal mode", key, value);
            return -1;
        }
        if (m & 0002) {
            snprintf(why, why_len, "%s: a world-writable socket is refused", key);
            return -1;
        }
        *(uint32_t *)p = (uint32_t)m;
        return 0;
    }
    case T_U32:
    case T_SIZE:
        if (parse_size(value, k->type == T_SIZE, &v) || v < k->min || v > k->max) {
            snprintf(why, why_len, "%s: '%s' is not a number in [%" PRIu64 ", %" PRIu64 "]", key,
                     value, k->min, k->max);
            return -1;
        }
        if (k->step && v % k->step) {
            snprintf(why, why_len, "%s: '%s' is not a multiple of %u", key, value, k->step);
            return -1;
        }
        if (k->type == T_U32)
            *(uint32_t *)p = (uint32_t)v;
        else
            *(uint64_t *)p = v;
        return 0;
    }
    return -1;
}

/* 1 if s is HOST:PORT as a peer advertises it: 1 to 255 printable bytes
 * without spaces (what a leader takes in a Join), ending in ':' and a port
 * 1 - 65535. */
static int address_ok(const char *s)
{
    const size_t n = strlen(s);
    if (n == 0 || n > 255)
        return 0;
    for (const char *q = s; *q; q++)
        if ((unsigned char)*q <= 0x20 || (unsigned char)*q > 0x7e)
            return 0;
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1] || strlen(colon + 1) > 5)
        return 0;
    unsigned long port = 0;
    for (const char *q = colon + 1; *q; q++) {
        if (!isdigit((unsigned char)*q))
            return 0;
        port = port * 10 + (unsigned long)(*q - '0');
    }
    return port >= 1 && port <= 65535;
}

int cfg_check(const struct zpp_config *c, char *why, size_t why_len)
{
    if (c->peer_listen[0] && c->peer_heartbeat_ms >= c->peer_timeout_ms) {
        snprintf(why, why_len,
                 "peer_heartbeat_ms %u must be below peer_timeout_ms %u (a peer would be "
                 "declared lost between two heartbeats)",
                 c->peer_heartbeat_ms, c->peer_timeout_ms);
        return -1;
    }
    if (c->peer_listen[0] && c->peer_advertise[0] && !address_ok(c->peer_advertise)) {
        snprintf(why, why_len,
                 "peer_advertise '%.80s': not HOST:PORT (printable, no spaces, port 1-65535)",
                 c->peer_advertise);
        return -1;
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* A config file is read whole at start and on SIGHUP, on the loop thread:
 * one that never ends (-c /dev/zero, a FIFO) must not hang the daemon. */
#define CFG_MAX_BYTES (1u << 20)

/* Reads one line, without its '\n', into line (NUL-terminated). Returns its
 * length in bytes (NUL bytes included; more than cap - 1 when it was too long:
 * the rest of it is skipped), -1 at the end of the file, or -2 once *left
 * bytes have been read. */
static long read_line(FILE *f, char *line, size_t cap, size_t *left)
{
    size_t n = 0;
    int ch;
    while ((ch = getc(f)) != EOF) {
        if ((*left)-- == 0)
            return -2;
        if (ch == '\n')
            break;
        if (n < cap - 1)
            line[n] = (char)ch;
        if (n < cap)
            n++;
    }
    line[n < cap ? n : cap - 1] = 0;
    return ch == EOF && n == 0 ? -1 : (long)n;
}

int cfg_load(struct zpp_config *c, const char *path, int *nbad, char *why, size_t why_len)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int lineno = 0, bad = 0;
    long len;
    size_t left = CFG_MAX_BYTES;
    while ((len = read_line(f, line, sizeof line, &left)) >= 0) {
        lineno++;
        if ((size_t)len >= sizeof line) {
            ZLOG_W("config", "line too long, ignoring", "file=%s line=%d", path, lineno);
            bad++;
            continue;
        }
        if (strlen(line) != (size_t)len) {
            ZLOG_W("config", "NUL byte in line, ignoring", "file=%s line=%d", path, lineno);
            bad++;
            continue;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            ZLOG_W("config", "not key = value, ignoring", "file=%s line=%d", path, lineno);
            bad++;
            continue;
        }
        *eq = 0;
        char *key = trim(s), *val = trim(eq + 1);
        char err[256];
        if (cfg_set(c, key, val, err, sizeof err)) {
            ZLOG_W("config", err, "file=%s line=%d ignoring=1", path, lineno);
            bad++;
        }
    }
    if (len == -2) {
        snprintf(why, why_len, "%s is longer than %u bytes: not a config file", path,
                 CFG_MAX_BYTES);
        fclose(f);
        return -1;
    }
    if (ferror(f)) {
        snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    fclose(f);
    if (nbad)
        *nbad = bad;
    return 0;
}

/* A key's text types: NUL-terminated in a field of k->len bytes. */
static int key_is_text(const struct cfg_key *k)
{
    return k->type == T_STR || k->type == T_BACKEND || k->type == T_FAULT;
}

/* The bytes of a key's field in struct zpp_config. */
static size_t key_bytes(const struct cfg_key *k)
{
    return key_is_text(k) || k->type == T_SHARE ? k->len
           : k->type == T_SIZE                  ? sizeof(uint64_t)
           : k->type == T_U32 || k->type == T_MODE ? sizeof(uint32_t)
                                                   : sizeof(int);
}

void cfg_apply_reloadable(struct zpp_config *dst, const struct zpp_config *src)
{
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct cfg_key *k = &keys[i];
        if (k->reloadable)
            memcpy((char *)dst + k->off, (const char *)src + k->off, key_bytes(k));
    }
}

int cfg_static_changes(const struct zpp_config *a, const struct zpp_config *b, char *out,
                       size_t len)
{
    int n = 0;
    size_t o = 0;
    if (len)
        out[0] = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct cfg_key *k = &keys[i];
        if (k->reloadable)
            continue;
        const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
        /* (text: what follows the NUL is whatever an earlier value left) */
        if (key_is_text(k) ? !strncmp(pa, pb, k->len) : !memcmp(pa, pb, key_bytes(k)))
            continue;
        if (o < len) {
            int w = snprintf(out + o, len - o, "%s%s", n ? "," : "", k->name);
            o += w > 0 ? (size_t)w : 0;
        }
        n++;
    }
    return n;
}

void cfg_print(const struct zpp_config *c, FILE *f)
{
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct cfg_key *k = &keys[i];
        const char *p = (const char *)c + k->off;
        switch (k->type) {
        case T_STR:
        case T_FAULT:
        case T_BACKEND: fprintf(f, "%s = %s\n", k->name, p); break;
        case T_LEVEL: fprintf(f, "%s = %s\n", k->name, zlog_level_name(*(const int *)p)); break;
        case T_FORMAT: fprintf(f, "%s = %s\n", k->name, *(const int *)p ? "json" : "text"); break;
        case T_BOOL: fprintf(f, "%s = %s\n", k->name, *(const int *)p ? "true" : "false"); break;
        case T_MODE: fprintf(f, "%s = %04o\n", k->name, *(const uint32_t *)p); break;
        case T_U32: fprintf(f, "%s = %u\n", k->name, *(const uint32_t *)p); break;
        case T_SIZE: fprintf(f, "%s = %" PRIu64 "\n", k->name, *(const uint64_t *)p); break;
        case T_SHARE: {
            const struct cfg_share *sh = (const struct cfg_share *)(const void *)p;
            fprintf(f, "%s =", k->name);
            for (uint32_t n = 0; n < sh->n; n++)
                fprintf(f, " %u:%u", sh->pair[n][0], sh->pair[n][1]);
            fprintf(f, "\n");
            break;
        }
        }
    }
}
