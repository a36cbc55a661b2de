/*
 * test_job_call_fail_log.c — a client that fails calls as fast as it can
 * send them does not flood zppd's log. Found by an audit: a rank of a
 * world-1 job sending collectives whose input buffer id is not registered
 * got one "call failed" line at info per call. job.c now logs the first
 * lines of each second at info, the rest at debug, and once the second is
 * over (job_tick) one line with how many it left out. Every call is still
 * answered with its error and counted.
 *
 * The daemon state is this test's: one job of world 1, its rank a session
 * whose socket is one end of a socketpair (the test reads the replies from
 * the other). main.c's clock is faked here (main.c is not in zppd_core):
 * it moves only when the test says so. stderr, where zlog writes, is a
 * temporary file meanwhile.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "daemon.h"
#include "frame.h"
#include "hpz_store.h"
#include "job.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "stderr_capture.h"
#include "test.h"
#include "zpp.h"

static uint64_t fake_ms = 1000000;

uint64_t zppd_now_ms(void)
{
    return fake_ms;
}

uint64_t zppd_now_us(void)
{
    return fake_ms * 1000;
}

void zppd_maybe_exit(struct zppd *d)
{
    (void)d;
}

#define CALLS 200

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- the client's side ----------------------------------------------------------- */

/* Reads every reply frame waiting on fd; returns how many were errors
 * naming the unregistered buffer. */
static int drain_replies(int fd)
{
    static uint8_t buf[1 << 20];
    static size_t len;
    int errors = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1) {
            ssize_t n = read(fd, buf + len, sizeof buf - len);
            ASSERT(n > 0);
            len += (size_t)n;
        }
        size_t off = 0, body = 0;
        int rc = zpp_frame_peek(buf, len, sizeof buf, &off, &body);
        ASSERT(rc >= 0);
        if (rc == 0) {
            if (poll(&p, 1, 0) == 1)
                continue;
            return errors;
        }
        Zpp__Reply *rep = NULL;
        ASSERT_EQ(zpp_reply_unpack(buf + off, body, 1 << 20, &rep), 0);
        if (rep->code == ZPP_ENOENT && strstr(rep->message, "is not registered"))
            errors++;
        zpp_reply_free(rep);
        memmove(buf, buf + off + body, len - off - body);
        len -= off + body;
    }
}

static void submit_bad(struct session *s, uint64_t seq)
{
    Zpp__BufRef in = ZPP__BUF_REF__INIT, out = ZPP__BUF_REF__INIT;
    in.buffer_id = 999; /* never registered */
    out.buffer_id = 998;
    Zpp__Collective w = ZPP__COLLECTIVE__INIT;
    w.seq = seq;
    w.op = ZPP__OP__ALLGATHER;
    w.dtype = ZPP__DTYPE__FP32;
    w.count = 64;
    w.input = &in;
    w.output = &out;
    job_submit(s, 100 + seq, &w);
}

int main(void)
{
    static struct zppd d;
    static struct session s;
    static struct job j;
    static struct session *members[1];
    cfg_defaults(&d.cfg);
    d.be = &be_host_ops;
    d.backend_name = "host";
    d.store = hpz_store_new(&be_host_ops, NULL, 1 << 20, 0);
    ASSERT(d.store != NULL);
    zlog_setup(ZLOG_INFO, 0);

    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    s.d = &d;
    s.fd = sv[0];
    s.state = SESS_OPEN;
    s.refs = 1;
    s.poll_events = UV_READABLE; /* nothing queued stays: no poll to update */
    s.role = SESS_ROLE_RANK;
    s.uid = 1000;
    s.job = &j;
    s.rank = 0;
    d.sessions = &s;
    d.nsessions = 1;

    j.d = &d;
    snprintf(j.id, sizeof j.id, "flood");
    j.uid = 1000;
    j.world = j.nodes = j.local = j.nlocal = 1;
    members[0] = &s;
    j.members = members;
    j.njoined = 1;
    j.state = JOB_RUNNING;
    j.refs = 1;
    j.next_seq = 1;
    d.jobs = &j;
    d.njobs = 1;

    /* A burst of failing calls, all within one second of the fake clock. */
    capture_begin();
    int answered = 0;
    for (uint64_t seq = 1; seq <= CALLS; seq++) {
        submit_bad(&s, seq);
        answered += drain_replies(sv[1]);
    }
    char *burst = capture_end();
    int info = count(burst, "level=info mod=job msg=\"call failed\" job=flood");
    printf("%d calls failed: %d \"call failed\" lines at info\n", CALLS, info);
    ASSERT_EQ(answered, CALLS); /* every call still gets its error */
    ASSERT_EQ(j.next_seq, CALLS + 1);
    ASSERT_EQ(d.stats.calls_failed, CALLS);
    /* the first ones are logged, whole... */
    ASSERT_GE(info, 1);
    ASSERT_CONTAINS(burst, "job=flood seq=1 code=-");
    ASSERT_CONTAINS(burst, "buffer id 999 is not registered on this session\"");
    /* ...the rest are not, and nothing says so until the second is over */
    ASSERT_LE(info, 20);
    ASSERT_EQ(count(burst, "suppressed="), 0);
    free(burst);

    /* The loop's tick after the second: one summary with the count. */
    fake_ms += 1000;
    capture_begin();
    job_tick(&d);
    job_tick(&d);
    char *tick = capture_end();
    printf("tick: %s", tick);
    ASSERT_EQ(count(tick, "\n"), 1);
    ASSERT_CONTAINS(tick, "level=info mod=job msg=");
    ASSERT_CONTAINS(tick, "what=\"call failed\"");
    char want[64];
    snprintf(want, sizeof want, "suppressed=%d ", CALLS - info);
    ASSERT_CONTAINS(tick, want);
    free(tick);

    /* A failure in the next second is logged again. */
    capture_begin();
    submit_bad(&s, CALLS + 1);
    answered = drain_replies(sv[1]);
    char *again = capture_end();
    ASSERT_EQ(answered, 1);
    ASSERT_EQ(count(again, "level=info mod=job msg=\"call failed\" job=flood seq=201 "), 1);
    free(again);

    /* With log_level = debug the lines past the limit are still there. */
    zlog_setup(ZLOG_DEBUG, 0);
    capture_begin();
    for (uint64_t seq = CALLS + 2; seq < CALLS + 2 + 50; seq++) {
        submit_bad(&s, seq);
        drain_replies(sv[1]);
    }
    char *dbg = capture_end();
    zlog_setup(ZLOG_INFO, 0);
    ASSERT_EQ(count(dbg, "msg=\"call failed\" job=flood"), 50);
    ASSERT_GE(count(dbg, "level=debug mod=job msg=\"call failed\""), 30);
    free(dbg);

    d.jobs = NULL;
    close(sv[0]);
    close(sv[1]);
    hpz_store_free(d.store);
    metrics_free(&d);
    printf("test_job_call_fail_log: ok\n");
    return 0;
}
