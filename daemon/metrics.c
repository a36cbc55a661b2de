/*
 * metrics.c — see metrics.h. A minimal HTTP/1.0 responder on a libuv TCP
 * server: GET /metrics (Prometheus text format 0.0.4) and GET /healthz.
 * Requests are capped in size and number of connections: one address
 * holds at most MET_MAX_PER_ADDR of them, and at the cap the oldest
 * connection of the address holding the most is closed to make room for
 * the new one (so a flood from one address churns its own connections,
 * not a scraper's or a probe's from another), each
 * connection has MET_CONN_TIMEOUT_MS in all; anything else gets 404 or 400
 * and the connection closes after the answer.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "backend.h"
#include "coll.h"
#include "daemon.h"
#include "hpz_store.h"
#include "job.h"
#include "log.h"
#include "zpp.h"

#define MET_OPS 8 /* zpp_op_t values 1..7 */
#define MET_BUCKETS 11
#define MET_MAX_CONNS 16
#define MET_MAX_PER_ADDR 8 /* half the table: one address never fills it */
#define MET_MAX_REQUEST 8192
#define MET_CONN_TIMEOUT_MS 5000

static const double bucket_le[MET_BUCKETS] = {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05,
                                              0.1,    0.5,    1,     5,     30};
static const char *const outcome_name[MET_OUTCOMES] = {"ok", "error", "aborted"};
static const char *const cause_name[MET_ABORT_CAUSES] = {"disconnect", "timeout", "device",
                                                         "peer",       "shutdown", "other"};

struct met_tenant {
    uint32_t uid;
    uint64_t calls[MET_OPS][MET_OUTCOMES];
    uint64_t logical[MET_OPS], intra[MET_OPS], inter[MET_OPS], zero3[MET_OPS];
    uint64_t nonfinite[MET_OPS];
    uint64_t algo_fallback; /* quantized op that ran exact (single node) */
    uint64_t lat_bucket[MET_OPS][MET_BUCKETS];
    uint64_t lat_count[MET_OPS];
    double lat_sum[MET_OPS];
    uint64_t aborts[MET_ABORT_CAUSES];
    uint64_t ended; /* jobs that ended well */
};

struct met_conn;

struct met_state {
    struct met_tenant *t;
    size_t n, cap;
    uv_tcp_t srv;
    int listening;
    int conns; /* open, closing ones included (their memory) */
    int live;  /* open and not closing */
    struct met_conn *open; /* every connection until its handles are closed, newest first */
};

struct met_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    struct zppd *d;
    struct met_conn *next, *prev; /* met_state.open */
    struct sockaddr_storage peer; /* the port zeroed: connections are counted per address */
    char req[MET_MAX_REQUEST];
    size_t len;
    char *resp;
    int closing;
    int handles_open;
};

static struct met_state *state(struct zppd *d)
{
    if (!d->metrics)
        d->metrics = calloc(1, sizeof(struct met_state));
    return d->metrics;
}

static struct met_tenant *tenant(struct zppd *d, uint32_t uid)
{
    struct met_state *m = state(d);
    if (!m)
        return NULL;
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].uid == uid)
            return &m->t[i];
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        struct met_tenant *nt = realloc(m->t, cap * sizeof *nt);
        if (!nt)
            return NULL;
        m->t = nt;
        m->cap = cap;
    }
    struct met_tenant *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    t->uid = uid;
    return t;
}

void metrics_call(struct zppd *d, uint32_t uid, int op, int outcome, const struct coll_result *res,
                  uint64_t latency_us)
{
    struct met_tenant *t = tenant(d, uid);
    if (!t || op < 0 || op >= MET_OPS || outcome < 0 || outcome >= MET_OUTCOMES)
        return;
    t->calls[op][outcome]++;
    if (res && outcome == MET_OK) {
        t->logical[op] += res->logical_bytes;
        t->intra[op] += res->bytes_intra;
        t->inter[op] += res->bytes_inter;
        t->zero3[op] += res->bytes_zero3_inter;
        t->nonfinite[op] += res->nonfinite_blocks;
        if (op == ZPP_OP_QGZ_REDUCE_SCATTER && res->algo == ZPP_ALGO_RS_EXACT)
            t->algo_fallback++;
        double sec = (double)latency_us / 1e6;
        for (int b = 0; b < MET_BUCKETS; b++)
            if (sec <= bucket_le[b])
                t->lat_bucket[op][b]++;
        t->lat_count[op]++;
        t->lat_sum[op] += sec;
    }
}

void metrics_abort(struct zppd *d, uint32_t uid, int cause)
{
    struct met_tenant *t = tenant(d, uid);
    if (t && cause >= 0 && cause < MET_ABORT_CAUSES)
        t->aborts[cause]++;
}

void metrics_job_ended(struct zppd *d, uint32_t uid)
{
    struct met_tenant *t = tenant(d, uid);
    if (t)
        t->ended++;
}

void metrics_tenant_totals(struct zppd *d, uint32_t uid, struct metrics_totals *out)
{
    memset(out, 0, sizeof *out);
    struct met_state *m = d->metrics;
    for (size_t i = 0; m && i < m->n; i++) {
        const struct met_tenant *t = &m->t[i];
        if (t->uid != uid)
            continue;
        for (int op = 0; op < MET_OPS; op++) {
            out->calls_ok += t->calls[op][MET_OK];
            out->calls_failed += t->calls[op][MET_ERROR] + t->calls[op][MET_ABORTED];
            out->bytes_intra += t->intra[op];
            out->bytes_inter += t->inter[op];
        }
    }
}

/* ---- rendering ------------------------------------------------------------ */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void out(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(struct sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

static void header(struct sbuf *b, const char *name, const char *type, const char *help)
{
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A per-tenant, per-op counter family. */
static void op_family(struct sbuf *b, struct met_state *m, const char *name, const char *help,
                      size_t field_off)
{
    header(b, name, "counter", help);
    for (size_t i = 0; i < m->n; i++) {
        const uint64_t *v = (const uint64_t *)((const char *)&m->t[i] + field_off);
        for (int op = 1; op < MET_OPS; op++)
            if (v[op])
                out(b, "%s{tenant=\"%u\",op=\"%s\"} %" PRIu64 "\n", name, m->t[i].uid,
                    zpp_op_name(op), v[op]);
    }
}

char *metrics_render(struct zppd *d, size_t *len)
{
    struct met_state *m = state(d);
    struct sbuf b = {0};
    b.cap = 16384;
    b.p = malloc(b.cap);
    if (!b.p || !m) {
        free(b.p);
        return NULL;
    }
    b.p[0] = 0;
    header(&b, "zppd_info", "gauge", "zppd version and backend.");
    out(&b, "zppd_info{version=\"%s\",backend=\"%s\"} 1\n", ZPPD_VERSION, d->backend_name);
    header(&b, "zppd_uptime_seconds", "gauge", "Seconds since zppd started.");
    out(&b, "zppd_uptime_seconds %" PRIu64 "\n", (zppd_now_ms() - d->start_ms) / 1000);
    header(&b, "zppd_sessions", "gauge", "Open client connections.");
    out(&b, "zppd_sessions %u\n", d->nsessions);
    header(&b, "zppd_draining", "gauge", "1 while zppd takes no new jobs.");
    out(&b, "zppd_draining %d\n", d->draining);
    header(&b, "zppd_protocol_errors_total", "counter",
           "Malformed input: bad frames (the connection is closed) and invalid requests (answered "
           "with an error).");
    out(&b, "zppd_protocol_errors_total %" PRIu64 "\n", d->stats.protocol_errors);
    header(&b, "zppd_client_descriptors", "gauge",
           "Descriptors received from clients, not yet claimed by their frame.");
    out(&b, "zppd_client_descriptors %u\n", d->fds_held);
    header(&b, "zppd_client_descriptor_budget", "gauge",
           "The most the daemon holds of them (half its descriptor limit).");
    out(&b, "zppd_client_descriptor_budget %u\n", d->fds_budget);
    header(&b, "zppd_descriptor_budget_closes_total", "counter",
           "Sessions closed because the daemon, or their uid, held its share of the descriptor "
           "budget.");
    out(&b, "zppd_descriptor_budget_closes_total %" PRIu64 "\n", d->stats.fd_budget_closes);

    header(&b, "zppd_calls_total", "counter", "Collective calls by tenant, op and outcome.");
    for (size_t i = 0; i < m->n; i++)
        for (int op = 1; op < MET_OPS; op++)
            for (int o = 0; o < MET_OUTCOMES; o++)
                if (m->t[i].calls[op][o])
                    out(&b, "zppd_calls_total{tenant=\"%u\",op=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
                        m->t[i].uid, zpp_op_name(op), outcome_name[o], m->t[i].calls[op][o]);
    op_family(&b, m, "zppd_logical_bytes_total", "Bytes of the tensors the calls covered.",
              offsetof(struct met_tenant, logical));
    op_family(&b, m, "zppd_intra_node_bytes_total", "Bytes sent between ranks of one node.",
              offsetof(struct met_tenant, intra));
    op_family(&b, m, "zppd_inter_node_bytes_total", "Bytes that crossed node boundaries.",
              offsetof(struct met_tenant, inter));
    op_family(&b, m, "zppd_zero3_inter_node_bytes_total",
              "Bytes plain ZeRO-3 would have sent across nodes for the same calls.",
              offsetof(struct met_tenant, zero3));
    op_family(&b, m, "zppd_nonfinite_blocks_total",
              "Quantization blocks that held NaN or Inf (decoded as NaN).",
              offsetof(struct met_tenant, nonfinite));
    header(&b, "zppd_algorithm_fallbacks_total", "counter",
           "Quantized reduce-scatters that ran the exact algorithm (single node).");
    for (size_t i = 0; i < m->n; i++)
        out(&b, "zppd_algorithm_fallbacks_total{tenant=\"%u\"} %" PRIu64 "\n", m->t[i].uid,
            m->t[i].algo_fallback);

    header(&b, "zppd_call_duration_seconds", "histogram",
           "Time from the call's start (a job runs its calls one at a time) to its completion, by "
           "tenant and op.");
    for (size_t i = 0; i < m->n; i++) {
        struct met_tenant *t = &m->t[i];
        for (int op = 1; op < MET_OPS; op++) {
            if (!t->lat_count[op])
                continue;
            for (int k = 0; k < MET_BUCKETS; k++)
                out(&b,
                    "zppd_call_duration_seconds_bucket{tenant=\"%u\",op=\"%s\",le=\"%g\"} "
                    "%" PRIu64 "\n",
                    t->uid, zpp_op_name(op), bucket_le[k], t->lat_bucket[op][k]);
            out(&b,
                "zppd_call_duration_seconds_bucket{tenant=\"%u\",op=\"%s\",le=\"+Inf\"} %" PRIu64
                "\n",
                t->uid, zpp_op_name(op), t->lat_count[op]);
            out(&b, "zppd_call_duration_seconds_sum{tenant=\"%u\",op=\"%s\"} %.9f\n", t->uid,
                zpp_op_name(op), t->lat_sum[op]);
            out(&b, "zppd_call_duration_seconds_count{tenant=\"%u\",op=\"%s\"} %" PRIu64 "\n",
                t->uid, zpp_op_name(op), t->lat_count[op]);
        }
    }
    header(&b, "zppd_job_aborts_total", "counter", "Job aborts by tenant and cause.");
    for (size_t i = 0; i < m->n; i++)
        for (int c = 0; c < MET_ABORT_CAUSES; c++)
            if (m->t[i].aborts[c])
                out(&b, "zppd_job_aborts_total{tenant=\"%u\",cause=\"%s\"} %" PRIu64 "\n",
                    m->t[i].uid, cause_name[c], m->t[i].aborts[c]);
    header(&b, "zppd_jobs_ended_total", "counter",
           "Jobs that ended well (every rank left between calls; across daemons, every node's).");
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].ended)
            out(&b, "zppd_jobs_ended_total{tenant=\"%u\"} %" PRIu64 "\n", m->t[i].uid,
                m->t[i].ended);

    uint64_t used = 0, entries = 0, hits = 0, misses = 0;
    hpz_store_stats(d->store, &used, &entries, &hits, &misses);
    header(&b, "zppd_hpz_store_bytes", "gauge", "Bytes held by hpZ secondary partitions.");
    out(&b, "zppd_hpz_store_bytes %" PRIu64 "\n", used);
    header(&b, "zppd_hpz_store_budget_bytes", "gauge", "hpZ store budget per device.");
    out(&b, "zppd_hpz_store_budget_bytes %" PRIu64 "\n", d->cfg.store_budget);
    header(&b, "zppd_hpz_store_entries", "gauge", "Live hpZ keys.");
    out(&b, "zppd_hpz_store_entries %" PRIu64 "\n", entries);
    header(&b, "zppd_hpz_lookups_total", "counter", "hpZ gathers by result.");
    out(&b, "zppd_hpz_lookups_total{result=\"hit\"} %" PRIu64 "\n", hits);
    out(&b, "zppd_hpz_lookups_total{result=\"miss\"} %" PRIu64 "\n", misses);
    struct hpz_share_stats sh;
    hpz_store_share_stats(d->store, &sh);
    header(&b, "zppd_hpz_shared_replicas", "gauge", "Live shared replicas (docs/hpz-sharing.md).");
    out(&b, "zppd_hpz_shared_replicas %" PRIu64 "\n", sh.replicas);
    header(&b, "zppd_hpz_shared_bytes", "gauge", "Their bytes, every device.");
    out(&b, "zppd_hpz_shared_bytes %" PRIu64 "\n", sh.bytes);
    header(&b, "zppd_hpz_shared_attachments", "gauge", "(job, replica) attachments.");
    out(&b, "zppd_hpz_shared_attachments %" PRIu64 "\n", sh.attachments);
    header(&b, "zppd_hpz_shared_idle", "gauge",
           "Shared replicas no job is attached to (evictable).");
    out(&b, "zppd_hpz_shared_idle %" PRIu64 "\n", sh.idle);
    header(&b, "zppd_hpz_shared_events_total", "counter",
           "Shared-replica events: published, deduplicated (a publish served by a replica already "
           "there), read (gathers served), refused (reads refused ZPP_EPERM), evicted.");
    out(&b, "zppd_hpz_shared_events_total{event=\"published\"} %" PRIu64 "\n", sh.published);
    out(&b, "zppd_hpz_shared_events_total{event=\"deduplicated\"} %" PRIu64 "\n", sh.deduplicated);
    out(&b, "zppd_hpz_shared_events_total{event=\"read\"} %" PRIu64 "\n", sh.reads);
    out(&b, "zppd_hpz_shared_events_total{event=\"refused\"} %" PRIu64 "\n", sh.refused);
    out(&b, "zppd_hpz_shared_events_total{event=\"evicted\"} %" PRIu64 "\n", sh.evicted);

    /* One group per family (the text format requires it): a loop each. */
    header(&b, "zppd_jobs", "gauge", "Jobs by tenant and state.");
    for (struct job *j = d->jobs; j; j = j->next)
        out(&b, "zppd_jobs{tenant=\"%u\",job_id=\"%s\",state=\"%s\"} 1\n", j->uid, j->id,
            job_state_label(j));
    header(&b, "zppd_job_hpz_bytes", "gauge", "hpZ bytes held per job.");
    for (struct job *j = d->jobs; j; j = j->next)
        out(&b, "zppd_job_hpz_bytes{tenant=\"%u\",job_id=\"%s\"} %" PRIu64 "\n", j->uid, j->id,
            hpz_store_job_bytes(d->store, j));
    header(&b, "zppd_job_device_memory_bytes", "gauge",
           "Device memory held per job (communicators, staging).");
    for (struct job *j = d->jobs; j; j = j->next) {
        uint64_t mem = j->be_job && d->be->job_memory ? d->be->job_memory(d->be_state, j->be_job)
                                                      : 0;
        out(&b, "zppd_job_device_memory_bytes{tenant=\"%u\",job_id=\"%s\"} %" PRIu64 "\n", j->uid,
            j->id, mem);
    }
    struct be_dev_stat ds[64];
    int ng = d->be->dev_stats ? d->be->dev_stats(d->be_state, ds, 64) : 0;
    if (ng > 64)
        ng = 64;
    header(&b, "zppd_hpz_store_device_bytes", "gauge",
           "hpZ bytes held on each device (zppd_hpz_store_budget_bytes is per device): every "
           "GPU of the daemon; on the host backend the devices holding any.");
    for (int i = 0; i < (ng > 0 ? ng : HPZ_MAX_DEVICES); i++) {
        const uint64_t db = hpz_store_device_bytes(d->store, i);
        if (ng > 0)
            out(&b, "zppd_hpz_store_device_bytes{device=\"%d\",gpu=\"%s\"} %" PRIu64 "\n", i,
                ds[i].uuid, db);
        else if (db)
            out(&b, "zppd_hpz_store_device_bytes{device=\"%d\"} %" PRIu64 "\n", i, db);
    }
    if (ng > 0) {
        header(&b, "zppd_gpu_mps", "gauge",
               "1 when the GPU's contexts are shared through CUDA MPS, 0 when time-sliced.");
        for (int i = 0; i < ng; i++)
            if (ds[i].mps >= 0)
                out(&b, "zppd_gpu_mps{gpu=\"%s\"} %d\n", ds[i].uuid, ds[i].mps);
        header(&b, "zppd_gpu_imports", "gauge", "Client registrations mapped into zppd.");
        for (int i = 0; i < ng; i++)
            out(&b, "zppd_gpu_imports{gpu=\"%s\"} %" PRIu32 "\n", ds[i].uuid, ds[i].imports);
        header(&b, "zppd_gpu_imported_bytes", "gauge",
               "Bytes of client memory zppd keeps mapped (and so alive).");
        for (int i = 0; i < ng; i++)
            out(&b, "zppd_gpu_imported_bytes{gpu=\"%s\"} %" PRIu64 "\n", ds[i].uuid,
                ds[i].imported_bytes);
        header(&b, "zppd_gpu_deferred_releases", "gauge",
               "Frees waiting for work already queued on the GPU.");
        for (int i = 0; i < ng; i++)
            out(&b, "zppd_gpu_deferred_releases{gpu=\"%s\"} %" PRIu32 "\n", ds[i].uuid,
                ds[i].deferred);
        header(&b, "zppd_gpu_deferred_oldest_seconds", "gauge",
               "Age of the oldest deferred release (a stuck stream shows here).");
        for (int i = 0; i < ng; i++)
            out(&b, "zppd_gpu_deferred_oldest_seconds{gpu=\"%s\"} %.3f\n", ds[i].uuid,
                ds[i].deferred_oldest_ms / 1e3);
        header(&b, "zppd_gpu_memory_used_bytes", "gauge",
               "Device memory in use on the GPU, every process.");
        for (int i = 0; i < ng; i++)
            if (ds[i].total_bytes) /* 0: the driver could not be asked; no sample */
                out(&b, "zppd_gpu_memory_used_bytes{gpu=\"%s\"} %" PRIu64 "\n", ds[i].uuid,
                    ds[i].used_bytes);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* ---- HTTP ----------------------------------------------------------------- */

static void conn_closed(uv_handle_t *h)
{
    struct met_conn *c = h->data;
    if (--c->handles_open == 0) {
        struct met_state *m = state(c->d);
        m->conns--;
        if (c->prev)
            c->prev->next = c->next;
        else
            m->open = c->next;
        if (c->next)
            c->next->prev = c->prev;
        free(c->resp);
        free(c);
    }
}

static void conn_close(struct met_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    state(c->d)->live--;
    uv_close((uv_handle_t *)&c->timer, conn_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_written(uv_write_t *w, int status)
{
    struct met_conn *c = w->data;
    free(w);
    conn_close(c);
}

static void respond(struct met_conn *c, const char *status, const char *ctype, const char *body,
                    size_t blen)
{
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, ctype, blen);
    c->resp = malloc((size_t)hl + blen);
    uv_write_t *w = malloc(sizeof *w);
    if (!c->resp || !w) {
        free(w);
        conn_close(c);
        return;
    }
    memcpy(c->resp, head, (size_t)hl);
    memcpy(c->resp + hl, body, blen);
    uv_buf_t buf = uv_buf_init(c->resp, (unsigned)((size_t)hl + blen));
    w->data = c;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (uv_write(w, (uv_stream_t *)&c->tcp, &buf, 1, on_written)) {
        free(w);
        conn_close(c);
    }
}

static void handle_request(struct met_conn *c)
{
    if (!strncmp(c->req, "GET /metrics ", 13) || !strncmp(c->req, "GET /metrics?", 13)) {
        size_t len;
        char *body = metrics_render(c->d, &len);
        if (!body) {
            respond(c, "500 Internal Server Error", "text/plain", "out of memory\n", 14);
            return;
        }
        respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, len);
        free(body);
    } else if (!strncmp(c->req, "GET /healthz ", 13)) {
        const char *h = c->d->stopping ? "stopping\n" : c->d->draining ? "draining\n" : "ok\n";
        respond(c, c->d->stopping ? "503 Service Unavailable" : "200 OK", "text/plain", h,
                strlen(h));
    } else if (!strncmp(c->req, "GET ", 4)) {
        respond(c, "404 Not Found", "text/plain", "not found\n", 10);
    } else {
        respond(c, "400 Bad Request", "text/plain", "bad request\n", 12);
    }
}

static void on_alloc(uv_handle_t *h, size_t sugg, uv_buf_t *buf)
{
    struct met_conn *c = h->data;
    size_t room = sizeof c->req - 1 - c->len;
    *buf = uv_buf_init(c->req + c->len, (unsigned)room);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct met_conn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->req[c->len] = 0;
    if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
        handle_request(c);
        return;
    }
    if (c->len >= sizeof c->req - 1)
        respond(c, "431 Request Header Fields Too Large", "text/plain", "too large\n", 10);
}

static void on_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

/* The peer's address with the port zeroed, into c->peer (all zero when
 * it cannot be read: such connections count as one address). */
static void peer_address(struct met_conn *c)
{
    int len = sizeof c->peer;
    memset(&c->peer, 0, sizeof c->peer);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &len)) {
        memset(&c->peer, 0, sizeof c->peer);
        return;
    }
    if (c->peer.ss_family == AF_INET)
        ((struct sockaddr_in *)&c->peer)->sin_port = 0;
    else if (c->peer.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&c->peer)->sin6_port = 0;
}

static int same_address(const struct met_conn *a, const struct met_conn *b)
{
    if (a->peer.ss_family != b->peer.ss_family)
        return 0;
    if (a->peer.ss_family == AF_INET)
        return !memcmp(&((const struct sockaddr_in *)&a->peer)->sin_addr,
                       &((const struct sockaddr_in *)&b->peer)->sin_addr, sizeof(struct in_addr));
    if (a->peer.ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)&a->peer)->sin6_addr,
                       &((const struct sockaddr_in6 *)&b->peer)->sin6_addr,
                       sizeof(struct in6_addr));
    return 1;
}

/* Live (not closing) connections from a's address, a included. */
static int live_from(const struct met_state *m, const struct met_conn *a)
{
    int n = 0;
    for (const struct met_conn *o = m->open; o; o = o->next)
        n += !o->closing && same_address(o, a);
    return n;
}

/* A live connection of the address with the most live ones, other than
 * not (the new one); NULL when there is none. The table is at most
 * 2 * MET_MAX_CONNS long, so counting per connection is cheap. */
static struct met_conn *busiest(struct met_state *m, const struct met_conn *not)
{
    struct met_conn *best = NULL;
    int most = 0;
    for (struct met_conn *o = m->open; o; o = o->next) {
        if (o == not || o->closing)
            continue;
        int n = live_from(m, o);
        if (n > most) {
            most = n;
            best = o;
        }
    }
    return best;
}

/* The oldest live connection from like's address other than not (the list
 * is newest first); NULL when there is none or like is NULL. */
static struct met_conn *oldest_from(struct met_state *m, const struct met_conn *like,
                                    const struct met_conn *not)
{
    struct met_conn *oldest = NULL;
    if (!like)
        return NULL;
    for (struct met_conn *o = m->open; o; o = o->next)
        if (o != not && !o->closing && same_address(o, like))
            oldest = o;
    return oldest;
}

static void on_connection(uv_stream_t *srv, int status)
{
    struct zppd *d = srv->data;
    struct met_state *m = state(d);
    if (status < 0)
        return;
    struct met_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->d = d;
    uv_tcp_init(d->loop, &c->tcp);
    uv_timer_init(d->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles_open = 2;
    m->conns++;
    m->live++;
    c->next = m->open;
    if (m->open)
        m->open->prev = c;
    m->open = c;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) || m->conns > 2 * MET_MAX_CONNS) {
        conn_close(c); /* more than a loop turn's evictions still closing */
        return;
    }
    peer_address(c);
    struct met_conn *victim = NULL;
    if (live_from(m, c) > MET_MAX_PER_ADDR)
        victim = oldest_from(m, c, c); /* a flood from one address churns its own */
    else if (m->live > MET_MAX_CONNS)
        /* At the cap a connection already open gives way, not the new
         * one: otherwise anyone who can reach the port holds MET_MAX_CONNS
         * idle connections (renewed every MET_CONN_TIMEOUT_MS) and the
         * scraper and the liveness probe on /healthz (the DaemonSet's: a
         * failing probe restarts zppd) are shut out for good. The one to
         * go is the oldest of the address holding the most, so that a
         * flood pushes out its own connections before a scraper's. */
        victim = oldest_from(m, busiest(m, c), c);
    if (victim)
        conn_close(victim);
    uv_timer_start(&c->timer, on_timeout, MET_CONN_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int metrics_start(struct zppd *d)
{
    if (!d->cfg.metrics_listen[0])
        return 0;
    struct met_state *m = state(d);
    if (!m)
        return ZPP_ENOMEM;
    char host[128];
    const char *colon = strrchr(d->cfg.metrics_listen, ':');
    if (!colon || (size_t)(colon - d->cfg.metrics_listen) >= sizeof host) {
        ZLOG_E("metrics", "metrics_listen must be host:port", "value=%s", d->cfg.metrics_listen);
        return ZPP_EINVAL;
    }
    size_t hlen = (size_t)(colon - d->cfg.metrics_listen);
    const char *h = d->cfg.metrics_listen;
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') { /* [v6]:port */
        h++;
        hlen -= 2;
    }
    memcpy(host, h, hlen);
    host[hlen] = 0;
    /* The port is 1 to 5 digits up to 65535: atoi would take "" or "x" as 0
     * (a random port) and uv_ip4_addr 70000 as 4464. */
    int port = 0;
    const char *p = colon + 1;
    for (; *p >= '0' && *p <= '9' && port <= 65535; p++)
        port = port * 10 + (*p - '0');
    if (p == colon + 1 || *p || port > 65535) {
        ZLOG_E("metrics", "metrics_listen: the port must be a number from 0 to 65535", "value=%s",
               d->cfg.metrics_listen);
        return ZPP_EINVAL;
    }
    struct sockaddr_storage sa;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa)) {
        ZLOG_E("metrics", "metrics_listen is not an IP address and port", "value=%s",
               d->cfg.metrics_listen);
        return ZPP_EINVAL;
    }
    uv_tcp_init(d->loop, &m->srv);
    m->srv.data = d;
    int rc = uv_tcp_bind(&m->srv, (struct sockaddr *)&sa, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&m->srv, 16, on_connection);
    if (rc) {
        ZLOG_E("metrics", "cannot listen", "addr=%s err=\"%s\"", d->cfg.metrics_listen,
               uv_strerror(rc));
        uv_close((uv_handle_t *)&m->srv, NULL);
        return ZPP_EIO;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&m->srv, (struct sockaddr *)&bound, &blen);
    char name[64] = "?";
    int bport = 0;
    if (bound.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&bound, name, sizeof name);
        bport = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    } else {
        uv_ip6_name((struct sockaddr_in6 *)&bound, name, sizeof name);
        bport = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    }
    m->listening = 1;
    ZLOG_I("metrics", "metrics endpoint listening", "addr=%s port=%d", name, bport);
    return 0;
}

void metrics_stop(struct zppd *d)
{
    struct met_state *m = d->metrics;
    if (!m)
        return;
    if (m->listening) {
        m->listening = 0;
        uv_close((uv_handle_t *)&m->srv, NULL);
    }
    /* Closed here, with their own callbacks, before main's last uv_walk
     * closes whatever is left without one: a connection closed that way
     * would never be freed, and the write it still had queued would call
     * on_written, whose conn_close closes its already-closing handles a
     * second time (libuv asserts). */
    for (struct met_conn *c = m->open; c; c = c->next)
        conn_close(c);
}

void metrics_free(struct zppd *d)
{
    struct met_state *m = d->metrics;
    if (!m)
        return;
    free(m->t);
    free(m);
    d->metrics = NULL;
}
