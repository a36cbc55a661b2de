/*
 * harness.c — real daemons and client processes for the integration tests
 * (see harness.h for the contract). Everything started here is tracked in a
 * small table owned by the test process; an atexit handler kills what is
 * still running, prints the logs of daemons that did not stop cleanly and
 * removes their directories, so a failed ASSERT (exit(1)) leaks nothing.
 * Children also get PR_SET_PDEATHSIG(SIGKILL) for the case where the test
 * process itself is killed (ctest timeout); in sanitizer builds the same
 * cleanup also runs as the sanitizer's death callback.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A sanitizer that stops the test (ASan, UBSan without recovery) exits
 * without running atexit handlers; its death callback cleans up instead. */
#if defined(__SANITIZE_ADDRESS__)
#define ZH_HAVE_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZH_HAVE_SANITIZER 1
#endif
#endif
#ifdef ZH_HAVE_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

#ifndef ZPPD_BIN
#error "ZPPD_BIN must be defined by the build (tests/CMakeLists.txt)"
#endif

#define ZH_MAX_TRACKED 64
#define ZH_POLL_MS 10

/* A process the harness must clean up after. */
typedef struct {
    pid_t pid;
    int is_daemon;
    char dir[ZH_PATH_MAX];
    char log[ZH_PATH_MAX];
} zh_tracked;

static zh_tracked g_tracked[ZH_MAX_TRACKED];
static pid_t g_owner; /* the test process; forked children must not clean up */
static int g_atexit_done;

static void zh_cleanup_at_exit(void);

int64_t zh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void zh_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void zh_init(void)
{
    if (!g_atexit_done) {
        g_owner = getpid();
        atexit(zh_cleanup_at_exit);
#ifdef ZH_HAVE_SANITIZER
        __sanitizer_set_death_callback(zh_cleanup_at_exit);
#endif
        g_atexit_done = 1;
    }
}

static void zh_track(pid_t pid, int is_daemon, const char *dir, const char *log)
{
    for (int i = 0; i < ZH_MAX_TRACKED; i++) {
        if (g_tracked[i].pid == 0) {
            g_tracked[i].pid = pid;
            g_tracked[i].is_daemon = is_daemon;
            snprintf(g_tracked[i].dir, sizeof g_tracked[i].dir, "%s", dir ? dir : "");
            snprintf(g_tracked[i].log, sizeof g_tracked[i].log, "%s", log ? log : "");
            return;
        }
    }
    fprintf(stderr, "harness: more than %d tracked processes; pid %d untracked\n", ZH_MAX_TRACKED,
            (int)pid);
}

static void zh_untrack(pid_t pid)
{
    for (int i = 0; i < ZH_MAX_TRACKED; i++) {
        if (g_tracked[i].pid == pid) {
            g_tracked[i].pid = 0;
        }
    }
}

/* Removes a flat directory and the files in it. */
static void zh_rmdir(const char *dir)
{
    if (!dir[0] || getenv("ZH_KEEP")) {
        return;
    }
    DIR *dp = opendir(dir);
    if (dp) {
        struct dirent *e;
        while ((e = readdir(dp)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                unlinkat(dirfd(dp), e->d_name, 0);
            }
        }
        closedir(dp);
    }
    rmdir(dir);
}

static void zh_dump_file(const char *what, const char *path)
{
    FILE *f = fopen(path, "r");
    fprintf(stderr, "---- %s (%s) ----\n", what, path);
    if (!f) {
        fprintf(stderr, "(cannot open: %s)\n", strerror(errno));
    } else {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
            fwrite(buf, 1, n, stderr);
        }
        fclose(f);
    }
    fprintf(stderr, "---- end of %s ----\n", what);
}

static void zh_cleanup_at_exit(void)
{
    if (getpid() != g_owner) {
        return; /* a forked rank exiting: the test process cleans up */
    }
    for (int i = 0; i < ZH_MAX_TRACKED; i++) {
        zh_tracked *t = &g_tracked[i];
        if (t->pid == 0) {
            continue;
        }
        kill(-t->pid, SIGKILL);
        kill(t->pid, SIGKILL);
        waitpid(t->pid, NULL, 0);
        if (t->is_daemon) {
            fprintf(stderr, "harness: daemon pid %d still running at exit: killed\n", (int)t->pid);
            zh_dump_file("zppd log", t->log);
            zh_rmdir(t->dir);
        }
        t->pid = 0;
    }
}

/* In a freshly forked child: own process group, die with the test. */
static void zh_child_setup(pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127); /* the parent died before prctl took effect */
    }
}

static int zh_status_code(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return -1;
}

/* Waits up to timeout_ms for pid; returns 1 and *status when reaped. */
static int zh_wait_pid(pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = zh_now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) {
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            *status = 0;
            return 1; /* not our child any more: nothing to wait for */
        }
        if (zh_now_ms() >= deadline) {
            return 0;
        }
        zh_sleep_ms(ZH_POLL_MS);
    }
}

static int zh_write_config(const zh_daemon *d, const char *extra)
{
    FILE *f = fopen(d->conf, "w");
    if (!f) {
        fprintf(stderr, "harness: cannot write %s: %s\n", d->conf, strerror(errno));
        return -1;
    }
    fprintf(f,
            "# written by tests/integration/harness.c\n"
            "socket = %s\n"
            "socket_mode = 0600\n"
            "backend = host\n"
            "log_level = info\n"
            "peer_listen = 127.0.0.1:0\n",
            d->socket);
    if (extra && *extra) {
        fputs(extra, f);
        if (extra[strlen(extra) - 1] != '\n') {
            fputc('\n', f);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "harness: cannot write %s\n", d->conf);
        return -1;
    }
    return 0;
}

/* 1 when the daemon answers a status query on its socket. */
static int zh_daemon_answers(const zh_daemon *d)
{
    zpp_conn *c = NULL;
    if (zpp_connect(d->socket, &c) != 0) {
        return 0;
    }
    char buf[8192];
    int rc = zpp_admin_status_json(c, buf, sizeof buf);
    zpp_close(c);
    return rc == 0;
}

/* If extra sets `socket = PATH` (the last such line wins), copies PATH into
 * d->socket so that the harness waits on the socket the daemon will use. */
static void zh_socket_override(const char *extra, zh_daemon *d)
{
    for (const char *line = extra; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[ZH_PATH_MAX + 32];
        if (len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            char *hash = strchr(buf, '#');
            if (hash) {
                *hash = '\0';
            }
            char *k = buf;
            while (*k == ' ' || *k == '\t') {
                k++;
            }
            char *eq = strchr(k, '=');
            if (eq && strncmp(k, "socket", 6) == 0 &&
                strspn(k + 6, " \t") == (size_t)(eq - k - 6)) {
                char *v = eq + 1;
                while (*v == ' ' || *v == '\t') {
                    v++;
                }
                size_t vl = strlen(v);
                while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t' || v[vl - 1] == '\r')) {
                    v[--vl] = '\0';
                }
                if (vl > 0 && vl < sizeof d->socket) {
                    memcpy(d->socket, v, vl + 1);
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
}

int zh_daemon_start(const char *extra_conf_lines, zh_daemon *d)
{
    zh_init();
    memset(d, 0, sizeof *d);
    const char *tmp = getenv("TMPDIR");
    /* sun_path holds 108 bytes: fall back to /tmp for long TMPDIRs. */
    if (!tmp || !*tmp || strlen(tmp) > 60) {
        tmp = "/tmp";
    }
    snprintf(d->dir, sizeof d->dir, "%s/zh-XXXXXX", tmp);
    if (!mkdtemp(d->dir)) {
        fprintf(stderr, "harness: mkdtemp(%s): %s\n", d->dir, strerror(errno));
        d->dir[0] = '\0';
        return -1;
    }
    snprintf(d->socket, sizeof d->socket, "%s/zppd.sock", d->dir);
    snprintf(d->conf, sizeof d->conf, "%s/zppd.conf", d->dir);
    snprintf(d->log, sizeof d->log, "%s/zppd.log", d->dir);
    if (zh_write_config(d, extra_conf_lines) != 0) {
        zh_rmdir(d->dir);
        return -1;
    }
    zh_socket_override(extra_conf_lines, d);

    int logfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        fprintf(stderr, "harness: open %s: %s\n", d->log, strerror(errno));
        zh_rmdir(d->dir);
        return -1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "harness: fork: %s\n", strerror(errno));
        close(logfd);
        zh_rmdir(d->dir);
        return -1;
    }
    if (pid == 0) {
        zh_child_setup(parent);
        dup2(logfd, STDOUT_FILENO);
        dup2(logfd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
        }
        execl(ZPPD_BIN, ZPPD_BIN, "-c", d->conf, (char *)NULL);
        fprintf(stderr, "harness: exec %s: %s\n", ZPPD_BIN, strerror(errno));
        _exit(127);
    }
    close(logfd);
    setpgid(pid, pid); /* also in the parent: no race with an early kill */
    d->pid = pid;
    zh_track(pid, 1, d->dir, d->log);

    int64_t deadline = zh_now_ms() + ZH_START_TIMEOUT_MS;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            d->pid = 0;
            d->status = status;
            zh_untrack(pid);
            fprintf(stderr, "harness: zppd exited during start-up (code %d)\n",
                    zh_status_code(status));
            zh_daemon_dump_log(d);
            zh_rmdir(d->dir);
            return -1;
        }
        if (zh_daemon_answers(d)) {
            return 0;
        }
        if (zh_now_ms() >= deadline) {
            fprintf(stderr, "harness: zppd did not answer on %s within %d ms\n", d->socket,
                    ZH_START_TIMEOUT_MS);
            zh_daemon_dump_log(d);
            zh_daemon_kill(d);
            return -1;
        }
        zh_sleep_ms(20);
    }
}

int zh_daemon_stop(zh_daemon *d)
{
    if (d->pid == 0) {
        fprintf(stderr, "harness: zh_daemon_stop: daemon not running\n");
        zh_rmdir(d->dir);
        return -1;
    }
    int rc = 0, status = 0;
    kill(d->pid, SIGTERM);
    if (!zh_wait_pid(d->pid, ZH_STOP_TIMEOUT_MS, &status)) {
        fprintf(stderr, "harness: zppd pid %d still running %d ms after SIGTERM: killed\n",
                (int)d->pid, ZH_STOP_TIMEOUT_MS);
        kill(-d->pid, SIGKILL);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &status, 0);
        rc = -1;
    } else if (zh_status_code(status) != 0) {
        fprintf(stderr, "harness: zppd exited with code %d after SIGTERM (expected 0)\n",
                zh_status_code(status));
        rc = -1;
    } else if (access(d->socket, F_OK) == 0) {
        fprintf(stderr, "harness: zppd exited but left its socket %s\n", d->socket);
        rc = -1;
    }
    kill(-d->pid, SIGKILL); /* anything the daemon may have left in its group */
    zh_untrack(d->pid);
    d->status = status;
    d->pid = 0;
    if (rc != 0) {
        zh_daemon_dump_log(d);
    }
    zh_rmdir(d->dir);
    return rc;
}

void zh_daemon_kill(zh_daemon *d)
{
    if (d->pid > 0) {
        kill(-d->pid, SIGKILL);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &d->status, 0);
        zh_untrack(d->pid);
        d->pid = 0;
    }
    zh_rmdir(d->dir);
}

int zh_daemon_alive(zh_daemon *d)
{
    if (d->pid <= 0) {
        return 0;
    }
    int status;
    if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
        zh_untrack(d->pid);
        d->status = status;
        d->pid = 0;
        return 0;
    }
    return 1;
}

void zh_daemon_dump_log(const zh_daemon *d)
{
    zh_dump_file("zppd log", d->log);
}

char *zh_daemon_read_log(const zh_daemon *d)
{
    return zh_read_file(d->log);
}

char *zh_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) {
        buf[len] = '\0';
    }
    return buf;
}

int zh_daemon_log_contains(const zh_daemon *d, const char *needle)
{
    return zh_file_contains(d->log, needle);
}

int zh_file_contains(const char *path, const char *needle)
{
    char *s = zh_read_file(path);
    int found = s && strstr(s, needle) != NULL;
    free(s);
    return found;
}

int zh_zppctl(const zh_daemon *d, char *out, size_t cap, const char *a, const char *b,
              const char *c)
{
    char *argv[] = {ZPPCTL_BIN, "-s", (char *)d->socket, (char *)a, (char *)b, (char *)c, NULL};
    int rc = zh_run_capture(argv, 15000, out, cap);
    printf("$ zppctl %s %s %s -> %d\n%s", a, b ? b : "", c ? c : "", rc, out);
    return rc;
}

int zh_run_ranks(int n, zh_rank_fn fn, void *arg, int timeout_ms, int *codes)
{
    zh_init();
    if (n <= 0 || n > ZH_MAX_TRACKED / 2) {
        fprintf(stderr, "harness: zh_run_ranks: bad n %d\n", n);
        return -1;
    }
    pid_t pids[ZH_MAX_TRACKED / 2];
    int res[ZH_MAX_TRACKED / 2];
    pid_t parent = getpid();
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "harness: fork: %s\n", strerror(errno));
            for (int j = 0; j < r; j++) {
                kill(-pids[j], SIGKILL);
                waitpid(pids[j], NULL, 0);
                zh_untrack(pids[j]);
            }
            return -1;
        }
        if (pid == 0) {
            zh_child_setup(parent);
            int code = fn(r, arg);
            fflush(NULL);
            exit(code);
        }
        setpgid(pid, pid);
        pids[r] = pid;
        res[r] = -2; /* still running */
        zh_track(pid, 0, NULL, NULL);
    }

    int64_t deadline = zh_now_ms() + timeout_ms;
    int left = n;
    while (left > 0 && zh_now_ms() < deadline) {
        for (int r = 0; r < n; r++) {
            int status;
            if (res[r] == -2 && waitpid(pids[r], &status, WNOHANG) == pids[r]) {
                res[r] = zh_status_code(status);
                zh_untrack(pids[r]);
                left--;
            }
        }
        if (left > 0) {
            zh_sleep_ms(ZH_POLL_MS);
        }
    }
    int rc = 0;
    for (int r = 0; r < n; r++) {
        if (res[r] == -2) {
            kill(-pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
            zh_untrack(pids[r]);
            res[r] = -1;
            fprintf(stderr, "harness: rank %d timed out after %d ms: killed\n", r, timeout_ms);
        } else if (res[r] != 0) {
            fprintf(stderr, "harness: rank %d exited with code %d\n", r, res[r]);
        }
        if (res[r] != 0) {
            rc = -1;
        }
        if (codes) {
            codes[r] = res[r];
        }
    }
    return rc;
}

pid_t zh_spawn(zh_rank_fn fn, int rank, void *arg)
{
    zh_init();
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "harness: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        zh_child_setup(parent);
        int code = fn(rank, arg);
        fflush(NULL);
        exit(code);
    }
    setpgid(pid, pid);
    zh_track(pid, 0, NULL, NULL);
    return pid;
}

int zh_reap(pid_t pid, int timeout_ms)
{
    int status = 0, code;
    if (pid <= 0) {
        return -1;
    }
    if (zh_wait_pid(pid, timeout_ms, &status)) {
        code = zh_status_code(status);
    } else {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "harness: child %d still running after %d ms: killed\n", (int)pid,
                timeout_ms);
        code = -1;
    }
    zh_untrack(pid);
    return code;
}

int zh_run_capture(char *const argv[], int timeout_ms, char *out, size_t outlen)
{
    zh_init();
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        return -1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        zh_child_setup(parent);
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        execv(argv[0], argv);
        fprintf(stderr, "harness: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    setpgid(pid, pid);
    zh_track(pid, 0, NULL, NULL);

    size_t len = 0;
    int64_t deadline = zh_now_ms() + timeout_ms;
    int eof = 0, timed_out = 0;
    while (!eof) {
        int64_t left = deadline - zh_now_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno != EINTR) {
            break;
        }
        if (pr <= 0) {
            continue;
        }
        char buf[4096];
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            eof = 1;
            break;
        }
        if (out && outlen > 1 && len < outlen - 1) {
            size_t take = (size_t)n < outlen - 1 - len ? (size_t)n : outlen - 1 - len;
            memcpy(out + len, buf, take);
            len += take;
        }
    }
    close(p[0]);
    if (out && outlen > 0) {
        out[len] = '\0';
    }
    int status = 0, code;
    if (timed_out || !zh_wait_pid(pid, (int)(deadline - zh_now_ms()) + 1000, &status)) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        fprintf(stderr, "harness: %s timed out after %d ms: killed\n", argv[0], timeout_ms);
        code = -1;
    } else {
        code = zh_status_code(status);
    }
    kill(-pid, SIGKILL); /* stray grandchildren */
    zh_untrack(pid);
    return code;
}

int zh_connect_join(const zh_daemon *d, const char *job_id, uint32_t rank, uint32_t world,
                    uint32_t nodes, zpp_conn **out)
{
    zpp_conn *c = NULL;
    int rc = -1;
    int64_t deadline = zh_now_ms() + 2000;
    while ((rc = zpp_connect(d->socket, &c)) != 0 && zh_now_ms() < deadline) {
        zh_sleep_ms(20);
    }
    if (rc != 0) {
        fprintf(stderr, "harness: rank %u: connect %s: %s\n", rank, d->socket, zpp_strerror(rc));
        return rc;
    }
    uint32_t per_node = nodes ? world / nodes : world;
    zpp_job_desc job = {
        .job_id = job_id,
        .rank = rank,
        .world_size = world,
        .local_rank = per_node ? rank % per_node : 0,
        .node_count = nodes,
        .gpu_uuid = "host",
    };
    rc = zpp_hello(c, &job, NULL);
    if (rc != 0) {
        fprintf(stderr, "harness: rank %u: hello %s: %s: %s\n", rank, job_id, zpp_err_name(rc),
                zpp_last_error(c));
        zpp_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* ---- raw protocol access ------------------------------------------------ */

int zh_raw_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        return -1;
    }
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int zh_raw_send(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
    const uint8_t *p = buf;
    size_t done = 0;
    int first = 1;
    while (done < len || (first && nfds > 0)) {
        struct iovec iov = {(void *)(p + done), len - done};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        char *ctl = NULL;
        if (first && nfds > 0) {
            size_t clen = CMSG_SPACE((size_t)nfds * sizeof(int));
            ctl = calloc(1, clen);
            if (!ctl) {
                return -1;
            }
            mh.msg_control = ctl;
            mh.msg_controllen = clen;
            struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
            memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
        }
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        free(ctl);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        first = 0;
        done += (size_t)n;
        if (len == 0) {
            break;
        }
    }
    return 0;
}

int zh_raw_request(int fd, const Zpp__Request *req, const int *fds, int nfds)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (zpp_request_pack(req, 64u << 20, &buf, &len) != 0) {
        return -1;
    }
    int rc = zh_raw_send(fd, buf, len, fds, nfds);
    free(buf);
    return rc;
}

/* Reads exactly len bytes; 0, 1 on EOF, -1 on timeout or error. */
static int zh_read_full(int fd, uint8_t *p, size_t len, int64_t deadline)
{
    size_t got = 0;
    while (got < len) {
        int64_t left = deadline - zh_now_ms();
        if (left <= 0) {
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR) {
            continue;
        }
        if (pr <= 0) {
            continue;
        }
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n < 0) {
            return errno == ECONNRESET ? 1 : -1;
        }
        if (n == 0) {
            return 1;
        }
        got += (size_t)n;
    }
    return 0;
}

int zh_raw_reply(int fd, int timeout_ms, Zpp__Reply **out)
{
    int64_t deadline = zh_now_ms() + timeout_ms;
    uint8_t hdr[4];
    int rc = zh_read_full(fd, hdr, 4, deadline);
    if (rc != 0) {
        return rc;
    }
    uint32_t len = ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) | ((uint32_t)hdr[2] << 8) |
                   hdr[3];
    if (len > (64u << 20)) {
        return -1;
    }
    uint8_t *body = malloc(len ? len : 1);
    if (!body) {
        return -1;
    }
    rc = zh_read_full(fd, body, len, deadline);
    if (rc == 0 && zpp_reply_unpack(body, len, 64u << 20, out) != 0) {
        rc = -1;
    }
    free(body);
    return rc;
}

int zh_raw_closed(int fd, int timeout_ms)
{
    int64_t deadline = zh_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - zh_now_ms();
        if (left <= 0) {
            return 0;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR) {
            continue;
        }
        if (pr <= 0) {
            continue;
        }
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return 1;
        }
    }
}

int zh_raw_flags_hello(int fd, const char *job, const int *fds, int nfds, uint32_t announced,
                       uint64_t size, Zpp__Reply **out)
{
    static uint8_t handle[64];
    ProtobufCBinaryData ev[4];
    for (int i = 0; i < 4; i++) {
        ev[i].len = sizeof handle;
        ev[i].data = handle;
    }
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = (char *)job;
    h.world_size = 1;
    h.node_count = 1;
    h.gpu_uuid = (char *)"host";
    h.n_ready_events = 4;
    h.ready_events = ev;
    h.flags_nfds = announced;
    h.flags_size = size;
    h.nslots = 4;
    h.flag_bits = 32;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = 1;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    if (zh_raw_request(fd, &req, fds, nfds) != 0)
        return -1;
    return zh_raw_reply(fd, 5000, out) == 0 ? 0 : -1;
}

int zh_count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *dp = opendir(path);
    if (!dp) {
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(dp);
    return n;
}

int zh_steady_fds(pid_t pid)
{
    int last = zh_count_fds(pid), same = 0;
    for (int i = 0; i < 100 && same < 6; i++) {
        usleep(50000);
        int now = zh_count_fds(pid);
        same = now == last ? same + 1 : 0;
        last = now;
    }
    return last;
}

int zh_submit_long_qgz(zpp_conn *c, uint32_t count, zpp_shm **in, zpp_shm **out,
                       uint64_t *in_id, uint64_t *out_id, uint64_t *req)
{
    size_t bytes = (size_t)count * 4;
    int rc;
    if ((rc = zpp_shm_create(bytes, in)) || (rc = zpp_shm_create(bytes, out)) ||
        (rc = zpp_register_shm(c, *in, 0, bytes, in_id)) ||
        (rc = zpp_register_shm(c, *out, 0, bytes, out_id)) || (rc = zpp_barrier(c, NULL))) {
        return rc;
    }
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_QGZ_REDUCE_SCATTER, ZPP_FP32, count);
    call.bits = 4;
    call.flags = ZPP_FLAG_FORCE_QUANT;
    call.input = (zpp_bufref){*in_id, 0};
    call.output = (zpp_bufref){*out_id, 0};
    return zpp_submit(c, &call, req);
}

int zh_join_rc(const zh_daemon *d, const char *job, uint32_t rank, uint32_t world,
               zpp_conn **c)
{
    if (zpp_connect(d->socket, c) != 0) {
        fprintf(stderr, "harness: connect %s failed\n", d->socket);
        exit(1);
    }
    zpp_job_desc jd = {.job_id = job,
                       .rank = rank,
                       .world_size = world,
                       .local_rank = rank,
                       .node_count = 1,
                       .gpu_uuid = "host"};
    int rc = zpp_hello(*c, &jd, NULL);
    printf("hello %s rank %u: %s %s\n", job, rank, zpp_err_name(rc), rc ? zpp_last_error(*c) : "");
    return rc;
}

int zh_raw_hello(int fd, const char *job, uint32_t world)
{
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = (char *)job;
    h.world_size = world;
    h.node_count = 1;
    h.gpu_uuid = (char *)"host";
    req.req_id = 1;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    Zpp__Reply *rep;
    if (zh_raw_request(fd, &req, NULL, 0) != 0 || zh_raw_reply(fd, 3000, &rep) != 0)
        return -1;
    int code = rep->code;
    zpp_reply_free(rep);
    return code;
}

int zh_send_unclaimed(int sock, int fd, int n)
{
    static const uint8_t hdr[4] = {0, 0, 2, 0}; /* a big-endian length of 512 */
    int sent = 0, byte = 0;
    while (sent < n) {
        int k = n - sent < 4 ? n - sent : 4;
        int fds[4] = {fd, fd, fd, fd};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(4 * sizeof(int))];
        } ctl;
        memset(&ctl, 0, sizeof ctl);
        uint8_t b = byte < 4 ? hdr[byte] : 0;
        struct iovec iov = {&b, 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.buf,
                            .msg_controllen = CMSG_SPACE((size_t)k * sizeof(int))};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN((size_t)k * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, (size_t)k * sizeof(int));
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) != 1)
            return -1;
        sent += k;
        byte++;
    }
    return 0;
}

int zh_fds_back_to(const zh_daemon *d, int want)
{
    int now = -1;
    for (int i = 0; i < 100; i++) {
        now = zh_count_fds(d->pid);
        if (now == want)
            return 1;
        usleep(50000);
    }
    fprintf(stderr, "daemon descriptors: %d, expected %d\n", now, want);
    return 0;
}
