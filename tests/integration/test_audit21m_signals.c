/*
 * test_audit21m_signals.c — signals that reach zppd before its event loop
 * handles them: while it waits for GPUs that are not ready yet
 * (cuda_start_wait_ms; the test switch ZPPD_TEST_GPU_OPEN plays the
 * driver, main.c's open_gpus):
 *  - SIGHUP (a reload) does not kill it (SIGHUP's default action; systemd
 *    counts a death by SIGHUP as clean and would not restart it): it goes
 *    on starting, applies the reload once its loop runs, and serves;
 *  - SIGTERM ends the wait at once, with a clean exit.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static char g_dir[64], g_conf[128], g_log[128], g_sock[128];
static pid_t g_pid;

static void write_conf(const char *extra)
{
    FILE *f = fopen(g_conf, "w");
    ASSERT(f != NULL);
    fprintf(f, "socket = %s\nsocket_mode = 0600\nbackend = auto\npeer_listen =\n%s", g_sock, extra);
    ASSERT_EQ(fclose(f), 0);
}

static int log_contains(const char *needle)
{
    return zh_file_contains(g_log, needle);
}

static void dump_log(void)
{
    FILE *f = fopen(g_log, "r");
    if (!f)
        return;
    char line[1024];
    fprintf(stderr, "---- zppd log ----\n");
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
}

/* Starts zppd -c g_conf with ZPPD_TEST_GPU_OPEN=gpu_open and waits for its
 * "waiting" line. */
static void start_waiting(const char *gpu_open)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/zpp-a21m-XXXXXX");
    ASSERT(mkdtemp(g_dir) != NULL);
    snprintf(g_conf, sizeof g_conf, "%s/zppd.conf", g_dir);
    snprintf(g_log, sizeof g_log, "%s/zppd.log", g_dir);
    snprintf(g_sock, sizeof g_sock, "%s/zppd.sock", g_dir);
    write_conf("cuda_start_wait_ms = 20000\n");
    fflush(NULL);
    g_pid = fork();
    ASSERT(g_pid >= 0);
    if (g_pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(g_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("ZPPD_TEST_GPU_OPEN", gpu_open, 1);
        execl(ZPPD_BIN, ZPPD_BIN, "-c", g_conf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && !log_contains("the GPUs are not ready: waiting"); i++)
        usleep(10000);
    ASSERT(log_contains("the GPUs are not ready: waiting"));
}

/* Waits up to ms for zppd to exit; returns its wait status, -1 if alive. */
static int wait_exit(int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        int st;
        if (waitpid(g_pid, &st, WNOHANG) == g_pid)
            return st;
        usleep(10000);
    }
    return -1;
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ASSERT_EQ(system(cmd), 0);
}

static void hup_while_waiting(void)
{
    /* Not ready three times (about 1.5 s), then no GPU: the host backend. */
    start_waiting("807,807,807,100");
    write_conf("cuda_start_wait_ms = 20000\nlog_level = debug\n");
    ASSERT_EQ(kill(g_pid, SIGHUP), 0);
    int st = wait_exit(300);
    if (st != -1) {
        dump_log();
        fprintf(stderr, "SIGHUP while waiting for the GPUs: zppd ended (%s %d)\n",
                WIFSIGNALED(st) ? "signal" : "exit",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        exit(1);
    }
    int served = 0;
    for (int i = 0; i < 1000 && !served; i++) {
        zpp_conn *c;
        char buf[8192];
        if (zpp_connect(g_sock, &c) == 0) {
            served = zpp_admin_status_json(c, buf, sizeof buf) == 0;
            zpp_close(c);
        }
        if (!served)
            usleep(10000);
    }
    ASSERT(served);
    for (int i = 0; i < 300 && !log_contains("configuration reloaded"); i++)
        usleep(10000);
    ASSERT(log_contains("configuration reloaded"));
    ASSERT(log_contains("level=debug"));
    ASSERT_EQ(kill(g_pid, SIGTERM), 0);
    st = wait_exit(10000);
    ASSERT(st != -1);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        dump_log();
        ASSERT(0);
    }
    cleanup();
    printf("test_audit21m_signals: SIGHUP while waiting for the GPUs: reloaded, served\n");
}

static void term_while_waiting(void)
{
    start_waiting("807"); /* never ready within cuda_start_wait_ms */
    ASSERT_EQ(kill(g_pid, SIGTERM), 0);
    int st = wait_exit(2000);
    if (st == -1) {
        dump_log();
        kill(g_pid, SIGKILL);
        waitpid(g_pid, NULL, 0);
        fprintf(stderr, "SIGTERM did not end the wait for the GPUs\n");
        exit(1);
    }
    /* Exit 0, or a death by SIGTERM (systemd counts both as clean), but
     * not exit 1 ("cannot start": Restart=on-failure would start it again
     * while it is being stopped). */
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM)) {
        dump_log();
        fprintf(stderr, "SIGTERM while waiting for the GPUs: %s %d\n",
                WIFSIGNALED(st) ? "signal" : "exit",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        exit(1);
    }
    ASSERT(access(g_sock, F_OK) != 0);
    cleanup();
    printf("test_audit21m_signals: SIGTERM while waiting for the GPUs: ended at once\n");
}

int main(void)
{
    hup_while_waiting();
    term_while_waiting();
    printf("test_audit21m_signals: ok\n");
    return 0;
}
