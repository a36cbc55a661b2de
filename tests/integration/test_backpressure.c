/*
 * test_backpressure.c — a client that sends requests without reading the
 * replies stalls itself, not the daemon:
 *  - a writer process sends 500000 status queries on one connection while
 *    nobody reads the replies (some 70 MB of them, past the 64 MiB a
 *    session may have unsent, where the connection used to be closed);
 *  - meanwhile zppd's resident memory grows by less than 16 MiB (it stops
 *    reading that session once 1 MiB of replies wait), and another client
 *    is served at once;
 *  - then the replies are read: every one arrives, in order, and the
 *    writer finishes (the daemon read the rest as the replies drained).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

#define NREQ 500000

static zh_daemon g_d;
static int g_fd = -1;

static int status_request(int fd, uint64_t req_id)
{
    Zpp__Request req = ZPP__REQUEST__INIT;
    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = req_id;
    req.body_case = ZPP__REQUEST__BODY_STATUS;
    req.status = &sq;
    return zh_raw_request(fd, &req, NULL, 0);
}

/* The writer: every query, blocking when the socket is full. */
static int writer(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (uint64_t i = 1; i <= NREQ; i++)
        if (status_request(g_fd, i) != 0) {
            fprintf(stderr, "writer: request %llu not sent\n", (unsigned long long)i);
            return 1;
        }
    return 0;
}

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    long before = rss_kib(g_d.pid);
    ASSERT(before > 0);
    g_fd = zh_raw_connect(g_d.socket);
    ASSERT(g_fd >= 0);
    pid_t w = zh_spawn(writer, 0, NULL);
    ASSERT(w > 0);
    usleep(2500000); /* the writer fills what the daemon lets it */
    long during = rss_kib(g_d.pid);
    printf("test_backpressure: zppd RSS %ld KiB before, %ld KiB with a client not reading\n",
           before, during);
    ASSERT(during - before < 16 * 1024);

    /* everyone else is still served */
    zpp_conn *c;
    ASSERT_EQ(zpp_connect(g_d.socket, &c), 0);
    zpp_job_desc jd = {.job_id = "bp", .world_size = 1, .node_count = 1, .gpu_uuid = "host"};
    int64_t t0 = zh_now_ms();
    ASSERT_EQ(zpp_hello(c, &jd, NULL), 0);
    ASSERT_EQ(zpp_barrier(c, NULL), 0);
    ASSERT(zh_now_ms() - t0 < 2000);
    zpp_close(c);

    /* every reply, in order */
    for (uint64_t i = 1; i <= NREQ; i++) {
        Zpp__Reply *rep = NULL;
        int rc = zh_raw_reply(g_fd, 10000, &rep);
        if (rc != 0) {
            fprintf(stderr, "reply %llu: %s\n", (unsigned long long)i,
                    rc == 1 ? "the daemon closed the connection" : "none within 10 s");
            return 1;
        }
        ASSERT_EQ(rep->req_id, i);
        ASSERT_EQ(rep->code, 0);
        zpp_reply_free(rep);
    }
    ASSERT_EQ(zh_reap(w, 10000), 0);
    close(g_fd);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_backpressure: %d replies read in order\n", NREQ);
    return 0;
}
