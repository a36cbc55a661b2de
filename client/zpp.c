/*
 * zpp.c — libzpp's connection: a blocking Unix-socket client of zppd.
 *
 * One zpp_conn is one socket plus what the protocol needs around it: the
 * request ids it handed out and not yet returned to the caller, the replies
 * that arrived for other requests while it waited for one (the daemon may
 * answer out of order: an async collective completes after a later
 * register), the next collective sequence number, the receive buffer and the
 * message of the last failure. Framing and checked unpacking come from
 * proto/frame.c, the same module the daemon uses. Nothing is global; a
 * connection is used by one thread at a time.
 *
 * After a broken frame, a closed socket or a failed write the connection is
 * dead: every later call returns ZPP_ECLOSED and zpp_last_error keeps the
 * first cause.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "zpp.h"
#include "zpp_int.h"

/* Replies can be larger than requests (a jobs listing): the daemon packs
 * them up to 64 MiB whatever a client's max_frame (server.c sess_send, the
 * protocol's hard maximum), so a listing that big must not cost zppctl
 * its connection. The daemon is trusted more than a client, but not with
 * our heap: a reply unpacks under REPLY_BUDGET, or REPLY_BUDGET_FACTOR
 * times its size when larger (a listing of ranks unpacks each 1-3 byte
 * varint into 4 bytes). */
#define RECV_MAX_FRAME (64u << 20)
#define REPLY_BUDGET (64u << 20)
#define REPLY_BUDGET_FACTOR 4u
#define RECV_CHUNK (64u << 10)
#define MAX_OUTSTANDING 65536u
/* A non-blocking take drops at most this many replies nobody waits for
 * before it says "not yet": a daemon that keeps sending them would
 * otherwise keep zpp_test reading for as long as it sends. */
#define TEST_MAX_DROPPED 1024u
#define ERRMSG_LEN 256

typedef struct stash_node {
    Zpp__Reply *rep;
    struct stash_node *next;
} stash_node;

struct zpp_conn {
    int fd;
    int dead; /* 1 once the connection cannot carry another frame */
    uint64_t next_req_id;
    uint64_t last_seq;
    size_t send_max; /* the daemon's max_frame once Hello told us */
    uint8_t *rbuf;
    size_t rpos, rlen, rcap;
    uint64_t *outstanding; /* submitted, not yet returned to the caller */
    size_t n_out, cap_out;
    stash_node *stash;
    char err[ERRMSG_LEN];
    char bye[ERRMSG_LEN]; /* a req_id 0 error: the daemon's reason to close */
    zpp__ext ext;         /* the CUDA side's state (zpp_cuda.c), if attached */
    uint64_t spin_ns;     /* a blocking wait polls this long before it sleeps */
    /* A blocking wait gives up (and the connection with it) after this long
     * without a byte from zppd: ZPP_REPLY_TIMEOUT_MS, else REPLY_WAIT_PRE_MS
     * until Hello, then the daemon's call_timeout_ms plus
     * REPLY_WAIT_MARGIN_MS (it answers every call within its call timeout,
     * but a call's own run may add to that). A zppd whose loop is stuck
     * still accepts connections: without it such a wait never ends. */
    uint64_t wait_ns;
    int wait_env; /* set by ZPP_REPLY_TIMEOUT_MS: Hello leaves it */
    /* The daemon's max_pending from Hello (0: not known): a submit past it
     * is refused here, before it takes a sequence number (the daemon's
     * refusal would come after the number was used, leaving this rank a
     * call behind the others). */
    uint32_t max_pending;
    /* The process that said Hello as a rank (0: none): only it says
     * Goodbye, so a child that inherited the socket and closes or exits
     * never speaks for its parent. */
    pid_t hello_pid;
    int said_goodbye;
    zpp_conn *live_prev, *live_next; /* the at-exit list (joined a job) */
};

#define REPLY_WAIT_PRE_MS 60000u
#define REPLY_WAIT_MARGIN_MS 60000u
#define REPLY_WAIT_MAX_MS 86400000u

/* ---- errors -------------------------------------------------------------- */

static int set_err(zpp_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(zpp_conn *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return code;
}

/* Marks the connection dead (keeps the first cause) and returns code. */
static int conn_kill(zpp_conn *c, int code, const char *what)
{
    if (!c->dead) {
        c->dead = 1;
        if (c->bye[0])
            set_err(c, code, "%s (daemon said: %.180s)", what, c->bye);
        else
            set_err(c, code, "%s", what);
    }
    return code;
}

static int dead_err(zpp_conn *c)
{
    if (!c->err[0])
        set_err(c, ZPP_ECLOSED, "connection closed");
    return ZPP_ECLOSED;
}

/* ---- connect / close ------------------------------------------------------- */


/* SO_SNDTIMEO = wait_ns (none when 0): connect and a send that zppd does
 * not drain give up after it, like a wait for a reply. */
static void set_send_timeout(zpp_conn *c)
{
    struct timeval tv = {.tv_sec = (time_t)(c->wait_ns / 1000000000u),
                         .tv_usec = (suseconds_t)(c->wait_ns % 1000000000u / 1000u)};
    (void)setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Sets the reply wait (and the send timeout with it) to ms, at most
 * REPLY_WAIT_MAX_MS. */
static void set_wait_ms(zpp_conn *c, uint64_t ms)
{
    c->wait_ns = (ms < REPLY_WAIT_MAX_MS ? ms : REPLY_WAIT_MAX_MS) * 1000000u;
    set_send_timeout(c);
}
/* Connects to path (NULL: $ZPP_SOCKET, else ZPP_DEFAULT_SOCKET).
 * Returns 0 and *out (free with zpp_close); ZPP_EINVAL for a path that does
 * not fit a sockaddr_un, ZPP_ENOENT when nothing is there, ZPP_EPERM when
 * access is refused, ZPP_ENOMEM, else ZPP_EIO (connection refused: a stale
 * socket). errno keeps the system's cause, for the caller's message. */
int zpp_connect(const char *socket_path, zpp_conn **out)
{
    if (!out)
        return ZPP_EINVAL;
    const char *path = socket_path;
    if (!path || !path[0])
        path = secure_getenv("ZPP_SOCKET");
    if (!path || !path[0])
        path = ZPP_DEFAULT_SOCKET;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen = strlen(path);
    if (plen >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return ZPP_EINVAL;
    }
    memcpy(sa.sun_path, path, plen + 1);

    zpp_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return ZPP_ENOMEM;
    }
    c->spin_ns = zpp__env_us_ns("ZPP_SPIN_US", 100, 1000000);
    c->wait_ns = zpp__env_uint("ZPP_REPLY_TIMEOUT_MS", REPLY_WAIT_PRE_MS, REPLY_WAIT_MAX_MS,
                               &c->wait_env) * 1000000u; /* 0: wait for ever */
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        goto fail;
    /* The send timeout bounds connect too: a zppd whose loop is stuck stops
     * accepting, and once its backlog is full a blocking connect would
     * sleep for ever (EAGAIN after the timeout instead). */
    set_send_timeout(c);
    for (;;) {
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            break;
        if (errno == EINTR)
            continue;
        goto fail;
    }
    c->next_req_id = 1;
    c->send_max = ZPP_FRAME_DEFAULT_MAX;
    *out = c;
    return 0;

fail : {
    int e = errno, rc;
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        rc = ZPP_ENOENT;
        break;
    case EACCES:
    case EPERM:
        rc = ZPP_EPERM;
        break;
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
        rc = ZPP_ENOMEM;
        break;
    case EAGAIN: /* the send timeout passed: zppd's backlog stayed full */
        rc = ZPP_ETIMEDOUT;
        break;
    default:
        rc = ZPP_EIO;
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    errno = e;
    return rc;
}
}

/* ---- goodbye ------------------------------------------------------------- */

/* A rank that closes its connection on purpose says Goodbye first
 * (Hello.says_goodbye): zppd then lets it rejoin between calls, where a
 * disconnect without one means the process died and aborts the job at once
 * on every node. zpp_close says it, and so does an at-exit handler for the
 * connections a process leaves open when it exits normally (a Python
 * interpreter need not run every finalizer): only a process that is killed,
 * crashes or calls _exit ends without it. This list of connections that
 * joined a job is libzpp's one global state. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static zpp_conn *live_head;
static pid_t live_pid; /* the process the list belongs to */
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

/* Best effort and never blocking: one small frame, then the socket closes. */
static void say_goodbye(zpp_conn *c)
{
    if (!c->hello_pid || c->hello_pid != getpid() || c->fd < 0 || c->dead || c->said_goodbye)
        return;
    c->said_goodbye = 1;
    Zpp__Goodbye g = ZPP__GOODBYE__INIT;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = c->next_req_id++;
    req.body_case = ZPP__REQUEST__BODY_GOODBYE;
    req.goodbye = &g;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (zpp_request_pack(&req, c->send_max, &buf, &len) == 0) {
        ssize_t n;
        do
            n = send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
    }
    free(buf);
}

static void live_at_exit(void)
{
    if (getpid() != live_pid) /* a child's copy of its parent's list */
        return;
    pthread_mutex_lock(&live_mu);
    for (zpp_conn *c = live_head; c; c = c->live_next)
        say_goodbye(c);
    pthread_mutex_unlock(&live_mu);
}

static void live_init(void)
{
    atexit(live_at_exit);
}

static void live_add(zpp_conn *c)
{
    pthread_once(&live_once, live_init);
    pthread_mutex_lock(&live_mu);
    if (live_pid != getpid()) { /* first use in this process: a forked */
        live_head = NULL;       /* child drops its parent's entries */
        live_pid = getpid();
    }
    c->live_prev = NULL;
    c->live_next = live_head;
    if (live_head)
        live_head->live_prev = c;
    live_head = c;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(zpp_conn *c)
{
    if (!c->hello_pid || c->hello_pid != getpid())
        return; /* not on this process's list */
    pthread_mutex_lock(&live_mu);
    if (c->live_prev)
        c->live_prev->live_next = c->live_next;
    else if (live_head == c)
        live_head = c->live_next;
    if (c->live_next)
        c->live_next->live_prev = c->live_prev;
    c->live_prev = c->live_next = NULL;
    pthread_mutex_unlock(&live_mu);
}

/* Says Goodbye (a rank's connection, from the process that joined), closes
 * the socket and frees everything c holds; accepts NULL. */
void zpp_close(zpp_conn *c)
{
    if (!c)
        return;
    live_remove(c);
    say_goodbye(c);
    if (c->ext.free)
        c->ext.free(c->ext.state);
    if (c->fd >= 0)
        close(c->fd);
    while (c->stash) {
        stash_node *n = c->stash;
        c->stash = n->next;
        zpp_reply_free(n->rep);
        free(n);
    }
    free(c->outstanding);
    free(c->rbuf);
    free(c);
}

/* The message of the last failure on c ("" if none; a static string for
 * NULL). Valid until the next call on c. */
const char *zpp_last_error(const zpp_conn *c)
{
    return c ? c->err : "no connection";
}

/* The socket descriptor, owned by c; -1 for NULL. */
int zpp_fd(const zpp_conn *c)
{
    return c ? c->fd : -1;
}

/* ---- outstanding request ids ---------------------------------------------- */

static int out_find(const zpp_conn *c, uint64_t id)
{
    for (size_t i = 0; i < c->n_out; i++)
        if (c->outstanding[i] == id)
            return (int)i;
    return -1;
}

static int out_add(zpp_conn *c, uint64_t id)
{
    if (c->n_out == c->cap_out) {
        if (c->cap_out >= MAX_OUTSTANDING)
            return set_err(c, ZPP_ELIMIT, "more than %u requests outstanding", MAX_OUTSTANDING);
        size_t cap = c->cap_out ? c->cap_out * 2 : 16;
        uint64_t *p = realloc(c->outstanding, cap * sizeof(*p));
        if (!p)
            return set_err(c, ZPP_ENOMEM, "out of memory");
        c->outstanding = p;
        c->cap_out = cap;
    }
    c->outstanding[c->n_out++] = id;
    return 0;
}

static void out_remove(zpp_conn *c, uint64_t id)
{
    int i = out_find(c, id);
    if (i >= 0)
        c->outstanding[i] = c->outstanding[--c->n_out];
}

/* ---- sending ------------------------------------------------------------ */

/* The daemon accepts at most this many descriptors per recvmsg. */
#define FDS_PER_MSG 4

/* Sends all of buf; the descriptors ride on its first bytes, at most
 * FDS_PER_MSG per message (one byte each while more remain). */
static int send_all(zpp_conn *c, const uint8_t *buf, size_t len, const int *fds, int nfds)
{
    union {
        struct cmsghdr hdr;
        char space[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
    } ctl;
    size_t off = 0;
    int sent_fds = 0;
    if (nfds > 0 && (size_t)(nfds + FDS_PER_MSG - 1) / FDS_PER_MSG > len)
        return set_err(c, ZPP_EINVAL, "too many descriptors for one frame");
    while (off < len) {
        int k = nfds - sent_fds < FDS_PER_MSG ? nfds - sent_fds : FDS_PER_MSG;
        size_t chunk = len - off;
        if (k > 0 && sent_fds + k < nfds)
            chunk = 1; /* more descriptors follow on the next byte */
        struct iovec iov = {.iov_base = (void *)(buf + off), .iov_len = chunk};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (k > 0) {
            memset(&ctl, 0, sizeof(ctl));
            msg.msg_control = ctl.space;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k);
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
            memcpy(CMSG_DATA(cm), fds + sent_fds, sizeof(int) * (size_t)k);
        }
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EPIPE || errno == ECONNRESET)
                return conn_kill(c, ZPP_ECLOSED, "connection closed by the daemon");
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                char what[128];
                snprintf(what, sizeof(what),
                         "zppd did not take the request within %llu ms "
                         "(ZPP_REPLY_TIMEOUT_MS): giving up the connection",
                         (unsigned long long)(c->wait_ns / 1000000u));
                return conn_kill(c, ZPP_ETIMEDOUT, what);
            }
            char what[96];
            snprintf(what, sizeof(what), "send failed: %s", strerror(errno));
            return conn_kill(c, ZPP_EIO, what);
        }
        off += (size_t)n;
        sent_fds += k;
    }
    return 0;
}

/* Stamps version and a fresh req_id on req, packs and sends it, and records
 * the id as outstanding. */
static int conn_send(zpp_conn *c, Zpp__Request *req, const int *fds, int nfds, uint64_t *req_id)
{
    if (c->dead)
        return dead_err(c);
    uint8_t *buf = NULL;
    size_t len = 0;
    req->version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req->req_id = c->next_req_id;
    int rc = zpp_request_pack(req, c->send_max, &buf, &len);
    if (rc == ZPP_ELIMIT)
        return set_err(c, rc, "request larger than the daemon's max_frame (%zu bytes)",
                       c->send_max);
    if (rc < 0)
        return set_err(c, rc, "cannot pack request: %s", zpp_strerror(rc));
    rc = out_add(c, req->req_id);
    if (rc == 0) {
        rc = send_all(c, buf, len, fds, nfds);
        if (rc < 0)
            out_remove(c, req->req_id);
    }
    free(buf);
    if (rc < 0)
        return rc;
    c->next_req_id++;
    *req_id = req->req_id;
    return 0;
}

/* ---- receiving ------------------------------------------------------------ */

uint64_t zpp__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t zpp__env_uint(const char *name, uint64_t dflt, uint64_t max, int *given)
{
    const char *s = getenv(name);
    if (given)
        *given = 0;
    if (s && s[0] >= '0' && s[0] <= '9') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end == '\0' && !errno && v <= max) {
            if (given)
                *given = 1;
            return (uint64_t)v;
        }
    }
    return dflt;
}

uint64_t zpp__env_us_ns(const char *name, uint64_t def_us, uint64_t max_us)
{
    return zpp__env_uint(name, def_us, max_us, NULL) * 1000u;
}

/* Reads until one whole reply frame is buffered and unpacks it.
 * Returns 1 and *out; 0 when !block and no whole frame is there yet;
 * a negative code (the connection is then dead). */
static int recv_one(zpp_conn *c, int block, Zpp__Reply **out)
{
    /* A blocking wait first polls for spin_ns (ZPP_SPIN_US): a small call's
     * reply comes within tens of microseconds, and a receiver asleep in
     * recv pays the wake-up on top (zppd's busy_poll_us says more). */
    uint64_t spin_end = block && c->spin_ns ? zpp__mono_ns() + c->spin_ns : 0;
    uint64_t quiet_since = block ? zpp__mono_ns() : 0; /* the last byte, for wait_ns */
    for (;;) {
        size_t off = 0, blen = 0;
        int r = c->rbuf ? zpp_frame_peek(c->rbuf + c->rpos, c->rlen - c->rpos, RECV_MAX_FRAME, &off,
                                         &blen)
                        : 0;
        if (r < 0)
            return conn_kill(c, ZPP_EPROTO, "reply frame over the client's limit");
        if (r == 1) {
            Zpp__Reply *rep = NULL;
            size_t budget = blen > REPLY_BUDGET / REPLY_BUDGET_FACTOR ? blen * REPLY_BUDGET_FACTOR
                                                                      : REPLY_BUDGET;
            int rc = zpp_reply_unpack(c->rbuf + c->rpos + off, blen, budget, &rep);
            c->rpos += off + blen;
            if (c->rpos == c->rlen)
                c->rpos = c->rlen = 0;
            if (rc < 0)
                return conn_kill(c, ZPP_EPROTO, "reply does not unpack");
            *out = rep;
            return 1;
        }
        /* Need more: make room for the whole announced frame. */
        if (c->rpos > 0) {
            memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        size_t want = c->rlen + RECV_CHUNK;
        if (c->rlen >= ZPP_FRAME_HDR) {
            size_t total =
                ZPP_FRAME_HDR + (((size_t)c->rbuf[0] << 24) | ((size_t)c->rbuf[1] << 16) |
                                 ((size_t)c->rbuf[2] << 8) | (size_t)c->rbuf[3]);
            if (total > want)
                want = total;
        }
        if (want > c->rcap) {
            uint8_t *p = realloc(c->rbuf, want);
            if (!p)
                return set_err(c, ZPP_ENOMEM, "out of memory for a reply of %zu bytes", want);
            c->rbuf = p;
            c->rcap = want;
        }
        int spinning = spin_end && zpp__mono_ns() < spin_end;
        if (block && !spinning && c->wait_ns) {
            uint64_t now = zpp__mono_ns(), end = quiet_since + c->wait_ns;
            int ms = now >= end ? 0 : (int)((end - now + 999999u) / 1000000u);
            struct pollfd pf = {.fd = c->fd, .events = POLLIN};
            int pr = poll(&pf, 1, ms);
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr == 0) {
                char what[128];
                snprintf(what, sizeof(what),
                         "no reply from zppd within %llu ms (ZPP_REPLY_TIMEOUT_MS): giving up "
                         "the connection",
                         (unsigned long long)(c->wait_ns / 1000000u));
                return conn_kill(c, ZPP_ETIMEDOUT, what);
            }
        }
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen,
                         block && !spinning ? 0 : MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!block)
                    return 0;
                continue; /* spinning (a blocking recv does not say EAGAIN) */
            }
            if (errno == ECONNRESET)
                return conn_kill(c, ZPP_ECLOSED, "connection reset by the daemon");
            char what[96];
            snprintf(what, sizeof(what), "receive failed: %s", strerror(errno));
            return conn_kill(c, ZPP_EIO, what);
        }
        if (n == 0)
            return conn_kill(c, ZPP_ECLOSED, "connection closed by the daemon");
        c->rlen += (size_t)n;
        if (block)
            quiet_since = zpp__mono_ns();
    }
}

static Zpp__Reply *stash_take(zpp_conn *c, uint64_t id)
{
    for (stash_node **pp = &c->stash; *pp; pp = &(*pp)->next) {
        if ((*pp)->rep->req_id == id) {
            stash_node *n = *pp;
            Zpp__Reply *rep = n->rep;
            *pp = n->next;
            free(n);
            return rep;
        }
    }
    return NULL;
}

static int stash_has(const zpp_conn *c, uint64_t id)
{
    for (const stash_node *n = c->stash; n; n = n->next)
        if (n->rep->req_id == id)
            return 1;
    return 0;
}

/* Returns 1 and the reply to `id` (removing it from the outstanding set),
 * 0 if !block and it has not arrived, or a negative code. Replies to other
 * outstanding requests are stashed, once (a second reply to the same
 * request, a daemon's bug, would otherwise pile up and be returned to a later
 * wait on a finished id); unsolicited ones are dropped, except a
 * req_id 0 error (a daemon's last word before it closes), whose message is
 * kept. A non-blocking take returns 0 after TEST_MAX_DROPPED of those. */
static int conn_take(zpp_conn *c, uint64_t id, int block, Zpp__Reply **out)
{
    Zpp__Reply *rep = stash_take(c, id);
    if (rep)
        goto found;
    if (out_find(c, id) < 0)
        return set_err(c, ZPP_ENOENT, "request %llu is not outstanding", (unsigned long long)id);
    if (c->dead)
        return dead_err(c);
    unsigned dropped = 0;
    for (;;) {
        int r = recv_one(c, block, &rep);
        if (r <= 0)
            return r;
        if (rep->req_id == id)
            goto found;
        if (out_find(c, rep->req_id) >= 0 && !stash_has(c, rep->req_id)) {
            stash_node *n = malloc(sizeof(*n));
            if (!n) {
                zpp_reply_free(rep);
                return conn_kill(c, ZPP_ENOMEM, "out of memory keeping a reply");
            }
            n->rep = rep;
            n->next = c->stash;
            c->stash = n;
            continue;
        }
        if (rep->req_id == 0 && rep->code < 0)
            snprintf(c->bye, sizeof(c->bye), "%s", rep->message ? rep->message : "");
        zpp_reply_free(rep);
        if (!block && ++dropped >= TEST_MAX_DROPPED)
            return 0;
    }
found:
    out_remove(c, id);
    *out = rep;
    return 1;
}

/* The outcome of a reply: 0, or its code with its message as last error. A
 * success without the body the request calls for is a protocol error. */
static int reply_status(zpp_conn *c, const Zpp__Reply *rep, int want_body)
{
    if (rep->code != 0) {
        int code = rep->code < 0 ? rep->code : ZPP_EPROTO;
        if (rep->message && rep->message[0])
            return set_err(c, code, "%s", rep->message);
        return set_err(c, code, "%s", zpp_strerror(code));
    }
    if (want_body && (int)rep->body_case != want_body)
        return set_err(c, ZPP_EPROTO, "daemon reply lacks the expected body");
    return 0;
}

/* Sends req and waits for its reply: 0 and *out, or a negative code. */
static int conn_call_fds(zpp_conn *c, Zpp__Request *req, const int *fds, int nfds, int want_body,
                         Zpp__Reply **out)
{
    uint64_t id = 0;
    Zpp__Reply *rep = NULL;
    int rc = conn_send(c, req, fds, nfds, &id);
    if (rc < 0)
        return rc;
    rc = conn_take(c, id, 1, &rep);
    if (rc < 0)
        return rc;
    rc = reply_status(c, rep, want_body);
    if (rc < 0) {
        zpp_reply_free(rep);
        return rc;
    }
    *out = rep;
    return 0;
}

/* conn_call_fds without descriptors. */
static int conn_call(zpp_conn *c, Zpp__Request *req, int want_body, Zpp__Reply **out)
{
    return conn_call_fds(c, req, NULL, 0, want_body, out);
}

/* Stamps the protocol version on req and checks what the framing layer can
 * check alone, so a bad request fails here with the reason. */
static int check_local(zpp_conn *c, Zpp__Request *req)
{
    const char *why = NULL;
    req->version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    int rc = zpp_request_validate(req, &why);
    if (rc < 0)
        return set_err(c, rc, "%s", why);
    return 0;
}

/* check_local, then conn_call_fds. */
static int conn_call_checked(zpp_conn *c, Zpp__Request *req, const int *fds, int nfds,
                             int want_body, Zpp__Reply **out)
{
    int rc = check_local(c, req);
    return rc < 0 ? rc : conn_call_fds(c, req, fds, nfds, want_body, out);
}

/* Sends a RegisterBuffer (with its descriptors) and returns 0 and the
 * daemon's *buffer_id, or a negative code. */
static int register_call(zpp_conn *c, Zpp__RegisterBuffer *rb, const int *fds, int nfds,
                         uint64_t *buffer_id)
{
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = rb;
    Zpp__Reply *rep = NULL;
    int rc = conn_call_checked(c, &req, fds, nfds, ZPP__REPLY__BODY_REGISTER_BUFFER, &rep);
    if (rc < 0)
        return rc;
    *buffer_id = rep->register_buffer->buffer_id;
    zpp_reply_free(rep);
    return 0;
}

static char *nz(const char *s)
{
    return (char *)(s ? s : "");
}

/* ---- hello ------------------------------------------------------------------ */

/* Joins job as a rank (ROLE_RANK). Fills info (may be NULL) from the
 * HelloReply and adopts the daemon's max_frame for later requests. */
int zpp_hello(zpp_conn *c, const zpp_job_desc *job, zpp_hello_info *info)
{
    if (!c)
        return ZPP_EINVAL;
    if (!job)
        return set_err(c, ZPP_EINVAL, "no job description");
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.role = ZPP__ROLE__ROLE_RANK;
    h.job_id = nz(job->job_id);
    h.rank = job->rank;
    h.world_size = job->world_size;
    h.local_rank = job->local_rank;
    h.node_count = job->node_count;
    h.gpu_uuid = nz(job->gpu_uuid);
    h.leader_addr = nz(job->leader_addr);
    h.tenant_label = nz(job->tenant_label);
    h.pid = (uint32_t)getpid();
    h.says_goodbye = 1; /* zpp_close and the at-exit handler say it */
    int fds[2], nfds = 0;
    if (c->ext.hello_out) {
        int erc = c->ext.hello_out(c->ext.state, &h, fds, &nfds);
        if (erc < 0)
            return set_err(c, erc, "cannot export the CUDA ready events or done flags");
    }
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    Zpp__Reply *rep = NULL;
    int rc = conn_call_checked(c, &req, nfds ? fds : NULL, nfds, ZPP__REPLY__BODY_HELLO, &rep);
    if (rc < 0)
        return rc;
    const Zpp__HelloReply *hr = rep->hello;
    /* next_seq numbers this rank's next call; at 2^63 or more the client's
     * own numbering would wrap to 0, which means "the daemon picks" */
    if (hr->next_seq >= (1ull << 63)) {
        rc = set_err(c, ZPP_EPROTO, "the daemon's Hello reply has next_seq %llu",
                     (unsigned long long)hr->next_seq);
        zpp_reply_free(rep);
        return rc;
    }
    if (c->ext.hello_in && (rc = c->ext.hello_in(c->ext.state, c, hr)) < 0) {
        zpp_reply_free(rep);
        return rc;
    }
    if (hr->next_seq > 1) /* rejoining a running job: continue its numbering */
        c->last_seq = hr->next_seq - 1;
    if (hr->limits && hr->limits->max_frame >= ZPP_FRAME_MIN_MAX &&
        hr->limits->max_frame <= UINT32_MAX)
        c->send_max = (size_t)hr->limits->max_frame;
    if (hr->limits && hr->limits->call_timeout_ms && !c->wait_env)
        set_wait_ms(c, (uint64_t)hr->limits->call_timeout_ms + REPLY_WAIT_MARGIN_MS);
    if (hr->limits)
        c->max_pending = hr->limits->max_pending;
    if (!c->hello_pid) {
        c->hello_pid = getpid();
        live_add(c);
    }
    if (info) {
        memset(info, 0, sizeof(*info));
        info->session_id = hr->session_id;
        snprintf(info->daemon_version, sizeof(info->daemon_version), "%s", nz(hr->daemon_version));
        snprintf(info->backend, sizeof(info->backend), "%s", nz(hr->backend));
        if (hr->limits) {
            info->max_frame = hr->limits->max_frame;
            info->max_buffers = hr->limits->max_buffers;
            info->max_pending = hr->limits->max_pending;
        }
        info->nodes = hr->nodes;
        info->local_size = hr->local_size;
    }
    zpp_reply_free(rep);
    return 0;
}

/* ---- buffers ----------------------------------------------------------------- */

/* Registers [offset, offset+length) of the sealed memfd fd (sent with
 * SCM_RIGHTS; the caller keeps its descriptor). Returns 0 and *buffer_id. */
int zpp_register_fd(zpp_conn *c, int fd, uint64_t offset, uint64_t length, uint64_t *buffer_id)
{
    if (!c)
        return ZPP_EINVAL;
    if (fd < 0 || !buffer_id)
        return set_err(c, ZPP_EINVAL, "register: bad descriptor or no buffer_id");
    int seals = fcntl(fd, F_GET_SEALS);
    int need = F_SEAL_SHRINK | F_SEAL_GROW;
    if (seals < 0 || (seals & need) != need)
        return set_err(c, ZPP_EINVAL,
                       "register: descriptor is not a memfd sealed against "
                       "shrinking and growing (see zpp_shm_create)");
    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.offset = offset;
    rb.length = length;
    rb.nfds = 1;
    rb.gpu_uuid = (char *)"host";
    return register_call(c, &rb, &fd, 1, buffer_id);
}

/* zpp_register_fd on s's memfd, after checking the range against s. */
int zpp_register_shm(zpp_conn *c, const zpp_shm *s, uint64_t offset, uint64_t length,
                     uint64_t *buffer_id)
{
    if (!c)
        return ZPP_EINVAL;
    if (!s)
        return set_err(c, ZPP_EINVAL, "register: no shared memory");
    uint64_t size = zpp_shm_size(s);
    if (offset > size || length > size - offset)
        return set_err(c, ZPP_ERANGE, "register: [%llu, +%llu) is outside the %llu-byte shm",
                       (unsigned long long)offset, (unsigned long long)length,
                       (unsigned long long)size);
    return zpp_register_fd(c, zpp_shm_fd(s), offset, length, buffer_id);
}

/* Drops a registration of this session. */
int zpp_deregister(zpp_conn *c, uint64_t buffer_id)
{
    if (!c)
        return ZPP_EINVAL;
    Zpp__DeregisterBuffer db = ZPP__DEREGISTER_BUFFER__INIT;
    db.buffer_id = buffer_id;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.body_case = ZPP__REQUEST__BODY_DEREGISTER_BUFFER;
    req.deregister_buffer = &db;
    Zpp__Reply *rep = NULL;
    int rc = conn_call(c, &req, 0, &rep);
    if (rc < 0)
        return rc;
    zpp_reply_free(rep);
    if (c->ext.deregistered)
        c->ext.deregistered(c->ext.state, buffer_id);
    return 0;
}

/* ---- collectives ------------------------------------------------------------ */

/* Fills call with defaults: int8, daemon-default block and stages, sum,
 * output dtype = input dtype, no hpZ key, next sequence number. */
void zpp_coll_init(zpp_coll *call, zpp_op_t op, zpp_dtype_t dtype, uint64_t count)
{
    if (!call)
        return;
    memset(call, 0, sizeof(*call));
    call->op = op;
    call->dtype = dtype;
    call->count = count;
    call->bits = 8;
    call->reduce = ZPP_SUM;
}

/* Validates and sends a collective; returns 0 and *req_id, or a code. */
int zpp_submit(zpp_conn *c, const zpp_coll *call, uint64_t *req_id)
{
    return zpp__submit_ev(c, call, 0, 0, req_id);
}

int zpp__submit_ev(zpp_conn *c, const zpp_coll *call, uint32_t event_slot, uint64_t flag_value,
                   uint64_t *req_id)
{
    if (!c)
        return ZPP_EINVAL;
    if (!call || !req_id)
        return set_err(c, ZPP_EINVAL, "no call or no req_id");
    int has_in = call->op == ZPP_OP_QWZ_ALLGATHER || call->op == ZPP_OP_QGZ_REDUCE_SCATTER ||
                 call->op == ZPP_OP_ALLGATHER || call->op == ZPP_OP_REDUCE_SCATTER;
    int has_out = has_in || call->op == ZPP_OP_HPZ_GATHER;
    Zpp__BufRef in = ZPP__BUF_REF__INIT, out = ZPP__BUF_REF__INIT;
    in.buffer_id = call->input.buffer_id;
    in.offset = call->input.offset;
    out.buffer_id = call->output.buffer_id;
    out.offset = call->output.offset;
    Zpp__Collective co = ZPP__COLLECTIVE__INIT;
    co.seq = call->seq ? call->seq : c->last_seq + 1;
    co.op = (Zpp__Op)call->op;
    co.dtype = (Zpp__DType)call->dtype;
    co.count = call->count;
    co.bits = call->bits;
    co.block = call->block;
    co.stages = call->stages;
    co.hpz_key = nz(call->hpz_key);
    co.content_key = nz(call->content_key);
    co.reduce = (Zpp__ReduceOp)call->reduce;
    co.out_dtype = (Zpp__DType)call->out_dtype;
    co.input = has_in ? &in : NULL;
    co.output = has_out ? &out : NULL;
    co.flags = call->flags;
    co.timeout_ms = call->timeout_ms;
    co.event_slot = event_slot;
    co.flag_value = flag_value;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
    req.collective = &co;
    int rc = check_local(c, &req);
    if (rc < 0)
        return rc;
    if (c->max_pending && c->n_out >= c->max_pending)
        return set_err(c, ZPP_ELIMIT,
                       "%zu requests submitted and not yet waited for (the daemon's max_pending "
                       "is %u): wait for one first; nothing was sent and this call's sequence "
                       "number is not used",
                       c->n_out, c->max_pending);
    rc = conn_send(c, &req, NULL, 0, req_id);
    if (rc < 0)
        return rc;
    c->last_seq = co.seq;
    /* The daemon waits up to the call's own timeout_ms, which may be longer
     * than its call_timeout_ms: so does the wait for its reply. */
    if (!c->wait_env && c->wait_ns &&
        (uint64_t)call->timeout_ms + REPLY_WAIT_MARGIN_MS > c->wait_ns / 1000000u)
        set_wait_ms(c, (uint64_t)call->timeout_ms + REPLY_WAIT_MARGIN_MS);
    return 0;
}

static int collective_result(zpp_conn *c, Zpp__Reply *rep, zpp_result *res)
{
    /* ZPP_EBUSY from zpp_test means "not arrived": a daemon that answers a
     * collective with it would make the caller poll an id already taken. */
    if (rep->code == ZPP_EBUSY) {
        int rc = set_err(c, ZPP_EPROTO, "daemon answered request %llu with ZPP_EBUSY: %.180s",
                         (unsigned long long)rep->req_id, rep->message ? rep->message : "");
        zpp_reply_free(rep);
        return rc;
    }
    int rc = reply_status(c, rep, ZPP__REPLY__BODY_COLLECTIVE);
    if (rc == 0 && res) {
        const Zpp__CollectiveReply *cr = rep->collective;
        res->algo = (int)cr->algo;
        res->seq = cr->seq;
        res->logical_bytes = cr->logical_bytes;
        res->bytes_intra = cr->bytes_intra;
        res->bytes_inter = cr->bytes_inter;
        res->bytes_zero3_inter = cr->bytes_zero3_inter;
        res->nonfinite_blocks = cr->nonfinite_blocks;
        res->elapsed_us = cr->elapsed_us;
    }
    zpp_reply_free(rep);
    return rc;
}

/* The result of request req_id; ZPP_EBUSY when !block and its reply has
 * not arrived (a blocking take never returns without one). */
static int take_result(zpp_conn *c, uint64_t req_id, int block, zpp_result *res)
{
    if (!c)
        return ZPP_EINVAL;
    Zpp__Reply *rep = NULL;
    int rc = conn_take(c, req_id, block, &rep);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return ZPP_EBUSY;
    return collective_result(c, rep, res);
}

/* Blocks until request req_id's reply; other replies are kept. ZPP_ENOENT
 * for an id that is not outstanding. */
int zpp_wait(zpp_conn *c, uint64_t req_id, zpp_result *res)
{
    return take_result(c, req_id, 1, res);
}

/* zpp_wait without blocking: ZPP_EBUSY if the reply has not arrived. */
int zpp_test(zpp_conn *c, uint64_t req_id, zpp_result *res)
{
    return take_result(c, req_id, 0, res);
}

/* Submit + wait. */
int zpp_collective(zpp_conn *c, const zpp_coll *call, zpp_result *res)
{
    if (c && c->ext.collective) /* CUDA attached: stream-ordered (zpp_cuda.c) */
        return c->ext.collective(c->ext.state, c, call, res);
    uint64_t id = 0;
    int rc = zpp_submit(c, call, &id);
    if (rc < 0)
        return rc;
    return zpp_wait(c, id, res);
}

/* A call of op from in to out, the rest zpp_coll_init's defaults. */
static zpp_coll coll_io(zpp_op_t op, zpp_dtype_t dtype, uint64_t count, zpp_bufref in,
                        zpp_bufref out)
{
    zpp_coll call;
    zpp_coll_init(&call, op, dtype, count);
    call.input = in;
    call.output = out;
    return call;
}

/* qwZ all-gather; hpz_key (may be NULL) keeps this node's slice. */
int zpp_qwz_allgather(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count, zpp_dtype_t dtype,
                      uint32_t bits, uint32_t block, const char *hpz_key, zpp_result *res)
{
    zpp_coll call = coll_io(ZPP_OP_QWZ_ALLGATHER, dtype, count, in, out);
    call.bits = bits;
    call.block = block;
    call.hpz_key = hpz_key;
    return zpp_collective(c, &call, res);
}

/* hpZ gather of the node-level slices kept under hpz_key. */
int zpp_hpz_gather(zpp_conn *c, zpp_bufref out, uint64_t count, zpp_dtype_t dtype,
                   const char *hpz_key, zpp_result *res)
{
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_HPZ_GATHER, dtype, count);
    call.output = out;
    call.hpz_key = hpz_key;
    return zpp_collective(c, &call, res);
}

/* Drops hpz_key; NULL or "" drops every key of the job. */
int zpp_hpz_invalidate(zpp_conn *c, const char *hpz_key, zpp_result *res)
{
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_HPZ_INVALIDATE, 0, 0);
    call.hpz_key = hpz_key;
    if (!hpz_key || !hpz_key[0])
        call.flags = ZPP_FLAG_INVALIDATE_ALL;
    return zpp_collective(c, &call, res);
}

/* qgZ reduce-scatter with `bits`-bit quantization. */
int zpp_qgz_reduce_scatter(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count,
                           zpp_dtype_t dtype, zpp_dtype_t out_dtype, uint32_t bits,
                           zpp_reduce_t reduce, zpp_result *res)
{
    zpp_coll call = coll_io(ZPP_OP_QGZ_REDUCE_SCATTER, dtype, count, in, out);
    call.out_dtype = out_dtype;
    call.bits = bits;
    call.reduce = reduce;
    return zpp_collective(c, &call, res);
}

/* Plain (exact) all-gather. */
int zpp_allgather(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count, zpp_dtype_t dtype,
                  zpp_result *res)
{
    zpp_coll call = coll_io(ZPP_OP_ALLGATHER, dtype, count, in, out);
    return zpp_collective(c, &call, res);
}

/* Plain (exact) reduce-scatter. */
int zpp_reduce_scatter(zpp_conn *c, zpp_bufref in, zpp_bufref out, uint64_t count,
                       zpp_dtype_t dtype, zpp_dtype_t out_dtype, zpp_reduce_t reduce,
                       zpp_result *res)
{
    zpp_coll call = coll_io(ZPP_OP_REDUCE_SCATTER, dtype, count, in, out);
    call.out_dtype = out_dtype;
    call.reduce = reduce;
    return zpp_collective(c, &call, res);
}

/* Completes when every rank of the job submitted it. */
int zpp_barrier(zpp_conn *c, zpp_result *res)
{
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_BARRIER, 0, 0);
    return zpp_collective(c, &call, res);
}

/* ---- hooks for zpp_cuda.c ------------------------------------------------------ */

zpp__ext *zpp__ext_of(zpp_conn *c)
{
    return &c->ext;
}

int zpp__set_err(zpp_conn *c, int code, const char *msg)
{
    return set_err(c, code, "%s", msg);
}

int zpp__register_dev(zpp_conn *c, const int *fds, int nfds, const uint64_t *chunk_sizes,
                      const uint8_t *ipc, size_t ipc_len, const char *gpu_uuid, uint64_t offset,
                      uint64_t length, uint64_t *buffer_id)
{
    if (!c)
        return ZPP_EINVAL;
    if (!buffer_id || (nfds > 0) == (ipc_len > 0) || nfds < 0)
        return set_err(c, ZPP_EINVAL, "register: give VMM descriptors or one IPC handle");
    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.offset = offset;
    rb.length = length;
    rb.nfds = (uint32_t)nfds;
    rb.gpu_uuid = nz(gpu_uuid);
    rb.n_chunk_sizes = (size_t)nfds;
    rb.chunk_sizes = (uint64_t *)chunk_sizes;
    rb.ipc_handle.data = (uint8_t *)ipc;
    rb.ipc_handle.len = ipc_len;
    return register_call(c, &rb, fds, nfds, buffer_id);
}

/* CheckRequest: see zpp.h. */
int zpp_check(zpp_conn *c)
{
    if (!c)
        return ZPP_EINVAL;
    Zpp__CheckRequest cr = ZPP__CHECK_REQUEST__INIT;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.body_case = ZPP__REQUEST__BODY_CHECK;
    req.check = &cr;
    Zpp__Reply *rep = NULL;
    int rc = conn_call(c, &req, ZPP__REPLY__BODY_CHECK, &rep);
    if (rc < 0)
        return rc;
    zpp_reply_free(rep);
    return 0;
}

/* ---- admin -------------------------------------------------------------------- */

/* Sends an admin query (Status, Jobs, Sessions, Store, Metrics; no Hello
 * needed) and waits for the
 * reply; *out is freed with zpp_reply_free. */
int zpp__admin_query(zpp_conn *c, int which, Zpp__Reply **out)
{
    if (!c)
        return ZPP_EINVAL;
    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    Zpp__JobsQuery jq = ZPP__JOBS_QUERY__INIT;
    Zpp__SessionsQuery sessq = ZPP__SESSIONS_QUERY__INIT;
    Zpp__StoreQuery stq = ZPP__STORE_QUERY__INIT;
    Zpp__MetricsQuery mq = ZPP__METRICS_QUERY__INIT;
    Zpp__Request req = ZPP__REQUEST__INIT;
    int want;
    switch (which) {
    case ZPP__REQUEST__BODY_STATUS: req.status = &sq; want = ZPP__REPLY__BODY_STATUS; break;
    case ZPP__REQUEST__BODY_JOBS: req.jobs = &jq; want = ZPP__REPLY__BODY_JOBS; break;
    case ZPP__REQUEST__BODY_SESSIONS:
        req.sessions = &sessq;
        want = ZPP__REPLY__BODY_SESSIONS;
        break;
    case ZPP__REQUEST__BODY_STORE: req.store = &stq; want = ZPP__REPLY__BODY_STORE; break;
    case ZPP__REQUEST__BODY_METRICS: req.metrics = &mq; want = ZPP__REPLY__BODY_METRICS; break;
    default: return set_err(c, ZPP_EINVAL, "unknown admin query");
    }
    req.body_case = (Zpp__Request__BodyCase)which;
    return conn_call(c, &req, want, out);
}

/* Sends a DrainRequest (off: undo) and waits for the DrainReply. */
int zpp__admin_drain(zpp_conn *c, int off, Zpp__Reply **out)
{
    if (!c)
        return ZPP_EINVAL;
    Zpp__DrainRequest dr = ZPP__DRAIN_REQUEST__INIT;
    Zpp__Request req = ZPP__REQUEST__INIT;
    dr.off = off != 0;
    req.body_case = ZPP__REQUEST__BODY_DRAIN;
    req.drain = &dr;
    return conn_call(c, &req, ZPP__REPLY__BODY_DRAIN, out);
}

static int admin_json(zpp_conn *c, int which, char *buf, size_t len)
{
    if (!c)
        return ZPP_EINVAL;
    if (!buf || !len)
        return set_err(c, ZPP_EINVAL, "no output buffer");
    Zpp__Reply *rep = NULL;
    char *json = NULL;
    int rc = zpp__admin_query(c, which, &rep);
    if (rc < 0)
        return rc;
    rc = which == ZPP__REQUEST__BODY_STATUS ? zpp__status_json(rep->status, &json)
                                            : zpp__jobs_json(rep->jobs, &json);
    if (rc < 0) {
        set_err(c, rc, "out of memory rendering JSON");
    } else if (strlen(json) >= len) {
        rc = set_err(c, ZPP_ERANGE, "JSON reply needs %zu bytes, buffer has %zu", strlen(json) + 1,
                     len);
    } else {
        memcpy(buf, json, strlen(json) + 1);
    }
    free(json);
    zpp_reply_free(rep);
    return rc;
}

/* The daemon's StatusReply as a JSON object in buf (ZPP_ERANGE if short). */
int zpp_admin_status_json(zpp_conn *c, char *buf, size_t len)
{
    return admin_json(c, ZPP__REQUEST__BODY_STATUS, buf, len);
}

/* The daemon's JobsReply as a JSON object {"jobs":[...]} in buf. */
int zpp_admin_jobs_json(zpp_conn *c, char *buf, size_t len)
{
    return admin_json(c, ZPP__REQUEST__BODY_JOBS, buf, len);
}
