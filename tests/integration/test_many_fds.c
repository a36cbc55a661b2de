/*
 * test_many_fds.c — descriptors that arrive ahead of their frame: a
 * registration may carry up to SESS_MAX_FDS (256) of them, the VMM chunks
 * of a 5 GiB PyTorch tensor; more on one session closes it; and the daemon
 * as a whole holds at most half its descriptor limit of them, whatever
 * several clients send:
 *  - a RegisterBuffer of 256 descriptors (the host backend wants one: it is
 *    refused with ZPP_EINVAL naming nfds=256) leaves the session usable and
 *    the daemon holding none of them;
 *  - 257 descriptors on one session close it;
 *  - a daemon started with a descriptor limit of 600 (budget 300): one
 *    session holds 256 unclaimed descriptors, a second one that sends 64
 *    more is closed at the budget ("descriptor budget reached" in the log;
 *    /metrics: zppd_client_descriptors, _budget, _budget_closes_total),
 *    and once the first is gone a third registers normally;
 * and after each the daemon has the descriptors it had before.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/zpp_int.h"
#include "harness.h"
#include "proto/frame.h"
#include "tests/test.h"
#include "zpp.h"

static void registration_of_256(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    zpp_conn *c = NULL;
    ASSERT_EQ(zh_connect_join(&d, "many-fds", 0, 1, 1, &c), 0);
    int base = zh_steady_fds(d.pid);
    ASSERT(base > 0);

    zpp_shm *m;
    ASSERT_EQ(zpp_shm_create(4096, &m), 0);
    int fds[256];
    uint64_t sizes[256];
    for (int i = 0; i < 256; i++) {
        fds[i] = zpp_shm_fd(m);
        sizes[i] = 4096;
    }
    uint64_t id = 0;
    int rc = zpp__register_dev(c, fds, 256, sizes, NULL, 0, "host", 0, 4096, &id);
    ASSERT_EQ(rc, ZPP_EINVAL);
    ASSERT(strstr(zpp_last_error(c), "nfds=256") != NULL);
    /* the session goes on: one descriptor registers */
    ASSERT_EQ(zpp_register_shm(c, m, 0, 4096, &id), 0);
    ASSERT(zh_fds_back_to(&d, base));

    /* 257 on one session: closed, the daemon keeps none */
    int sock = zh_raw_connect(d.socket);
    ASSERT(sock >= 0);
    ASSERT(zh_fds_back_to(&d, base + 1));
    (void)zh_send_unclaimed(sock, zpp_shm_fd(m), 257);
    ASSERT_EQ(zh_raw_closed(sock, 3000), 1);
    close(sock);
    ASSERT(zh_fds_back_to(&d, base));
    ASSERT(zh_daemon_log_contains(&d, "too many descriptors"));

    zpp_close(c);
    zpp_shm_destroy(m);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

/* Runs in a child: the descriptor limit of 600 (soft and hard) goes to the
 * daemon it starts, and lowering a hard limit cannot be undone without
 * privilege. */
static void daemon_budget_child(void)
{
    struct rlimit low = {600, 600};
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    ASSERT(zh_daemon_log_contains(&d, "client_budget=300"));
    int base = zh_steady_fds(d.pid);

    zpp_shm *m;
    ASSERT_EQ(zpp_shm_create(4096, &m), 0);
    int a = zh_raw_connect(d.socket);
    ASSERT(a >= 0);
    ASSERT_EQ(zh_send_unclaimed(a, zpp_shm_fd(m), 256), 0);
    ASSERT(zh_fds_back_to(&d, base + 1 + 256));
    char m_out[32768];
    ASSERT_EQ(zh_zppctl(&d, m_out, sizeof m_out, "metrics", NULL, NULL), 0);
    ASSERT(strstr(m_out, "zppd_client_descriptors 256\n") != NULL);
    ASSERT(strstr(m_out, "zppd_client_descriptor_budget 300\n") != NULL);
    ASSERT(strstr(m_out, "zppd_descriptor_budget_closes_total 0\n") != NULL);
    int b = zh_raw_connect(d.socket);
    ASSERT(b >= 0);
    (void)zh_send_unclaimed(b, zpp_shm_fd(m), 64);
    ASSERT_EQ(zh_raw_closed(b, 3000), 1);
    close(b);
    ASSERT(zh_daemon_log_contains(&d, "descriptor budget reached"));
    ASSERT_EQ(zh_zppctl(&d, m_out, sizeof m_out, "metrics", NULL, NULL), 0);
    ASSERT(strstr(m_out, "zppd_descriptor_budget_closes_total 1\n") != NULL);
    ASSERT(zh_fds_back_to(&d, base + 1 + 256)); /* the first still holds its own */
    ASSERT(zh_daemon_alive(&d));
    close(a);
    ASSERT(zh_fds_back_to(&d, base));

    zpp_conn *c = NULL;
    ASSERT_EQ(zh_connect_join(&d, "budget", 0, 1, 1, &c), 0);
    uint64_t id = 0;
    ASSERT_EQ(zpp_register_shm(c, m, 0, 4096, &id), 0);
    zpp_close(c);
    zpp_shm_destroy(m);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

static void daemon_budget(void)
{
    struct rlimit cur;
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &cur), 0);
    if (cur.rlim_max < 600) {
        printf("SKIP budget: hard descriptor limit %llu\n", (unsigned long long)cur.rlim_max);
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        daemon_budget_child();
        _exit(0);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
    registration_of_256();
    daemon_budget();
    printf("2 passed, 0 failed\n");
    return 0;
}
