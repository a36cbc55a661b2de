/*
 * test_stop_pipelined.c — SIGTERM while ranks keep calls queued behind the
 * running one (zpp_submit pipelining, 4 deep): zppd lets the running call
 * finish, starts no queued one, ends those with ZPP_EABORTED "zppd is
 * shutting down" and exits 0 (docs/operations.md). Before session 22 every
 * finished call started the next queued one, so in-flight work never
 * reached zero: the ranks kept running calls after the signal until the
 * 30 s deadline made zppd exit 1, and they got ZPP_ECLOSED, no answer.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

#define ELEMS (1u << 21)

static zh_daemon g_d;

static int rank_pipe(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, "pipe", (uint32_t)rank, 2, 1, &c) != 0)
        return 1;
    zpp_shm *in, *out;
    uint64_t in_id, out_id;
    ASSERT_EQ(zpp_shm_create((size_t)ELEMS * 4, &in), 0);
    ASSERT_EQ(zpp_shm_create((size_t)ELEMS * 4, &out), 0);
    ASSERT_EQ(zpp_register_shm(c, in, 0, (size_t)ELEMS * 4, &in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, out, 0, (size_t)ELEMS * 4, &out_id), 0);
    zpp_coll q;
    zpp_coll_init(&q, ZPP_OP_QGZ_REDUCE_SCATTER, ZPP_FP32, ELEMS);
    q.bits = 4;
    q.flags = ZPP_FLAG_FORCE_QUANT;
    q.input.buffer_id = in_id;
    q.output.buffer_id = out_id;
    uint64_t req[4];
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(zpp_submit(c, &q, &req[k]), 0);
    int after = -1; /* calls that ended well after the signal */
    for (int k = 0;; k++) {
        int rc = zpp_wait(c, req[k % 4], NULL);
        if (rc) {
            printf("rank %d: %d calls ended well after SIGTERM, then %s: %s\n", rank, after,
                   zpp_err_name(rc), zpp_last_error(c));
            ASSERT_EQ(rc, ZPP_EABORTED);
            ASSERT_CONTAINS(zpp_last_error(c), "shutting down");
            ASSERT_LE(after, 4); /* the running one, and none started since */
            break;
        }
        if (after >= 0)
            after++;
        if (rank == 0 && k == 8 && after < 0) {
            ASSERT_EQ(kill(g_d.pid, SIGTERM), 0);
            after = 0;
        }
        if (rank == 1 && k == 8)
            after = 0; /* rank 0 signals at its call 8: counted from here */
        ASSERT_EQ(zpp_submit(c, &q, &req[k % 4]), 0);
    }
    zpp_close(c);
    zpp_shm_destroy(in);
    zpp_shm_destroy(out);
    return 0;
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    int codes[2];
    ASSERT_EQ(zh_run_ranks(2, rank_pipe, NULL, 60000, codes), 0);
    for (int i = 0; i < 2000 && zh_daemon_alive(&g_d); i++)
        usleep(10000);
    ASSERT(!zh_daemon_alive(&g_d));
    ASSERT(WIFEXITED(g_d.status));
    ASSERT_EQ(WEXITSTATUS(g_d.status), 0);
    ASSERT(zh_daemon_log_contains(&g_d, "in-flight work done"));
    printf("test_stop_pipelined: ok\n");
    return 0;
}
