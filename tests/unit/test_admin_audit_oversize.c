/*
 * test_admin_audit_oversize.c — an admin listing that cannot be sent (its
 * reply packs past the protocol's 64 MiB frame) is answered with an error
 * reply naming the limit, not with silence that leaves zppctl waiting
 * forever.
 *
 * The daemon state is this test's: 24 jobs of 2^20 ranks (the most
 * max_world_size may be set to) whose oldest call no rank has submitted,
 * so each lists about 3 MB of missing ranks; one session, its socket one end of a
 * socketpair. main.c's clock is faked here (main.c is not in zppd_core).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "admin.h"
#include "daemon.h"
#include "frame.h"
#include "hpz_store.h"
#include "job.h"
#include "session.h"
#include "test.h"
#include "zpp.h"

uint64_t zppd_now_ms(void)
{
    return 1000;
}

uint64_t zppd_now_us(void)
{
    return 1000000;
}

void zppd_maybe_exit(struct zppd *d)
{
    (void)d;
}

#define NJOBS 24
#define WORLD (1u << 20)

/* Reads one reply frame from fd within 5 s. Returns it, or NULL. */
static Zpp__Reply *read_reply(int fd)
{
    static uint8_t buf[1 << 16];
    size_t len = 0, off = 0, body = 0;
    for (;;) {
        int rc = zpp_frame_peek(buf, len, sizeof buf, &off, &body);
        ASSERT(rc >= 0);
        if (rc == 1)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            return NULL;
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n <= 0)
            return NULL;
        len += (size_t)n;
    }
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zpp_reply_unpack(buf + off, body, 1 << 20, &rep), 0);
    return rep;
}

int main(void)
{
    static struct zppd d;
    static struct session s;
    static struct job jobs[NJOBS];
    d.be = &be_host_ops;
    d.backend_name = "host";
    d.store = hpz_store_new(&be_host_ops, NULL, 1 << 20, 0);
    ASSERT(d.store != NULL);

    struct session **members = calloc(WORLD, sizeof *members);
    struct call *call = calloc(1, sizeof *call);
    ASSERT(members && call);
    call->seq = 1;
    call->subs = calloc(WORLD, sizeof *call->subs); /* nobody submitted */
    ASSERT(call->subs != NULL);
    for (int i = 0; i < NJOBS; i++) {
        struct job *j = &jobs[i];
        j->d = &d;
        snprintf(j->id, sizeof j->id, "big-%d", i);
        j->world = WORLD;
        j->nodes = 1;
        j->local = WORLD;
        j->nlocal = WORLD;
        j->members = members;
        j->state = JOB_FORMING;
        j->calls = call;
        j->next = i + 1 < NJOBS ? &jobs[i + 1] : NULL;
    }
    d.jobs = &jobs[0];
    d.njobs = NJOBS;

    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    s.d = &d;
    s.fd = sv[0];
    s.state = SESS_OPEN;
    s.poll_events = UV_READABLE; /* nothing queued stays: no poll to update */
    d.sessions = &s;
    d.nsessions = 1;

    admin_jobs(&s, 7);
    Zpp__Reply *rep = read_reply(sv[1]);
    if (!rep) {
        fprintf(stderr, "test_admin_audit_oversize: no reply to a listing too large to send\n");
        return 1;
    }
    printf("reply: code %d, %s\n", rep->code, rep->message);
    ASSERT_EQ(rep->req_id, 7);
    ASSERT_EQ(rep->code, ZPP_ELIMIT);
    ASSERT_CONTAINS(rep->message, "64 MiB");
    zpp_reply_free(rep);

    close(sv[0]);
    close(sv[1]);
    free(call->subs);
    free(call);
    free(members);
    hpz_store_free(d.store);
    printf("test_admin_audit_oversize: ok\n");
    return 0;
}
