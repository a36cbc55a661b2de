/*
 * zppctl.c — the admin CLI of zppd:
 * `zppctl [-s SOCKET] [--json] COMMAND [--json] [COMMAND OPTIONS]`.
 *
 * Each subcommand is a row of the command table below (name, help, handler).
 * Output is a human table by default and one JSON object with --json.
 * Exit codes: 0 ok, 1 the daemon returned an error, 2 usage, 3 cannot
 * connect (or the daemon closed the connection without an answer, or gave
 * none within --timeout), 4 (health) the daemon is draining or stopping.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zpp.h"
#include "zpp_int.h"

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3, EXIT_NOT_READY = 4 };

#define DRAIN_POLL_US 200000 /* drain --wait: status poll interval */
#define TIMEOUT_DEF_S 10     /* -t: a daemon whose loop is stuck still accepts */
#define TIMEOUT_MAX_S 86400

typedef struct {
    const char *socket;
    int json;
    int off;    /* drain --off */
    int wait_s; /* drain --wait=SECONDS */
} opts_t;

/* Command options beyond --json. */
enum { OPT_OFF = 1, OPT_WAIT = 2 };

typedef struct {
    const char *name;
    const char *help;
    int (*run)(zpp_conn *c, const opts_t *o);
    int opts; /* OPT_* the command accepts */
} command_t;

/* ---- output helpers ------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid; a NUL
 * fails the continuation checks, so it never reads past the string. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : lo; /* overlong */
        hi = c == 0xED ? 0x9F : hi; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

/* Prints s with every control character replaced by '?', so that a hostile
 * string (a job id, an hpZ key quoted in a call's message) cannot drive the
 * terminal: C0, DEL, the C1 controls U+0080..U+009F (CSI is U+009B), and
 * bytes that are not valid UTF-8 (an 8-bit terminal reads a lone 0x9B as
 * CSI). width counts characters. */
static void put_safe(const char *s, int width)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; n++) {
        size_t len = utf8_len(p);
        if (len == 0 || (len == 1 && (*p < 0x20 || *p == 0x7F)) ||
            (len == 2 && p[0] == 0xC2 && p[1] < 0xA0)) {
            putchar('?');
            p += len ? len : 1;
        } else {
            fwrite(p, 1, len, stdout);
            p += len;
        }
    }
    for (; n < width; n++)
        putchar(' ');
}

static const char *human_bytes(uint64_t b, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%" PRIu64 " B", b);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

/* "0-3,5,7-8" from a sorted or unsorted list (printed in the given order,
 * runs of consecutive values folded). */
static void rank_list(const uint32_t *r, size_t n, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = 0;
    if (n == 0) {
        snprintf(buf, len, "-");
        return;
    }
    for (size_t i = 0; i < n && pos < len; i++) {
        size_t j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        int w;
        if (j > i)
            w = snprintf(buf + pos, len - pos, "%s%" PRIu32 "-%" PRIu32, i ? "," : "", r[i], r[j]);
        else
            w = snprintf(buf + pos, len - pos, "%s%" PRIu32, i ? "," : "", r[i]);
        if (w < 0)
            break;
        pos += (size_t)w;
        i = j;
    }
    if (pos >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
}

/* A daemon that closes the connection without an answer (one over
 * max_connections or max_connections_per_uid is closed at accept), or
 * gives none within -t (ZPP_ETIMEDOUT), could not be reached: exit 3, as
 * when the connect fails. */
static int daemon_error(zpp_conn *c, int rc)
{
    fprintf(stderr, "zppctl: %s: %s\n", zpp_err_name(rc), zpp_last_error(c));
    return rc == ZPP_ECLOSED || rc == ZPP_ETIMEDOUT ? EXIT_CONNECT : EXIT_DAEMON;
}

static int print_json(char *json)
{
    fputs(json, stdout);
    fputc('\n', stdout);
    free(json);
    return EXIT_OK;
}

/* ---- commands ----------------------------------------------------------------- */

static int cmd_status(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_STATUS, &rep);
    if (rc < 0)
        return daemon_error(c, rc);
    const Zpp__StatusReply *st = rep->status;
    if (o->json) {
        char *json = NULL;
        rc = zpp__status_json(st, &json);
        zpp_reply_free(rep);
        if (rc < 0) {
            fprintf(stderr, "zppctl: out of memory\n");
            return EXIT_DAEMON;
        }
        return print_json(json);
    }
    char b1[32], b2[32];
    uint64_t up = st->uptime_s;
    printf("zppd ");
    put_safe(st->daemon_version, 0);
    printf(" (backend ");
    put_safe(st->backend, 0);
    printf(", pid %" PRIu32 "), up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 "\n",
           st->pid, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
    if (st->own_uid_only)
        printf("%-10s uid %u's own sessions, jobs, calls, bytes and store (root and zppd's "
               "uid see every tenant)\n",
               "counts", (unsigned)getuid());
    printf("%-10s %" PRIu32 "\n", "sessions", st->sessions);
    printf("%-10s %" PRIu32 " (%" PRIu32 " running)\n", "jobs", st->jobs, st->running_jobs);
    printf("%-10s %" PRIu64 " ok, %" PRIu64 " failed\n", "calls", st->calls_ok, st->calls_failed);
    printf("%-10s intra-node %s, inter-node %s\n", "bytes",
           human_bytes(st->bytes_intra, b1, sizeof(b1)),
           human_bytes(st->bytes_inter, b2, sizeof(b2)));
    /* the bytes are every device's, the budget each device's */
    printf("%-10s %s (budget %s a device)\n", "hpz store",
           human_bytes(st->store_bytes, b1, sizeof(b1)),
           human_bytes(st->store_budget, b2, sizeof(b2)));
    printf("%-10s %s\n", "draining", st->draining ? "yes" : "no");
    if (st->stopping)
        printf("%-10s %s\n", "stopping", "yes");
    if (st->n_gpus)
        printf("%-4s %-42s %-4s %-7s %-10s %-9s %-22s %s\n", "GPU", "UUID", "MPS", "IMPORTS",
               "IMPORTED", "DEFERRED", "USED", "NAME");
    for (size_t i = 0; i < st->n_gpus; i++) {
        const Zpp__GpuInfo *g = st->gpus[i];
        char b3[32], def[32];
        snprintf(def, sizeof def, "%" PRIu32, g->deferred_releases);
        if (g->deferred_releases)
            snprintf(def, sizeof def, "%" PRIu32 " (%" PRIu64 "s)", g->deferred_releases,
                     g->deferred_oldest_ms / 1000);
        printf("%-4" PRIu32 " ", g->index);
        put_safe(g->uuid, 42);
        char used[64];
        if (g->total_bytes)
            snprintf(used, sizeof used, "%s of %s", human_bytes(g->used_bytes, b2, sizeof(b2)),
                     human_bytes(g->total_bytes, b3, sizeof(b3)));
        else
            snprintf(used, sizeof used, "?"); /* the driver could not be asked */
        printf(" %-4s %-7" PRIu32 " %-10s %-9s %-22s ",
               g->mps > 0 ? "on" : g->mps == 0 ? "off" : "?", g->imports,
               human_bytes(g->imported_bytes, b1, sizeof(b1)), def, used);
        put_safe(g->name, 0);
        printf("\n");
    }
    zpp_reply_free(rep);
    return EXIT_OK;
}

static void print_recent(const Zpp__JobInfo *j)
{
    if (j->n_recent == 0)
        return;
    printf("    %-8s %-20s %-12s %-8s %-10s %s\n", "SEQ", "OP", "BYTES", "STATE", "TIME_US",
           "MESSAGE");
    for (size_t i = 0; i < j->n_recent; i++) {
        const Zpp__CallRecord *r = j->recent[i];
        char b[32], t[24];
        if (r->end_us >= r->start_us && r->end_us)
            snprintf(t, sizeof(t), "%" PRIu64, r->end_us - r->start_us);
        else
            snprintf(t, sizeof(t), "-");
        printf("    %-8" PRIu64 " %-20s %-12s ", r->seq, zpp_op_name((int)r->op),
               human_bytes(r->bytes, b, sizeof(b)));
        put_safe(r->state, 8);
        printf(" %-10s ", t);
        put_safe(r->message, 0);
        putchar('\n');
    }
}

static int cmd_jobs(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_JOBS, &rep);
    if (rc < 0)
        return daemon_error(c, rc);
    const Zpp__JobsReply *jr = rep->jobs;
    if (o->json) {
        char *json = NULL;
        rc = zpp__jobs_json(jr, &json);
        zpp_reply_free(rep);
        if (rc < 0) {
            fprintf(stderr, "zppctl: out of memory\n");
            return EXIT_DAEMON;
        }
        return print_json(json);
    }
    if (jr->n_jobs == 0) {
        printf("no jobs\n");
        zpp_reply_free(rep);
        return EXIT_OK;
    }
    printf("%-24s %-7s %-5s %-5s %-9s %-16s %-10s %s\n", "JOB", "TENANT", "WORLD", "NODES", "STATE",
           "JOINED", "PENDING", "MISSING");
    for (size_t i = 0; i < jr->n_jobs; i++) {
        const Zpp__JobInfo *j = jr->jobs[i];
        char joined[64], missing[64], pending[32];
        rank_list(j->joined_ranks, j->n_joined_ranks, joined, sizeof(joined));
        if (j->oldest_pending_seq) {
            snprintf(pending, sizeof(pending), "seq %" PRIu64, j->oldest_pending_seq);
            rank_list(j->missing_ranks, j->n_missing_ranks, missing, sizeof(missing));
        } else {
            snprintf(pending, sizeof(pending), "-");
            snprintf(missing, sizeof(missing), "-");
        }
        put_safe(j->job_id, 24);
        printf(" %-7" PRIu32 " %-5" PRIu32 " %-5" PRIu32 " ", j->tenant_uid, j->world_size,
               j->nodes);
        put_safe(j->state, 9);
        printf(" %-16s %-10s %s\n", joined, pending, missing);
        if (j->tenant_label && j->tenant_label[0]) {
            printf("    label ");
            put_safe(j->tenant_label, 0);
            putchar('\n');
        }
        if (j->n_away_ranks) {
            char away[64];
            rank_list(j->away_ranks, j->n_away_ranks, away, sizeof(away));
            printf("    away, may rejoin: %s\n", away);
        }
        if (j->device_memory || j->store_bytes) {
            char b1[32], b2[32];
            printf("    device memory %s, hpZ slices %s\n",
                   human_bytes(j->device_memory, b1, sizeof(b1)),
                   human_bytes(j->store_bytes, b2, sizeof(b2)));
        }
        if (j->abort_reason && j->abort_reason[0]) {
            printf("    aborted: ");
            put_safe(j->abort_reason, 0);
            putchar('\n');
        }
        print_recent(j);
    }
    zpp_reply_free(rep);
    return EXIT_OK;
}

/* Prints a reply rendered as JSON by fn, or reports out of memory. */
#define PRINT_JSON(fn, body)                                                                       \
    do {                                                                                           \
        char *json_ = NULL;                                                                        \
        int rc_ = fn(body, &json_);                                                                \
        zpp_reply_free(rep);                                                                       \
        if (rc_ < 0) {                                                                             \
            fprintf(stderr, "zppctl: out of memory\n");                                            \
            return EXIT_DAEMON;                                                                    \
        }                                                                                          \
        return print_json(json_);                                                                  \
    } while (0)

static int cmd_sessions(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_SESSIONS, &rep);
    if (rc < 0)
        return daemon_error(c, rc);
    const Zpp__SessionsReply *sr = rep->sessions;
    if (o->json)
        PRINT_JSON(zpp__sessions_json, sr);
    printf("%-8s %-7s %-8s %-6s %-24s %-5s %-8s %-8s %-6s %s\n", "SESSION", "UID", "PID", "ROLE",
           "JOB", "RANK", "PENDING", "BUFFERS", "SYNC", "AGE_S");
    for (size_t i = 0; i < sr->n_sessions; i++) {
        const Zpp__SessionInfo *x = sr->sessions[i];
        printf("%-8" PRIu64 " %-7" PRIu32 " %-8" PRIu32 " ", x->session_id, x->uid, x->pid);
        put_safe(x->role, 6);
        putchar(' ');
        put_safe(x->job_id && x->job_id[0] ? x->job_id : "-", 24);
        if (!strcmp(x->role ? x->role : "", "rank"))
            printf(" %-5" PRIu32, x->rank);
        else
            printf(" %-5s", "-");
        printf(" %-8" PRIu32 " %-8" PRIu32 " ", x->pending, x->buffers);
        put_safe(x->sync && x->sync[0] ? x->sync : "-", 6);
        printf(" %" PRIu64 "\n", x->connected_s);
    }
    zpp_reply_free(rep);
    return EXIT_OK;
}

static int cmd_store(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_STORE, &rep);
    if (rc < 0)
        return daemon_error(c, rc);
    const Zpp__StoreReply *sr = rep->store;
    if (o->json)
        PRINT_JSON(zpp__store_json, sr);
    char b1[32], b2[32];
    printf("hpz store  %s in %" PRIu64 " entries; budget %s per device",
           human_bytes(sr->bytes, b1, sizeof b1), sr->entries,
           sr->budget_per_device ? human_bytes(sr->budget_per_device, b2, sizeof b2) : "none");
    printf(", %s per tenant\n",
           sr->budget_per_tenant ? human_bytes(sr->budget_per_tenant, b2, sizeof b2) : "none");
    if (sr->own_uid_only)
        printf("lookups    (root and zppd's uid only; the bytes and entries above are uid "
               "%u's)\n",
               (unsigned)getuid());
    else
        printf("lookups    %" PRIu64 " hits, %" PRIu64 " misses\n", sr->hits, sr->misses);
    if (sr->n_tenants) {
        printf("%-10s %-12s %s\n", "TENANT", "BYTES", "BUDGET");
        for (size_t i = 0; i < sr->n_tenants; i++)
            printf("%-10" PRIu32 " %-12s %s\n", sr->tenants[i]->uid,
                   human_bytes(sr->tenants[i]->bytes, b1, sizeof b1),
                   sr->tenants[i]->budget ? human_bytes(sr->tenants[i]->budget, b2, sizeof b2)
                                          : "none");
    }
    if (sr->n_jobs) {
        printf("%-24s %-10s %s\n", "JOB", "TENANT", "BYTES");
        for (size_t i = 0; i < sr->n_jobs; i++) {
            put_safe(sr->jobs[i]->job_id, 24);
            printf(" %-10" PRIu32 " %s\n", sr->jobs[i]->tenant_uid,
                   human_bytes(sr->jobs[i]->bytes, b1, sizeof b1));
        }
    }
    if (sr->n_replicas) {
        /* Shared read-only replicas (docs/hpz-sharing.md), newest first;
         * IDLE is the LRU age in store operations. */
        printf("%-71s %-10s %-12s %-5s %-12s %-6s %-5s %s\n", "REPLICA", "OWNER", "COUNT", "DTYPE",
               "BYTES", "JOBS", "PINS", "IDLE");
        for (size_t i = 0; i < sr->n_replicas; i++) {
            const Zpp__StoreReplica *r = sr->replicas[i];
            put_safe(r->content_key, 71);
            printf(" %-10" PRIu32 " %-12" PRIu64 " %-5s %-12s %-6" PRIu32 " %-5" PRIu32 " %" PRIu64
                   "\n",
                   r->owner_uid, r->count, zpp__dtype_name((int)r->dtype),
                   human_bytes(r->bytes, b1, sizeof b1), r->attached_jobs, r->pins, r->idle_ops);
        }
    }
    zpp_reply_free(rep);
    return EXIT_OK;
}

/* The Prometheus text, as the metrics endpoint serves it (also with --json:
 * the exposition format is already machine-readable). */
static int cmd_metrics(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_METRICS, &rep);
    if (rc < 0)
        return daemon_error(c, rc);
    fputs(rep->metrics->text ? rep->metrics->text : "", stdout);
    zpp_reply_free(rep);
    return EXIT_OK;
}

/* 0 healthy, 4 draining or stopping (3, unreachable, is main's). */
static int cmd_health(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_STATUS, &rep);
    if (rc < 0) {
        int code = daemon_error(c, rc);
        if (code == EXIT_CONNECT)
            printf(o->json ? "{\"health\":\"unreachable\"}\n" : "unreachable\n");
        return code;
    }
    const Zpp__StatusReply *st = rep->status;
    const char *h = st->stopping ? "stopping" : st->draining ? "draining" : "ok";
    if (o->json)
        printf("{\"health\":\"%s\",\"running_jobs\":%" PRIu32 "}\n", h, st->running_jobs);
    else
        printf("%s\n", h);
    zpp_reply_free(rep);
    return strcmp(h, "ok") ? EXIT_NOT_READY : EXIT_OK;
}

static int cmd_drain(zpp_conn *c, const opts_t *o)
{
    Zpp__Reply *rep = NULL;
    int rc = zpp__admin_drain(c, o->off, &rep);
    if (rc < 0)
        return daemon_error(c, rc);
    uint32_t running = rep->drain->running_jobs;
    int64_t left_us = (int64_t)o->wait_s * 1000000;
    while (!o->off && o->wait_s && running && left_us > 0) {
        zpp_reply_free(rep);
        rep = NULL;
        usleep(DRAIN_POLL_US);
        left_us -= DRAIN_POLL_US;
        if ((rc = zpp__admin_query(c, ZPP__REQUEST__BODY_STATUS, &rep)) < 0)
            return daemon_error(c, rc);
        running = rep->status->running_jobs;
    }
    zpp_reply_free(rep);
    if (o->json)
        printf("{\"draining\":%s,\"running_jobs\":%" PRIu32 "}\n", o->off ? "false" : "true",
               running);
    else if (o->off)
        printf("zppd takes new jobs again\n");
    else
        printf("zppd is draining: no new jobs; %" PRIu32 " running\n", running);
    if (!o->off && o->wait_s && running) {
        fprintf(stderr, "zppctl: %" PRIu32 " jobs still running after %d s\n", running, o->wait_s);
        return EXIT_NOT_READY;
    }
    return EXIT_OK;
}

static const command_t commands[] = {
    {"status", "daemon version, uptime, sessions, traffic and store usage", cmd_status, 0},
    {"jobs", "jobs with members, the oldest pending call and recent calls", cmd_jobs, 0},
    {"sessions", "client connections: uid, pid, role, job, rank, pending calls", cmd_sessions, 0},
    {"store", "hpZ store usage: totals, budgets, per tenant and per job", cmd_store, 0},
    {"metrics", "the Prometheus metrics text (root or the daemon's uid)", cmd_metrics, 0},
    {"health", "ok (exit 0), draining or stopping (exit 4), unreachable (exit 3)", cmd_health, 0},
    {"drain", "take no new jobs, let running ones finish [--off] [--wait=SECONDS]", cmd_drain,
     OPT_OFF | OPT_WAIT},
};

/* ---- main ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zppctl [-s SOCKET] [--json] COMMAND [--json] [OPTIONS]\n\n"
            "  -s, --socket PATH  zppd's socket (default $ZPP_SOCKET, else %s)\n"
            "  -j, --json         print one JSON object\n"
            "  -t, --timeout S    give up after S seconds without an answer (default %d,\n"
            "                     0 never; drain --wait adds its own)\n"
            "  -h, --help         this text\n"
            "  -V, --version      print the version\n\ncommands:\n",
            ZPP_DEFAULT_SOCKET, TIMEOUT_DEF_S);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nexit status: 0 ok, 1 the daemon returned an error (ZPP_EPERM: drain and\n"
               "metrics need root or the daemon's uid), 2 usage, 3 cannot connect (or\n"
               "closed without an answer, or none within --timeout), 4 health: draining\n"
               "or stopping (drain --wait: jobs still running)\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"socket", required_argument, NULL, 's'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"timeout", required_argument, NULL, 't'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    opts_t o = {0};
    long timeout_s = TIMEOUT_DEF_S;
    int ch;
    /* "+": stop at the command; its own options are parsed below. */
    while ((ch = getopt_long(argc, argv, "+s:jt:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            /* Not "" (an unset variable in a script): that would silently
             * mean $ZPP_SOCKET or the default daemon. */
            if (!optarg[0]) {
                fprintf(stderr, "zppctl: -s/--socket needs a path\n");
                return EXIT_USAGE;
            }
            o.socket = optarg;
            break;
        case 'j':
            o.json = 1;
            break;
        case 't': {
            char *end;
            timeout_s = strtol(optarg, &end, 10);
            if (*end || end == optarg || timeout_s < 0 || timeout_s > TIMEOUT_MAX_S) {
                fprintf(stderr, "zppctl: -t/--timeout takes seconds (0..%d)\n", TIMEOUT_MAX_S);
                return EXIT_USAGE;
            }
            break;
        }
        case 'h':
            usage(stdout);
            return EXIT_OK;
        case 'V':
            printf("zppctl %s\n", ZPP_VERSION_STRING);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const command_t *cmd = NULL;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[optind], commands[i].name) == 0)
            cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "zppctl: unknown command '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    for (int i = optind + 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json") || !strcmp(a, "-j")) {
            o.json = 1;
        } else if ((cmd->opts & OPT_OFF) && !strcmp(a, "--off")) {
            o.off = 1;
        } else if ((cmd->opts & OPT_WAIT) && !strncmp(a, "--wait=", 7)) {
            char *end;
            long v = strtol(a + 7, &end, 10);
            if (*end || end == a + 7 || v < 0 || v > 86400) {
                fprintf(stderr, "zppctl: --wait takes seconds (0..86400)\n");
                return EXIT_USAGE;
            }
            o.wait_s = (int)v;
        } else {
            fprintf(stderr, "zppctl: %s: unknown option '%s'\n", cmd->name, a);
            return EXIT_USAGE;
        }
    }

    const char *path = o.socket;
    if (!path || !path[0])
        path = getenv("ZPP_SOCKET");
    if (!path || !path[0])
        path = ZPP_DEFAULT_SOCKET;
    /* -t: the kernel accepts connections on zppd's socket even while its
     * loop is stuck; libzpp's reply timeout ends each wait for an answer
     * (ZPP_ETIMEDOUT: exit 3, "unreachable" for health). drain --wait polls
     * with answers in between, so it needs nothing more. */
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%ld", timeout_s * 1000);
    setenv("ZPP_REPLY_TIMEOUT_MS", tmo, 1);
    zpp_conn *c = NULL;
    int rc = zpp_connect(path, &c);
    if (rc < 0) {
        fprintf(stderr, "zppctl: cannot connect to %s: %s (%s)\n", path, strerror(errno),
                zpp_err_name(rc));
        if (cmd->run == cmd_health)
            printf(o.json ? "{\"health\":\"unreachable\"}\n" : "unreachable\n");
        return EXIT_CONNECT;
    }
    int status = cmd->run(c, &o);
    zpp_close(c);
    if (fflush(stdout) != 0 && status == EXIT_OK)
        status = EXIT_DAEMON;
    return status;
}
