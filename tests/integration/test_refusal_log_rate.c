/*
 * test_refusal_log_rate.c — a client that connects in a loop past
 * max_connections_per_uid cannot flood the daemon's log: the "connection
 * refused: limit reached" line is written at most once a second per limit,
 * and a summary line (zlog_limit) says how many were left out
 * (what="refused connections (...)" suppressed=N).
 * With max_connections_per_uid = 1 and one connection held, 300
 * connections in a row are each closed at accept; then, after more than a
 * second, one more. The log holds at most one such line per second of the
 * run (plus two for the edges), and the lines plus the summaries' counts
 * add up to the 301 refusals: none went unaccounted. The held connection
 * still works. Before, every refusal wrote its own line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"
#include "zpp.h"

#define REFUSALS 300
#define LINE "connection refused: limit reached"
#define SUMMARY "what=\"refused connections (max_connections_per_uid)\""

/* The number of refusal lines in the log and the sum of the suppressed=
 * counts of their summary lines. */
static void count_lines(const zh_daemon *d, int *lines, long *suppressed)
{
    char *log = zh_daemon_read_log(d);
    ASSERT(log != NULL);
    *lines = 0;
    *suppressed = 0;
    for (char *p = strstr(log, LINE); p; p = strstr(p + 1, LINE))
        (*lines)++;
    for (char *p = strstr(log, SUMMARY); p; p = strstr(p + 1, SUMMARY)) {
        char *eol = strchr(p, '\n');
        char *s = strstr(p, "suppressed=");
        ASSERT(s && (!eol || s < eol));
        *suppressed += strtol(s + strlen("suppressed="), NULL, 10);
    }
    free(log);
}

/* One connection past the limit: closed by the daemon. */
static void refused(const zh_daemon *d)
{
    int fd = zh_raw_connect(d->socket);
    if (fd < 0)
        return; /* refused even sooner: the daemon still counts it at accept */
    ASSERT_EQ(zh_raw_closed(fd, 5000), 1);
    close(fd);
}

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("max_connections_per_uid = 1\n", &d), 0);
    (void)zh_steady_fds(d.pid); /* the start's status query is gone */
    zpp_conn *held;
    ASSERT_EQ(zpp_connect(d.socket, &held), 0);
    char js[65536];
    ASSERT_EQ(zpp_admin_status_json(held, js, sizeof js), 0);

    int64_t t0 = zh_now_ms();
    for (int i = 0; i < REFUSALS; i++)
        refused(&d);
    int64_t secs = (zh_now_ms() - t0) / 1000 + 1;
    int lines;
    long suppressed;
    count_lines(&d, &lines, &suppressed);
    printf("%d refusals in about %lld s: %d lines, %ld suppressed\n", REFUSALS, (long long)secs,
           lines, suppressed);
    ASSERT_GE(lines, 1);
    ASSERT_LE(lines, secs + 2);

    /* more than a second later: one line, after the summary of the rest */
    struct timespec pause = {1, 200000000L};
    nanosleep(&pause, NULL);
    refused(&d);
    int before = lines;
    for (int i = 0; i < 100 && lines == before; i++) {
        usleep(50000);
        count_lines(&d, &lines, &suppressed);
    }
    ASSERT_EQ(lines, before + 1);
    ASSERT_EQ(lines + suppressed, REFUSALS + 1);
    ASSERT(zh_daemon_log_contains(&d, "limit=max_connections_per_uid"));

    ASSERT_EQ(zpp_admin_status_json(held, js, sizeof js), 0); /* unharmed */
    zpp_close(held);
    ASSERT(zh_daemon_alive(&d));
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_refusal_log_rate: 1 passed, 0 failed\n");
    return 0;
}
