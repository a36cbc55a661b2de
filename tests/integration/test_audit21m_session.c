/*
 * test_audit21m_session.c — a session's buffers and descriptors when it
 * ends while a call that uses them still runs (session.c, server.c):
 *  - both ranks submit a long qgZ; rank 1 then deregisters its input and
 *    output and closes its connection at once: the call keeps its own
 *    references (no unmapped memory read, no crash; under ASan no
 *    use-after-free), rank 0 gets an answer, the daemon goes on serving,
 *    holds no more descriptors than before and stops clean (LSan: nothing
 *    of the sessions leaked).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define BIG_COUNT (1u << 22)

static zh_daemon g_d;

static int rank_body(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, "dereg", (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    zpp_shm *in, *out;
    uint64_t in_id, out_id, req;
    if (zh_submit_long_qgz(c, BIG_COUNT, &in, &out, &in_id, &out_id, &req))
        return 1;
    if (rank == 1) {
        usleep(2000);
        /* The call is running on a worker with both buffers mapped. */
        zpp_deregister(c, in_id);
        zpp_deregister(c, out_id);
        zpp_close(c);
        zpp_shm_destroy(in);
        zpp_shm_destroy(out);
        return 0;
    }
    int rc = zpp_wait(c, req, NULL);
    printf("rank 0: call while rank 1 left: %s %s\n", zpp_err_name(rc),
           rc ? zpp_last_error(c) : "");
    zpp_close(c);
    zpp_shm_destroy(in);
    zpp_shm_destroy(out);
    return rc == 0 || rc == ZPP_EABORTED ? 0 : 1;
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    int before = zh_count_fds(g_d.pid);
    ASSERT(before > 0);
    for (int round = 0; round < 3; round++)
        ASSERT_EQ(zh_run_ranks(2, rank_body, NULL, 60000, NULL), 0);
    ASSERT(zh_daemon_alive(&g_d));
    int after = -1;
    for (int i = 0; i < 200; i++) {
        after = zh_count_fds(g_d.pid);
        if (after <= before)
            break;
        usleep(20000);
    }
    ASSERT_LE(after, before);
    zpp_conn *c;
    ASSERT_EQ(zh_connect_join(&g_d, "after", 0, 1, 1, &c), 0);
    ASSERT_EQ(zpp_barrier(c, NULL), 0);
    zpp_close(c);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_audit21m_session: ok\n");
    return 0;
}
