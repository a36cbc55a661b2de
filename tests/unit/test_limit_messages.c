/*
 * test_limit_messages.c — a refusal names the limit that really holds.
 * Strings on the wire must be strictly shorter than their ZPP_MAX_*
 * (frame.c str_ok: room for the NUL), so a job id is at most 127
 * characters, a tenant label 63 and an hpZ key 255 bytes (docs/protocol.md).
 * Found by an audit: job.c said "1..128" and took a 128-character id,
 * coll.c said "at most 256 bytes" and took a 256-byte key, though the
 * frame validator refuses both first.
 *
 * job_hello is called as session.c calls it, on a session whose socket is
 * one end of a socketpair; the test reads the error reply from the other.
 * Each Hello also asks for world size 0, which job_hello refuses right
 * after the names: a name taken by mistake shows as that other refusal.
 * main.c's clock is faked here (main.c is not in zppd_core).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "coll.h"
#include "daemon.h"
#include "frame.h"
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

/* Reads one reply frame from fd within 5 s. */
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
        ASSERT_EQ(poll(&p, 1, 5000), 1);
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        ASSERT(n > 0);
        len += (size_t)n;
    }
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zpp_reply_unpack(buf + off, body, 1 << 20, &rep), 0);
    return rep;
}

static struct zppd g_d;
static struct session g_s;
static int g_peer = -1;

static void setup(void)
{
    cfg_defaults(&g_d.cfg);
    g_d.be = &be_host_ops;
    g_d.backend_name = "host";
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    g_s.d = &g_d;
    g_s.fd = sv[0];
    g_s.state = SESS_OPEN;
    g_s.refs = 1;
    g_s.poll_events = UV_READABLE; /* nothing queued stays: no poll to update */
    g_d.sessions = &g_s;
    g_d.nsessions = 1;
    g_peer = sv[1];
}

/* Says Hello with this job id and label (world size 0); returns the
 * error reply's message (static) and checks its code is ZPP_EINVAL. */
static const char *hello(const char *job_id, const char *label)
{
    static char msg[512];
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = (char *)job_id;
    h.tenant_label = (char *)label;
    h.world_size = 0;
    h.node_count = 1;
    int ffd[2] = {-1, -1};
    job_hello(&g_s, 5, &h, ffd);
    Zpp__Reply *rep = read_reply(g_peer);
    ASSERT_EQ(rep->req_id, 5);
    snprintf(msg, sizeof msg, "%s", rep->message ? rep->message : "");
    int code = rep->code;
    zpp_reply_free(rep);
    if (code != ZPP_EINVAL && code != ZPP_ELIMIT) {
        fprintf(stderr, "hello: code %d: %s\n", code, msg);
        exit(1);
    }
    return msg;
}

static void test_a_job_id_is_at_most_127_characters_and_says_so(void)
{
    char id[ZPP_MAX_JOB_ID + 1];
    memset(id, 'j', ZPP_MAX_JOB_ID - 1);
    id[ZPP_MAX_JOB_ID - 1] = 0; /* 127: the name passes, world_size 0 does not */
    ASSERT_CONTAINS(hello(id, ""), "world_size 0");
    id[ZPP_MAX_JOB_ID - 1] = 'j';
    id[ZPP_MAX_JOB_ID] = 0; /* 128 */
    const char *m = hello(id, "");
    printf("128-character job id: %s\n", m);
    ASSERT_CONTAINS(m, "job_id must be 1..127 characters");
    ASSERT_CONTAINS(hello("", ""), "job_id must be 1..127 characters");
}

static void test_a_tenant_label_is_at_most_63_characters_and_says_so(void)
{
    char label[ZPP_MAX_LABEL + 1];
    memset(label, 't', ZPP_MAX_LABEL - 1);
    label[ZPP_MAX_LABEL - 1] = 0; /* 63 */
    ASSERT_CONTAINS(hello("job", label), "world_size 0");
    label[ZPP_MAX_LABEL - 1] = 't';
    label[ZPP_MAX_LABEL] = 0; /* 64 */
    const char *m = hello("job", label);
    printf("64-character tenant label: %s\n", m);
    ASSERT_CONTAINS(m, "tenant_label must be 1..63 characters");
    ASSERT_CONTAINS(hello("job", "a b"), "tenant_label must be 1..63 characters");
}

static void test_an_hpz_key_is_at_most_255_bytes_and_says_so(void)
{
    struct coll_args a;
    memset(&a, 0, sizeof a);
    a.op = ZPP_OP_HPZ_GATHER;
    a.dtype = a.out_dtype = ZPP_FP32;
    a.block = 256;
    a.stages = 1;
    a.count = 64;
    struct be_topo t = {.world = 1, .nodes = 1, .local = 1, .nslots = 1, .rank0 = 0};
    size_t in_b = 0, out_b = 0;
    char why[256] = "";
    memset(a.hpz_key, 'k', ZPP_MAX_KEY - 1); /* 255 */
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), 0);
    a.hpz_key[ZPP_MAX_KEY - 1] = 'k'; /* 256 */
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, why, sizeof why), ZPP_EINVAL);
    printf("256-byte hpZ key: %s\n", why);
    ASSERT_CONTAINS(why, "at most 255 bytes");
    /* no room for a message: still refused */
    ASSERT_EQ(coll_buffer_needs(&a, &t, &in_b, &out_b, NULL, 0), ZPP_EINVAL);
}

int main(void)
{
    setup();
    test_a_job_id_is_at_most_127_characters_and_says_so();
    test_a_tenant_label_is_at_most_63_characters_and_says_so();
    test_an_hpz_key_is_at_most_255_bytes_and_says_so();
    close(g_s.fd);
    close(g_peer);
    printf("test_limit_messages: ok\n");
    return 0;
}
