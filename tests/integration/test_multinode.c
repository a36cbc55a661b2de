/*
 * test_multinode.c — jobs across daemons, on loopback (issue 11, "CI (no
 * GPU)"). Every scenario starts its own 2–3 daemons (host backend, each in
 * its own directory with its own socket, peer service on 127.0.0.1) and
 * forks the ranks; the ranks report through a shared page.
 *
 * Scenarios (numbered as in main's table; `test_multinode N` runs one):
 *  1–2. Formation: 2 nodes x 2 ranks (ranks 0,1 on A, the leader; 2,3 on
 *     B) and 3 daemons x 1 rank: every daemon lists the job "running"
 *     (zppctl --json jobs). Then a data call fails with ZPP_EUNSUPPORTED
 *     naming the host backend: THIS IS THE EXPECTED HOST BEHAVIOUR — the
 *     host backend moves data inside one daemon only (job.c call_start);
 *     jobs across daemons move data with the cuda backend (NCCL), tested on
 *     the GPU machine.
 *  3. World mismatch: B's rank claims 2 nodes x 1 rank while A leads 2 x 2:
 *     the leader refuses the Join, B's pending call ends with an error
 *     quoting the refusal; B's abort reaches A, whose pending calls name
 *     node 1 and the mismatch; once the ranks left, the same job id with
 *     the right shape forms.
 *  4. Leader unreachable (a port nothing listens on), join_timeout_ms = 1500:
 *     the pending call ends within ~3 s naming the leader's address.
 *  5. Member killed: formed 2 x 2; rank 0 on A waits in a call rank 1 never
 *     submits; daemon B is SIGKILLed: rank 0's call ends within
 *     peer_timeout_ms (1500, heartbeat 300) + slack, naming node 1.
 *  6. Abort propagation: formed 2 x 2; rank 3 (on B) is SIGKILLed: B aborts
 *     (rank 2's pending call names rank 3) and A's pending call names node 1
 *     and rank 3.
 *  7. Mutual TLS (certificates from tests/unit/peer_certs.sh): A and B with
 *     certificates of one CA form a job; a daemon with a certificate of
 *     another CA is refused: its job aborts naming the leader, and A's log
 *     shows the failed handshake.
 *  8. Restart: A on a fixed peer port is SIGKILLed (B's pending call names
 *     node 0), started again on the same port, and a new job across A and B
 *     forms.
 *  9. Graceful stop: B stopped with SIGTERM sends Abort: A's pending call
 *     names node 1 and the shutdown at once (peer_timeout_ms 5000).
 * 10. A rank dies while the job forms (3 x 1): B's rank dies with B's Join
 *     parked on A: A's call names node 1 and the rank; C, joining later, is
 *     refused by the leader naming the same cause.
 * 11. A member restarts on the same port mid-job: A's heartbeats find a
 *     zppd that does not know the job: A aborts naming node 1.
 * 12. Two daemons claim node 1: the leader refuses the second ("already
 *     joined"); what happens to the formed job is printed, not asserted.
 * 13. A job ends well across daemons (rejoin_timeout_ms = 1500): node 0's
 *     rank leaves between calls: node 1's job stays running (its last
 *     calls would still be finishing), a new rank 0 may rejoin on node 0
 *     within the timeout and the job goes on; when rank 0 leaves again and
 *     stays away, node 0 ends the job after the timeout and node 1's job
 *     ends too, naming node 0.
 * 14. A device error first (as NCCL sees a dead peer before the heartbeats
 *     do; the host backend's ZPPD_TEST_POLL_FAIL_FILE makes A's job_poll
 *     fail once the file exists), peer_timeout_ms 20000, heartbeat 300:
 *     with B alive, A's pending call ends after the grace (2 heartbeat
 *     periods + 1 s) saying every other node still answers; with B SIGKILLed
 *     first, it ends within a few hundred ms naming node 1 (its failed
 *     heartbeat, or its silence), long before the peer timeout.
 *
 * 15. Every node's ranks leave (rejoin_timeout_ms 20000, heartbeat 300):
 *     2 x 2 formed, then all four ranks leave between calls, node 1's
 *     first: both daemons end the job well within a few heartbeat periods,
 *     long before the rejoin timeout ("job ended", communicators of the
 *     host backend closed gracefully, no "job aborted" and no abort
 *     counted); then the same job id forms again across both.
 * 16. The last idle node ends the job first (see the scenario).
 * 17. A member stops answering without dying (SIGSTOP: its sockets stay
 *     open, so heartbeats time out instead of failing): A's pending call
 *     ends within peer_timeout_ms (1500) + slack naming node 1 and the
 *     silence; B, resumed (SIGCONT), learns the job is aborted and why
 *     (A's Abort, A's answer to its heartbeat, or, once A's ranks left and
 *     A freed the job, A's note of the abort) and its rank's pending call
 *     ends with ZPP_EABORTED naming the silence within a few heartbeat
 *     periods; both daemons stay up and a new job forms across them.
 * 18. A rank killed between calls (rejoin_timeout_ms 20000): formed 2 x 2,
 *     rank 0 on A waits in a barrier the others have not joined. Rank 3
 *     (on B) exits normally without zpp_close: libzpp's at-exit Goodbye
 *     makes it a leave, so B keeps its place for a rejoin and A's call
 *     stays pending. Then rank 2 (on B) is SIGKILLed: no Goodbye, so B
 *     aborts at once instead of after the rejoin timeout, and A's call
 *     ends within a few hundred ms naming node 1 and rank 2.
 *
 * Timings are printed ("timing: ...").
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

/* Ranks return straight after a failed check with connections open: not a
 * leak of the product. The daemons keep their own leak checking. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define MAXR 8
#define MSG_LEN 768

/* What a rank does after Hello. */
enum { SUBMIT_NEVER = 0, SUBMIT_NOW = 1, SUBMIT_ON_GO = 2 };

typedef struct {
    const zh_daemon *d;
    const char *job;
    uint32_t rank, world, nodes;
    char leader[128];
    int submit;
} rank_spec;

/* Shared between the test and its ranks (MAP_SHARED, made before fork). */
typedef struct {
    int hello[MAXR];     /* 0 not yet, 1 ok, 2 failed (rc/msg below) */
    int submitted[MAXR]; /* 1 once the call is submitted */
    int done[MAXR];      /* 1 once the call ended */
    int rc[MAXR];
    int64_t t_done[MAXR];
    char msg[MAXR][MSG_LEN];
    int leave[MAXR]; /* test -> one rank: close and exit */
    int noclose[MAXR]; /* test -> one rank: exit on leave without zpp_close */
    int go;      /* test -> ranks: submit now (SUBMIT_ON_GO) */
    int release; /* test -> ranks: close and exit */
    rank_spec spec[MAXR];
} shared_t;

static shared_t *g_sh;

static int ld(const int *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void st(int *p, int v)
{
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

static void reset_shared(void)
{
    memset(g_sh, 0, sizeof *g_sh);
}

/* ---- the rank ------------------------------------------------------------ */

static int rank_main(int slot, void *arg)
{
    (void)arg;
    rank_spec *sp = &g_sh->spec[slot];
    zpp_conn *c = NULL;
    int rc = -1;
    int64_t deadline = zh_now_ms() + 3000;
    while ((rc = zpp_connect(sp->d->socket, &c)) != 0 && zh_now_ms() < deadline)
        sleep_ms(20);
    if (rc) {
        g_sh->rc[slot] = rc;
        snprintf(g_sh->msg[slot], MSG_LEN, "connect %s failed", sp->d->socket);
        st(&g_sh->hello[slot], 2);
        return 1;
    }
    uint32_t per = sp->world / sp->nodes;
    zpp_job_desc job = {.job_id = sp->job,
                        .rank = sp->rank,
                        .world_size = sp->world,
                        .local_rank = sp->rank % per,
                        .node_count = sp->nodes,
                        .gpu_uuid = "host",
                        .leader_addr = sp->leader};
    rc = zpp_hello(c, &job, NULL);
    if (rc) {
        g_sh->rc[slot] = rc;
        snprintf(g_sh->msg[slot], MSG_LEN, "%s", zpp_last_error(c));
        st(&g_sh->hello[slot], 2);
        zpp_close(c);
        return 0;
    }
    st(&g_sh->hello[slot], 1);
    if (sp->submit == SUBMIT_ON_GO) {
        deadline = zh_now_ms() + 30000;
        while (!ld(&g_sh->go) && !ld(&g_sh->release) && zh_now_ms() < deadline)
            sleep_ms(5);
    }
    if (sp->submit != SUBMIT_NEVER && !ld(&g_sh->release)) {
        zpp_coll call;
        zpp_coll_init(&call, ZPP_OP_BARRIER, 0, 0);
        uint64_t req;
        rc = zpp_submit(c, &call, &req);
        st(&g_sh->submitted[slot], 1);
        if (!rc) {
            zpp_result res;
            rc = zpp_wait(c, req, &res);
        }
        g_sh->rc[slot] = rc;
        g_sh->t_done[slot] = zh_now_ms();
        snprintf(g_sh->msg[slot], MSG_LEN, "%s", rc ? zpp_last_error(c) : "");
        st(&g_sh->done[slot], 1);
    }
    deadline = zh_now_ms() + 40000;
    while (!ld(&g_sh->release) && !ld(&g_sh->leave[slot]) && zh_now_ms() < deadline)
        sleep_ms(5);
    if (ld(&g_sh->noclose[slot]))
        return 0; /* exit(0): libzpp's at-exit handler says Goodbye */
    zpp_close(c);
    return 0;
}

/* ---- helpers of the test ------------------------------------------------- */

static pid_t g_pid[MAXR];

static void spawn(int slot, const zh_daemon *d, const char *job, uint32_t rank, uint32_t world,
                  uint32_t nodes, const char *leader, int submit)
{
    rank_spec *sp = &g_sh->spec[slot];
    sp->d = d;
    sp->job = job;
    sp->rank = rank;
    sp->world = world;
    sp->nodes = nodes;
    snprintf(sp->leader, sizeof sp->leader, "%s", leader);
    sp->submit = submit;
    g_pid[slot] = zh_spawn(rank_main, slot, NULL);
    ASSERT_GT(g_pid[slot], 0);
}

/* Waits until the ranks in [0, n) said Hello; every Hello must succeed. */
static void wait_hello(int n)
{
    int64_t deadline = zh_now_ms() + 10000;
    for (int s = 0; s < n; s++) {
        while (!ld(&g_sh->hello[s]) && zh_now_ms() < deadline)
            sleep_ms(5);
        if (ld(&g_sh->hello[s]) != 1) {
            fprintf(stderr, "slot %d (rank %u): hello: %s %s\n", s, g_sh->spec[s].rank,
                    zpp_err_name(g_sh->rc[s]), g_sh->msg[s]);
            exit(1);
        }
    }
}

static int wait_flag(int *flag, int timeout_ms)
{
    int64_t deadline = zh_now_ms() + timeout_ms;
    while (!ld(flag) && zh_now_ms() < deadline)
        sleep_ms(5);
    return ld(flag);
}

/* Tells the ranks to go and reaps the first n. */
static void release_all(int n)
{
    st(&g_sh->release, 1);
    for (int s = 0; s < n; s++) {
        if (g_pid[s] > 0) {
            int code = zh_reap(g_pid[s], 10000);
            if (code != 0 && code != 128 + SIGKILL) {
                fprintf(stderr, "slot %d exited with %d\n", s, code);
                exit(1);
            }
            g_pid[s] = 0;
        }
    }
}

static int admin_json(const zh_daemon *d, int jobs, char *buf, size_t len)
{
    zpp_conn *c = NULL;
    int rc = zpp_connect(d->socket, &c);
    if (rc)
        return rc;
    rc = jobs ? zpp_admin_jobs_json(c, buf, len) : zpp_admin_status_json(c, buf, len);
    zpp_close(c);
    return rc;
}

/* The daemon's peer address from `status` ("peer_address":"H:P"). */
static void peer_address(const zh_daemon *d, char *out, size_t len)
{
    static char buf[1 << 16];
    ASSERT_EQ(admin_json(d, 0, buf, sizeof buf), 0);
    const char *p = strstr(buf, "\"peer_address\":\"");
    ASSERT(p != NULL);
    p += strlen("\"peer_address\":\"");
    const char *e = strchr(p, '"');
    ASSERT(e != NULL && e > p && (size_t)(e - p) < len);
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = 0;
    ASSERT(strncmp(out, "127.0.0.1:", 10) == 0);
}

/* The job's state in `jobs` JSON ("" when not listed). */
static void job_state(const zh_daemon *d, const char *job, char *out, size_t len)
{
    static char buf[1 << 17];
    out[0] = 0;
    if (admin_json(d, 1, buf, sizeof buf))
        return;
    char key[200];
    snprintf(key, sizeof key, "\"job_id\":\"%s\"", job);
    const char *p = strstr(buf, key);
    if (!p)
        return;
    p = strstr(p, "\"state\":\"");
    if (!p)
        return;
    p += strlen("\"state\":\"");
    const char *e = strchr(p, '"');
    if (!e || (size_t)(e - p) >= len)
        return;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = 0;
}

/* Waits until d lists job in state want; returns the ms it took. */
static int64_t wait_state(const zh_daemon *d, const char *job, const char *want, int timeout_ms)
{
    int64_t t0 = zh_now_ms(), deadline = t0 + timeout_ms;
    char s[32] = "";
    for (;;) {
        job_state(d, job, s, sizeof s);
        if (!strcmp(s, want))
            return zh_now_ms() - t0;
        if (zh_now_ms() >= deadline)
            break;
        sleep_ms(20);
    }
    fprintf(stderr, "daemon %s: job %s is '%s', expected '%s' within %d ms\n", d->socket, job, s,
            want, timeout_ms);
    zh_daemon_dump_log(d);
    exit(1);
}

/* Forms `job` across two daemons: ranks 0 .. world/2 - 1 on a, the rest on
 * b (2 nodes), slot = rank; submit[r] is what rank r does after Hello
 * ('g' SUBMIT_ON_GO, 'n' SUBMIT_NEVER, 'w' SUBMIT_NOW). Returns when every
 * Hello succeeded and both daemons list the job as running. */
static void form_2(const zh_daemon *a, const zh_daemon *b, const char *job, uint32_t world,
                   const char *leader, const char *submit)
{
    for (uint32_t r = 0; r < world; r++)
        spawn((int)r, r < world / 2 ? a : b, job, r, world, 2, leader,
              submit[r] == 'g' ? SUBMIT_ON_GO : submit[r] == 'w' ? SUBMIT_NOW : SUBMIT_NEVER);
    wait_hello((int)world);
    wait_state(a, job, "running", 5000);
    wait_state(b, job, "running", 5000);
}

/* `zppctl --json jobs` (the binary) lists the job as running. */
static void zppctl_shows_running(const zh_daemon *d, const char *job)
{
    static char out[1 << 16];
    char *argv[] = {ZPPCTL_BIN, "-s", (char *)d->socket, "--json", "jobs", NULL};
    ASSERT_EQ(zh_run_capture(argv, 10000, out, sizeof out), 0);
    char key[200];
    snprintf(key, sizeof key, "\"job_id\":\"%s\"", job);
    const char *p = strstr(out, key);
    if (!p || !strstr(p, "\"state\":\"running\"")) {
        fprintf(stderr, "zppctl --json jobs on %s:\n%s\n", d->socket, out);
        exit(1);
    }
}

/* A port that was free a moment ago on 127.0.0.1. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    int port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* The call of slot ended with code (0 = any error) and a message holding
 * every needle (NULL-terminated). */
static void expect_error(int slot, int code, ...)
{
    if (!ld(&g_sh->done[slot])) {
        fprintf(stderr, "slot %d (rank %u): the call has not ended\n", slot, g_sh->spec[slot].rank);
        exit(1);
    }
    const char *m = g_sh->msg[slot];
    int rc = g_sh->rc[slot];
    if (rc == 0 || (code && rc != code)) {
        fprintf(stderr, "slot %d (rank %u): got %s (%s), expected %s\n", slot,
                g_sh->spec[slot].rank, zpp_err_name(rc), m, code ? zpp_err_name(code) : "an error");
        exit(1);
    }
    va_list ap;
    va_start(ap, code);
    const char *needle;
    while ((needle = va_arg(ap, const char *)) != NULL) {
        if (!strstr(m, needle)) {
            fprintf(stderr, "slot %d (rank %u): message does not name '%s': %s\n", slot,
                    g_sh->spec[slot].rank, needle, m);
            exit(1);
        }
    }
    va_end(ap);
    printf("  slot %d (rank %u): %s: %s\n", slot, g_sh->spec[slot].rank, zpp_err_name(rc), m);
}

static void start(const char *extra, zh_daemon *d, char *addr, size_t len)
{
    ASSERT_EQ(zh_daemon_start(extra, d), 0);
    peer_address(d, addr, len);
}

static void stop(zh_daemon *d)
{
    ASSERT_EQ(zh_daemon_stop(d), 0);
}

#define FAST "peer_heartbeat_ms = 300\npeer_timeout_ms = 1500\njoin_timeout_ms = 5000\n"

/* Two fresh daemons a and b with config conf (aa, ab: char[128] for their
 * peer addresses), `job` formed across them (form_2's submit letters), the
 * 'g' ranks told to go and their barriers submitted, settle_ms later still
 * pending (the others never submit). */
static void form_pending(const char *conf, zh_daemon *a, char *aa, zh_daemon *b, char *ab,
                         const char *job, const char *submit, int settle_ms)
{
    reset_shared();
    start(conf, a, aa, 128);
    start(conf, b, ab, 128);
    form_2(a, b, job, (uint32_t)strlen(submit), aa, submit);
    st(&g_sh->go, 1);
    for (int r = 0; submit[r]; r++)
        if (submit[r] == 'g')
            ASSERT(wait_flag(&g_sh->submitted[r], 2000));
    sleep_ms(settle_ms);
    for (int r = 0; submit[r]; r++)
        if (submit[r] == 'g')
            ASSERT(!ld(&g_sh->done[r]));
}

/* ---- 1. formation -------------------------------------------------------- */

static void test_formation_2x2(void)
{
    reset_shared();
    zh_daemon a, b;
    char aa[128], ab[128];
    start(FAST, &a, aa, sizeof aa);
    start(FAST, &b, ab, sizeof ab);
    const char *job = "mn-form";
    int64_t t0 = zh_now_ms();
    form_2(&a, &b, job, 4, aa, "gggg");
    printf("timing: 2x2 formed on both daemons %lld ms after the ranks started\n",
           (long long)(zh_now_ms() - t0));
    zppctl_shows_running(&a, job);
    zppctl_shows_running(&b, job);
    /* The host backend keeps data inside one daemon: on a job across
     * daemons every data call fails, naming the backend (expected). */
    st(&g_sh->go, 1);
    for (int s = 0; s < 4; s++) {
        ASSERT(wait_flag(&g_sh->done[s], 5000));
        expect_error(s, ZPP_EUNSUPPORTED, "host backend", NULL);
    }
    /* The daemons stay up and still list the job (until its ranks leave). */
    ASSERT(zh_daemon_alive(&a) && zh_daemon_alive(&b));
    release_all(4);
    stop(&a);
    stop(&b);
}

/* Daemons dial each other directly whatever proxy their environment
 * names: gRPC would otherwise send the Joins and heartbeats to it (here a
 * port nothing listens on, so the job would never form). */
static void test_proxy_env_ignored(void)
{
    reset_shared();
    static const char *vars[] = {"grpc_proxy", "https_proxy", "http_proxy", "no_proxy",
                                 "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (strstr(vars[i], "no_") || strstr(vars[i], "NO_"))
            unsetenv(vars[i]);
        else
            setenv(vars[i], "http://127.0.0.1:9", 1);
    zh_daemon a, b;
    char aa[128], ab[128];
    start(FAST, &a, aa, sizeof aa);
    start(FAST, &b, ab, sizeof ab);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    form_2(&a, &b, "mn-proxy", 2, aa, "nn");
    release_all(2);
    stop(&a);
    stop(&b);
}

static void test_formation_3x1(void)
{
    reset_shared();
    zh_daemon d[3];
    char addr[3][128];
    for (int i = 0; i < 3; i++)
        start(FAST, &d[i], addr[i], sizeof addr[i]);
    const char *job = "mn-form3";
    int64_t t0 = zh_now_ms();
    /* The members first, the leader last: Joins wait on the leader. */
    spawn(2, &d[2], job, 2, 3, 3, addr[0], SUBMIT_ON_GO);
    spawn(1, &d[1], job, 1, 3, 3, addr[0], SUBMIT_ON_GO);
    sleep_ms(200);
    spawn(0, &d[0], job, 0, 3, 3, addr[0], SUBMIT_ON_GO);
    wait_hello(3);
    for (int i = 0; i < 3; i++)
        wait_state(&d[i], job, "running", 5000);
    printf("timing: 3x1 formed on all three daemons %lld ms after the ranks started\n",
           (long long)(zh_now_ms() - t0));
    zppctl_shows_running(&d[2], job);
    st(&g_sh->go, 1);
    for (int s = 0; s < 3; s++) {
        ASSERT(wait_flag(&g_sh->done[s], 5000));
        expect_error(s, ZPP_EUNSUPPORTED, "host backend", NULL);
    }
    release_all(3);
    for (int i = 0; i < 3; i++)
        stop(&d[i]);
}

/* ---- 2. mismatch --------------------------------------------------------- */

static void test_world_mismatch(void)
{
    reset_shared();
    zh_daemon a, b;
    char aa[128], ab[128];
    start(FAST, &a, aa, sizeof aa);
    start(FAST, &b, ab, sizeof ab);
    const char *job = "mn-mismatch";
    spawn(0, &a, job, 0, 4, 2, aa, SUBMIT_NOW);
    spawn(1, &a, job, 1, 4, 2, aa, SUBMIT_NOW);
    wait_hello(2);
    wait_state(&a, job, "forming", 3000);
    /* B's rank says 2 nodes x 1 rank (world 2): node 1 of a different job
     * shape. Its call waits while the job forms, then fails. */
    int64_t t0 = zh_now_ms();
    spawn(2, &b, job, 1, 2, 2, aa, SUBMIT_NOW);
    wait_hello(3);
    ASSERT(wait_flag(&g_sh->done[2], 5000));
    printf("timing: mismatch refused %lld ms after B's rank started\n",
           (long long)(g_sh->t_done[2] - t0));
    expect_error(2, ZPP_EABORTED, "leader", aa, "2 nodes x 2 ranks", "node 1 says 2 x 1", NULL);
    wait_state(&b, job, "aborted", 2000);
    /* A refused node does not abort the leader's job (a stray daemon must
     * not kill a healthy job): A goes on waiting for a node 1 of the right
     * shape, and gives up after join_timeout_ms naming the missing node. */
    sleep_ms(300);
    ASSERT(!g_sh->done[0]);
    ASSERT(wait_flag(&g_sh->done[0], 7000));
    ASSERT(wait_flag(&g_sh->done[1], 3000));
    expect_error(0, ZPP_EABORTED, "nodes 1", "did not join", NULL);
    expect_error(1, ZPP_EABORTED, "nodes 1", "did not join", NULL);
    wait_state(&a, job, "aborted", 1000);
    /* Once every rank left, both daemons forget the job: the same id with
     * the right shape forms. */
    release_all(3);
    char s[32];
    int64_t dl = zh_now_ms() + 3000;
    for (;;) {
        char sb[32];
        job_state(&a, job, s, sizeof s);
        job_state(&b, job, sb, sizeof sb);
        if ((!s[0] && !sb[0]) || zh_now_ms() > dl)
            break;
        sleep_ms(20);
    }
    ASSERT_STR_EQ(s, "");
    reset_shared();
    spawn(0, &a, job, 0, 4, 2, aa, SUBMIT_NOW);
    spawn(1, &a, job, 1, 4, 2, aa, SUBMIT_NOW);
    spawn(2, &b, job, 2, 4, 2, aa, SUBMIT_NOW);
    spawn(3, &b, job, 3, 4, 2, aa, SUBMIT_NOW);
    wait_hello(4);
    /* formed: the calls submitted while forming ran into the host
     * backend's limit */
    for (int k = 0; k < 4; k++) {
        ASSERT(wait_flag(&g_sh->done[k], 5000));
        expect_error(k, ZPP_EUNSUPPORTED, "host backend", NULL);
    }
    release_all(4);
    stop(&a);
    stop(&b);
}

/* ---- 3. leader unreachable ----------------------------------------------- */

static void test_leader_unreachable(void)
{
    reset_shared();
    zh_daemon b;
    char ab[128], dead[64];
    start("peer_heartbeat_ms = 300\npeer_timeout_ms = 1500\njoin_timeout_ms = 1500\n", &b, ab,
          sizeof ab);
    snprintf(dead, sizeof dead, "127.0.0.1:%d", free_port());
    const char *job = "mn-noleader";
    int64_t t0 = zh_now_ms();
    spawn(0, &b, job, 1, 2, 2, dead, SUBMIT_NOW);
    wait_hello(1);
    ASSERT(wait_flag(&g_sh->done[0], 6000));
    int64_t dt = g_sh->t_done[0] - t0;
    printf("timing: leader unreachable reported after %lld ms (join_timeout_ms 1500)\n",
           (long long)dt);
    expect_error(0, ZPP_EABORTED, dead, "leader", NULL);
    ASSERT_LE(dt, 3500);
    ASSERT_GE(dt, 1000);
    wait_state(&b, job, "aborted", 1000);
    release_all(1);
    stop(&b);
}

/* ---- 4. a member killed -------------------------------------------------- */

static void test_member_killed(void)
{
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *job = "mn-memberkill";
    /* a few heartbeats go by: the call stays pending */
    form_pending(FAST, &a, aa, &b, ab, job, "gnnn", 600);
    int64_t t_kill = zh_now_ms();
    zh_daemon_kill(&b);
    ASSERT(wait_flag(&g_sh->done[0], 5000));
    int64_t dt = g_sh->t_done[0] - t_kill;
    printf("timing: daemon B SIGKILLed -> rank 0's call ended after %lld ms "
           "(peer_timeout_ms 1500, heartbeat 300)\n",
           (long long)dt);
    expect_error(0, ZPP_EABORTED, "node 1", ab, NULL);
    ASSERT_LE(dt, 1500 + 1000);
    wait_state(&a, job, "aborted", 1000);
    ASSERT(zh_daemon_alive(&a));
    release_all(4);
    stop(&a);
}

/* ---- 5. abort propagation ------------------------------------------------ */

static void test_abort_propagation(void)
{
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *job = "mn-abortprop";
    form_pending(FAST, &a, aa, &b, ab, job, "gngn", 300);
    int64_t t_kill = zh_now_ms();
    kill(g_pid[3], SIGKILL);
    ASSERT_EQ(zh_reap(g_pid[3], 5000), 128 + SIGKILL);
    g_pid[3] = 0;
    ASSERT(wait_flag(&g_sh->done[2], 5000));
    ASSERT(wait_flag(&g_sh->done[0], 5000));
    printf("timing: rank 3 SIGKILLed -> B's call ended after %lld ms, A's after %lld ms\n",
           (long long)(g_sh->t_done[2] - t_kill), (long long)(g_sh->t_done[0] - t_kill));
    expect_error(2, ZPP_EABORTED, "rank 3", NULL);
    expect_error(0, ZPP_EABORTED, "node 1", "rank 3", NULL);
    ASSERT_LE(g_sh->t_done[0] - t_kill, 3000);
    wait_state(&a, job, "aborted", 1000);
    ASSERT(zh_daemon_alive(&a) && zh_daemon_alive(&b));
    release_all(4);
    stop(&a);
    stop(&b);
}

/* ---- 6. mutual TLS ------------------------------------------------------- */

static void test_tls(void)
{
    reset_shared();
    /* The certificates: tests/unit/peer_certs.sh, found from this file. */
    char root[512];
    snprintf(root, sizeof root, "%s", __FILE__);
    char *cut = strstr(root, "tests/integration/");
    char script[600];
    if (!cut || root[0] != '/') {
        printf("SKIP tls: cannot find the source tree from __FILE__ (%s)\n", __FILE__);
        return;
    }
    *cut = 0;
    snprintf(script, sizeof script, "%stests/unit/peer_certs.sh", root);
    char dir[] = "/tmp/zmn-certs-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "sh '%s' '%s'", script, dir);
    if (access(script, R_OK) != 0 || system(cmd) != 0) {
        printf("SKIP tls: %s failed (openssl missing?)\n", cmd);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ASSERT_EQ(system(cmd), 0);
        return;
    }
    char conf_a[2048], conf_b[2048], conf_x[2048];
    const char *fmt = FAST "peer_tls = true\npeer_tls_ca = %s/%s.pem\npeer_tls_cert = %s/%s.pem\n"
                           "peer_tls_key = %s/%s.key\n";
    snprintf(conf_a, sizeof conf_a, fmt, dir, "ca1", dir, "node-a", dir, "node-a");
    snprintf(conf_b, sizeof conf_b, fmt, dir, "ca1", dir, "node-b", dir, "node-b");
    /* The intruder trusts ca1 (it would accept A's certificate) but its own
     * certificate is signed by ca2: A must refuse it. */
    snprintf(conf_x, sizeof conf_x, fmt, dir, "ca1", dir, "intruder", dir, "intruder");
    strncat(conf_x, "join_timeout_ms = 1500\n", sizeof conf_x - strlen(conf_x) - 1);
    zh_daemon a, b, x;
    char aa[128], ab[128], ax[128];
    start(conf_a, &a, aa, sizeof aa);
    start(conf_b, &b, ab, sizeof ab);
    start(conf_x, &x, ax, sizeof ax);
    ASSERT(zh_daemon_log_contains(&a, "tls=1"));
    const char *job = "mn-tls";
    int64_t t0 = zh_now_ms();
    form_2(&a, &b, job, 2, aa, "gg");
    printf("timing: TLS 2x1 formed %lld ms after the ranks started\n",
           (long long)(zh_now_ms() - t0));
    /* The intruder's Join never gets past the handshake. */
    const char *job2 = "mn-tls-intruder";
    spawn(2, &a, job2, 0, 2, 2, aa, SUBMIT_NEVER);
    t0 = zh_now_ms();
    spawn(3, &x, job2, 1, 2, 2, aa, SUBMIT_NOW);
    wait_hello(4);
    ASSERT(wait_flag(&g_sh->done[3], 6000));
    printf("timing: intruder refused after %lld ms (join_timeout_ms 1500)\n",
           (long long)(g_sh->t_done[3] - t0));
    expect_error(3, ZPP_EABORTED, "leader", aa, NULL);
    wait_state(&x, job2, "aborted", 1000);
    /* The leader's side of that job is still forming: nobody joined it. */
    char s[32];
    job_state(&a, job2, s, sizeof s);
    ASSERT_STR_EQ(s, "forming");
    /* gRPC logs the refused handshake on A (docs/peers.md). */
    int seen = zh_daemon_log_contains(&a, "andshake") || zh_daemon_log_contains(&a, "certificate");
    printf("  A's log %s the failed handshake\n", seen ? "shows" : "does NOT show");
    ASSERT(seen);
    /* The good job is unharmed. */
    job_state(&a, job, s, sizeof s);
    ASSERT_STR_EQ(s, "running");
    release_all(4);
    stop(&a);
    stop(&b);
    stop(&x);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ASSERT_EQ(system(cmd), 0);
}

/* ---- 7. restart ---------------------------------------------------------- */

static void test_restart(void)
{
    reset_shared();
    char conf_a[512];
    int port = free_port();
    snprintf(conf_a, sizeof conf_a, FAST "peer_listen = 127.0.0.1:%d\n", port);
    zh_daemon a, b;
    char aa[128], ab[128];
    start(conf_a, &a, aa, sizeof aa);
    start(FAST, &b, ab, sizeof ab);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    ASSERT_STR_EQ(aa, want);
    const char *job = "mn-restart-1";
    form_2(&a, &b, job, 4, aa, "nngn");
    st(&g_sh->go, 1);
    ASSERT(wait_flag(&g_sh->submitted[2], 2000));
    sleep_ms(300);
    int64_t t_kill = zh_now_ms();
    zh_daemon_kill(&a);
    /* The leader's death is a member's death too: B names node 0. */
    ASSERT(wait_flag(&g_sh->done[2], 5000));
    printf("timing: leader SIGKILLed -> B's call ended after %lld ms\n",
           (long long)(g_sh->t_done[2] - t_kill));
    expect_error(2, ZPP_EABORTED, "node 0", aa, NULL);
    release_all(4);
    memset(g_sh, 0, sizeof *g_sh);
    /* Same config, same peer port. */
    int64_t t_start = zh_now_ms();
    start(conf_a, &a, aa, sizeof aa);
    ASSERT_STR_EQ(aa, want);
    const char *job2 = "mn-restart-2";
    form_2(&a, &b, job2, 4, aa, "gggg");
    printf("timing: restarted A and B formed a new job %lld ms after A's restart began\n",
           (long long)(zh_now_ms() - t_start));
    st(&g_sh->go, 1);
    for (int s = 0; s < 4; s++) {
        ASSERT(wait_flag(&g_sh->done[s], 5000));
        expect_error(s, ZPP_EUNSUPPORTED, "host backend", NULL);
    }
    release_all(4);
    stop(&a);
    stop(&b);
}

/* ---- 8. graceful stop ---------------------------------------------------- */

/* A member stopped with SIGTERM tells the others (Abort) instead of letting
 * them wait out peer_timeout_ms (5000 here): A's pending call names node 1
 * and the shutdown well within that. */
static void test_graceful_stop(void)
{
    const char *conf = "peer_heartbeat_ms = 300\npeer_timeout_ms = 5000\njoin_timeout_ms = 5000\n";
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *job = "mn-sigterm";
    form_pending(conf, &a, aa, &b, ab, job, "gnnn", 300);
    int64_t t_stop = zh_now_ms();
    stop(&b);
    ASSERT(wait_flag(&g_sh->done[0], 8000));
    int64_t dt = g_sh->t_done[0] - t_stop;
    printf("timing: daemon B stopped (SIGTERM) -> rank 0's call ended after %lld ms "
           "(peer_timeout_ms 5000)\n",
           (long long)dt);
    expect_error(0, ZPP_EABORTED, "node 1", NULL);
    ASSERT_LE(dt, 2000);
    release_all(4);
    stop(&a);
}

/* ---- 10. a rank dies while the job forms --------------------------------- */

/* 3 nodes x 1 rank: A leads, B's Join is parked on A, C has not come yet.
 * B's rank dies: B aborts and tells A; A's pending call names node 1 and
 * the rank; C, joining later, is refused by the leader with the reason. */
static void test_rank_dies_while_forming(void)
{
    reset_shared();
    zh_daemon d[3];
    char addr[3][128];
    for (int i = 0; i < 3; i++)
        start(FAST, &d[i], addr[i], sizeof addr[i]);
    const char *job = "mn-formdie";
    spawn(0, &d[0], job, 0, 3, 3, addr[0], SUBMIT_NOW);
    spawn(1, &d[1], job, 1, 3, 3, addr[0], SUBMIT_NOW);
    wait_hello(2);
    ASSERT(wait_flag(&g_sh->submitted[0], 2000));
    ASSERT(wait_flag(&g_sh->submitted[1], 2000));
    sleep_ms(300); /* B's Join is parked on A */
    ASSERT(!ld(&g_sh->done[0]) && !ld(&g_sh->done[1]));
    char s[32];
    job_state(&d[0], job, s, sizeof s);
    ASSERT_STR_EQ(s, "forming");
    int64_t t_kill = zh_now_ms();
    kill(g_pid[1], SIGKILL);
    ASSERT_EQ(zh_reap(g_pid[1], 5000), 128 + SIGKILL);
    g_pid[1] = 0;
    ASSERT(wait_flag(&g_sh->done[0], 3000));
    printf("timing: rank 1 (on B) SIGKILLed while forming -> A's call ended after %lld ms\n",
           (long long)(g_sh->t_done[0] - t_kill));
    expect_error(0, ZPP_EABORTED, "node 1", "rank 1", NULL);
    wait_state(&d[0], job, "aborted", 1000);
    /* C comes late: the leader refuses its Join, naming the cause. */
    spawn(2, &d[2], job, 2, 3, 3, addr[0], SUBMIT_NOW);
    wait_hello(1);
    ASSERT(wait_flag(&g_sh->done[2], 3000));
    expect_error(2, ZPP_EABORTED, "leader", "rank 1", NULL);
    release_all(3);
    for (int i = 0; i < 3; i++)
        stop(&d[i]);
}

/* ---- 11. a member restarts mid-job ---------------------------------------- */

/* B is SIGKILLed and at once started again on the same peer port: A's
 * heartbeats reach a zppd that does not know the job; A aborts naming node
 * 1 (before peer_timeout_ms, 5000 here). */
static void test_member_restarts(void)
{
    reset_shared();
    char conf_b[512];
    snprintf(conf_b, sizeof conf_b,
             "peer_heartbeat_ms = 300\npeer_timeout_ms = 5000\npeer_listen = 127.0.0.1:%d\n",
             free_port());
    zh_daemon a, b;
    char aa[128], ab[128], ab2[128];
    start("peer_heartbeat_ms = 300\npeer_timeout_ms = 5000\n", &a, aa, sizeof aa);
    start(conf_b, &b, ab, sizeof ab);
    const char *job = "mn-memberrestart";
    form_2(&a, &b, job, 2, aa, "nn");
    int64_t t_kill = zh_now_ms();
    zh_daemon_kill(&b);
    start(conf_b, &b, ab2, sizeof ab2);
    ASSERT_STR_EQ(ab, ab2);
    int64_t ms = wait_state(&a, job, "aborted", 4000);
    printf("timing: member restarted -> A aborted the job %lld ms after the kill (%lld after "
           "the restart)\n",
           (long long)(zh_now_ms() - t_kill), (long long)ms);
    /* The reason names the node and says why. */
    static char buf[1 << 17];
    ASSERT_EQ(admin_json(&a, 1, buf, sizeof buf), 0);
    if (!strstr(buf, "node 1") || !strstr(buf, "no longer knows the job")) {
        fprintf(stderr, "A's jobs: %s\n", buf);
        exit(1);
    }
    release_all(2);
    stop(&a);
    stop(&b);
}

/* ---- 12. two daemons claim the same node ---------------------------------- */

/* 2 nodes x 1 rank formed by A and B; C's rank also claims rank 1 (node 1)
 * with A as leader: the leader refuses C's Join ("already joined") and C's
 * job aborts naming the refusal. What A's job does then is printed, not
 * asserted (today C's Abort reaches A and ends the formed job too; see
 * the report of this test's author). */
static void test_duplicate_node(void)
{
    reset_shared();
    zh_daemon a, b, c;
    char aa[128], ab[128], ac[128];
    start(FAST, &a, aa, sizeof aa);
    start(FAST, &b, ab, sizeof ab);
    start(FAST, &c, ac, sizeof ac);
    const char *job = "mn-dupnode";
    form_2(&a, &b, job, 2, aa, "nn");
    spawn(2, &c, job, 1, 2, 2, aa, SUBMIT_NOW);
    wait_hello(3);
    ASSERT(wait_flag(&g_sh->done[2], 3000));
    expect_error(2, ZPP_EABORTED, "leader", aa, "node 1", "already joined", NULL);
    wait_state(&c, job, "aborted", 1000);
    sleep_ms(200);
    char sa[32], sb[32];
    job_state(&a, job, sa, sizeof sa);
    job_state(&b, job, sb, sizeof sb);
    printf("  after C's refusal: the job is '%s' on A and '%s' on B\n", sa, sb);
    ASSERT_STR_EQ(sa, "running"); /* a stray node does not abort a healthy job */
    ASSERT_STR_EQ(sb, "running");
    release_all(3);
    stop(&a);
    stop(&b);
    stop(&c);
}

/* ---- main ---------------------------------------------------------------- */

typedef struct {
    const char *name;
    void (*fn)(void);
} scenario;

/* ---- 13. a job ends well across daemons ------------------------------ */

static void leave(int slot)
{
    st(&g_sh->leave[slot], 1);
    ASSERT_EQ(zh_reap(g_pid[slot], 5000), 0);
    g_pid[slot] = 0;
}

static void test_clean_end(void)
{
    reset_shared();
    zh_daemon a, b;
    char aa[128], ab[128];
    start(FAST "rejoin_timeout_ms = 1500\n", &a, aa, sizeof aa);
    start(FAST "rejoin_timeout_ms = 1500\n", &b, ab, sizeof ab);
    const char *job = "mn-end";
    form_2(&a, &b, job, 2, aa, "nn");
    /* Rank 0 leaves between calls: nothing is aborted anywhere; node 0,
     * whose ranks are all gone, shows the job idle. */
    leave(0);
    sleep_ms(700);
    char s1[32], s2[32];
    job_state(&a, job, s1, sizeof s1);
    job_state(&b, job, s2, sizeof s2);
    ASSERT_STR_EQ(s1, "idle");
    ASSERT_STR_EQ(s2, "running");
    /* A new process rejoins as rank 0 within the timeout: the job goes on. */
    spawn(2, &a, job, 0, 2, 2, aa, SUBMIT_NEVER);
    while (!ld(&g_sh->hello[2]))
        sleep_ms(5);
    ASSERT_EQ(ld(&g_sh->hello[2]), 1);
    sleep_ms(1500);
    job_state(&a, job, s1, sizeof s1);
    job_state(&b, job, s2, sizeof s2);
    ASSERT(!strcmp(s1, "running") && !strcmp(s2, "running"));
    /* It leaves for good: node 0 ends the job after the timeout, and node 1
     * learns it (its rank is still connected, so it lists the job). */
    int64_t t0 = zh_now_ms();
    leave(2);
    int64_t took = wait_state(&b, job, "aborted", 5000);
    printf("timing: node 0's last rank left -> node 1's job ended after %lld ms "
           "(rejoin_timeout_ms 1500)\n", (long long)(zh_now_ms() - t0));
    ASSERT_LE(1400, took);
    ASSERT(zh_daemon_alive(&a) && zh_daemon_alive(&b));
    release_all(2);
    stop(&a);
    stop(&b);
}

/* ---- 14. a device error names the dead node ----------------------------- */

#define SLOW_PEER "peer_heartbeat_ms = 300\npeer_timeout_ms = 20000\njoin_timeout_ms = 5000\n"

/* One job of 2 x 2 across a and b whose rank 0 waits in a call; then kill
 * b (kill_b), make a's job_poll fail (the file), and return how long rank
 * 0's call took to end from then. */
static int64_t device_error_case(zh_daemon *a, zh_daemon *b, const char *ab, const char *job,
                                 const char *file, int kill_b)
{
    reset_shared();
    form_2(a, b, job, 4, ab, "gnnn");
    st(&g_sh->go, 1);
    ASSERT(wait_flag(&g_sh->submitted[0], 2000));
    sleep_ms(600); /* heartbeats go by: the call stays pending */
    ASSERT(!ld(&g_sh->done[0]));
    if (kill_b)
        zh_daemon_kill(b);
    int64_t t0 = zh_now_ms();
    FILE *f = fopen(file, "w");
    ASSERT(f != NULL);
    fclose(f);
    ASSERT(wait_flag(&g_sh->done[0], 10000));
    return g_sh->t_done[0] - t0;
}

static void test_device_error_names_node(void)
{
    zh_daemon a, b;
    char aa[128], ab[128], file[256];
    snprintf(file, sizeof file, "/tmp/zh-pollfail-%d", (int)getpid());
    unlink(file);
    ASSERT_EQ(setenv("ZPPD_TEST_POLL_FAIL_FILE", file, 1), 0); /* a only */
    start(SLOW_PEER, &a, aa, sizeof aa);
    ASSERT_EQ(unsetenv("ZPPD_TEST_POLL_FAIL_FILE"), 0);
    start(SLOW_PEER, &b, ab, sizeof ab);

    int64_t dt = device_error_case(&a, &b, aa, "mn-deverr-alive", file, 0);
    printf("timing: device error with node 1 alive -> rank 0's call ended after %lld ms\n",
           (long long)dt);
    expect_error(0, ZPP_EABORTED, "device error", "every other node still answers", NULL);
    /* it waited for the heartbeats (grace: 2 x 300 ms + 1 s), and no longer */
    ASSERT_GE(dt, 1000);
    ASSERT_LE(dt, 5000);
    wait_state(&a, "mn-deverr-alive", "aborted", 1000);
    release_all(4);
    unlink(file);

    dt = device_error_case(&a, &b, aa, "mn-deverr-dead", file, 1);
    printf("timing: B SIGKILLed, then a device error -> rank 0's call ended after %lld ms "
           "(peer_timeout_ms 20000)\n",
           (long long)dt);
    /* named either way: its heartbeat failed, or none answered for two
     * periods, whichever the daemon sees first */
    expect_error(0, ZPP_EABORTED, "device error", "node 1", ab, NULL);
    ASSERT_LE(dt, 3000);
    wait_state(&a, "mn-deverr-dead", "aborted", 1000);
    ASSERT(zh_daemon_alive(&a));
    release_all(4);
    unlink(file);
    stop(&a);
}

/* ---- 15. every node's ranks leave: the job ends well everywhere -------- */

/* The ranks of a formed 2 x 2 job leave between calls, node 1's first (it
 * goes idle while node 0 runs on, so nothing ends yet), then node 0's;
 * returns the ms from node 0's leaving until the job is gone from both
 * daemons, and checks that both ended it well: finalized, not aborted. */
static int64_t leave_node1_then_node0(zh_daemon *a, zh_daemon *b, const char *job)
{
    leave(2);
    leave(3);
    sleep_ms(900); /* three heartbeat periods */
    char s1[32], s2[32];
    job_state(a, job, s1, sizeof s1);
    job_state(b, job, s2, sizeof s2);
    ASSERT_STR_EQ(s1, "running");
    ASSERT_STR_EQ(s2, "idle");
    int64_t t0 = zh_now_ms();
    leave(0);
    leave(1);
    wait_state(a, job, "", 5000);
    wait_state(b, job, "", 5000);
    int64_t took = zh_now_ms() - t0;
    char reason[128];
    snprintf(reason, sizeof reason, "job=%s uid=0 reason", job);
    const zh_daemon *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        ASSERT(zh_daemon_log_contains(both[i], "every rank of every node left"));
        ASSERT(zh_daemon_log_contains(both[i], "backend=graceful"));
        ASSERT(!zh_daemon_log_contains(both[i], "job aborted"));
        ASSERT(!zh_daemon_log_contains(both[i], reason));
    }
    return took;
}

static void test_all_nodes_leave(void)
{
    reset_shared();
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *conf = FAST "rejoin_timeout_ms = 20000\n";
    start(conf, &a, aa, sizeof aa);
    start(conf, &b, ab, sizeof ab);
    const char *job = "mn-all-leave";
    form_2(&a, &b, job, 4, aa, "nnnn");
    int64_t took = leave_node1_then_node0(&a, &b, job);
    printf("timing: every node's ranks left -> the job gone from both nodes after %lld ms "
           "(heartbeat 300 ms, rejoin_timeout_ms 20000)\n", (long long)took);
    ASSERT_LE(took, 5000);
    /* The same job id forms again across both daemons. */
    reset_shared();
    form_2(&a, &b, job, 2, aa, "nn");
    release_all(2);
    ASSERT(zh_daemon_alive(&a) && zh_daemon_alive(&b));
    stop(&a);
    stop(&b);
}

/* ---- 16. the last node to go idle ends the job before the others hear it -- */

/* Node 0 goes idle last, sees node 1 idle and ends its part at once. Its
 * idle notice is a heartbeat, skipped when one to node 1 is already in
 * flight; the hook makes it always skipped. Node 1 then hears of it only
 * in the answer to its own next heartbeat: ENDED, and it ends its part
 * well too (an UNKNOWN answer would abort it as "no longer knows the
 * job"). */
static void test_last_idle_node_ends_first(void)
{
    reset_shared();
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *conf = FAST "rejoin_timeout_ms = 20000\n";
    ASSERT_EQ(setenv("ZPPD_TEST_NO_IDLE_NOTICE", "1", 1), 0); /* a only */
    start(conf, &a, aa, sizeof aa);
    ASSERT_EQ(unsetenv("ZPPD_TEST_NO_IDLE_NOTICE"), 0);
    start(conf, &b, ab, sizeof ab);
    const char *job = "mn-ended-first";
    form_2(&a, &b, job, 4, aa, "nnnn");
    int64_t took = leave_node1_then_node0(&a, &b, job);
    printf("timing: node 0 ended first -> node 1 ended well, the job gone from both after "
           "%lld ms (heartbeat 300 ms)\n", (long long)took);
    stop(&a);
    stop(&b);
}

/* ---- 17. a member stops answering (SIGSTOP), then resumes ---------------- */

/* A SIGKILLed zppd closes its sockets and a heartbeat to it fails at once;
 * a stopped one (SIGSTOP: a debugger, a frozen container, a machine that
 * swaps) keeps them open, so the heartbeats time out and only
 * peer_timeout_ms ends the job. B is resumed afterwards: its loop sees the
 * stall (peer timeouts restart there), and it must still learn that the job
 * is gone and end its rank's call rather than wait for ever, and say why.
 * Stopped for stop_ms after A gave up: 500 lets A's Abort (deadline
 * PEER_ABORT_TIMEOUT_MS, 2000) reach B once resumed; 4000 outlasts it, and B
 * learns it from A's answer to its own heartbeat; with a_left, A's ranks
 * leave first, so A has freed the job and answers from its note of the
 * abort (before session 23: UNKNOWN, "no longer knows the job (its zppd
 * restarted?)"). */
static void member_stopped(int stop_ms, int a_left)
{
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *job = "mn-memberstop";
    /* a few heartbeats go by: the calls stay pending */
    form_pending(FAST, &a, aa, &b, ab, job, "gngn", 600);
    int64_t t_stop = zh_now_ms();
    ASSERT_EQ(kill(b.pid, SIGSTOP), 0);
    ASSERT(wait_flag(&g_sh->done[0], 5000));
    int64_t dt = g_sh->t_done[0] - t_stop;
    printf("timing: daemon B stopped (SIGSTOP) -> rank 0's call ended after %lld ms "
           "(peer_timeout_ms 1500, heartbeat 300)\n",
           (long long)dt);
    expect_error(0, ZPP_EABORTED, "node 1", "stopped answering", NULL);
    ASSERT_LE(dt, 1500 + 1500);
    ASSERT(!ld(&g_sh->done[2])); /* B is stopped: its rank's call cannot have ended */
    wait_state(&a, job, "aborted", 1000);
    if (a_left) { /* A frees the aborted job */
        for (int s = 0; s < 2; s++) {
            st(&g_sh->leave[s], 1);
            ASSERT_EQ(zh_reap(g_pid[s], 5000), 0);
            g_pid[s] = 0;
        }
        wait_state(&a, job, "", 2000);
    }

    sleep_ms(stop_ms);
    int64_t t_cont = zh_now_ms();
    ASSERT_EQ(kill(b.pid, SIGCONT), 0);
    ASSERT(wait_flag(&g_sh->done[2], 5000));
    printf("timing: daemon B resumed (SIGCONT) %d ms after A gave up%s -> rank 2's call ended "
           "after %lld ms\n",
           stop_ms, a_left ? " and freed the job" : "", (long long)(g_sh->t_done[2] - t_cont));
    expect_error(2, ZPP_EABORTED, "node 0", "node 1", "stopped answering", NULL);
    ASSERT(zh_daemon_alive(&a) && zh_daemon_alive(&b));
    release_all(4);

    /* both take a new job across them */
    reset_shared();
    form_2(&a, &b, "mn-memberstop-2", 2, aa, "nn");
    release_all(2);
    stop(&a);
    stop(&b);
}

static void test_member_stopped(void)
{
    member_stopped(500, 0);
    member_stopped(4000, 0);
    member_stopped(4000, 1);
}

/* ---- 18. a rank killed between calls --------------------------------------- */

/* A rank's process killed between calls (the usual case: a training rank
 * spends most of its time computing) used to count as a rank that left and
 * may rejoin: every other rank, on every node, waited rejoin_timeout_ms
 * (30 s by default) before its call failed. libzpp now says Goodbye when it
 * closes on purpose (zpp_close, or at a normal exit), and a disconnect
 * without one is a death. */
static void test_rank_killed_between_calls(void)
{
    zh_daemon a, b;
    char aa[128], ab[128];
    const char *job = "mn-killed-between";
    form_pending(FAST "rejoin_timeout_ms = 20000\n", &a, aa, &b, ab, job, "gnnn", 0);

    /* rank 3 exits without zpp_close: the at-exit Goodbye, a leave */
    st(&g_sh->noclose[3], 1);
    st(&g_sh->leave[3], 1);
    ASSERT_EQ(zh_reap(g_pid[3], 5000), 0);
    g_pid[3] = 0;
    sleep_ms(1000); /* several heartbeats: nothing is aborted */
    ASSERT(!ld(&g_sh->done[0]));
    wait_state(&a, job, "running", 100);
    wait_state(&b, job, "running", 100);

    /* rank 2 SIGKILLed: no Goodbye, a death */
    int64_t t_kill = zh_now_ms();
    kill(g_pid[2], SIGKILL);
    ASSERT_EQ(zh_reap(g_pid[2], 5000), 128 + SIGKILL);
    g_pid[2] = 0;
    ASSERT(wait_flag(&g_sh->done[0], 5000));
    int64_t dt = g_sh->t_done[0] - t_kill;
    printf("timing: rank 2 SIGKILLed between calls -> A's call ended after %lld ms "
           "(rejoin_timeout_ms 20000)\n",
           (long long)dt);
    expect_error(0, ZPP_EABORTED, "node 1", "rank 2", "without a goodbye", NULL);
    ASSERT_LE(dt, 3000);
    wait_state(&b, job, "aborted", 1000);
    ASSERT(zh_daemon_alive(&a) && zh_daemon_alive(&b));
    release_all(4);
    stop(&a);
    stop(&b);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT(g_sh != MAP_FAILED);
    static const scenario all[] = {
        {"formation 2 nodes x 2 ranks", test_formation_2x2},
        {"formation 3 daemons x 1 rank", test_formation_3x1},
        {"world mismatch refused", test_world_mismatch},
        {"leader unreachable", test_leader_unreachable},
        {"member daemon killed", test_member_killed},
        {"abort propagation", test_abort_propagation},
        {"mutual TLS", test_tls},
        {"restart then a new job", test_restart},
        {"graceful stop of a member", test_graceful_stop},
        {"a rank dies while the job forms", test_rank_dies_while_forming},
        {"a member restarts mid-job", test_member_restarts},
        {"two daemons claim the same node", test_duplicate_node},
        {"a job ends well across daemons", test_clean_end},
        {"a device error names the dead node", test_device_error_names_node},
        {"every node's ranks leave: the job ends well", test_all_nodes_leave},
        {"the last idle node ends the job first", test_last_idle_node_ends_first},
        {"a member stops answering, then resumes", test_member_stopped},
        {"a rank killed between calls", test_rank_killed_between_calls},
        {"a proxy in the environment is not used", test_proxy_env_ignored},
    };
    int n = (int)(sizeof all / sizeof all[0]);
    int only = argc > 1 ? atoi(argv[1]) : 0;
    int64_t t_all = zh_now_ms();
    for (int i = 0; i < n; i++) {
        if (only && only != i + 1)
            continue;
        int64_t t0 = zh_now_ms();
        printf("[%d] %s\n", i + 1, all[i].name);
        all[i].fn();
        printf("[%d] ok (%lld ms)\n", i + 1, (long long)(zh_now_ms() - t0));
    }
    printf("test_multinode: all passed in %lld ms\n", (long long)(zh_now_ms() - t_all));
    return 0;
}
