/*
 * zppctl.c — the admin CLI of zppd: `zppctl [-s SOCKET] [--json] COMMAND`.
 *
 * Each subcommand is a row of the command table below (name, help, handler);
 * a new one (sessions, store, health, drain, metrics) is a handler and a
 * row. Output is a human table by default and one JSON object with --json.
 * Exit codes: 0 ok, 1 the daemon returned an error, 2 usage, 3 cannot
 * connect.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zpp.h"
#include "zpp_int.h"

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

typedef struct {
    const char *socket;
    int json;
} opts_t;

typedef struct {
    const char *name;
    const char *help;
    int (*run)(zpp_conn *c, const opts_t *o);
} command_t;

/* ---- output helpers ------------------------------------------------------- */

/* Prints s with control characters replaced, so a hostile job id cannot
 * drive the terminal. */
static void put_safe(const char *s, int width)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++, n++)
        putchar(*p < 0x20 || *p == 0x7F ? '?' : *p);
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

static int daemon_error(zpp_conn *c, int rc)
{
    fprintf(stderr, "zppctl: %s: %s\n", zpp_err_name(rc), zpp_last_error(c));
    return EXIT_DAEMON;
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
    printf("zppd %s (backend ", st->daemon_version);
    put_safe(st->backend, 0);
    printf(", pid %" PRIu32 "), up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 "\n",
           st->pid, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
    printf("%-10s %" PRIu32 "\n", "sessions", st->sessions);
    printf("%-10s %" PRIu32 "\n", "jobs", st->jobs);
    printf("%-10s %" PRIu64 " ok, %" PRIu64 " failed\n", "calls", st->calls_ok, st->calls_failed);
    printf("%-10s intra-node %s, inter-node %s\n", "bytes",
           human_bytes(st->bytes_intra, b1, sizeof(b1)),
           human_bytes(st->bytes_inter, b2, sizeof(b2)));
    printf("%-10s %s of %s\n", "hpz store", human_bytes(st->store_bytes, b1, sizeof(b1)),
           human_bytes(st->store_budget, b2, sizeof(b2)));
    printf("%-10s %s\n", "draining", st->draining ? "yes" : "no");
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
        printf("    %-8" PRIu64 " %-20s %-12s ", r->seq, zpp__op_name((int)r->op),
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

static const command_t commands[] = {
    {"status", "daemon version, uptime, sessions, traffic and store usage", cmd_status},
    {"jobs", "jobs with members, the oldest pending call and recent calls", cmd_jobs},
};

/* ---- main ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zppctl [-s SOCKET] [--json] COMMAND\n\n"
            "  -s, --socket PATH  zppd's socket (default $ZPP_SOCKET, else %s)\n"
            "  -j, --json         print one JSON object\n"
            "  -h, --help         this text\n"
            "  -V, --version      print the version\n\ncommands:\n",
            ZPP_DEFAULT_SOCKET);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nexit status: 0 ok, 1 the daemon returned an error, 2 usage, "
               "3 cannot connect\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"socket", required_argument, NULL, 's'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    opts_t o = {0};
    int ch;
    while ((ch = getopt_long(argc, argv, "s:jhV", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o.socket = optarg;
            break;
        case 'j':
            o.json = 1;
            break;
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
    if (optind != argc - 1) {
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

    const char *path = o.socket;
    if (!path || !path[0])
        path = getenv("ZPP_SOCKET");
    if (!path || !path[0])
        path = ZPP_DEFAULT_SOCKET;
    zpp_conn *c = NULL;
    int rc = zpp_connect(path, &c);
    if (rc < 0) {
        fprintf(stderr, "zppctl: cannot connect to %s: %s (%s)\n", path, strerror(errno),
                zpp_err_name(rc));
        return EXIT_CONNECT;
    }
    int status = cmd->run(c, &o);
    zpp_close(c);
    if (fflush(stdout) != 0 && status == EXIT_OK)
        status = EXIT_DAEMON;
    return status;
}
