/*
 * test_peer_hostile.c — requests another daemon may send that the field
 * checks of proto/peer_check.c let through but daemon/peer.c must still
 * survive: an Abort without a reason (protobuf-c then points the field at
 * its shared, read-only empty string).
 */
#ifndef ZPP_HAVE_GRPC
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "test_peer_hostile: built without gRPC: skipped\n");
    return 77;
}
#else

#include <stdlib.h>
#include <uv.h>

#include "peer.h"
#include "test.h"
#include "uv_wait.h"
#include "zpp.h"

static uv_loop_t loop;
static const struct peer_tenant ptenant = {1000, "team-a"};

static void run_until(const int *flag, uint64_t ms)
{
    uv_wait_until(&loop, flag, ms);
}

struct seen {
    int aborts;
    char reason[600];
    uint32_t from;
};

static int on_abort(void *ctx, const Zpp__Peer__AbortRequest *req, const struct peer_caller *from,
                    char *msg, size_t len)
{
    struct seen *s = ctx;
    (void)from;
    s->aborts++;
    snprintf(s->reason, sizeof(s->reason), "%s", req->reason ? req->reason : "(null)");
    s->from = req->from_node;
    snprintf(msg, len, "aborting");
    return 0;
}

static struct peer *start_peer(struct seen *s)
{
    static const struct peer_handlers h = {.on_abort = on_abort};
    struct peer_config cfg = {.listen = "127.0.0.1:0"};
    struct peer *p = NULL;
    char why[256] = "";
    int rc = peer_start(&loop, &cfg, &h, s, &p, why, sizeof(why));
    if (rc)
        fprintf(stderr, "peer_start: %s\n", why);
    ASSERT_EQ(rc, 0);
    return p;
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

/* An empty reason is not sent at all (proto3), so the receiver's unpacked
 * request points reason at protobuf-c's read-only "": the in-place
 * sanitising of srv_abort must not write there. The daemon keeps serving. */
static void test_abort_without_reason(void)
{
    struct seen s = {0};
    struct peer *a = start_peer(&s);
    struct peer *b = start_peer(&s);
    char aa[64];
    snprintf(aa, sizeof(aa), "127.0.0.1:%d", peer_port(a));
    struct res r = {0};
    ASSERT_EQ(peer_abort_send(b, aa, "job-1", &ptenant, "", 2, 0, abort_cb, &r), 0);
    run_until(&r.done, 3000);
    if (r.code)
        fprintf(stderr, "abort: %s\n", r.msg);
    ASSERT_EQ(r.code, 0);
    ASSERT_EQ(s.aborts, 1);
    ASSERT_STR_EQ(s.reason, "");
    ASSERT_EQ(s.from, 2);
    /* and the next one, with a reason, still works */
    struct res r2 = {0};
    ASSERT_EQ(peer_abort_send(b, aa, "job-1", &ptenant, "x\ty", 2, 0, abort_cb, &r2), 0);
    run_until(&r2.done, 3000);
    ASSERT_EQ(r2.code, 0);
    ASSERT_EQ(s.aborts, 2);
    ASSERT_STR_EQ(s.reason, "x?y");
    peer_stop(b);
    peer_stop(a);
    run_until(NULL, 1);
}

int main(void)
{
    ASSERT_EQ(uv_loop_init(&loop), 0);
    test_abort_without_reason();
    fprintf(stderr, "ok test_abort_without_reason\n");
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    return 0;
}

#endif
