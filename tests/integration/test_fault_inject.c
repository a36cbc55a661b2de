/*
 * test_fault_inject.c — a sticky device error ends the daemon, loudly:
 * the host backend's test switch (fault_inject = sticky_error_after_calls:2)
 * makes the third transfer fail the way a sticky CUDA error would.
 *  - job f1 (2 ranks) runs two all-gathers; its third fails on every rank
 *    with ZPP_EBACKEND naming the sticky error;
 *  - job f2 has a call pending (rank 1 never submits it): rank 0 gets an
 *    error (ZPP_EABORTED, or ZPP_ECLOSED once the daemon is gone), not a
 *    hang;
 *  - zpp_check answers 0 while the device works, and after the fault an
 *    error (ZPP_EBACKEND naming the sticky error, or ZPP_ECLOSED once the
 *    daemon is gone), never 0;
 *  - zppd exits by itself with status 3 (EXIT_FATAL_DEVICE) within a few
 *    seconds, having logged why — systemd's Restart=on-failure takes over;
 *  - a bad fault_inject value is refused by --check-config, and the switch
 *    is refused with any backend but host.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 256u
#define HANG_LIMIT_S 60 /* a hang fails the test rather than ctest's timeout */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_fault_inject: a client hung after the fault\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(HANG_LIMIT_S);
    static char out[8192];

    char *bad[] = {ZPPD_BIN, "--check-config", "-o", "fault_inject=sometimes", NULL};
    ASSERT_EQ(zh_run_capture(bad, 10000, out, sizeof out), 1);
    ASSERT_CONTAINS(out, "sticky_error_after_calls:N");
    char *cuda[] = {ZPPD_BIN,
                    "-b",
                    "auto",
                    "-s",
                    "/nonexistent/zppd.sock",
                    "-o",
                    "fault_inject=sticky_error_after_calls:1",
                    NULL};
    ASSERT_EQ(zh_run_capture(cuda, 10000, out, sizeof out), 1);
    ASSERT_CONTAINS(out, "test switch of the host backend");

    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("fault_inject = sticky_error_after_calls:2\n", &d), 0);
    ASSERT(zh_daemon_log_contains(&d, "fault injection armed"));

    zpp_conn *f1[2], *f2[2];
    zpp_shm *in[2], *o[2];
    uint64_t in_id[2], out_id[2], req[2];
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(zh_connect_join(&d, "f1", (uint32_t)r, 2, 1, &f1[r]), 0);
        ASSERT_EQ(zh_connect_join(&d, "f2", (uint32_t)r, 2, 1, &f2[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &in[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &o[r]), 0);
        ASSERT_EQ(zpp_register_shm(f1[r], in[r], 0, COUNT * 4, &in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(f1[r], o[r], 0, COUNT * 4, &out_id[r]), 0);
    }
    /* f2: rank 0 waits in a barrier that rank 1 never joins. */
    zpp_coll bar;
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    uint64_t bar_req;
    ASSERT_EQ(zpp_submit(f2[0], &bar, &bar_req), 0);

    for (int call = 1; call <= 3; call++) {
        for (int r = 0; r < 2; r++) {
            zpp_coll ag;
            zpp_coll_init(&ag, ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
            ag.input = (zpp_bufref){in_id[r], 0};
            ag.output = (zpp_bufref){out_id[r], 0};
            ASSERT_EQ(zpp_submit(f1[r], &ag, &req[r]), 0);
        }
        for (int r = 0; r < 2; r++) {
            int rc = zpp_wait(f1[r], req[r], NULL);
            printf("f1 call %d rank %d: %s %s\n", call, r, zpp_err_name(rc),
                   rc ? zpp_last_error(f1[r]) : "");
            if (call < 3) {
                ASSERT_EQ(rc, 0);
            } else {
                ASSERT_EQ(rc, ZPP_EBACKEND);
                ASSERT_CONTAINS(zpp_last_error(f1[r]), "sticky device error");
            }
        }
        if (call == 2)
            for (int r = 0; r < 2; r++)
                ASSERT_EQ(zpp_check(f1[r]), 0);
    }
    int crc = zpp_check(f1[1]);
    printf("f1 rank 1 check after the fault: %s %s\n", zpp_err_name(crc), zpp_last_error(f1[1]));
    ASSERT(crc == ZPP_EBACKEND || crc == ZPP_ECLOSED);
    if (crc == ZPP_EBACKEND)
        ASSERT_CONTAINS(zpp_last_error(f1[1]), "sticky device error");
    int rc = zpp_wait(f2[0], bar_req, NULL);
    printf("f2 rank 0 barrier: %s %s\n", zpp_err_name(rc), zpp_last_error(f2[0]));
    ASSERT(rc == ZPP_EABORTED || rc == ZPP_ECLOSED);

    int64_t deadline = zh_now_ms() + 10000;
    while (zh_daemon_alive(&d) && zh_now_ms() < deadline)
        usleep(20000);
    ASSERT_EQ(zh_daemon_alive(&d), 0);
    ASSERT(WIFEXITED(d.status));
    ASSERT_EQ(WEXITSTATUS(d.status), 3);
    ASSERT(zh_daemon_log_contains(&d, "sticky device error: failing every job and exiting"));

    for (int r = 0; r < 2; r++) {
        zpp_close(f1[r]);
        zpp_close(f2[r]);
        zpp_shm_destroy(in[r]);
        zpp_shm_destroy(o[r]);
    }
    zh_daemon_kill(&d);
    printf("test_fault_inject: ok\n");
    return 0;
}
