/*
 * test_client_big_reply.c — libzpp takes every reply the daemon may send.
 * zppd packs an admin listing up to the protocol's 64 MiB whatever a
 * client's max_frame (server.c sess_send). Found by an audit: the client
 * refused frames over 16 MiB, so a jobs listing between the two sizes
 * killed zppctl's connection with ZPP_EPROTO. A scripted daemon (fake_daemon.h)
 * answers a JobsQuery with a listing of 24 MB, then one of about 60 MB whose
 * rank arrays unpack to 80 MiB (more than the client's fixed budget); the
 * client reads both, and the connection still carries a StatusQuery after
 * them. A frame announced past 64 MiB still ends the connection.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_daemon.h"
#include "frame.h"
#include "test.h"
#include "zpp.h"
#include "client/zpp_int.h"

/* What zppd packs replies under (server.c sess_send). */
#define DAEMON_REPLY_MAX (64u << 20)
#define RANKS (1u << 20) /* max_world_size's ceiling: 1-3 byte varints */

static uint32_t *g_ranks;

/* Sends a JobsReply of njobs jobs, each missing every rank of RANKS,
 * packed as the daemon packs it. */
static void send_listing(int fd, uint64_t req_id, size_t njobs)
{
    Zpp__JobInfo *infos = calloc(njobs, sizeof *infos);
    Zpp__JobInfo **ptrs = calloc(njobs, sizeof *ptrs);
    if (!infos || !ptrs)
        _exit(30);
    char ids[64][16];
    for (size_t i = 0; i < njobs && i < 64; i++) {
        zpp__job_info__init(&infos[i]);
        snprintf(ids[i], sizeof ids[i], "big-%zu", i);
        infos[i].job_id = ids[i];
        infos[i].world_size = RANKS;
        infos[i].state = "running";
        infos[i].oldest_pending_seq = 1;
        infos[i].n_missing_ranks = RANKS;
        infos[i].missing_ranks = g_ranks;
        ptrs[i] = &infos[i];
    }
    Zpp__JobsReply jr = ZPP__JOBS_REPLY__INIT;
    jr.n_jobs = njobs;
    jr.jobs = ptrs;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_JOBS;
    rep.jobs = &jr;
    uint8_t *buf;
    size_t len;
    if (zpp_reply_pack(&rep, DAEMON_REPLY_MAX, &buf, &len) < 0)
        _exit(31);
    if (len - ZPP_FRAME_HDR <= (16u << 20)) /* the sizes the old client took */
        _exit(32);
    write_all(fd, buf, len);
    free(buf);
    free(ptrs);
    free(infos);
}

static void send_status(int fd, uint64_t req_id)
{
    Zpp__StatusReply st = ZPP__STATUS_REPLY__INIT;
    st.daemon_version = "test";
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_STATUS;
    rep.status = &st;
    srv_send(fd, &rep);
}

static void script_big_listings(int fd)
{
    g_ranks = malloc(RANKS * sizeof *g_ranks);
    if (!g_ranks)
        _exit(33);
    for (uint32_t i = 0; i < RANKS; i++)
        g_ranks[i] = i;
    static const size_t sizes[] = {8, 20}; /* about 24 MB and 60 MB */
    for (int k = 0; k < 2; k++) {
        Zpp__Request *r = srv_read(fd, NULL);
        if (r->body_case != ZPP__REQUEST__BODY_JOBS)
            _exit(34);
        send_listing(fd, r->req_id, sizes[k]);
        zpp_request_free(r);
    }
    Zpp__Request *r = srv_read(fd, NULL);
    if (r->body_case != ZPP__REQUEST__BODY_STATUS)
        _exit(35);
    send_status(fd, r->req_id);
    zpp_request_free(r);
    free(g_ranks);
}

static void test_listings_up_to_the_daemons_maximum_arrive(void)
{
    pid_t pid = serve(script_big_listings);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    static const size_t sizes[] = {8, 20};
    for (int k = 0; k < 2; k++) {
        Zpp__Reply *rep = NULL;
        int rc = zpp__admin_query(c, ZPP__REQUEST__BODY_JOBS, &rep);
        if (rc)
            fprintf(stderr, "listing %d: %s: %s\n", k, zpp_err_name(rc), zpp_last_error(c));
        ASSERT_EQ(rc, 0);
        ASSERT_EQ(rep->jobs->n_jobs, sizes[k]);
        for (size_t i = 0; i < rep->jobs->n_jobs; i++) {
            const Zpp__JobInfo *j = rep->jobs->jobs[i];
            ASSERT_EQ(j->n_missing_ranks, RANKS);
            ASSERT_EQ(j->missing_ranks[0], 0);
            ASSERT_EQ(j->missing_ranks[RANKS - 1], RANKS - 1);
        }
        zpp_reply_free(rep);
    }
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zpp__admin_query(c, ZPP__REQUEST__BODY_STATUS, &rep), 0); /* still connected */
    ASSERT_STR_EQ(rep->status->daemon_version, "test");
    zpp_reply_free(rep);
    zpp_close(c);
    reap(pid);
}

static void script_frame_past_the_maximum(int fd)
{
    Zpp__Request *r = srv_read(fd, NULL);
    uint32_t n = DAEMON_REPLY_MAX + 1;
    uint8_t hdr[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    write_all(fd, hdr, 4);
    zpp_request_free(r);
}

static void test_a_frame_past_the_daemons_maximum_kills_the_connection(void)
{
    pid_t pid = serve(script_frame_past_the_maximum);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zpp__admin_query(c, ZPP__REQUEST__BODY_JOBS, &rep), ZPP_EPROTO);
    ASSERT_CONTAINS(zpp_last_error(c), "limit");
    zpp_close(c);
    reap(pid);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(sock_path, sizeof(sock_path), "/tmp/zpp-test-bigrep-%d.sock", (int)getpid());
    test_listings_up_to_the_daemons_maximum_arrive();
    test_a_frame_past_the_daemons_maximum_kills_the_connection();
    unlink(sock_path);
    printf("test_client_big_reply: ok\n");
    return 0;
}
