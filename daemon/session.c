/*
 * session.c — what a session asks for: Hello (job.c), buffer registration,
 * collectives (job.c) and admin queries (admin.c).
 *
 * Host-backend buffers are sealed memfds passed with SCM_RIGHTS. The daemon
 * accepts one only if the peer's uid owns it (the kernel sets the owner of
 * a memfd to its creator) and it is sealed against shrinking: an unsealed
 * memfd could be truncated under the daemon's mapping and kill it with
 * SIGBUS. The registered range is checked against the real size, overflow
 * safe, before anything is mapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "admin.h"
#include "daemon.h"
#include "job.h"
#include "log.h"
#include "session.h"
#include "zpp.h"

void buffer_ref(struct buffer *b)
{
    b->refs++;
}

void buffer_unref(struct buffer *b)
{
    if (--b->refs)
        return;
    if (b->map)
        munmap(b->map, b->map_len);
    if (b->handle)
        b->ops->buf_release(b->be, b->handle);
    free(b);
}

struct buffer *sess_find_buffer(struct session *s, uint64_t id)
{
    uint32_t lo = 0, hi = s->nbufs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->bufs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->nbufs && s->bufs[lo]->id == id ? s->bufs[lo] : NULL;
}

void sess_release_buffers(struct session *s)
{
    for (uint32_t i = 0; i < s->nbufs; i++)
        buffer_unref(s->bufs[i]);
    free(s->bufs);
    s->bufs = NULL;
    s->nbufs = s->cap_bufs = 0;
}

int sess_map_memfd(struct session *s, int fd, uint64_t off, uint64_t len, void **map,
                   size_t *map_len, uint8_t **ptr, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_len, "the descriptor is not a shared-memory file");
        return ZPP_EINVAL;
    }
    if (st.st_uid != s->uid) {
        snprintf(why, why_len, "the shared memory belongs to uid %u, not to the caller (uid %u)",
                 (unsigned)st.st_uid, s->uid);
        return ZPP_EPERM;
    }
    /* Only shmem (tmpfs) memfds: a hugetlbfs one passes the checks around
     * this, but its owner can punch a hole in it (F_SEAL_SHRINK does not
     * forbid that) and take the free huge pages, and zppd's next write into
     * its mapping is then a SIGBUS that kills the daemon. */
    struct statfs sf = {0};
    if (fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
        snprintf(why, why_len,
                 "the shared memory must be a memfd of ordinary pages (tmpfs), not %s",
                 sf.f_type == HUGETLBFS_MAGIC ? "of huge pages (MFD_HUGETLB)" : "another file");
        return ZPP_EINVAL;
    }
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        snprintf(why, why_len, "the memfd must be sealed with F_SEAL_SHRINK (zpp_shm_create does)");
        return ZPP_EPERM;
    }
    if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
        snprintf(why, why_len, "the memfd must not be sealed against writing (zppd writes into it)");
        return ZPP_EINVAL;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (len == 0 || off > size || len > size - off) {
        snprintf(why, why_len,
                 "range [%" PRIu64 ", +%" PRIu64 ") is outside the %" PRIu64 "-byte object", off,
                 len, size);
        return ZPP_ERANGE;
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = off / page * page;
    size_t n = (size_t)(off - start + len);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (p == MAP_FAILED) {
        snprintf(why, why_len, "cannot map the shared memory: %s", strerror(errno));
        return errno == ENOMEM ? ZPP_ENOMEM : ZPP_EINVAL;
    }
    /* A tenant's tensors are not the daemon's to dump: a core file of
     * zppd (a watchdog abort, a crash) leaves them out (shared mappings are
     * dumped by default). Advisory: a kernel that refuses it changes
     * nothing else. */
    (void)madvise(p, n, MADV_DONTDUMP);
    *map = p;
    *map_len = n;
    *ptr = (uint8_t *)p + (off - start);
    return 0;
}

/* Imports device memory through the backend (cuda): VMM chunks passed as
 * descriptors, or a legacy IPC handle where the config allows it. */
static int import_device(struct session *s, const Zpp__RegisterBuffer *r, const int *fds, int nfds,
                         struct buffer **out, char *why, size_t why_len)
{
    struct zppd *d = s->d;
    if (nfds != (int)r->n_chunk_sizes || (nfds == 0 && !r->ipc_handle.len) ||
        (nfds && r->ipc_handle.len)) {
        snprintf(why, why_len,
                 "give either one descriptor per VMM chunk (%u descriptors, %zu chunk sizes) or "
                 "one IPC handle",
                 (unsigned)nfds, r->n_chunk_sizes);
        return ZPP_EINVAL;
    }
    if (r->ipc_handle.len && !d->cfg.allow_legacy_ipc) {
        snprintf(why, why_len, "legacy CUDA IPC handles are disabled (allow_legacy_ipc = false); "
                 "use VMM memory (PyTorch: expandable_segments:True)");
        return ZPP_EPERM;
    }
    struct buffer *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(why, why_len, "out of memory");
        return ZPP_ENOMEM;
    }
    struct be_import imp = {.device = s->device, .uid = s->uid, .nfds = nfds, .fds = fds,
                            .chunk_sizes = r->chunk_sizes, .ipc_handle = r->ipc_handle.data,
                            .ipc_len = r->ipc_handle.len, .offset = r->offset,
                            .length = r->length};
    int rc = d->be->buf_import(d->be_state, &imp, &b->handle, &b->ptr, why, why_len);
    if (rc) {
        free(b);
        return rc;
    }
    b->ops = d->be;
    b->be = d->be_state;
    b->len = r->length;
    *out = b;
    return 0;
}

static void do_register(struct session *s, uint64_t req_id, const Zpp__RegisterBuffer *r)
{
    struct zppd *d = s->d;
    /* Claim what the frame says it carries (at most SESS_MAX_FDS). */
    int fds[SESS_MAX_FDS], nfds = 0;
    for (uint32_t i = 0; i < r->nfds && i < SESS_MAX_FDS; i++) {
        int x = sess_take_fd(s);
        if (x >= 0)
            fds[nfds++] = x;
    }
    int fd = nfds ? fds[0] : -1;
    char why[300];
    int rc = 0;
    struct buffer *b = NULL;
    if (s->role != SESS_ROLE_RANK) {
        rc = ZPP_ESTATE;
        snprintf(why, sizeof why, "say Hello as a rank before registering buffers");
    } else if (s->nbufs >= d->cfg.max_buffers_per_session) {
        rc = ZPP_ELIMIT;
        snprintf(why, sizeof why, "%u buffers registered (max_buffers_per_session)", s->nbufs);
    } else if (d->be->buf_import) {
        rc = import_device(s, r, fds, nfds, &b, why, sizeof why);
    } else if (r->ipc_handle.len) {
        rc = ZPP_EUNSUPPORTED;
        snprintf(why, sizeof why, "the %s backend takes shared-memory descriptors, not CUDA IPC "
                 "handles", d->backend_name);
    } else if (r->nfds != 1 || fd < 0) {
        rc = ZPP_EINVAL;
        snprintf(why, sizeof why, "RegisterBuffer needs exactly one descriptor (nfds=%u, %s)",
                 r->nfds, fd < 0 ? "none arrived" : "one arrived");
    } else if (!(b = calloc(1, sizeof *b))) {
        rc = ZPP_ENOMEM;
        snprintf(why, sizeof why, "out of memory");
    } else {
        rc = sess_map_memfd(s, fd, r->offset, r->length, &b->map, &b->map_len, &b->ptr, why,
                            sizeof why);
        b->len = r->length;
    }
    if (!rc && s->nbufs == s->cap_bufs) {
        uint32_t cap = s->cap_bufs ? s->cap_bufs * 2 : 16;
        struct buffer **nb = realloc(s->bufs, cap * sizeof *nb);
        if (!nb) {
            rc = ZPP_ENOMEM;
            snprintf(why, sizeof why, "out of memory");
        } else {
            s->bufs = nb;
            s->cap_bufs = cap;
        }
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (rc) {
        if (b) {
            b->refs = 1;
            buffer_unref(b); /* unmaps or releases whatever was set up */
        }
        sess_send_error(s, req_id, rc, "RegisterBuffer refused: %s", why);
        return;
    }
    b->private_ = d->be->buf_shared && !d->be->buf_shared(d->be_state, b->handle);
    b->id = s->next_buf_id++; /* ids only grow: the array stays sorted */
    b->refs = 1;
    s->bufs[s->nbufs++] = b;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    Zpp__RegisterReply rr = ZPP__REGISTER_REPLY__INIT;
    rr.buffer_id = b->id;
    rr.length = b->len;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_REGISTER_BUFFER;
    rep.register_buffer = &rr;
    sess_send(s, &rep);
}

static void do_deregister(struct session *s, uint64_t req_id, const Zpp__DeregisterBuffer *r)
{
    struct buffer *b = sess_find_buffer(s, r->buffer_id);
    if (!b) {
        sess_send_error(s, req_id, ZPP_ENOENT,
                        "buffer id %" PRIu64 " is not registered on this session", r->buffer_id);
        return;
    }
    uint32_t i = 0;
    while (s->bufs[i] != b)
        i++;
    memmove(s->bufs + i, s->bufs + i + 1, (s->nbufs - i - 1) * sizeof *s->bufs);
    s->nbufs--;
    buffer_unref(b); /* a call still using it keeps its own reference */
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    sess_send(s, &rep);
}

/* CheckRequest (zpp_check): every call answered on this session has
 * completed on a device that still works. */
static void do_check(struct session *s, uint64_t req_id)
{
    char why[384] = "";
    const struct be_ops *be = s->d->be;
    int rc = be->check ? be->check(s->d->be_state, s->events, why, sizeof why) : 0;
    if (rc < 0) {
        sess_send_error(s, req_id, rc, "%s", why);
        return;
    }
    Zpp__CheckReply cr = ZPP__CHECK_REPLY__INIT;
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = req_id;
    rep.body_case = ZPP__REPLY__BODY_CHECK;
    rep.check = &cr;
    sess_send(s, &rep);
}

void sess_dispatch(struct session *s, const Zpp__Request *req)
{
    /* A Goodbye says the stream ends next. The server clears the mark
     * again on whatever follows it on the stream, valid or not
     * (server.c, goodbye_followed). */
    if (req->body_case == ZPP__REQUEST__BODY_GOODBYE)
        s->goodbye = 1;
    switch (req->body_case) {
    case ZPP__REQUEST__BODY_HELLO: {
        /* the done flags' descriptors, if the frame announced them:
         * job_hello hands them to the backend or leaves them to be closed */
        int ffd[2] = {-1, -1};
        for (uint32_t i = 0; i < req->hello->flags_nfds && i < 2; i++)
            ffd[i] = sess_take_fd(s);
        job_hello(s, req->req_id, req->hello, ffd);
        for (int i = 0; i < 2; i++)
            if (ffd[i] >= 0)
                close(ffd[i]);
        break;
    }
    case ZPP__REQUEST__BODY_REGISTER_BUFFER:
        do_register(s, req->req_id, req->register_buffer);
        break;
    case ZPP__REQUEST__BODY_DEREGISTER_BUFFER:
        do_deregister(s, req->req_id, req->deregister_buffer);
        break;
    case ZPP__REQUEST__BODY_COLLECTIVE:
        job_submit(s, req->req_id, req->collective);
        break;
    case ZPP__REQUEST__BODY_STATUS:
        admin_status(s, req->req_id);
        break;
    case ZPP__REQUEST__BODY_JOBS:
        admin_jobs(s, req->req_id);
        break;
    case ZPP__REQUEST__BODY_CHECK:
        do_check(s, req->req_id);
        break;
    case ZPP__REQUEST__BODY_SESSIONS:
        admin_sessions(s, req->req_id);
        break;
    case ZPP__REQUEST__BODY_STORE:
        admin_store(s, req->req_id);
        break;
    case ZPP__REQUEST__BODY_METRICS:
        admin_metrics(s, req->req_id);
        break;
    case ZPP__REQUEST__BODY_DRAIN:
        admin_drain(s, req->req_id, req->drain);
        break;
    case ZPP__REQUEST__BODY_GOODBYE: /* no reply: the client is closing */
        break;
    default:
        sess_send_error(s, req->req_id, ZPP_EUNSUPPORTED, "unknown request");
        break;
    }
}
