/*
 * session.h — one client connection and what it owns.
 *
 * A session is one accepted Unix-socket connection: its peer credentials
 * (the tenant is the uid from SO_PEERCRED, plus an optional label), its
 * input and output buffers, the descriptors that arrived with its frames,
 * and the buffers it registered. A session that said Hello as a rank is a
 * member of one job.
 *
 * Lifetime: a session is freed when its connection is closed (uv_close
 * done) and no call still needs to reply on it (refs). Registered buffers
 * are reference-counted apart from the session, so an in-flight call keeps
 * the memory it reads mapped even if the client deregisters or dies.
 */
#ifndef ZPPD_SESSION_H
#define ZPPD_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "backend.h"
#include "zpp.pb-c.h"

struct zppd;
struct job;

/* Unclaimed descriptors a session may hold: the VMM chunks of one
 * registration (ZPP_CUDA_MAX_CHUNKS: 5 GiB of PyTorch's 20 MiB chunks)
 * arrive before their frame. The sessions of one uid hold at most a
 * share of zppd.fds_budget (an eighth, at least SESS_MAX_FDS), the daemon
 * as a whole at most fds_budget (server.c). */
#define SESS_MAX_FDS 256
#define SESS_FDS_PER_MSG 4   /* descriptors accepted per recvmsg */
#define SESS_MAX_OUTPUT (64u << 20)
/* Unsent replies past this: the session's requests are not read (nor its
 * buffered frames handled) until they drain below it. A client that sends
 * without reading then stalls itself, and the daemon holds about this much
 * for it, not SESS_MAX_OUTPUT. */
#define SESS_READ_PAUSE (1u << 20)

enum sess_state { SESS_OPEN = 0, SESS_CLOSING = 1, SESS_CLOSED = 2 };
enum sess_role { SESS_ROLE_NONE = 0, SESS_ROLE_RANK = 1, SESS_ROLE_ADMIN = 2 };

/* A registered region of client memory, mapped into the daemon. */
struct buffer {
    uint64_t id;
    int refs;
    const struct be_ops *ops; /* device memory: released through ops */
    void *be;
    void *handle;
    void *map;      /* host memory: the mapping (munmap'd at last unref) */
    size_t map_len;
    uint8_t *ptr;   /* start of the registered region */
    uint64_t len;
    int private_; /* only its own GPU may read it (be_ops.buf_shared) */
};

struct outbuf {
    struct outbuf *next;
    size_t len, off;
    uint8_t data[];
};

struct session {
    struct zppd *d;
    uint64_t id;
    int fd;
    uv_poll_t poll;
    int poll_events;
    enum sess_state state;
    int refs; /* 1 for the connection, +1 per call that will reply here */

    uint32_t uid, gid, pid;
    enum sess_role role;
    char label[65];

    uint8_t *in;
    size_t in_len, in_cap;
    int fds[SESS_MAX_FDS];
    int nfds;
    struct outbuf *out_head, *out_tail;
    size_t out_bytes;

    struct job *job;
    uint32_t rank;
    int device;      /* cuda: the daemon's index of the client's GPU */
    void *events;    /* cuda: the session's event pools */
    uint32_t nevents;
    int flag_sync;   /* cuda: the backend writes the client's done flags (Hello.flags_nfds) */
    uint32_t pending; /* collective calls waiting for a reply */
    int says_goodbye; /* Hello: the client sends Goodbye before a deliberate close */
    int goodbye;      /* it did, and nothing followed on the stream: a
                       * disconnect now is a leave, not a death */

    struct buffer **bufs; /* sorted by id */
    uint32_t nbufs, cap_bufs;
    uint64_t next_buf_id;

    uint64_t connected_ms;
    int close_pending;
    char close_reason[96];
    struct session *close_next; /* the daemon's list of sessions to close */
    int read_paused;    /* replies over SESS_READ_PAUSE: input left unread */
    int resume_pending; /* on the daemon's list of sessions to read again */
    struct session *resume_next;
    struct session *next, *prev;
};

/* server.c: sends a reply (packed into the output queue). Drops it if the
 * session is closing. Returns 0 or a negative code (the session is then
 * closed). */
int sess_send(struct session *s, const Zpp__Reply *rep);
/* Sends an error reply for req_id. */
void sess_send_error(struct session *s, uint64_t req_id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Closes the connection: leaves its job (aborting it), drops buffers, and
 * frees the session once nothing refers to it. reason is logged. Never
 * call it from the job layer: use sess_close_later there. */
void sess_close(struct session *s, const char *reason);
/* Queues the close for the next loop turn (safe anywhere). */
void sess_close_later(struct session *s, const char *reason);
void sess_ref(struct session *s);
void sess_unref(struct session *s);

/* Maps [off, off + len) of a client's memfd, read and write, after the
 * checks every memfd from a client passes: a tmpfs file (not hugetlbfs:
 * its owner could free a page under the mapping, and zppd's next access
 * would be a SIGBUS) owned by the session's uid, sealed against shrinking
 * and not against writing, holding the range. 0 with *map / *map_len (for
 * munmap) and *ptr (the range's start), or a ZPP_E* code with why. */
int sess_map_memfd(struct session *s, int fd, uint64_t off, uint64_t len, void **map,
                   size_t *map_len, uint8_t **ptr, char *why, size_t why_len);

/* server.c: pops the oldest descriptor received on the connection and not
 * yet claimed, or -1; the caller owns it. */
int sess_take_fd(struct session *s);
/* server.c: closes the descriptors req announced (a RegisterBuffer's nfds,
 * a Hello's flags_nfds) when nothing will claim them: a refused request,
 * the flag array this daemon does not take. Left queued, they would be
 * claimed by the next RegisterBuffer in place of its own. */
void sess_drop_announced_fds(struct session *s, const Zpp__Request *req);
/* session.c: handles one unpacked, validated request. */
void sess_dispatch(struct session *s, const Zpp__Request *req);
/* Drops every registered buffer (session end). */
void sess_release_buffers(struct session *s);
/* Finds a registered buffer; NULL if the session has no such id. */
struct buffer *sess_find_buffer(struct session *s, uint64_t id);

void buffer_ref(struct buffer *b);
void buffer_unref(struct buffer *b);

#endif
