/*
 * harness.h — what an integration test needs to run a real zppd and several
 * client processes: a daemon in a temporary directory with its own config
 * and socket (host backend), rank processes forked from the test, and
 * programs (zppctl, zpp-demo) run with a time limit and their output kept.
 *
 * Nothing leaks when a test fails: every process the harness starts gets
 * PR_SET_PDEATHSIG(SIGKILL) and its own process group, and an atexit handler
 * in the test process kills whatever is still running (daemons, ranks) and
 * removes the temporary directories, after printing the daemon logs of
 * daemons that were not stopped cleanly. Set ZH_KEEP=1 to keep the
 * directories.
 *
 * The paths of the binaries come from the build (tests/CMakeLists.txt):
 * ZPPD_BIN, ZPPCTL_BIN, ZPP_DEMO_BIN.
 *
 * Thread: one thread of the test process; not for use inside rank children
 * except zh_connect_join.
 */
#ifndef ZPP_HARNESS_H
#define ZPP_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zpp.h"

#define ZH_PATH_MAX 200
#define ZH_DIR_MAX 128 /* leaves room for "/zppd.sock" within ZH_PATH_MAX */
#define ZH_START_TIMEOUT_MS 10000
#define ZH_STOP_TIMEOUT_MS 10000

/* A daemon started by zh_daemon_start. Fields are read-only for tests. */
typedef struct {
    pid_t pid;                /* 0 once reaped */
    int status;               /* waitpid status once reaped */
    char dir[ZH_DIR_MAX];     /* temporary directory, removed by stop/kill */
    char socket[ZH_PATH_MAX]; /* <dir>/zppd.sock, or the extra lines' `socket` */
    char conf[ZH_PATH_MAX];   /* <dir>/zppd.conf */
    char log[ZH_PATH_MAX];    /* <dir>/zppd.log: the daemon's stderr and stdout */
} zh_daemon;

/* Makes a temporary directory, writes a config there (socket in the
 * directory, backend = host, log_level = info, then extra_conf_lines
 * verbatim, e.g. "virtual_nodes = 2\nmax_frame = 4K\n"; NULL for none; a
 * later line overrides an earlier key, and a `socket` line there moves
 * d->socket too), starts ZPPD_BIN -c <conf> with its
 * output in <dir>/zppd.log and waits (ZH_START_TIMEOUT_MS) until the socket
 * accepts a connection and answers a status query.
 * Returns 0 with *d filled, or -1 after printing why and the daemon log
 * (nothing is left running and the directory is removed). */
int zh_daemon_start(const char *extra_conf_lines, zh_daemon *d);

/* Sends SIGTERM, waits up to ZH_STOP_TIMEOUT_MS for the daemon to exit
 * (then SIGKILLs its process group), and removes the directory.
 * Returns 0 when it exited by itself with status 0 and removed its socket;
 * -1 otherwise, after printing why and the daemon log. */
int zh_daemon_stop(zh_daemon *d);

/* SIGKILLs the daemon's process group, reaps it and removes the directory.
 * Accepts a daemon that already stopped. */
void zh_daemon_kill(zh_daemon *d);

/* 1 while the daemon process is alive (reaps it if it exited). */
int zh_daemon_alive(zh_daemon *d);

/* Prints the daemon log to stderr, between markers. */
void zh_daemon_dump_log(const zh_daemon *d);

/* Reads the daemon log into a malloc'd NUL-terminated string the caller
 * frees; NULL if it cannot be read. */
char *zh_daemon_read_log(const zh_daemon *d);

/* 1 if the daemon log contains needle. */
int zh_daemon_log_contains(const zh_daemon *d, const char *needle);

/* The same for any file: its contents (malloc'd, NUL-terminated, NULL if
 * unreadable), and whether they contain needle. */
char *zh_read_file(const char *path);
int zh_file_contains(const char *path, const char *needle);

/* Runs zppctl -s <d's socket> a b c (b, c may be NULL) with its output in
 * out (cap bytes), echoes both to stdout, and returns its exit status. */
int zh_zppctl(const zh_daemon *d, char *out, size_t cap, const char *a, const char *b,
              const char *c);

/* A rank body: runs in a forked child; its return value is the child's
 * exit code (0 = success). */
typedef int (*zh_rank_fn)(int rank, void *arg);

/* Forks n children (each in its own process group, killed if the test
 * dies), child r runs exit(fn(r, arg)) — exit, not _exit, so in sanitizer
 * builds LeakSanitizer checks each rank: free what a rank allocates
 * (zpp_close, zpp_shm_destroy). Waits up to timeout_ms for all of
 * them; children still running then are SIGKILLed.
 * codes[r] (when codes is not NULL, n entries) receives the exit code, 128 +
 * signal number if killed by a signal, or -1 if it timed out.
 * Returns 0 if every child exited 0, else -1 (and prints which failed). */
int zh_run_ranks(int n, zh_rank_fn fn, void *arg, int timeout_ms, int *codes);

/* Forks one child, set up and tracked like those of zh_run_ranks, that runs
 * exit(fn(rank, arg)), and returns its pid at once (-1 if fork failed): for
 * tests that act (kill a daemon, kill the rank) while ranks run. Reap it
 * with zh_reap. (Added for test_multinode.) */
pid_t zh_spawn(zh_rank_fn fn, int rank, void *arg);

/* Waits up to timeout_ms for a child of zh_spawn (SIGKILLs its process group
 * after that). Returns its exit code, 128 + signal, or -1 on timeout. */
int zh_reap(pid_t pid, int timeout_ms);

/* Runs argv[0] (a path) with argv, stdout and stderr together captured into
 * out (NUL-terminated, truncated to outlen - 1; out may be NULL), for at
 * most timeout_ms (then SIGKILL). Returns the exit code, 128 + signal, or -1
 * on timeout or when it could not start. */
int zh_run_capture(char *const argv[], int timeout_ms, char *out, size_t outlen);

/* Connects to d's socket and joins job_id as rank of world over nodes
 * virtual nodes (local rank = rank % (world / nodes)). Retries the connect
 * for up to 2 s. Returns 0 and *out, or the zpp error (printed with the
 * daemon's message). Usable inside rank children. */
int zh_connect_join(const zh_daemon *d, const char *job_id, uint32_t rank, uint32_t world,
                    uint32_t nodes, zpp_conn **out);

/* A call that keeps a worker busy for a while (tests of what happens
 * while a call runs): registers two shared-memory buffers of count fp32 on
 * c, makes a barrier (every rank of the job is past it), then submits a
 * forced int4 qGZ reduce-scatter of count elements. *req is its request;
 * the buffers and their ids come back for the caller to use or drop.
 * Returns 0, or the first failing call's code. */
int zh_submit_long_qgz(zpp_conn *c, uint32_t count, zpp_shm **in, zpp_shm **out,
                       uint64_t *in_id, uint64_t *out_id, uint64_t *req);

/* Connects (which must work) and says Hello for rank of a one-node job of
 * world ranks; returns Hello's code with *c left open either way, for tests
 * of what a refused Hello says (zpp_last_error(*c)). Prints the outcome. */
int zh_join_rc(const zh_daemon *d, const char *job, uint32_t rank, uint32_t world,
               zpp_conn **c);

/* Monotonic milliseconds. */
int64_t zh_now_ms(void);


/* ---- raw protocol access (added for test_garbage/test_limits/test_tenant) --
 * For tests that must send what libzpp never would: hand-made frames, bad
 * fields, descriptors. Usable inside rank children. */
#include "proto/frame.h"

/* Connects a plain SOCK_STREAM socket to path. Returns the fd or -1. */
int zh_raw_connect(const char *path);

/* Sends all of buf (with nfds descriptors as SCM_RIGHTS on the first
 * sendmsg). Returns 0 or -1 (peer closed, error). */
int zh_raw_send(int fd, const void *buf, size_t len, const int *fds, int nfds);

/* Packs req (version set by the caller) with its header and sends it with
 * the descriptors. Returns 0 or -1. */
int zh_raw_request(int fd, const Zpp__Request *req, const int *fds, int nfds);

/* Reads one Reply frame within timeout_ms. Returns 0 and *out (free with
 * zpp_reply_free), 1 if the daemon closed the connection, -1 on timeout
 * or a reply that does not parse. */
int zh_raw_reply(int fd, int timeout_ms, Zpp__Reply **out);

/* A raw Hello (req_id 1) as rank 0 of a one-node job of world ranks on the
 * host backend, and its reply within 3 s. Returns the reply's code, or -1
 * when none came. */
int zh_raw_hello(int fd, const char *job, uint32_t world);

/* A raw Hello (req_id 1) of rank 0 of a one-rank job on the host backend
 * offering 4 ready events (dummy handles) and flags: Hello.flags_nfds =
 * announced, flags_size = size, nslots 4, with the nfds descriptors fds.
 * Returns 0 and *out (its reply within 5 s; free with zpp_reply_free), or
 * -1 when none came. */
int zh_raw_flags_hello(int fd, const char *job, const int *fds, int nfds, uint32_t announced,
                       uint64_t size, Zpp__Reply **out);

/* 1 if the peer closes fd within timeout_ms (whatever it sends first is
 * read and dropped), 0 otherwise. */
int zh_raw_closed(int fd, int timeout_ms);

/* Number of open descriptors of process pid (from /proc), -1 on error. */
int zh_count_fds(pid_t pid);

/* zh_count_fds once steady: the same count for 300 ms (at most 5 s). A
 * connection just closed, such as zh_daemon_start's status query, may
 * still hold one until the daemon reaps its session. */
int zh_steady_fds(pid_t pid);

/* Sends n copies of fd on sock, at most 4 per message (the daemon's
 * SESS_FDS_PER_MSG), each message carrying one byte of a frame header that
 * announces 512 bytes never sent: the daemon holds the descriptors
 * unclaimed. 0, or -1 once the peer is gone. */
int zh_send_unclaimed(int sock, int fd, int n);

/* 1 once daemon d holds `want` descriptors again (at most 5 s), else 0
 * with a line on stderr. */
int zh_fds_back_to(const zh_daemon *d, int want);

#endif
