/*
 * test_audit21m_metrics_http.c — the metrics endpoint (metrics_listen)
 * against clients that misbehave, and zppd's stop with such clients
 * connected:
 *  - SIGTERM while a scraper has not read its /metrics answer (the reply
 *    still queued in the daemon) ends with exit 0, not a crash in the
 *    loop's last turn;
 *  - SIGTERM with idle metrics connections open exits 0 too;
 *  - while in-flight work drains after SIGTERM, GET /healthz answers 503
 *    "stopping" (docs/metrics.md), not a refused connection;
 *  - metrics_listen with a port that is not a number from 0 to 65535
 *    stops zppd at start (exit 1) instead of binding another port
 *    (70000 was 4464, an empty port a random one); "[::1]:0" is taken;
 *  - a request over the size cap gets 431 and is closed;
 *  - connections held open without a request, as anyone who reaches the
 *    port can, do not shut out /healthz (the DaemonSet's liveness probe: a
 *    failing one restarts zppd) nor /metrics: one address keeps at most 8,
 *    at the cap (16) the oldest of the address holding the most makes
 *    room, and idle ones are closed by the timeout; a flood from one
 *    address leaves a scraper's and another address's connections alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define JOBS 200

/* The port of the daemon's metrics endpoint, from its log line. */
static int metrics_port(const zh_daemon *d)
{
    for (int i = 0; i < 300; i++) {
        char *log = zh_daemon_read_log(d);
        const char *p = log ? strstr(log, "metrics endpoint listening") : NULL;
        p = p ? strstr(p, "port=") : NULL;
        int port = p ? atoi(p + 5) : 0;
        free(log);
        if (port > 0)
            return port;
        usleep(10000);
    }
    fprintf(stderr, "no metrics port in the log\n");
    exit(1);
}

/* A TCP connection to 127.0.0.1:port from address from (NULL: the
 * default, 127.0.0.1); rcvbuf > 0 shrinks the receive
 * buffer and the segment size first (so that a reply stays queued in the
 * daemon). */
static int http_connect_from(const char *from, int port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT(fd >= 0);
    if (from) { /* another loopback address (all of 127/8 is local) */
        struct sockaddr_in me = {.sin_family = AF_INET};
        ASSERT_EQ(inet_pton(AF_INET, from, &me.sin_addr), 1);
        ASSERT_EQ(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
    }
    if (rcvbuf > 0) {
        /* A small segment size too: on loopback the daemon's send buffer
         * grows with the segment size (to MiBs at 64 KiB segments). */
        int mss = 536;
        ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
        ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss), 0);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static int http_connect(int port, int rcvbuf)
{
    return http_connect_from(NULL, port, rcvbuf);
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        ASSERT(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Reads until the peer closes or timeout_ms pass. Returns the bytes read
 * (NUL-terminated, truncated to cap - 1), or -1 on timeout. */
static long read_until_close(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t n = 0;
    int64_t end = zh_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = end - zh_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char tmp[4096];
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t take = (size_t)r < cap - 1 - n ? (size_t)r : cap - 1 - n;
        memcpy(buf + n, tmp, take);
        n += take;
    }
    buf[n] = 0;
    return (long)n;
}

/* One request on a fresh connection; the whole answer in buf. */
static long http_do(int port, const char *req, char *buf, size_t cap)
{
    int fd = http_connect(port, 0);
    send_all(fd, req, strlen(req));
    long n = read_until_close(fd, buf, cap, 10000);
    close(fd);
    return n;
}

/* Sends SIGTERM and returns the daemon's wait status. */
static int stop_status(zh_daemon *d)
{
    ASSERT_EQ(kill(d->pid, SIGTERM), 0);
    for (int i = 0; i < 1000 && zh_daemon_alive(d); i++)
        usleep(10000);
    ASSERT(!zh_daemon_alive(d));
    return d->status;
}

static void check_clean_exit(zh_daemon *d, int st, const char *what)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: zppd ended with %s %d\n", what,
                WIFSIGNALED(st) ? "signal" : "exit status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        zh_daemon_dump_log(d);
        exit(1);
    }
}

/* SIGTERM while the daemon still holds an unread /metrics answer. */
static void stop_with_unread_reply(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("metrics_listen = 127.0.0.1:0\nmax_jobs = 1000\n"
                              "max_connections_per_uid = 1000\n",
                              &d),
              0);
    int port = metrics_port(&d);
    /* Enough jobs with long ids that the answer does not fit in the
     * sockets' buffers. */
    static zpp_conn *c[JOBS];
    for (int i = 0; i < JOBS; i++) {
        char id[128];
        snprintf(id, sizeof id, "job-%04d-%0110d", i, 0);
        ASSERT_EQ(zh_connect_join(&d, id, 0, 1, 1, &c[i]), 0);
    }
    int fd = http_connect(port, 1024);
    const char *req = "GET /metrics HTTP/1.0\r\n\r\n";
    send_all(fd, req, strlen(req));
    usleep(300 * 1000);
    int idle = http_connect(port, 0);
    usleep(100 * 1000);
    int st = stop_status(&d);
    check_clean_exit(&d, st, "stop with an unread metrics answer");
    close(fd);
    close(idle);
    for (int i = 0; i < JOBS; i++)
        zpp_close(c[i]);
    zh_daemon_kill(&d);
    printf("test_audit21m_metrics_http: stop with an unread answer: exit 0\n");
}

/* SIGTERM with only idle metrics connections. */
static void stop_with_idle_connections(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("metrics_listen = 127.0.0.1:0\n", &d), 0);
    int port = metrics_port(&d);
    int fds[3];
    for (int i = 0; i < 3; i++)
        fds[i] = http_connect(port, 0);
    send_all(fds[1], "GET /met", 8); /* a partial request */
    usleep(100 * 1000);
    int st = stop_status(&d);
    check_clean_exit(&d, st, "stop with idle metrics connections");
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    zh_daemon_kill(&d);
    printf("test_audit21m_metrics_http: stop with idle connections: exit 0\n");
}

#define BIG_COUNT (1u << 24)

static zh_daemon g_d;
static int g_port;

/* Both ranks submit one long qgZ reduce-scatter; rank 0 then sends SIGTERM
 * and asks /healthz while that call is still in flight. Exit 0: 503
 * stopping; 2: no answer (refused or closed); 3: the call had already
 * ended (nothing to prove); 1: other failure. */
static int rank_healthz(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, "hz", (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    zpp_shm *in, *out;
    uint64_t in_id, out_id, req;
    if (zh_submit_long_qgz(c, BIG_COUNT, &in, &out, &in_id, &out_id, &req))
        return 1;
    int code = 0;
    if (rank == 0) {
        usleep(20000);
        kill(g_d.pid, SIGTERM);
        usleep(20000); /* the loop takes the signal */
        static char buf[4096];
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        long n = -1;
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            const char *q = "GET /healthz HTTP/1.0\r\n\r\n";
            if (send(fd, q, strlen(q), MSG_NOSIGNAL) == (ssize_t)strlen(q))
                n = read_until_close(fd, buf, sizeof buf, 5000);
        }
        if (fd >= 0)
            close(fd);
        code = n > 0 && strstr(buf, "503") && strstr(buf, "stopping") ? 0 : 2;
        printf("rank 0: /healthz after SIGTERM: %s\n", n > 0 ? buf : "no answer");
    }
    int rc = zpp_wait(c, req, NULL);
    if (rank == 0 && code == 2 && rc == 0 && zh_daemon_log_contains(&g_d, "inflight=0"))
        code = 3;
    zpp_close(c);
    zpp_shm_destroy(in);
    zpp_shm_destroy(out);
    return code;
}

static void healthz_while_stopping(void)
{
    for (int attempt = 0;; attempt++) {
        ASSERT_EQ(zh_daemon_start("metrics_listen = 127.0.0.1:0\n", &g_d), 0);
        g_port = metrics_port(&g_d);
        int codes[2];
        zh_run_ranks(2, rank_healthz, NULL, 60000, codes);
        for (int i = 0; i < 1000 && zh_daemon_alive(&g_d); i++)
            usleep(10000);
        ASSERT(!zh_daemon_alive(&g_d));
        check_clean_exit(&g_d, g_d.status, "stop while in flight");
        zh_daemon_kill(&g_d);
        ASSERT_EQ(codes[1], 0);
        if (codes[0] == 3 && attempt < 3)
            continue; /* the call was over before SIGTERM: try again */
        ASSERT_EQ(codes[0], 0);
        break;
    }
    printf("test_audit21m_metrics_http: /healthz while stopping: 503\n");
}

/* zppd -o metrics_listen=value on a socket of its own; its exit code
 * (it is SIGTERMed after 3 s if it started). */
static int run_with_listen(const char *value, char *out, size_t outlen)
{
    char dir[] = "/tmp/zpp-a21m-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char sock[64], opt[160];
    snprintf(sock, sizeof sock, "%s/zppd.sock", dir);
    snprintf(opt, sizeof opt, "metrics_listen=%s", value);
    char *argv[] = {ZPPD_BIN, "-b", "host", "-s", sock, "-o", "peer_listen=", "-o", opt, NULL};
    int code = zh_run_capture(argv, 3000, out, outlen);
    unlink(sock);
    rmdir(dir);
    return code;
}

static void listen_values(void)
{
    static char out[16384];
    const char *bad[] = {"127.0.0.1:70000", "127.0.0.1:", "127.0.0.1:94x", "127.0.0.1:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int code = run_with_listen(bad[i], out, sizeof out);
        if (code != 1 || !strstr(out, "metrics_listen")) {
            fprintf(stderr, "metrics_listen=%s: exit %d\n%s\n", bad[i], code, out);
            exit(1);
        }
    }
    int v6 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int have_v6 = v6 >= 0 && bind(v6, (struct sockaddr *)&sa6, sizeof sa6) == 0;
    if (v6 >= 0)
        close(v6);
    if (have_v6) {
        zh_daemon d;
        ASSERT_EQ(zh_daemon_start("metrics_listen = [::1]:0\n", &d), 0);
        ASSERT_GT(metrics_port(&d), 0);
        ASSERT_EQ(zh_daemon_stop(&d), 0);
    }
    printf("test_audit21m_metrics_http: metrics_listen values: ok%s\n",
           have_v6 ? "" : " (no IPv6 loopback: [::1] not tried)");
}

/* Size cap, connection cap and idle timeout. */
static void caps(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("metrics_listen = 127.0.0.1:0\n", &d), 0);
    int port = metrics_port(&d);
    static char buf[1 << 20];

    /* A request that never ends its headers, over 8 KiB: 431. */
    static char big[20000];
    memcpy(big, "GET /metrics HTTP/1.0\r\nX: ", 26);
    memset(big + 26, 'a', sizeof big - 27);
    int fd = http_connect(port, 0);
    send(fd, big, strlen(big), MSG_NOSIGNAL); /* the daemon may close mid-way */
    ASSERT_GE(read_until_close(fd, buf, sizeof buf, 10000), 0);
    close(fd);
    ASSERT_CONTAINS(buf, "431");

    /* 16 connections held open without a request from one address: it
     * keeps 8 (half the table), each new one closing its oldest at once;
     * a scraper or a probe from that address too is answered at once, the
     * oldest idle one closed for it; the idle ones left are closed by the
     * timeout. */
    int idle[17];
    for (int i = 0; i < 16; i++) {
        idle[i] = http_connect(port, 0);
        usleep(2000); /* accepted in this order */
    }
    for (int i = 0; i < 8; i++) {
        int64_t t0 = zh_now_ms();
        ASSERT_GE(read_until_close(idle[i], buf, sizeof buf, 10000), 0);
        ASSERT_LT(zh_now_ms() - t0, 1000); /* closed for a newer one, not by the timeout */
    }
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            idle[16] = http_connect(port, 0); /* closes idle[9]; then 8 with the probe */
        int64_t t0 = zh_now_ms();
        ASSERT_GE(http_do(port,
                          k ? "GET /metrics HTTP/1.0\r\n\r\n" : "GET /healthz HTTP/1.0\r\n\r\n",
                          buf, sizeof buf),
                  0);
        ASSERT_LT(zh_now_ms() - t0, 2000);
        ASSERT_CONTAINS(buf, "200 OK");
        t0 = zh_now_ms();
        ASSERT_GE(read_until_close(idle[8 + k], buf, sizeof buf, 10000), 0);
        ASSERT_LT(zh_now_ms() - t0, 1000);
    }
    int64_t t0 = zh_now_ms();
    ASSERT_GE(read_until_close(idle[15], buf, sizeof buf, 10000), 0); /* the idle timeout */
    ASSERT_LT(zh_now_ms() - t0, 8000);
    for (int i = 0; i < 17; i++)
        close(idle[i]);
    usleep(100 * 1000);
    ASSERT_GE(http_do(port, "GET /healthz HTTP/1.0\r\n\r\n", buf, sizeof buf), 0);
    ASSERT_CONTAINS(buf, "200 OK");
    ASSERT_GE(http_do(port, "GET /metrics HTTP/1.0\r\n\r\n", buf, sizeof buf), 0);
    ASSERT_CONTAINS(buf, "zppd_info{");
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_audit21m_metrics_http: caps: ok\n");
}

/* A flood from one address does not push out a scraper from another: the
 * flooder keeps at most 8 connections, and at the cap the address holding
 * the most gives way (before session 22 the oldest connection of all did,
 * so 16 new ones closed any scraper that had not yet sent its request). */
static void flood_from_one_address(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("metrics_listen = 127.0.0.1:0\n", &d), 0);
    int port = metrics_port(&d);
    static char buf[1 << 20];
    int scraper = http_connect(port, 0); /* from 127.0.0.1, no request yet */
    int other[7], flood[40];
    for (int i = 0; i < 7; i++)
        other[i] = http_connect_from("127.0.0.3", port, 0); /* a second, polite address */
    for (int i = 0; i < 40; i++)
        flood[i] = http_connect_from("127.0.0.2", port, 0);
    usleep(100 * 1000);
    /* the flood's first connections were closed for its later ones */
    int64_t t0 = zh_now_ms();
    ASSERT_GE(read_until_close(flood[0], buf, sizeof buf, 10000), 0);
    ASSERT_LT(zh_now_ms() - t0, 1000);
    /* 1 + 7 + 8 = 16 live: one more from the flood closes its own oldest,
     * and so does one from a third address, the flood holding the most */
    int third = http_connect_from("127.0.0.4", port, 0);
    usleep(50 * 1000);
    const char *req = "GET /metrics HTTP/1.0\r\n\r\n";
    send_all(scraper, req, strlen(req));
    ASSERT_GE(read_until_close(scraper, buf, sizeof buf, 10000), 0);
    ASSERT_CONTAINS(buf, "200 OK");
    ASSERT_CONTAINS(buf, "zppd_info{");
    for (int i = 0; i < 7; i++) { /* the polite address kept every connection */
        send_all(other[i], "GET /healthz HTTP/1.0\r\n\r\n", 25);
        ASSERT_GE(read_until_close(other[i], buf, sizeof buf, 10000), 0);
        ASSERT_CONTAINS(buf, "200 OK");
        close(other[i]);
    }
    send_all(third, "GET /healthz HTTP/1.0\r\n\r\n", 25);
    ASSERT_GE(read_until_close(third, buf, sizeof buf, 10000), 0);
    ASSERT_CONTAINS(buf, "200 OK");
    close(third);
    close(scraper);
    for (int i = 0; i < 40; i++)
        close(flood[i]);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_audit21m_metrics_http: flood from one address: ok\n");
}

int main(void)
{
    listen_values();
    healthz_while_stopping();
    stop_with_idle_connections();
    stop_with_unread_reply();
    caps();
    flood_from_one_address();
    printf("test_audit21m_metrics_http: ok\n");
    return 0;
}
