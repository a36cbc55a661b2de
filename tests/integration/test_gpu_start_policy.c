/*
 * test_gpu_start_policy.c — what a real zppd does when its GPUs will not open at
 * start (daemon/gpu_start.h, main.c's open_gpus), without a GPU: the test
 * switch ZPPD_TEST_GPU_OPEN hands the daemon the driver results of its
 * successive attempts.
 *  - no device (100) under backend = auto: the host backend, at once;
 *  - the MPS server not ready (807) twice, then no device: zppd logs that
 *    it waits, tries again, and only then serves the host backend;
 *  - not ready for longer than cuda_start_wait_ms: exit 1 naming the wait;
 *    with cuda_start_wait_ms = 0, exit 1 after one attempt;
 *  - a failing GPU (999, 2) under auto: exit 1 with the hint, never the
 *    host backend;
 *  - backend = cuda where no device is visible: exit 1;
 *  - under systemd (NOTIFY_SOCKET), the wait extends the unit's start
 *    timeout (EXTEND_TIMEOUT_USEC: the rest of the wait and 30 s) and says
 *    why in STATUS, so TimeoutStartSec= need not track cuda_start_wait_ms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

#define ENV "ZPPD_TEST_GPU_OPEN"

static char out[16384];

/* zppd -b BACKEND on a socket that is never reached, extra -o options. */
static int run_zppd(const char *backend, const char *opt1, const char *opt2, int timeout_ms)
{
    char *argv[] = {ZPPD_BIN,
                    "-b",
                    (char *)backend,
                    "-s",
                    "/nonexistent/zppd.sock",
                    "-o",
                    "peer_listen=",
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL};
    int n = 7;
    if (opt1) {
        argv[n++] = "-o";
        argv[n++] = (char *)opt1;
    }
    if (opt2) {
        argv[n++] = "-o";
        argv[n++] = (char *)opt2;
    }
    return zh_run_capture(argv, timeout_ms, out, sizeof out);
}

static void test_host_where_no_gpu(void)
{
    zh_daemon d;
    setenv(ENV, "100", 1);
    ASSERT_EQ(zh_daemon_start("backend = auto\npeer_listen =\n", &d), 0);
    ASSERT(zh_daemon_log_contains(&d, "no usable GPU: using the host backend"));
    ASSERT(zh_daemon_log_contains(&d, "backend=host"));
    ASSERT(!zh_daemon_log_contains(&d, "not ready"));
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

static void test_wait_then_host(void)
{
    zh_daemon d;
    setenv(ENV, "807,807,100", 1);
    int64_t t0 = zh_now_ms();
    ASSERT_EQ(zh_daemon_start("backend = auto\npeer_listen =\ncuda_start_wait_ms = 8000\n", &d), 0);
    int64_t took = zh_now_ms() - t0;
    ASSERT(zh_daemon_log_contains(&d, "the GPUs are not ready: waiting"));
    ASSERT(zh_daemon_log_contains(&d, "driver result 807"));
    ASSERT(zh_daemon_log_contains(&d, "stopped waiting for the GPUs"));
    ASSERT(zh_daemon_log_contains(&d, "backend=host"));
    ASSERT_GE(took, 900); /* two retries of 500 ms */
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

static void test_not_ready_too_long(void)
{
    setenv(ENV, "807", 1);
    int64_t t0 = zh_now_ms();
    ASSERT_EQ(run_zppd("auto", "cuda_start_wait_ms=1500", NULL, 20000), 1);
    int64_t took = zh_now_ms() - t0;
    ASSERT_CONTAINS(out, "the GPUs are not ready: waiting");
    ASSERT_CONTAINS(out, "the cuda backend cannot start");
    ASSERT_CONTAINS(out, "not ready within cuda_start_wait_ms");
    ASSERT(!strstr(out, "using the host backend"));
    ASSERT_GE(took, 900);
    ASSERT_LT(took, 15000);

    setenv(ENV, "805", 1); /* the MPS control daemon away */
    ASSERT_EQ(run_zppd("auto", "cuda_start_wait_ms=0", NULL, 20000), 1);
    ASSERT_CONTAINS(out, "not ready within cuda_start_wait_ms");
    ASSERT(!strstr(out, "waiting"));
}

static void test_failing_gpu(void)
{
    static const char *codes[] = {"999", "2", "214", "-3"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        setenv(ENV, codes[i], 1);
        ASSERT_EQ(run_zppd("auto", NULL, NULL, 20000), 1);
        ASSERT_CONTAINS(out, "the cuda backend cannot start");
        ASSERT_CONTAINS(out, "auto uses the host backend only where no GPU is visible");
        ASSERT(!strstr(out, "using the host backend"));
        ASSERT(!strstr(out, "waiting"));
    }
}

static void test_cuda_without_gpu(void)
{
    setenv(ENV, "100", 1);
    ASSERT_EQ(run_zppd("cuda", NULL, NULL, 20000), 1);
    ASSERT_CONTAINS(out, "the cuda backend cannot start");
    ASSERT_CONTAINS(out, "backend=cuda");
}

static void test_wait_extends_start_timeout(void)
{
    char dir[] = "/tmp/zpp-notify-XXXXXX", path[108];
    ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/notify", dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT(fd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {0, 1000};
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv(ENV, "807", 1);
    ASSERT_EQ(run_zppd("auto", "cuda_start_wait_ms=1500", NULL, 20000), 1);
    unsetenv("NOTIFY_SOCKET");
    char all[8192] = "", msg[1024];
    ssize_t n;
    while ((n = recv(fd, msg, sizeof msg - 1, 0)) > 0) {
        msg[n] = 0;
        strncat(all, msg, sizeof all - strlen(all) - 2);
        strcat(all, "\n");
    }
    printf("notify messages:\n%s", all);
    close(fd);
    unlink(path);
    rmdir(dir);
#ifndef ZPPD_HAS_SYSTEMD
    printf("zppd was built without libsystemd: notify messages not checked\n");
    return;
#endif
    ASSERT_CONTAINS(all, "STATUS=waiting for the GPUs");
    const char *ext = strstr(all, "EXTEND_TIMEOUT_USEC=");
    ASSERT(ext);
    unsigned long long us = strtoull(ext + strlen("EXTEND_TIMEOUT_USEC="), NULL, 10);
    ASSERT_GE(us, 30000000ull);          /* 30 s beyond the wait */
    ASSERT(us <= (1500ull + 30000) * 1000); /* no more than all of it */
}

int main(void)
{
    test_host_where_no_gpu();
    test_wait_then_host();
    test_not_ready_too_long();
    test_failing_gpu();
    test_cuda_without_gpu();
    test_wait_extends_start_timeout();
    unsetenv(ENV);
    printf("test_gpu_start_policy: ok\n");
    return 0;
}
