/*
 * test_client_conn.c — libzpp's connection against a scripted fake daemon
 * (a forked child speaking the framing of proto/frame.c), so no zppd is
 * needed: connect errors, Hello, replies out of order matched by req_id,
 * zpp_test before the reply, the memfd riding SCM_RIGHTS, the daemon's
 * message as the last error, sequence numbers, admin JSON escaping, a
 * socket the daemon closes, and the Goodbye a rank says when it closes on
 * purpose (zpp_close, a normal exit) but not when it dies (_exit) or from a
 * forked child that inherited the socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "test.h"
#include "zpp.h"

#include "fake_daemon.h"

/* ---- scripts ---------------------------------------------------------------- */

static void script_accept_only(int fd)
{
    (void)fd;
}

static void script_hello(int fd)
{
    Zpp__Request *req = srv_read(fd, NULL);
    if (req->body_case != ZPP__REQUEST__BODY_HELLO || strcmp(req->hello->job_id, "j1") != 0 ||
        req->hello->rank != 1 || req->hello->world_size != 2 || req->hello->role != 0 ||
        req->hello->pid == 0)
        _exit(30);
    Zpp__Limits lim = ZPP__LIMITS__INIT;
    lim.max_frame = 4096;
    lim.max_buffers = 8;
    Zpp__HelloReply hr = ZPP__HELLO_REPLY__INIT;
    hr.session_id = 77;
    hr.daemon_version = (char *)"0.1.0-a-very-long-version-string-that-gets-truncated";
    hr.backend = (char *)"host";
    hr.limits = &lim;
    hr.nodes = 1;
    hr.local_size = 2;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req->req_id;
    rep.body_case = ZPP__REPLY__BODY_HELLO;
    rep.hello = &hr;
    srv_send(fd, &rep);
    zpp_request_free(req);
    /* The client now keeps requests under the daemon's 4096-byte frame. */
}

static void test_hello_fills_info_then_daemon_close_is_eclosed(void)
{
    pid_t pid = serve(script_hello);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    ASSERT_GE(zpp_fd(c), 0);
    zpp_job_desc job = {
        .job_id = "j1", .rank = 1, .world_size = 2, .local_rank = 1, .node_count = 1};
    zpp_hello_info info;
    ASSERT_EQ(zpp_hello(c, &job, &info), 0);
    ASSERT_EQ(info.session_id, 77);
    ASSERT_STR_EQ(info.backend, "host");
    ASSERT_EQ(strlen(info.daemon_version), sizeof(info.daemon_version) - 1);
    ASSERT_EQ(info.max_frame, 4096);
    ASSERT_EQ(info.max_buffers, 8);
    ASSERT_EQ(info.local_size, 2);
    reap(pid); /* the fake daemon has closed its end */
    ASSERT_EQ(zpp_barrier(c, NULL), ZPP_ECLOSED);
    ASSERT_CONTAINS(zpp_last_error(c), "closed");
    ASSERT_EQ(zpp_barrier(c, NULL), ZPP_ECLOSED); /* stays dead */
    zpp_close(c);
}

static void test_hello_refuses_bad_job_locally(void)
{
    pid_t pid = serve(script_hello);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_job_desc job = {.job_id = "j1", .rank = 2, .world_size = 2, .node_count = 1};
    zpp_hello_info info = {.session_id = 5};
    ASSERT_EQ(zpp_hello(c, &job, &info), ZPP_EINVAL);
    ASSERT_CONTAINS(zpp_last_error(c), "hello.rank");
    ASSERT_EQ(info.session_id, 5); /* untouched */
    job.rank = 1;
    job.local_rank = 1;
    ASSERT_EQ(zpp_hello(c, &job, NULL), 0);
    zpp_close(c);
    reap(pid);
}

static void script_out_of_order(int fd)
{
    Zpp__Request *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = srv_read(fd, NULL);
        if (r[i]->body_case != ZPP__REQUEST__BODY_COLLECTIVE)
            _exit(31);
        if (r[i]->collective->seq != (uint64_t)i + 1)
            _exit(32);
    }
    /* Unsolicited noise first: an unknown req_id is dropped. */
    srv_coll_reply(fd, 999, 999);
    srv_coll_reply(fd, r[2]->req_id, 3);
    srv_coll_reply(fd, r[1]->req_id, 2);
    /* The client waits for r[1], then tests r[0]: nothing yet. Then r[0]. */
    Zpp__Request *ping = srv_read(fd, NULL); /* a barrier: sync point */
    if (ping->collective->op != ZPP__OP__BARRIER || ping->collective->seq != 10)
        _exit(33);
    srv_coll_reply(fd, r[0]->req_id, 1);
    srv_coll_reply(fd, ping->req_id, 10);
    Zpp__Request *next = srv_read(fd, NULL);
    if (next->collective->seq != 11)
        _exit(34);
    srv_coll_reply(fd, next->req_id, 11);
    for (int i = 0; i < 3; i++)
        zpp_request_free(r[i]);
    zpp_request_free(ping);
    zpp_request_free(next);
}

static void test_replies_out_of_order_are_matched_by_req_id(void)
{
    pid_t pid = serve(script_out_of_order);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    uint64_t id[3];
    for (int i = 0; i < 3; i++)
        submit_ag(c, &id[i]);
    zpp_result res;
    ASSERT_EQ(zpp_wait(c, id[1], &res), 0);
    ASSERT_EQ(res.seq, 2);
    ASSERT_EQ(res.algo, ZPP_ALGO_AG_EXACT);
    ASSERT_EQ(res.logical_bytes, 200);
    ASSERT_EQ(zpp_test(c, id[0], &res), ZPP_EBUSY);
    ASSERT_EQ(zpp_test(c, id[2], &res), 0); /* stashed while waiting for id[1] */
    ASSERT_EQ(res.seq, 3);
    ASSERT_EQ(zpp_wait(c, id[2], &res), ZPP_ENOENT); /* already returned */
    ASSERT_CONTAINS(zpp_last_error(c), "not outstanding");
    zpp_coll bar;
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    bar.seq = 10; /* explicit: the next automatic one is 11 */
    ASSERT_EQ(zpp_collective(c, &bar, &res), 0);
    ASSERT_EQ(res.seq, 10);
    ASSERT_EQ(zpp_wait(c, id[0], &res), 0); /* arrived before the barrier's */
    ASSERT_EQ(res.seq, 1);
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    ASSERT_EQ(res.seq, 11);
    zpp_close(c);
    reap(pid);
}

/* A faulty daemon answers one request three times while the client waits
 * for another: the client keeps one answer, and a wait on the id once it
 * has been returned is ENOENT, not a stale duplicate. */
static void script_duplicates(int fd)
{
    Zpp__Request *r[2];
    for (int i = 0; i < 2; i++)
        r[i] = srv_read(fd, NULL);
    for (int k = 0; k < 3; k++)
        srv_coll_reply(fd, r[1]->req_id, 2);
    srv_coll_reply(fd, r[0]->req_id, 1);
    Zpp__Request *bye = srv_read(fd, NULL); /* a barrier: the client is done */
    srv_coll_reply(fd, bye->req_id, 3);
    for (int i = 0; i < 2; i++)
        zpp_request_free(r[i]);
    zpp_request_free(bye);
}

static void test_duplicate_replies_are_kept_once(void)
{
    pid_t pid = serve(script_duplicates);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    uint64_t id[2];
    for (int i = 0; i < 2; i++)
        submit_ag(c, &id[i]);
    zpp_result res;
    ASSERT_EQ(zpp_wait(c, id[0], &res), 0);
    ASSERT_EQ(res.seq, 1);
    ASSERT_EQ(zpp_wait(c, id[1], &res), 0);
    ASSERT_EQ(res.seq, 2);
    ASSERT_EQ(zpp_wait(c, id[1], &res), ZPP_ENOENT);
    ASSERT_EQ(zpp_barrier(c, &res), 0);
    ASSERT_EQ(res.seq, 3);
    zpp_close(c);
    reap(pid);
}

static void script_register_and_errors(int fd)
{
    int passed = -1;
    Zpp__Request *req = srv_read(fd, &passed);
    if (req->body_case != ZPP__REQUEST__BODY_REGISTER_BUFFER || passed < 0 ||
        req->register_buffer->nfds != 1 || req->register_buffer->offset != 4096 ||
        req->register_buffer->length != 4096)
        _exit(40);
    struct stat st;
    if (fstat(passed, &st) != 0 || st.st_size != 8192)
        _exit(41);
    if (fcntl(passed, F_GET_SEALS) < 0 || ftruncate(passed, 1) == 0)
        _exit(42);
    close(passed);
    Zpp__RegisterReply rr = ZPP__REGISTER_REPLY__INIT;
    rr.buffer_id = 5;
    rr.length = 4096;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req->req_id;
    rep.body_case = ZPP__REPLY__BODY_REGISTER_BUFFER;
    rep.register_buffer = &rr;
    srv_send(fd, &rep);
    zpp_request_free(req);

    req = srv_read(fd, &passed);
    if (passed >= 0 || req->body_case != ZPP__REQUEST__BODY_COLLECTIVE)
        _exit(43);
    Zpp__Reply err = ZPP__REPLY__INIT;
    err.req_id = req->req_id;
    err.code = ZPP_EMISMATCH;
    err.message = (char *)"call 1: rank 3 sent count 999, rank 0 sent 1000";
    srv_send(fd, &err);
    zpp_request_free(req);

    req = srv_read(fd, NULL);
    if (req->body_case != ZPP__REQUEST__BODY_DEREGISTER_BUFFER ||
        req->deregister_buffer->buffer_id != 5)
        _exit(44);
    Zpp__Reply ok = ZPP__REPLY__INIT;
    ok.req_id = req->req_id;
    srv_send(fd, &ok);
    zpp_request_free(req);

    /* Last word before closing: a req_id 0 error. */
    req = srv_read(fd, NULL);
    Zpp__Reply bye = ZPP__REPLY__INIT;
    bye.code = ZPP_EPROTO;
    bye.message = (char *)"Protocol error: closing";
    srv_send(fd, &bye);
    zpp_request_free(req);
}

static void test_register_passes_memfd_and_errors_carry_message(void)
{
    pid_t pid = serve(script_register_and_errors);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_shm *s = NULL;
    ASSERT_EQ(zpp_shm_create(8192, &s), 0);
    uint64_t bid = 0;
    ASSERT_EQ(zpp_register_shm(c, s, 4096, 8192, &bid), ZPP_ERANGE); /* local check */
    ASSERT_EQ(bid, 0);
    ASSERT_EQ(zpp_register_fd(c, 0, 0, 1, &bid), ZPP_EINVAL); /* stdin: not a sealed memfd */
    ASSERT_CONTAINS(zpp_last_error(c), "sealed");
    ASSERT_EQ(zpp_register_shm(c, s, 4096, 4096, &bid), 0);
    ASSERT_EQ(bid, 5);
    zpp_bufref in = {5, 0}, out = {5, 1024};
    zpp_result res = {.seq = 1234};
    ASSERT_EQ(zpp_allgather(c, in, out, 1000, ZPP_FP32, &res), ZPP_EMISMATCH);
    ASSERT_STR_EQ(zpp_last_error(c), "call 1: rank 3 sent count 999, rank 0 sent 1000");
    ASSERT_EQ(res.seq, 1234); /* untouched */
    ASSERT_EQ(zpp_deregister(c, 5), 0);
    ASSERT_EQ(zpp_barrier(c, NULL), ZPP_ECLOSED);
    ASSERT_CONTAINS(zpp_last_error(c), "Protocol error: closing");
    zpp_close(c);
    zpp_shm_destroy(s);
    reap(pid);
}

static void script_admin(int fd)
{
    uint32_t joined[] = {0, 1, 2, 3};
    uint32_t missing[] = {1, 3};
    Zpp__CallRecord rec = ZPP__CALL_RECORD__INIT;
    rec.seq = 7;
    rec.op = ZPP__OP__QGZ_REDUCE_SCATTER;
    rec.bytes = 1 << 20;
    rec.state = (char *)"pending";
    rec.message = (char *)"tab\there";
    Zpp__CallRecord *recs[] = {&rec};
    Zpp__JobInfo job = ZPP__JOB_INFO__INIT;
    job.job_id = (char *)"we\"ird\\job\n\x01\xff\xc3\xa9";
    job.tenant_uid = 1000;
    job.world_size = 4;
    job.nodes = 2;
    job.n_joined_ranks = 4;
    job.joined_ranks = joined;
    job.state = (char *)"running";
    job.oldest_pending_seq = 7;
    job.n_missing_ranks = 2;
    job.missing_ranks = missing;
    job.n_recent = 1;
    job.recent = recs;
    Zpp__JobInfo *jobs[] = {&job};
    Zpp__JobsReply jr = ZPP__JOBS_REPLY__INIT;
    jr.n_jobs = 1;
    jr.jobs = jobs;
    for (int i = 0; i < 2; i++) {
        Zpp__Request *req = srv_read(fd, NULL);
        if (req->body_case != ZPP__REQUEST__BODY_JOBS)
            _exit(50);
        Zpp__Reply rep = ZPP__REPLY__INIT;
        rep.req_id = req->req_id;
        rep.body_case = ZPP__REPLY__BODY_JOBS;
        rep.jobs = &jr;
        srv_send(fd, &rep);
        zpp_request_free(req);
    }
    Zpp__Request *req = srv_read(fd, NULL);
    if (req->body_case != ZPP__REQUEST__BODY_STATUS)
        _exit(51);
    Zpp__StatusReply st = ZPP__STATUS_REPLY__INIT;
    st.daemon_version = (char *)"0.1.0";
    st.backend = (char *)"host";
    st.sessions = 4;
    st.draining = 1;
    Zpp__GpuInfo gpu = ZPP__GPU_INFO__INIT;
    gpu.uuid = (char *)"GPU-00000000-0000-0000-0000-000000000001";
    gpu.name = (char *)"NVIDIA \"H200\"\n";
    gpu.mps = 1;
    Zpp__GpuInfo *gpus[] = {&gpu};
    st.n_gpus = 1;
    st.gpus = gpus;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req->req_id;
    rep.body_case = ZPP__REPLY__BODY_STATUS;
    rep.status = &st;
    srv_send(fd, &rep);
    zpp_request_free(req);
}

static void test_admin_json_escapes_strings(void)
{
    pid_t pid = serve(script_admin);
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    char buf[4096];
    ASSERT_EQ(zpp_admin_jobs_json(c, buf, sizeof(buf)), 0);
    ASSERT_CONTAINS(buf, "\"job_id\":\"we\\\"ird\\\\job\\n\\u0001\\ufffd\xc3\xa9\"");
    ASSERT_CONTAINS(buf, "\"joined_ranks\":[0,1,2,3]");
    ASSERT_CONTAINS(buf, "\"missing_ranks\":[1,3]");
    ASSERT_CONTAINS(buf, "\"op\":\"qgz_reduce_scatter\"");
    ASSERT_CONTAINS(buf, "\"message\":\"tab\\there\"");
    char small[16] = "untouched";
    ASSERT_EQ(zpp_admin_jobs_json(c, small, sizeof(small)), ZPP_ERANGE);
    ASSERT_STR_EQ(small, "untouched");
    ASSERT_EQ(zpp_admin_status_json(c, buf, sizeof(buf)), 0);
    ASSERT_CONTAINS(buf, "\"sessions\":4");
    ASSERT_CONTAINS(buf, "\"draining\":true");
    /* the GPU's name: which device a saved status is from */
    ASSERT_CONTAINS(buf, "\"name\":\"NVIDIA \\\"H200\\\"\\n\"");
    ASSERT_CONTAINS(buf, "\"mps\":true");
    ASSERT_EQ(buf[0], '{');
    ASSERT_EQ(buf[strlen(buf) - 1], '}');
    zpp_close(c);
    reap(pid);
}

static void test_connect_errors(void)
{
    zpp_conn *c = (zpp_conn *)0x1;
    char missing[160];
    snprintf(missing, sizeof(missing), "/tmp/zpp-test-missing-%d/zppd.sock", (int)getpid());
    errno = 0;
    ASSERT_EQ(zpp_connect(missing, &c), ZPP_ENOENT);
    ASSERT_EQ(errno, ENOENT);
    ASSERT_EQ((uintptr_t)c, 1); /* untouched */
    char longp[200];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = 0;
    ASSERT_EQ(zpp_connect(longp, &c), ZPP_EINVAL);
    ASSERT_EQ(zpp_connect(sock_path, NULL), ZPP_EINVAL);
    /* NULL path: $ZPP_SOCKET. */
    setenv("ZPP_SOCKET", missing, 1);
    ASSERT_EQ(zpp_connect(NULL, &c), ZPP_ENOENT);
    pid_t pid = serve(script_accept_only);
    setenv("ZPP_SOCKET", sock_path, 1);
    ASSERT_EQ(zpp_connect(NULL, &c), 0);
    zpp_close(c);
    reap(pid);
    unsetenv("ZPP_SOCKET");
    /* NULL handles. */
    zpp_close(NULL);
    ASSERT_EQ(zpp_fd(NULL), -1);
    ASSERT(zpp_last_error(NULL) != NULL);
    ASSERT_EQ(zpp_barrier(NULL, NULL), ZPP_EINVAL);
}

/* ---- Goodbye ------------------------------------------------------------------ */

/* Hello (which must promise a Goodbye), then: want_goodbye 1: one Goodbye,
 * then the end of the stream; 0: the end of the stream at once. */
static void script_goodbye_common(int fd, int want_goodbye)
{
    Zpp__Request *req = srv_read(fd, NULL);
    if (req->body_case != ZPP__REQUEST__BODY_HELLO || !req->hello->says_goodbye)
        _exit(40);
    Zpp__HelloReply hr = ZPP__HELLO_REPLY__INIT;
    hr.backend = (char *)"host";
    srv_hello_reply(fd, req, &hr);
    zpp_request_free(req);
    if (want_goodbye) {
        req = srv_read(fd, NULL);
        if (req->body_case != ZPP__REQUEST__BODY_GOODBYE)
            _exit(41);
        zpp_request_free(req);
    }
    char b;
    ssize_t n;
    while ((n = read(fd, &b, 1)) < 0 && errno == EINTR)
        ;
    if (n != 0) /* a second Goodbye (from a child), or anything else */
        _exit(42);
}

static void script_goodbye(int fd)
{
    script_goodbye_common(fd, 1);
}

static void script_no_goodbye(int fd)
{
    script_goodbye_common(fd, 0);
}

static zpp_conn *hello_rank(void)
{
    zpp_conn *c = NULL;
    ASSERT_EQ(zpp_connect(sock_path, &c), 0);
    zpp_job_desc job = {
        .job_id = "j1", .rank = 0, .world_size = 2, .local_rank = 0, .node_count = 1};
    ASSERT_EQ(zpp_hello(c, &job, NULL), 0);
    return c;
}

/* The clients of test_goodbye, each run in a child process. */
static zpp_conn *g_inherited; /* said Hello in the parent */

static void close_inherited_then_exit(void)
{
    zpp_close(g_inherited);
    exit(0);
}

static void hello_then_exit(void)
{
    (void)hello_rank();
    exit(0);
}

static void hello_then_die(void)
{
    (void)hello_rank();
    _exit(0);
}

/* Forks a client that runs fn (which ends the process) against a fake
 * daemon running script, after the parent said Hello itself when
 * parent_joins (then closes that connection once the child is gone); both
 * must end well. */
static void goodbye_case(void (*script)(int fd), void (*fn)(void), int parent_joins)
{
    pid_t pid = serve(script);
    if (parent_joins)
        g_inherited = hello_rank();
    pid_t kid = fork();
    ASSERT_GE(kid, 0);
    if (kid == 0)
        fn();
    int st = 0;
    ASSERT_EQ(waitpid(kid, &st, 0), kid);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (g_inherited) { /* the parent's own Goodbye */
        zpp_close(g_inherited);
        g_inherited = NULL;
    }
    reap(pid);
}

static void test_goodbye(void)
{
    /* zpp_close says it; a forked child closing (and exiting with) the
     * inherited connection does not: the script wants exactly one */
    goodbye_case(script_goodbye, close_inherited_then_exit, 1);
    /* a normal exit with the connection open: the at-exit handler says it */
    goodbye_case(script_goodbye, hello_then_exit, 0);
    /* a process that dies (_exit here; SIGKILL alike) says nothing */
    goodbye_case(script_no_goodbye, hello_then_die, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(sock_path, sizeof(sock_path), "/tmp/zpp-test-conn-%d.sock", (int)getpid());
    test_connect_errors();
    test_hello_fills_info_then_daemon_close_is_eclosed();
    test_hello_refuses_bad_job_locally();
    test_replies_out_of_order_are_matched_by_req_id();
    test_duplicate_replies_are_kept_once();
    test_register_passes_memfd_and_errors_carry_message();
    test_admin_json_escapes_strings();
    test_goodbye();
    unlink(sock_path);
    return 0;
}
