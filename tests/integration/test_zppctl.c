/*
 * test_zppctl.c — zppctl against a daemon with a hanging call:
 *  - `zppctl status` and `zppctl --json status` answer (exit 0);
 *  - a 3-rank job (three connections of this process, async calls) runs a
 *    barrier (done), then ranks 0 and 2 submit an all-gather that rank 1
 *    has not: `zppctl --json jobs` shows the job, its joined ranks, the
 *    oldest pending call (seq 2) with missing rank [1], and the ring of
 *    recent calls; the human `zppctl jobs` names the job too;
 *  - once rank 1 submits, the call completes and the ring lists each call
 *    once, in its final state (no stale "running" record);
 *  - a forming job whose only rank left shows it away, with its label;
 *  - exit codes: 3 when the socket is missing, 2 for an unknown command;
 *    3 (and "unreachable" for health) within -t when a socket accepts but
 *    never answers, as a zppd whose loop is stuck does.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

/* Rank children return straight after a failed check, connections and
 * shared memory still open: LeakSanitizer in the test's own processes would
 * report that, not a bug. The daemon (a separate program) keeps its own
 * leak checking. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define N 3

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    static char out[65536];

    char *st[] = {ZPPCTL_BIN, "-s", d.socket, "status", NULL};
    ASSERT_EQ(zh_run_capture(st, 10000, out, sizeof out), 0);
    ASSERT_CONTAINS(out, "host");
    char *stj[] = {ZPPCTL_BIN, "-s", d.socket, "--json", "status", NULL};
    ASSERT_EQ(zh_run_capture(stj, 10000, out, sizeof out), 0);
    ASSERT_CONTAINS(out, "\"backend\":\"host\"");
    ASSERT_CONTAINS(out, "\"draining\":false");
    ASSERT_CONTAINS(out, "\"gpus\":[]"); /* the host backend has no GPU to list */

    zpp_conn *c[N];
    zpp_shm *in[N], *o[N];
    uint64_t in_id[N], out_id[N], req[N];
    for (int r = 0; r < N; r++) {
        ASSERT_EQ(zh_connect_join(&d, "ctl-job", (uint32_t)r, N, 1, &c[r]), 0);
        ASSERT_EQ(zpp_shm_create(4096, &in[r]), 0);
        ASSERT_EQ(zpp_shm_create(4096, &o[r]), 0);
        ASSERT_EQ(zpp_register_shm(c[r], in[r], 0, 4096, &in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(c[r], o[r], 0, 4096, &out_id[r]), 0);
    }
    zpp_coll bar;
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    for (int r = 0; r < N; r++)
        ASSERT_EQ(zpp_submit(c[r], &bar, &req[r]), 0);
    for (int r = 0; r < N; r++)
        ASSERT_EQ(zpp_wait(c[r], req[r], NULL), 0);

    zpp_coll ag[N];
    for (int r = 0; r < N; r++) {
        zpp_coll_init(&ag[r], ZPP_OP_ALLGATHER, ZPP_FP32, 300);
        ag[r].input = (zpp_bufref){in_id[r], 0};
        ag[r].output = (zpp_bufref){out_id[r], 0};
    }
    ASSERT_EQ(zpp_submit(c[0], &ag[0], &req[0]), 0);
    ASSERT_EQ(zpp_submit(c[2], &ag[2], &req[2]), 0);
    zpp_result res;
    ASSERT_EQ(zpp_test(c[0], req[0], &res), ZPP_EBUSY);

    char *jj[] = {ZPPCTL_BIN, "-s", d.socket, "--json", "jobs", NULL};
    int code = -1;
    for (int tries = 0; tries < 50; tries++) { /* the submissions may still be in flight */
        code = zh_run_capture(jj, 10000, out, sizeof out);
        if (code == 0 && strstr(out, "\"missing_ranks\":[1]"))
            break;
        usleep(20000);
    }
    printf("%s\n", out);
    ASSERT_EQ(code, 0);
    ASSERT_CONTAINS(out, "\"job_id\":\"ctl-job\"");
    ASSERT_CONTAINS(out, "\"world_size\":3");
    ASSERT_CONTAINS(out, "\"joined_ranks\":[0,1,2]");
    ASSERT_CONTAINS(out, "\"state\":\"running\"");
    ASSERT_CONTAINS(out, "\"oldest_pending_seq\":2");
    ASSERT_CONTAINS(out, "\"missing_ranks\":[1]");
    ASSERT_CONTAINS(out, "\"op\":\"barrier\"");
    ASSERT_CONTAINS(out, "\"seq\":1");
    ASSERT_CONTAINS(out, "\"state\":\"done\"");

    char *jh[] = {ZPPCTL_BIN, "-s", d.socket, "jobs", NULL};
    ASSERT_EQ(zh_run_capture(jh, 10000, out, sizeof out), 0);
    printf("%s\n", out);
    ASSERT_CONTAINS(out, "ctl-job");

    ASSERT_EQ(zpp_submit(c[1], &ag[1], &req[1]), 0);
    for (int r = 0; r < N; r++)
        ASSERT_EQ(zpp_wait(c[r], req[r], NULL), 0);
    ASSERT_EQ(zh_run_capture(jj, 10000, out, sizeof out), 0);
    ASSERT_CONTAINS(out, "\"missing_ranks\":[]");
    ASSERT_CONTAINS(out, "\"op\":\"allgather\"");
    /* The ring has one record per call, in its last state: a finished call
     * is not also listed as running. */
    if (strstr(out, "\"state\":\"running\",\"start_us\"")) {
        fprintf(stderr, "test_zppctl: finished calls still listed as running in the ring:\n%s\n",
                out);
        exit(1);
    }

    for (int r = 0; r < N; r++) {
        zpp_close(c[r]);
        zpp_shm_destroy(in[r]);
        zpp_shm_destroy(o[r]);
    }

    /* A job still forming whose only rank left: its place waits for it
     * (rejoin_timeout_ms), and jobs shows the rank as away and the label
     * the rank gave. */
    zpp_conn *lone;
    ASSERT_EQ(zpp_connect(d.socket, &lone), 0);
    zpp_job_desc jd = {.job_id = "ctl-away", .world_size = 2, .node_count = 1, .rank = 0,
                       .gpu_uuid = "host", .tenant_label = "team-a"};
    ASSERT_EQ(zpp_hello(lone, &jd, NULL), 0);
    zpp_close(lone);
    for (int tries = 0; tries < 50; tries++) { /* the close may still be in flight */
        ASSERT_EQ(zh_run_capture(jj, 10000, out, sizeof out), 0);
        if (strstr(out, "\"away_ranks\":[0]"))
            break;
        usleep(20000);
    }
    ASSERT_CONTAINS(out, "\"job_id\":\"ctl-away\"");
    ASSERT_CONTAINS(out, "\"joined_ranks\":[]");
    ASSERT_CONTAINS(out, "\"tenant_label\":\"team-a\",\"away_ranks\":[0]");
    ASSERT_EQ(zh_run_capture(jh, 10000, out, sizeof out), 0);
    ASSERT_CONTAINS(out, "label team-a");
    ASSERT_CONTAINS(out, "away, may rejoin: 0");

    char missing[ZH_PATH_MAX + 16];
    snprintf(missing, sizeof missing, "%s/nope.sock", d.dir);
    char *nm[] = {ZPPCTL_BIN, "-s", missing, "status", NULL};
    ASSERT_EQ(zh_run_capture(nm, 10000, out, sizeof out), 3);
    char *bad[] = {ZPPCTL_BIN, "-s", d.socket, "no-such-command", NULL};
    ASSERT_EQ(zh_run_capture(bad, 10000, out, sizeof out), 2);
    char *badt[] = {ZPPCTL_BIN, "-s", d.socket, "-t", "x", "status", NULL};
    ASSERT_EQ(zh_run_capture(badt, 10000, out, sizeof out), 2);

    /* A socket the kernel accepts on but nobody serves. */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/mute.sock", d.dir);
    int mute = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT(mute >= 0);
    ASSERT_EQ(bind(mute, (struct sockaddr *)&sa, sizeof sa), 0);
    ASSERT_EQ(listen(mute, 8), 0);
    char *hm[] = {ZPPCTL_BIN, "-s", sa.sun_path, "-t", "1", "health", NULL};
    int64_t t0 = zh_now_ms();
    ASSERT_EQ(zh_run_capture(hm, 10000, out, sizeof out), 3);
    int64_t took = zh_now_ms() - t0;
    ASSERT_CONTAINS(out, "unreachable");
    ASSERT(took >= 900 && took < 5000);
    char *sm[] = {ZPPCTL_BIN, "-s", sa.sun_path, "--timeout", "1", "--json", "status", NULL};
    ASSERT_EQ(zh_run_capture(sm, 10000, out, sizeof out), 3);
    close(mute);
    printf("test_zppctl: a mute socket: exit 3 after %lld ms\n", (long long)took);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_zppctl: ok\n");
    return 0;
}
