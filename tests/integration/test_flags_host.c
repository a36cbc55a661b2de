/*
 * test_flags_host.c — a session on the client's flags (proto Hello.flags_*,
 * docs/cuda.md "Done flags") against the host backend, which speaks the
 * same protocol: the job layer's part of it, which a CUDA machine alone
 * would otherwise check.
 *
 * - The Hello is answered with flag_sync and no done events.
 * - A call that ran gets its value in its slot's done flag by the time its
 *   reply arrives.
 * - A call refused before it runs gets its done flag raised all the same
 *   (the client reuses a slot once its done flag has come up, so without it
 *   that slot would never be free again): seq outside the job's window,
 *   an unknown buffer.
 * - A call naming a slot the session does not have touches no flag.
 * - Values only move forward: a refused call with an older value leaves
 *   the flag where it is.
 * - The pipe's write end is closed once the session has closed, and the
 *   daemon keeps no descriptor.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

static uint64_t g_req = 1;

/* Sends a collective and returns its reply's code. */
static int call(int fd, Zpp__Collective *co)
{
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = ++g_req;
    req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
    req.collective = co;
    ASSERT_EQ(zh_raw_request(fd, &req, NULL, 0), 0);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->req_id, req.req_id);
    int code = rep->code;
    zpp_reply_free(rep);
    return code;
}

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    int fds_before = zh_steady_fds(d.pid);

    zpp_shm *flags;
    ASSERT_EQ(zpp_shm_create(4096, &flags), 0);
    volatile uint32_t *done = zpp_shm_ptr(flags);
    int p[2];
    ASSERT_EQ(pipe(p), 0);

    int fd = zh_raw_connect(d.socket);
    ASSERT(fd >= 0);
    int ffds[2] = {zpp_shm_fd(flags), p[1]};
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_flags_hello(fd, "flags-host", ffds, 2, 2, 4096, &rep), 0);
    close(p[1]); /* the daemon's copy is the only writer now */
    ASSERT_EQ(rep->code, 0);
    ASSERT_EQ(rep->hello->flag_sync, 1);
    ASSERT_EQ(rep->hello->n_done_events, 0);
    zpp_reply_free(rep);

    /* A call that runs: slot 1 (event_slot 1) gets 7. */
    Zpp__Collective co = ZPP__COLLECTIVE__INIT;
    co.op = ZPP__OP__BARRIER;
    co.seq = 1;
    co.event_slot = 1;
    co.flag_value = 7;
    ASSERT_EQ(call(fd, &co), 0);
    ASSERT_EQ(done[0], 7);

    /* Refused: seq outside the window. Slot 2 gets 9 all the same. */
    co.seq = 100000;
    co.event_slot = 2;
    co.flag_value = 9;
    ASSERT_EQ(call(fd, &co), ZPP_EINVAL);
    ASSERT_EQ(done[1], 9);

    /* Refused: an unknown buffer. Slot 3 gets 11. */
    Zpp__BufRef in = ZPP__BUF_REF__INIT, out = ZPP__BUF_REF__INIT;
    in.buffer_id = 77;
    out.buffer_id = 78;
    Zpp__Collective ag = ZPP__COLLECTIVE__INIT;
    ag.op = ZPP__OP__ALLGATHER;
    ag.dtype = ZPP__DTYPE__BF16;
    ag.count = 64;
    ag.seq = 2;
    ag.input = &in;
    ag.output = &out;
    ag.event_slot = 3;
    ag.flag_value = 11;
    int code = call(fd, &ag);
    ASSERT(code == ZPP_ENOENT || code == ZPP_EINVAL);
    ASSERT_EQ(done[2], 11);

    /* A slot the session does not have: refused, no flag touched. */
    co.seq = 2;
    co.event_slot = 5;
    co.flag_value = 13;
    ASSERT_EQ(call(fd, &co), ZPP_EINVAL);
    for (int i = 3; i < 64; i++)
        ASSERT_EQ(done[i], 0);

    /* An older value never lowers a flag. */
    co.seq = 100000;
    co.event_slot = 1;
    co.flag_value = 3;
    ASSERT_EQ(call(fd, &co), ZPP_EINVAL);
    ASSERT_EQ(done[0], 7);

    /* The next call on slot 1 runs and moves it on (seq 2 went to the
     * all-gather that failed). */
    co.seq = 3;
    co.flag_value = 15;
    ASSERT_EQ(call(fd, &co), 0);
    ASSERT_EQ(done[0], 15);

    /* The pipe stays open while the session lives, and ends with it. */
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    ASSERT_EQ(poll(&pf, 1, 200), 0);
    close(fd);
    char c;
    ASSERT_EQ(poll(&pf, 1, 5000), 1);
    ASSERT_EQ(read(p[0], &c, 1), 0);
    close(p[0]);
    zpp_shm_destroy(flags);
    ASSERT_EQ(zh_steady_fds(d.pid), fds_before);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_flags_host: ok\n");
    return 0;
}
