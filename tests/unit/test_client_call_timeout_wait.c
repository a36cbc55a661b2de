/*
 * test_client_call_timeout_wait.c — a collective's own timeout_ms is longer
 * than the daemon's call_timeout_ms (the daemon honours it: job.c takes the
 * call's timeout_ms over call_timeout_ms). The client's reply wait is
 * call_timeout_ms + 60 s of silence, whatever the call asked for: here the
 * daemon says call_timeout_ms = 10, the call asks for one hour, and the
 * daemon answers after 63 s; the client must wait for it. Before session
 * 22 it gave up the connection at ~60 s (ZPP_ETIMEDOUT), which on a real
 * zppd is a member leaving with a call pending: the whole job was aborted.
 * Takes about 63 s (the margin of the client's wait is 60 s).
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "fake_daemon.h"
#include "zpp.h"

static void script(int fd)
{
    alarm(120);
    Zpp__Request *req = srv_read(fd, NULL);
    if (req->body_case != ZPP__REQUEST__BODY_HELLO)
        _exit(30);
    Zpp__Limits lim = ZPP__LIMITS__INIT;
    lim.max_frame = 1u << 20;
    lim.call_timeout_ms = 10; /* the config's minimum */
    Zpp__HelloReply hr = ZPP__HELLO_REPLY__INIT;
    hr.session_id = 1;
    hr.backend = (char *)"host";
    hr.limits = &lim;
    hr.nodes = 1;
    hr.local_size = 2;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req->req_id;
    rep.body_case = ZPP__REPLY__BODY_HELLO;
    rep.hello = &hr;
    srv_send(fd, &rep);
    Zpp__Request *b = srv_read(fd, NULL); /* the barrier, timeout_ms = 1 h */
    if (b->body_case != ZPP__REQUEST__BODY_COLLECTIVE || b->collective->timeout_ms != 3600000)
        _exit(31);
    sleep(63); /* a rank is late; the call's own timeout is far away */
    srv_coll_reply(fd, b->req_id, 1);
    sleep(1);
}

int main(void)
{
    unsetenv("ZPP_REPLY_TIMEOUT_MS");
    snprintf(sock_path, sizeof(sock_path), "/tmp/zpp-ctw-%d.sock", (int)getpid());
    pid_t pid = serve(script);
    zpp_conn *c;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_job_desc job = {.job_id = "j", .rank = 0, .world_size = 2, .node_count = 1};
    ASSERT_EQ(zpp_hello(c, &job, NULL), 0);
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_BARRIER, 0, 0);
    call.timeout_ms = 3600000;
    time_t t0 = time(NULL);
    int rc = zpp_collective(c, &call, NULL);
    printf("barrier(timeout_ms=1h): rc=%d (%s) after %lld s: %s\n", rc, zpp_err_name(rc),
           (long long)(time(NULL) - t0), zpp_last_error(c));
    ASSERT_EQ(rc, 0);
    zpp_close(c);
    reap(pid);
    return 0;
}
