/*
 * server.c — the Unix socket: listening, accepting, reading frames with the
 * descriptors that ride on them, writing replies, closing.
 *
 * libuv passes only socket handles over a pipe, so connections are raw
 * descriptors under uv_poll_t and read with our own recvmsg (SCM_RIGHTS,
 * MSG_CMSG_CLOEXEC, MSG_CTRUNC refused, descriptors capped per session).
 * Reads are capped per wakeup so one busy client cannot starve the others.
 * Unclaimed descriptors are capped per session, per uid (a share of the
 * daemon's budget, so one tenant cannot block the others' registrations)
 * and for the daemon as a whole.
 * A frame over max_frame, or one that does not unpack, closes the
 * connection with a logged reason; every other bad request is answered
 * with an error and the connection stays.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "frame.h"
#include "job.h"
#include "log.h"
#include "session.h"
#include "zpp.h"

#define READS_PER_WAKEUP 16
#define ACCEPTS_PER_WAKEUP 64
#define READ_CHUNK (64u << 10)
/* Unpacking a frame may allocate at most this many times its size. */
#define UNPACK_BUDGET_FACTOR 8u
#define UNPACK_BUDGET_MIN (64u << 10)
/* The sessions of one uid hold at most 1/FDS_UID_SHARES of the daemon's
 * budget of unclaimed descriptors (at least SESS_MAX_FDS): so many uids
 * can each hold their share at once before the budget is full. */
#define FDS_UID_SHARES 8u
/* Lines clients can cause at will at accept: at most one a second each. */
#define REFUSE_LOG_INTERVAL_MS 1000u

static void on_conn_event(uv_poll_t *h, int status, int events);

/* Logs a protocol error, at most a few lines per second at warn level. */
/* ZLOG_WARN for the first 10 lines a second of what clients can cause at
 * will, ZLOG_DEBUG after that: no client floods the log. */
static int client_log_level(struct zppd *d)
{
    static uint64_t window;
    uint64_t now = zppd_now_ms() / 1000;
    if (now != window) {
        window = now;
        d->log_budget = 10;
    }
    return d->log_budget ? (d->log_budget--, ZLOG_WARN) : ZLOG_DEBUG;
}

static void log_proto(struct session *s, const char *why)
{
    struct zppd *d = s->d;
    d->stats.protocol_errors++;
    zlog(client_log_level(d), "server", why, "session=%llu uid=%u pid=%u",
         (unsigned long long)s->id, s->uid, s->pid);
}

int server_listen(struct zppd *d)
{
    const char *path = d->cfg.socket;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        ZLOG_E("server", "socket path too long", "path=%s", path);
        return ZPP_EINVAL;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);

    /* A socket file left by a dead daemon is removed; a live one is not. */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            ZLOG_E("server", "socket path exists and is not a socket", "path=%s", path);
            return ZPP_EEXIST;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0) {
            close(probe);
            ZLOG_E("server", "another zppd is listening on the socket", "path=%s", path);
            return ZPP_EBUSY;
        }
        if (probe >= 0)
            close(probe);
        ZLOG_I("server", "removing stale socket", "path=%s", path);
        unlink(path);
    }

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ZLOG_E("server", "socket() failed", "err=\"%s\"", strerror(errno));
        return ZPP_EIO;
    }
    /* Bind under a umask that leaves nobody a window of wider access. */
    mode_t old = umask(0777 & ~d->cfg.socket_mode);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0) {
        ZLOG_E("server", "bind failed", "path=%s err=\"%s\"", path, strerror(errno));
        close(fd);
        return ZPP_EIO;
    }
    if (chmod(path, d->cfg.socket_mode) < 0)
        ZLOG_W("server", "chmod on socket failed", "err=\"%s\"", strerror(errno));
    if (d->cfg.socket_group[0]) {
        struct group *g = getgrnam(d->cfg.socket_group);
        if (!g || chown(path, (uid_t)-1, g->gr_gid) < 0) {
            ZLOG_E("server", "cannot give the socket to its group", "group=%s",
                   d->cfg.socket_group);
            close(fd);
            unlink(path);
            return ZPP_EPERM;
        }
    }
    if (listen(fd, 128) < 0) {
        ZLOG_E("server", "listen failed", "err=\"%s\"", strerror(errno));
        close(fd);
        unlink(path);
        return ZPP_EIO;
    }
    d->listen_fd = fd;
    d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ZLOG_I("server", "listening", "path=%s mode=%04o", path, d->cfg.socket_mode);
    return 0;
}

static void on_listen_closed(uv_handle_t *h)
{
    struct zppd *d = h->data;
    if (d->listen_fd >= 0)
        close(d->listen_fd);
    d->listen_fd = -1;
}

void server_stop_listening(struct zppd *d)
{
    if (!d->listening)
        return;
    d->listening = 0;
    uv_poll_stop(&d->listen_poll);
    uv_close((uv_handle_t *)&d->listen_poll, on_listen_closed);
    unlink(d->cfg.socket);
    if (d->spare_fd >= 0)
        close(d->spare_fd);
    d->spare_fd = -1;
}

static uint32_t sessions_of_uid(struct zppd *d, uint32_t uid)
{
    uint32_t n = 0;
    for (struct session *s = d->sessions; s; s = s->next)
        if (s->uid == uid && s->state == SESS_OPEN)
            n++;
    return n;
}

/* Why a connection is dropped at accept: each reason's warn line is
 * written at most once per REFUSE_LOG_INTERVAL_MS, then one line counts
 * those left out (zlog_limit; server_log_tick flushes it once the flood
 * stops). File scope, as client_log_level's window: one daemon per
 * process, loop thread. */
enum refusal { REFUSE_TOTAL, REFUSE_PER_UID, REFUSE_NO_FDS, REFUSE_REASONS };
static struct zlog_limit refuse_log[REFUSE_REASONS] = {
    ZLOG_LIMIT_INIT(ZLOG_WARN, "server", "refused connections (max_connections)", 1,
                    REFUSE_LOG_INTERVAL_MS),
    ZLOG_LIMIT_INIT(ZLOG_WARN, "server", "refused connections (max_connections_per_uid)", 1,
                    REFUSE_LOG_INTERVAL_MS),
    ZLOG_LIMIT_INIT(ZLOG_WARN, "server", "dropped connections (out of descriptors)", 1,
                    REFUSE_LOG_INTERVAL_MS),
};

void server_log_tick(uint64_t now_ms)
{
    for (int r = 0; r < REFUSE_REASONS; r++)
        zlog_limit_flush(&refuse_log[r], now_ms);
}

static void accept_one(struct zppd *d, int fd)
{
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
        close(fd);
        return;
    }
    int total = d->nsessions >= d->cfg.max_connections;
    if (total || sessions_of_uid(d, cred.uid) >= d->cfg.max_connections_per_uid) {
        if (zlog_limit_pass(&refuse_log[total ? REFUSE_TOTAL : REFUSE_PER_UID], zppd_now_ms()))
            ZLOG_W("server", "connection refused: limit reached", "limit=%s uid=%u pid=%d sessions=%u",
                   total ? "max_connections" : "max_connections_per_uid", cred.uid, cred.pid,
                   d->nsessions);
        close(fd);
        return;
    }
    struct session *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return;
    }
    s->d = d;
    s->id = ++d->next_session_id;
    s->fd = fd;
    s->refs = 1;
    s->uid = cred.uid;
    s->gid = cred.gid;
    s->pid = (uint32_t)cred.pid;
    s->next_buf_id = 1;
    s->connected_ms = zppd_now_ms();
    for (int i = 0; i < SESS_MAX_FDS; i++)
        s->fds[i] = -1;
    if (uv_poll_init(d->loop, &s->poll, fd) != 0) {
        close(fd);
        free(s);
        return;
    }
    s->poll.data = s;
    s->poll_events = UV_READABLE;
    uv_poll_start(&s->poll, s->poll_events, on_conn_event);
    s->next = d->sessions;
    if (d->sessions)
        d->sessions->prev = s;
    d->sessions = s;
    d->nsessions++;
    ZLOG_D("server", "session opened", "session=%llu uid=%u pid=%u", (unsigned long long)s->id,
           s->uid, s->pid);
}

static void on_listen(uv_poll_t *h, int status, int events)
{
    struct zppd *d = h->data;
    if (status < 0 || d->stopping)
        return;
    for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accept_one(d, fd);
            continue;
        }
        if (errno == EINTR)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && d->spare_fd >= 0) {
            /* Out of descriptors: give back the spare, accept and drop one
             * connection so its client sees a close instead of a hang,
             * then take the spare again. Weak under a flood, like libuv's. */
            close(d->spare_fd);
            int x = accept(d->listen_fd, NULL, NULL);
            if (x >= 0)
                close(x);
            d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (zlog_limit_pass(&refuse_log[REFUSE_NO_FDS], zppd_now_ms()))
                ZLOG_W("server", "out of file descriptors: dropped a connection", NULL);
        }
        break;
    }
}

/* The most unclaimed descriptors the sessions of one uid hold together:
 * an FDS_UID_SHARES-th of the budget (4096 of 32768 under the shipped
 * LimitNOFILE=65536: the largest registration of 16 ranks in flight at
 * once, while 8 uids can each hold theirs), but never less than one
 * session's SESS_MAX_FDS, so that the largest registration always fits.
 * root and the daemon's own uid get the same share as anyone. */
static uint32_t fds_uid_share(const struct zppd *d)
{
    uint32_t share = d->fds_budget / FDS_UID_SHARES;
    return share < SESS_MAX_FDS ? SESS_MAX_FDS : share;
}

/* Raises the soft descriptor limit to the hard one (systemd's LimitNOFILE
 * sets both; a shell often leaves the soft one at 1024), and gives half of
 * it to descriptors in flight from clients (SESS_MAX_FDS per session): the
 * rest stays for connections, peers, NCCL, CUDA and files. */
static void fds_budget_init(struct zppd *d)
{
    struct rlimit rl;
    uint64_t soft = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            struct rlimit up = {rl.rlim_max, rl.rlim_max};
            if (up.rlim_cur > (1u << 20))
                up.rlim_cur = 1u << 20;
            if (setrlimit(RLIMIT_NOFILE, &up) == 0)
                rl.rlim_cur = up.rlim_cur;
        }
        soft = rl.rlim_cur == RLIM_INFINITY ? (1u << 20) : (uint64_t)rl.rlim_cur;
    }
    d->fds_budget = (uint32_t)(soft / 2 < SESS_MAX_FDS ? SESS_MAX_FDS : soft / 2);
    zlog(ZLOG_INFO, "server", "descriptors", "limit=%llu client_budget=%u uid_share=%u",
         (unsigned long long)soft, d->fds_budget, fds_uid_share(d));
}

int server_start_accepting(struct zppd *d);
int server_start_accepting(struct zppd *d)
{
    fds_budget_init(d);
    if (uv_poll_init(d->loop, &d->listen_poll, d->listen_fd) != 0)
        return ZPP_EIO;
    d->listen_poll.data = d;
    uv_poll_start(&d->listen_poll, UV_READABLE, on_listen);
    d->listening = 1;
    return 0;
}

/* ---- output ------------------------------------------------------------ */

static void process_frames(struct session *s);
static void read_input(struct session *s);

static void resume_later(struct session *s);

static void update_poll(struct session *s)
{
    if (s->state != SESS_OPEN)
        return;
    int readable = s->out_bytes < SESS_READ_PAUSE;
    if (!readable) {
        s->read_paused = 1;
    } else if (s->read_paused) {
        s->read_paused = 0;
        resume_later(s); /* frames may wait in the input buffer already */
    }
    int ev = (readable ? UV_READABLE : 0) | (s->out_head ? UV_WRITABLE : 0);
    if (ev != s->poll_events) {
        s->poll_events = ev;
        uv_poll_start(&s->poll, ev, on_conn_event);
    }
}

/* Writes what the socket takes. Returns 0, or -1 if the peer is gone. */
static int flush_output(struct session *s)
{
    while (s->out_head) {
        struct outbuf *o = s->out_head;
        ssize_t n = send(s->fd, o->data + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return -1;
        }
        o->off += (size_t)n;
        s->out_bytes -= (size_t)n;
        if (o->off == o->len) {
            s->out_head = o->next;
            if (!s->out_head)
                s->out_tail = NULL;
            free(o);
        }
    }
    update_poll(s);
    return 0;
}

/* Replies are sent from deep inside the job layer (a call completing on
 * every rank); closing a session there, or handling its next request,
 * would re-enter it (abort the job whose call is completing). So a
 * failure met while sending only queues the close, and a session whose
 * replies drained below SESS_READ_PAUSE is queued to be read again; both
 * run on a loop turn of their own (the reaper), like Redis's
 * freeClientAsync. Each queued session holds a reference. */
static void drain_closing(struct zppd *d)
{
    while (d->closing) {
        struct session *s = d->closing;
        d->closing = s->close_next;
        s->close_next = NULL;
        sess_close(s, s->close_reason);
        sess_unref(s);
    }
}

/* read: handle the buffered frames and read the socket again (at exit the
 * references are only given back) */
static void drain_resuming(struct zppd *d, int read)
{
    while (d->resuming) {
        struct session *s = d->resuming;
        d->resuming = s->resume_next;
        s->resume_next = NULL;
        s->resume_pending = 0;
        if (read && s->state == SESS_OPEN && !s->close_pending && !s->read_paused) {
            process_frames(s);
            if (s->state == SESS_OPEN && !s->close_pending && !s->read_paused)
                read_input(s);
        }
        sess_unref(s);
    }
}

static void on_reap(uv_timer_t *t)
{
    struct zppd *d = t->data;
    drain_closing(d);
    drain_resuming(d, 1);
}

static void reap_later(struct zppd *d)
{
    if (!d->reaper_ready) {
        uv_timer_init(d->loop, &d->reaper);
        d->reaper.data = d;
        d->reaper_ready = 1;
    }
    uv_timer_start(&d->reaper, on_reap, 0, 0);
}

static void resume_later(struct session *s)
{
    struct zppd *d = s->d;
    if (s->resume_pending)
        return;
    s->resume_pending = 1;
    sess_ref(s);
    s->resume_next = d->resuming;
    d->resuming = s;
    reap_later(d);
}

void server_drop_deferred(struct zppd *d)
{
    drain_resuming(d, 0);
    drain_closing(d); /* each session is closed already: only the references */
}

void sess_close_later(struct session *s, const char *reason)
{
    struct zppd *d = s->d;
    if (s->state != SESS_OPEN || s->close_pending)
        return;
    s->close_pending = 1;
    snprintf(s->close_reason, sizeof s->close_reason, "%s", reason);
    uv_poll_stop(&s->poll); /* nothing more is read from it */
    sess_ref(s);
    s->close_next = d->closing;
    d->closing = s;
    reap_later(d);
}

int sess_send(struct session *s, const Zpp__Reply *rep)
{
    if (s->state != SESS_OPEN || s->close_pending)
        return ZPP_ECLOSED;
    zppd_busy(s->d); /* a client that got its reply often asks again soon */
    uint8_t *buf;
    size_t len;
    /* Replies may exceed a client's max_frame only through the admin
     * listings; cap them at the protocol's hard maximum. */
    int rc = zpp_reply_pack(rep, 64u << 20, &buf, &len);
    if (rc) {
        ZLOG_E("server", "cannot pack reply", "session=%llu code=%d", (unsigned long long)s->id,
               rc);
        return rc;
    }
    if (s->out_bytes + len > SESS_MAX_OUTPUT) {
        free(buf);
        sess_close_later(s, "client does not read its replies (output limit)");
        return ZPP_ELIMIT;
    }
    struct outbuf *o = malloc(sizeof *o + len);
    if (!o) {
        free(buf);
        sess_close_later(s, "out of memory for a reply");
        return ZPP_ENOMEM;
    }
    memcpy(o->data, buf, len);
    free(buf);
    o->len = len;
    o->off = 0;
    o->next = NULL;
    if (s->out_tail)
        s->out_tail->next = o;
    else
        s->out_head = o;
    s->out_tail = o;
    s->out_bytes += len;
    if (flush_output(s) < 0) {
        sess_close_later(s, "peer closed while writing");
        return ZPP_ECLOSED;
    }
    return 0;
}

void sess_send_error(struct session *s, uint64_t req_id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.code = code;
    rep.message = msg;
    ZLOG_D("server", "error reply", "session=%llu code=%d text=\"%s\"",
           (unsigned long long)s->id, code, msg);
    sess_send(s, &rep);
}

/* ---- input -------------------------------------------------------------- */

/* Unclaimed descriptors held by the sessions of uid (closing ones hold
 * none: sess_close closes theirs at once). */
static uint32_t fds_of_uid(const struct zppd *d, uint32_t uid)
{
    uint32_t n = 0;
    for (const struct session *s = d->sessions; s; s = s->next)
        if (s->uid == uid)
            n += (uint32_t)s->nfds;
    return n;
}

enum fds_over { FDS_OK = 0, FDS_OVER_SESSION = -1, FDS_OVER_BUDGET = -2, FDS_OVER_UID = -3 };

/* Takes the descriptors of one received message. Returns FDS_OK, or why
 * some were refused: the session already holds SESS_MAX_FDS, the daemon
 * its budget, or the session's uid its share (fds_uid_share). Every
 * descriptor of the message is either queued on the session or closed
 * here. */
static enum fds_over take_fds(struct session *s, struct msghdr *mh)
{
    struct zppd *d = s->d;
    const uint32_t share = fds_uid_share(d);
    /* What the uid holds is counted only once the daemon holds a share's
     * worth: below that no uid can be over it. */
    int uid_counted = 0;
    uint32_t uid_held = 0;
    enum fds_over rc = FDS_OK;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *fds = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, fds + i, sizeof fd);
            if (!uid_counted && d->fds_held >= share) {
                uid_held = fds_of_uid(d, s->uid);
                uid_counted = 1;
            }
            enum fds_over over = FDS_OK;
            if (s->nfds >= SESS_MAX_FDS)
                over = FDS_OVER_SESSION;
            else if (uid_counted && uid_held >= share)
                over = FDS_OVER_UID;
            else if (d->fds_held >= d->fds_budget)
                over = FDS_OVER_BUDGET;
            if (over == FDS_OK) {
                s->fds[s->nfds++] = fd;
                d->fds_held++;
                uid_held++;
            } else {
                close(fd);
                if (rc == FDS_OK)
                    rc = over;
            }
        }
    }
    return rc;
}

int sess_take_fd(struct session *s)
{
    if (!s->nfds)
        return -1;
    int fd = s->fds[0];
    memmove(s->fds, s->fds + 1, (size_t)(s->nfds - 1) * sizeof(int));
    s->fds[--s->nfds] = -1;
    s->d->fds_held--;
    return fd;
}

void sess_drop_announced_fds(struct session *s, const Zpp__Request *req)
{
    uint32_t n = 0;
    if (req->body_case == ZPP__REQUEST__BODY_REGISTER_BUFFER && req->register_buffer)
        n = req->register_buffer->nfds;
    else if (req->body_case == ZPP__REQUEST__BODY_HELLO && req->hello)
        n = req->hello->flags_nfds;
    for (uint32_t i = 0; i < n && i < SESS_MAX_FDS; i++) {
        int fd = sess_take_fd(s);
        if (fd >= 0)
            close(fd);
    }
}

/* A Goodbye counts only as the last thing on the stream before its end
 * (docs/protocol.md): any byte after it, a valid request or not, a frame
 * that does not unpack or one never finished, makes it count for nothing,
 * so a client cannot say it early and then die unnoticed (job_leave would
 * take that death for a leave). The Goodbye frame itself is consumed
 * before this looks, so a byte still buffered came after it. */
static void goodbye_followed(struct session *s, size_t pos)
{
    if (s->in_len > pos)
        s->goodbye = 0;
}

/* Handles every complete frame in the input buffer. */
static void process_frames(struct session *s)
{
    struct zppd *d = s->d;
    size_t pos = 0;
    /* (replies over SESS_READ_PAUSE: the rest waits until they drain) */
    while (s->state == SESS_OPEN && s->out_bytes < SESS_READ_PAUSE) {
        goodbye_followed(s, pos);
        size_t off, blen;
        int rc = zpp_frame_peek(s->in + pos, s->in_len - pos, d->cfg.max_frame, &off, &blen);
        if (rc == 0)
            break;
        if (rc < 0) {
            log_proto(s, "frame over max_frame: closing the connection");
            sess_close(s, "protocol error: frame too large");
            return;
        }
        Zpp__Request *req = NULL;
        size_t budget = blen * UNPACK_BUDGET_FACTOR;
        if (budget < UNPACK_BUDGET_MIN)
            budget = UNPACK_BUDGET_MIN;
        if (zpp_request_unpack(s->in + pos + off, blen, budget, &req) != 0) {
            log_proto(s, "frame does not unpack: closing the connection");
            sess_close(s, "protocol error: bad frame");
            return;
        }
        pos += off + blen;
        const char *why = NULL;
        int vrc = zpp_request_validate(req, &why);
        if (vrc) {
            log_proto(s, why ? why : "invalid request");
            sess_drop_announced_fds(s, req); /* refused: nothing claims them */
            sess_send_error(s, req->req_id, vrc, "%s", why ? why : "invalid request");
        } else {
            sess_dispatch(s, req);
        }
        zpp_request_free(req);
    }
    goodbye_followed(s, pos); /* (frames left for later, replies pending) */
    if (pos && s->state == SESS_OPEN) {
        memmove(s->in, s->in + pos, s->in_len - pos);
        s->in_len -= pos;
    }
}

static void read_input(struct session *s)
{
    struct zppd *d = s->d;
    for (int i = 0; i < READS_PER_WAKEUP && s->state == SESS_OPEN && !s->read_paused; i++) {
        size_t want = d->cfg.max_frame + ZPP_FRAME_HDR;
        if (s->in_cap < want) {
            size_t cap = s->in_cap ? s->in_cap : READ_CHUNK;
            while (cap < s->in_len + READ_CHUNK && cap < want)
                cap *= 2;
            if (cap > want)
                cap = want;
            if (cap > s->in_cap) {
                uint8_t *p = realloc(s->in, cap);
                if (!p) {
                    sess_close(s, "out of memory for input");
                    return;
                }
                s->in = p;
                s->in_cap = cap;
            }
        }
        if (s->in_len == s->in_cap) {
            /* Cannot happen: a frame never exceeds max_frame + header. */
            sess_close(s, "protocol error: input overflow");
            return;
        }
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(SESS_FDS_PER_MSG * sizeof(int))];
        } ctl;
        struct iovec iov = {s->in + s->in_len, s->in_cap - s->in_len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                            .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(s->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            sess_close(s, "read error");
            return;
        }
        enum fds_over fd_over = take_fds(s, &mh);
        if (fd_over == FDS_OVER_BUDGET || fd_over == FDS_OVER_UID) {
            int uid = fd_over == FDS_OVER_UID;
            d->stats.fd_budget_closes++;
            zlog(client_log_level(d), "server", "descriptor budget reached",
                 "limit=%s session=%llu uid=%u uid_held=%u uid_share=%u held=%u budget=%u",
                 uid ? "uid_share" : "daemon", (unsigned long long)s->id, s->uid,
                 fds_of_uid(d, s->uid), fds_uid_share(d), d->fds_held, d->fds_budget);
            sess_close(s, uid ? "this uid holds its share of the daemon's unclaimed descriptors"
                              : "the daemon holds its most unclaimed descriptors: try again");
            return;
        }
        if (mh.msg_flags & MSG_CTRUNC || fd_over) {
            log_proto(s, "too many descriptors on the socket");
            sess_close(s, "protocol error: too many descriptors");
            return;
        }
        if (n == 0) {
            sess_close(s, "client disconnected");
            return;
        }
        s->in_len += (size_t)n;
        zppd_busy(d);
        process_frames(s);
    }
}

static void on_conn_event(uv_poll_t *h, int status, int events)
{
    struct session *s = h->data;
    if (s->state != SESS_OPEN)
        return;
    if (status < 0) {
        sess_close(s, "socket error");
        return;
    }
    sess_ref(s);
    if (events & UV_WRITABLE && flush_output(s) < 0)
        sess_close(s, "peer closed while writing");
    if (s->state == SESS_OPEN && (events & (UV_READABLE | UV_DISCONNECT)))
        read_input(s);
    sess_unref(s);
}

/* ---- closing -------------------------------------------------------------- */

static void free_session(struct session *s)
{
    struct zppd *d = s->d;
    if (s->prev)
        s->prev->next = s->next;
    else if (d->sessions == s)
        d->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    d->nsessions--;
    while (s->out_head) {
        struct outbuf *o = s->out_head;
        s->out_head = o->next;
        free(o);
    }
    free(s->in);
    free(s);
    zppd_maybe_exit(d);
}

void sess_ref(struct session *s)
{
    s->refs++;
}

void sess_unref(struct session *s)
{
    if (--s->refs == 0)
        free_session(s);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct session *s = h->data;
    close(s->fd);
    s->fd = -1;
    s->state = SESS_CLOSED;
    sess_unref(s);
}

void sess_close(struct session *s, const char *reason)
{
    if (s->state != SESS_OPEN)
        return;
    s->state = SESS_CLOSING;
    int lvl = s->role == SESS_ROLE_RANK ? ZLOG_INFO : ZLOG_DEBUG;
    zlog(lvl, "server", "session closed", "session=%llu uid=%u pid=%u reason=\"%s\"",
         (unsigned long long)s->id, s->uid, s->pid, reason);
    if (s->job)
        job_leave(s, reason);
    sess_release_buffers(s);
    if (s->events && s->d->be->events_close)
        s->d->be->events_close(s->d->be_state, s->events);
    s->events = NULL;
    for (int i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    s->d->fds_held -= (uint32_t)s->nfds;
    s->nfds = 0;
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, on_conn_closed);
}
