/*
 * test_client_connect_timeout.c — zpp_connect to a zppd that does not
 * accept (its loop stuck) gives up after the reply timeout instead of
 * sleeping for ever: a listener with a full backlog that never accepts,
 * ZPP_REPLY_TIMEOUT_MS = 300, and zpp_connect must return ZPP_ETIMEDOUT
 * within a few seconds (before session 22 it blocked in connect until the
 * alarm below killed the test). zppctl -t relies on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tests/test.h"
#include "zpp.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
    char path[108];
    snprintf(path, sizeof path, "/tmp/zpp-cto-%d.sock", (int)getpid());
    unlink(path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT(l >= 0);
    ASSERT_EQ(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    ASSERT_EQ(listen(l, 0), 0);
    /* fill the backlog: non-blocking connects until one would block */
    int held[64], n = 0;
    for (; n < 64; n++) {
        held[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT(held[n] >= 0);
        if (connect(held[n], (struct sockaddr *)&sa, sizeof sa) != 0) {
            ASSERT(errno == EAGAIN || errno == EINPROGRESS);
            close(held[n]);
            break;
        }
    }
    ASSERT_LT(n, 64);
    printf("backlog full after %d connections\n", n);
    setenv("ZPP_REPLY_TIMEOUT_MS", "300", 1);
    alarm(20); /* the old client: blocked in connect for ever */
    zpp_conn *c = NULL;
    double t0 = now_s();
    int rc = zpp_connect(path, &c);
    double dt = now_s() - t0;
    printf("zpp_connect: %s after %.2f s\n", zpp_err_name(rc), dt);
    ASSERT_EQ(rc, ZPP_ETIMEDOUT);
    ASSERT(c == NULL);
    ASSERT(dt >= 0.2 && dt < 10.0);
    for (int i = 0; i < n; i++)
        close(held[i]);
    close(l);
    unlink(path);
    printf("test_client_connect_timeout: ok\n");
    return 0;
}
