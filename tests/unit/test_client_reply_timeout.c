/*
 * test_client_reply_timeout.c — a zppd that accepts and then never answers
 * (its loop stuck) must not hold a client's blocking wait for ever:
 *  - with ZPP_REPLY_TIMEOUT_MS=300 a blocking barrier on a scripted daemon
 *    that reads it and stays silent returns ZPP_ETIMEDOUT after ~300 ms,
 *    naming the variable, and the connection is given up (later calls fail
 *    at once);
 *  - replies that keep arriving restart the clock: a daemon that answers
 *    after 200 ms, twice, within a 300 ms timeout, is waited for.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "fake_daemon.h"
#include "zpp.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void script_silent(int fd)
{
    Zpp__Request *req = srv_read(fd, NULL); /* the barrier */
    (void)req;
    sleep(3); /* stuck: never answers */
}

static void script_slow(int fd)
{
    Zpp__Request *a = srv_read(fd, NULL);
    Zpp__Request *b = srv_read(fd, NULL);
    usleep(200000);
    srv_coll_reply(fd, a->req_id, 1);
    usleep(200000);
    srv_coll_reply(fd, b->req_id, 2);
    Zpp__Request *bye = srv_read(fd, NULL); /* the client is done */
    (void)bye;
}

int main(void)
{
    snprintf(sock_path, sizeof(sock_path), "/tmp/zpp-rt-%d.sock", (int)getpid());
    setenv("ZPP_REPLY_TIMEOUT_MS", "300", 1);

    pid_t pid = serve(script_silent);
    zpp_conn *c;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    int64_t t0 = now_ms();
    ASSERT_EQ(zpp_barrier(c, NULL), ZPP_ETIMEDOUT);
    int64_t took = now_ms() - t0;
    ASSERT_CONTAINS(zpp_last_error(c), "ZPP_REPLY_TIMEOUT_MS");
    ASSERT(took >= 250 && took < 2500);
    ASSERT(zpp_barrier(c, NULL) < 0); /* given up */
    zpp_close(c);
    reap(pid);
    printf("test_client_reply_timeout: silent daemon: ETIMEDOUT after %lld ms\n", (long long)took);

    pid = serve(script_slow);
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_coll bar;
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    uint64_t r1, r2;
    ASSERT_EQ(zpp_submit(c, &bar, &r1), 0);
    ASSERT_EQ(zpp_submit(c, &bar, &r2), 0);
    ASSERT_EQ(zpp_wait(c, r2, NULL), 0); /* 400 ms in all, 200 ms between bytes */
    ASSERT_EQ(zpp_wait(c, r1, NULL), 0);
    ASSERT_EQ(zpp_submit(c, &bar, &r1), 0); /* read by the script as its last */
    zpp_close(c);
    reap(pid);
    unlink(sock_path);
    printf("test_client_reply_timeout: ok\n");
    return 0;
}
