/*
 * test_peer_channels.c — daemon/peer.c's channel cache over a long life. A
 * daemon keeps one gRPC channel per peer address it has called; it meets
 * many over its life (jobs come and go, nodes are replaced), so a full
 * cache must give up an idle channel rather than refuse every new peer
 * with ZPP_ELIMIT. Here one peer object calls another under more distinct
 * addresses than the cache holds (127.0.a.b all reach a listener on
 * 0.0.0.0), one call at a time: every call must be answered.
 */
#ifndef ZPP_HAVE_GRPC
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "test_peer_channels: built without gRPC: skipped\n");
    return 77;
}
#else

#include <stdlib.h>
#include <sys/resource.h>
#include <uv.h>

#include "peer.h"
#include "test.h"
#include "uv_wait.h"
#include "zpp.h"

#define CALLS 1100 /* more than peer.c's PEER_MAX_CHANNELS (1024) */

static uv_loop_t loop;
static const struct peer_tenant ptenant = {1000, "team-a"};

static void run_until(const int *flag, uint64_t ms)
{
    uv_wait_until(&loop, flag, ms);
}

static int aborts;

static int on_abort(void *ctx, const Zpp__Peer__AbortRequest *req, const struct peer_caller *from,
                    char *msg, size_t len)
{
    (void)ctx, (void)req, (void)from;
    aborts++;
    snprintf(msg, len, "noted");
    return 0;
}

struct res {
    int done, code;
    char msg[1400];
};

static void abort_cb(void *arg, int code, const char *msg)
{
    struct res *r = arg;
    r->done = 1;
    r->code = code;
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
}

int main(void)
{
    /* both ends of every cached connection live in this process */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4 * CALLS) {
        rl.rlim_cur = rl.rlim_max < 4 * CALLS ? rl.rlim_max : 4 * CALLS;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 4 * CALLS) {
            fprintf(stderr, "test_peer_channels: fewer than %d descriptors: skipped\n", 4 * CALLS);
            return 77;
        }
    }
    ASSERT_EQ(uv_loop_init(&loop), 0);
    static const struct peer_handlers h = {.on_abort = on_abort};
    struct peer_config sc = {.listen = "0.0.0.0:0"}, cc = {.listen = "127.0.0.1:0"};
    struct peer *srv = NULL, *cli = NULL;
    char why[256] = "";
    ASSERT_EQ(peer_start(&loop, &sc, &h, NULL, &srv, why, sizeof(why)), 0);
    ASSERT_EQ(peer_start(&loop, &cc, &h, NULL, &cli, why, sizeof(why)), 0);
    const int port = peer_port(srv);
    for (int i = 0; i < CALLS; i++) {
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.%d.%d:%d", 1 + i / 250, 1 + i % 250, port);
        struct res r = {0};
        int rc = peer_abort_send(cli, addr, "job-1", &ptenant, "gone", 1, 0, abort_cb, &r);
        if (rc)
            fprintf(stderr, "call %d to %s: not started (%d)\n", i, addr, rc);
        ASSERT_EQ(rc, 0);
        run_until(&r.done, 10000);
        if (!r.done || r.code)
            fprintf(stderr, "call %d to %s: %d %s\n", i, addr, r.code, r.msg);
        ASSERT_EQ(r.done, 1);
        ASSERT_EQ(r.code, 0);
    }
    ASSERT_EQ(aborts, CALLS);
    /* an address met at the start, its channel long given up, still works */
    char first[64];
    snprintf(first, sizeof(first), "127.0.1.1:%d", port);
    struct res r = {0};
    ASSERT_EQ(peer_abort_send(cli, first, "job-1", &ptenant, "again", 1, 0, abort_cb, &r), 0);
    run_until(&r.done, 10000);
    ASSERT_EQ(r.code, 0);
    peer_stop(cli);
    peer_stop(srv);
    run_until(NULL, 1);
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    fprintf(stderr, "ok %d calls to distinct addresses\n", CALLS + 1);
    return 0;
}

#endif
