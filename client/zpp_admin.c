/*
 * zpp_admin.c — renders the daemon's admin replies (StatusReply, JobsReply,
 * SessionsReply, StoreReply with its shared replicas, DrainReply) as
 * JSON, for zpp_admin_*_json and `zppctl --json`.
 *
 * Strings in those replies come from clients (job ids, tenant labels, call
 * messages), so they are escaped fully: quotes, backslashes and control
 * characters (C0, DEL and the C1 controls U+0080..U+009F, which terminals
 * read as CSI and the like when the JSON is shown on one), and a byte
 * sequence that is not valid UTF-8 becomes U+FFFD so that the output always
 * parses.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zpp_int.h"

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} jw_t;

static void jw_put(jw_t *w, const char *s, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *p = realloc(w->buf, cap);
        if (!p) {
            w->oom = 1;
            return;
        }
        w->buf = p;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = 0;
}

static void jw_raw(jw_t *w, const char *s)
{
    jw_put(w, s, strlen(s));
}

static void jw_fmt(jw_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jw_fmt(jw_t *w, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        jw_put(w, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

static void jw_str(jw_t *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    jw_put(w, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            jw_put(w, e, 2);
            p++;
        } else if (*p < 0x20 || *p == 0x7F) {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            if (*p == '\n')
                jw_put(w, "\\n", 2);
            else if (*p == '\t')
                jw_put(w, "\\t", 2);
            else if (*p == '\r')
                jw_put(w, "\\r", 2);
            else
                jw_put(w, e, 6);
            p++;
        } else {
            /* The string is NUL-terminated, so utf8_len never reads past it:
             * a NUL fails the continuation check. */
            size_t n = utf8_len(p);
            if (n == 0) {
                jw_raw(w, "\\ufffd");
                p++;
            } else if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) { /* C1 control */
                char e[6] = {'\\', 'u', '0', '0', hex[p[1] >> 4], hex[p[1] & 15]};
                jw_put(w, e, 6);
                p += 2;
            } else {
                jw_put(w, (const char *)p, n);
                p += n;
            }
        }
    }
    jw_put(w, "\"", 1);
}

static void jw_key(jw_t *w, int *first, const char *k)
{
    if (!*first)
        jw_put(w, ",", 1);
    *first = 0;
    jw_str(w, k);
    jw_put(w, ":", 1);
}

static void jw_u64(jw_t *w, int *first, const char *k, uint64_t v)
{
    jw_key(w, first, k);
    jw_fmt(w, "%" PRIu64, v);
}

static void jw_kstr(jw_t *w, int *first, const char *k, const char *v)
{
    jw_key(w, first, k);
    jw_str(w, v);
}

static void jw_u32_array(jw_t *w, int *first, const char *k, const uint32_t *v, size_t n)
{
    jw_key(w, first, k);
    jw_put(w, "[", 1);
    for (size_t i = 0; i < n; i++)
        jw_fmt(w, "%s%" PRIu32, i ? "," : "", v[i]);
    jw_put(w, "]", 1);
}

static int jw_finish(jw_t *w, char **out)
{
    if (w->oom || !w->buf) {
        free(w->buf);
        return ZPP_ENOMEM;
    }
    *out = w->buf;
    return 0;
}

/* Static lower-case name of a wire DType; "unknown" outside the enum. */
const char *zpp__dtype_name(int dtype)
{
    switch (dtype) {
    case ZPP_FP32:
        return "fp32";
    case ZPP_FP16:
        return "fp16";
    case ZPP_BF16:
        return "bf16";
    default:
        return "unknown";
    }
}

/* StatusReply -> malloc'd JSON object (caller frees); 0 or ZPP_ENOMEM. */
int zpp__status_json(const Zpp__StatusReply *st, char **out)
{
    jw_t w = {0};
    int f = 1;
    jw_raw(&w, "{");
    if (st) {
        jw_kstr(&w, &f, "daemon_version", st->daemon_version);
        jw_kstr(&w, &f, "backend", st->backend);
        jw_u64(&w, &f, "pid", st->pid);
        jw_kstr(&w, &f, "peer_address", st->peer_address);
        jw_u64(&w, &f, "uptime_s", st->uptime_s);
        jw_u64(&w, &f, "sessions", st->sessions);
        jw_u64(&w, &f, "jobs", st->jobs);
        jw_u64(&w, &f, "store_bytes", st->store_bytes);
        jw_u64(&w, &f, "store_budget", st->store_budget);
        jw_u64(&w, &f, "calls_ok", st->calls_ok);
        jw_u64(&w, &f, "calls_failed", st->calls_failed);
        jw_u64(&w, &f, "bytes_intra", st->bytes_intra);
        jw_u64(&w, &f, "bytes_inter", st->bytes_inter);
        jw_key(&w, &f, "draining");
        jw_raw(&w, st->draining ? "true" : "false");
        jw_key(&w, &f, "stopping");
        jw_raw(&w, st->stopping ? "true" : "false");
        jw_u64(&w, &f, "running_jobs", st->running_jobs);
        jw_key(&w, &f, "gpus");
        jw_raw(&w, "[");
        for (size_t i = 0; i < st->n_gpus; i++) {
            const Zpp__GpuInfo *g = st->gpus[i];
            int gf = 1;
            jw_raw(&w, i ? ",{" : "{");
            jw_u64(&w, &gf, "index", g->index);
            jw_kstr(&w, &gf, "uuid", g->uuid);
            jw_kstr(&w, &gf, "name", g->name);
            jw_key(&w, &gf, "mps");
            jw_raw(&w, g->mps > 0 ? "true" : g->mps == 0 ? "false" : "null");
            jw_u64(&w, &gf, "imports", g->imports);
            jw_u64(&w, &gf, "imported_bytes", g->imported_bytes);
            jw_u64(&w, &gf, "deferred_releases", g->deferred_releases);
            jw_u64(&w, &gf, "deferred_oldest_ms", g->deferred_oldest_ms);
            jw_u64(&w, &gf, "used_bytes", g->used_bytes);
            jw_u64(&w, &gf, "total_bytes", g->total_bytes);
            jw_raw(&w, "}");
        }
        jw_raw(&w, "]");
        jw_key(&w, &f, "own_uid_only");
        jw_raw(&w, st->own_uid_only ? "true" : "false");
    }
    jw_raw(&w, "}");
    return jw_finish(&w, out);
}

static void call_json(jw_t *w, const Zpp__CallRecord *r)
{
    int f = 1;
    jw_raw(w, "{");
    jw_u64(w, &f, "seq", r->seq);
    jw_kstr(w, &f, "op", zpp_op_name((int)r->op));
    jw_u64(w, &f, "bytes", r->bytes);
    jw_kstr(w, &f, "state", r->state);
    jw_u64(w, &f, "start_us", r->start_us);
    jw_u64(w, &f, "end_us", r->end_us);
    jw_kstr(w, &f, "message", r->message);
    jw_raw(w, "}");
}

static void job_json(jw_t *w, const Zpp__JobInfo *j)
{
    int f = 1;
    jw_raw(w, "{");
    jw_kstr(w, &f, "job_id", j->job_id);
    jw_u64(w, &f, "tenant_uid", j->tenant_uid);
    jw_u64(w, &f, "world_size", j->world_size);
    jw_u64(w, &f, "nodes", j->nodes);
    jw_kstr(w, &f, "state", j->state);
    jw_u32_array(w, &f, "joined_ranks", j->joined_ranks, j->n_joined_ranks);
    jw_u64(w, &f, "oldest_pending_seq", j->oldest_pending_seq);
    jw_u32_array(w, &f, "missing_ranks", j->missing_ranks, j->n_missing_ranks);
    jw_kstr(w, &f, "abort_reason", j->abort_reason);
    jw_u64(w, &f, "store_bytes", j->store_bytes);
    jw_u64(w, &f, "device_memory", j->device_memory);
    /* keys added later go last: scripts match the older ones in order */
    jw_kstr(w, &f, "tenant_label", j->tenant_label);
    jw_u32_array(w, &f, "away_ranks", j->away_ranks, j->n_away_ranks);
    jw_key(w, &f, "recent");
    jw_raw(w, "[");
    for (size_t i = 0; i < j->n_recent; i++) {
        if (i)
            jw_raw(w, ",");
        call_json(w, j->recent[i]);
    }
    jw_raw(w, "]}");
}

/* JobsReply -> malloc'd {"jobs":[...]} (caller frees); 0 or ZPP_ENOMEM. */
int zpp__jobs_json(const Zpp__JobsReply *jr, char **out)
{
    jw_t w = {0};
    jw_raw(&w, "{\"jobs\":[");
    for (size_t i = 0; jr && i < jr->n_jobs; i++) {
        if (i)
            jw_raw(&w, ",");
        job_json(&w, jr->jobs[i]);
    }
    jw_raw(&w, "]}");
    return jw_finish(&w, out);
}

/* SessionsReply -> malloc'd {"sessions":[...]} (caller frees); 0 or ZPP_ENOMEM. */
int zpp__sessions_json(const Zpp__SessionsReply *sr, char **out)
{
    jw_t w = {0};
    jw_raw(&w, "{\"sessions\":[");
    for (size_t i = 0; sr && i < sr->n_sessions; i++) {
        const Zpp__SessionInfo *x = sr->sessions[i];
        int f = 1;
        jw_raw(&w, i ? ",{" : "{");
        jw_u64(&w, &f, "session_id", x->session_id);
        jw_u64(&w, &f, "uid", x->uid);
        jw_u64(&w, &f, "gid", x->gid);
        jw_u64(&w, &f, "pid", x->pid);
        jw_kstr(&w, &f, "role", x->role);
        jw_kstr(&w, &f, "tenant_label", x->tenant_label);
        jw_kstr(&w, &f, "job_id", x->job_id);
        jw_u64(&w, &f, "rank", x->rank);
        jw_u64(&w, &f, "pending", x->pending);
        jw_u64(&w, &f, "buffers", x->buffers);
        jw_u64(&w, &f, "connected_s", x->connected_s);
        jw_u64(&w, &f, "output_bytes", x->output_bytes);
        jw_kstr(&w, &f, "sync", x->sync);
        jw_raw(&w, "}");
    }
    jw_raw(&w, "]}");
    return jw_finish(&w, out);
}

/* StoreReply -> malloc'd JSON object (caller frees); 0 or ZPP_ENOMEM. */
int zpp__store_json(const Zpp__StoreReply *sr, char **out)
{
    jw_t w = {0};
    int f = 1;
    jw_raw(&w, "{");
    if (sr) {
        jw_u64(&w, &f, "bytes", sr->bytes);
        jw_u64(&w, &f, "entries", sr->entries);
        jw_u64(&w, &f, "hits", sr->hits);
        jw_u64(&w, &f, "misses", sr->misses);
        jw_u64(&w, &f, "budget_per_device", sr->budget_per_device);
        jw_u64(&w, &f, "budget_per_tenant", sr->budget_per_tenant);
        jw_key(&w, &f, "tenants");
        jw_raw(&w, "[");
        for (size_t i = 0; i < sr->n_tenants; i++) {
            int g = 1;
            jw_raw(&w, i ? ",{" : "{");
            jw_u64(&w, &g, "uid", sr->tenants[i]->uid);
            jw_u64(&w, &g, "bytes", sr->tenants[i]->bytes);
            jw_u64(&w, &g, "budget", sr->tenants[i]->budget);
            jw_raw(&w, "}");
        }
        jw_raw(&w, "]");
        jw_key(&w, &f, "jobs");
        jw_raw(&w, "[");
        for (size_t i = 0; i < sr->n_jobs; i++) {
            int g = 1;
            jw_raw(&w, i ? ",{" : "{");
            jw_kstr(&w, &g, "job_id", sr->jobs[i]->job_id);
            jw_u64(&w, &g, "tenant_uid", sr->jobs[i]->tenant_uid);
            jw_u64(&w, &g, "bytes", sr->jobs[i]->bytes);
            jw_raw(&w, "}");
        }
        jw_raw(&w, "]");
        jw_key(&w, &f, "replicas");
        jw_raw(&w, "[");
        for (size_t i = 0; i < sr->n_replicas; i++) {
            const Zpp__StoreReplica *r = sr->replicas[i];
            int g = 1;
            jw_raw(&w, i ? ",{" : "{");
            jw_kstr(&w, &g, "content_key", r->content_key);
            jw_u64(&w, &g, "owner_uid", r->owner_uid);
            jw_u64(&w, &g, "count", r->count);
            jw_kstr(&w, &g, "dtype", zpp__dtype_name((int)r->dtype));
            jw_u64(&w, &g, "slots", r->slots);
            jw_u64(&w, &g, "bytes", r->bytes);
            jw_u64(&w, &g, "attached_jobs", r->attached_jobs);
            jw_u64(&w, &g, "pins", r->pins);
            jw_u64(&w, &g, "idle_ops", r->idle_ops);
            jw_raw(&w, "}");
        }
        jw_raw(&w, "]");
        jw_key(&w, &f, "own_uid_only");
        jw_raw(&w, sr->own_uid_only ? "true" : "false");
    }
    jw_raw(&w, "}");
    return jw_finish(&w, out);
}

/* DrainReply -> malloc'd JSON object (caller frees); 0 or ZPP_ENOMEM. */
int zpp__drain_json(const Zpp__DrainReply *dr, char **out)
{
    jw_t w = {0};
    int f = 1;
    jw_raw(&w, "{");
    jw_key(&w, &f, "draining");
    jw_raw(&w, dr && dr->draining ? "true" : "false");
    jw_u64(&w, &f, "running_jobs", dr ? dr->running_jobs : 0);
    jw_raw(&w, "}");
    return jw_finish(&w, out);
}
