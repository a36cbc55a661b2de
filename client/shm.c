/*
 * shm.c — host-backend buffers: sealed memfd mappings shared with zppd.
 *
 * The daemon maps the memfd the client sends over the socket. It refuses an
 * unsealed one: a client that shrank the file afterwards would make the
 * daemon's next access SIGBUS. So the size is fixed with F_SEAL_SHRINK and
 * F_SEAL_GROW, and F_SEAL_SEAL keeps anyone from undoing that.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zpp.h"

struct zpp_shm {
    int fd;
    void *ptr;
    size_t size;
};

static int errno_to_zpp(int e)
{
    switch (e) {
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
        return ZPP_ENOMEM;
    case EPERM:
    case EACCES:
        return ZPP_EPERM;
    case EINVAL:
    case EFBIG:
        return ZPP_EINVAL;
    default:
        return ZPP_EIO;
    }
}

/* Creates a sealed, shared, zero-filled memfd mapping of `bytes` bytes.
 * Returns 0 and *out (free with zpp_shm_destroy), ZPP_EINVAL for 0 bytes,
 * ZPP_ENOMEM or ZPP_EIO (errno keeps the system's cause). */
int zpp_shm_create(size_t bytes, zpp_shm **out)
{
    if (!out || bytes == 0 || bytes > (size_t)INT64_MAX)
        return ZPP_EINVAL;
    int rc = 0;
    void *ptr = MAP_FAILED;
    zpp_shm *s = NULL;
    int fd = memfd_create("zpp-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        goto fail_errno;
    if (ftruncate(fd, (off_t)bytes) != 0)
        goto fail_errno;
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        goto fail_errno;
    ptr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ptr == MAP_FAILED)
        goto fail_errno;
    s = malloc(sizeof(*s));
    if (!s) {
        rc = ZPP_ENOMEM;
        goto fail;
    }
    s->fd = fd;
    s->ptr = ptr;
    s->size = bytes;
    *out = s;
    return 0;

fail_errno:
    rc = errno_to_zpp(errno);
fail : {
    int saved = errno;
    if (ptr != MAP_FAILED)
        munmap(ptr, bytes);
    if (fd >= 0)
        close(fd);
    errno = saved;
    return rc;
}
}

/* The mapping (read/write), NULL for NULL. */
void *zpp_shm_ptr(const zpp_shm *s)
{
    return s ? s->ptr : NULL;
}

/* Its size in bytes, 0 for NULL. */
size_t zpp_shm_size(const zpp_shm *s)
{
    return s ? s->size : 0;
}

/* Its memfd (owned by s), -1 for NULL. */
int zpp_shm_fd(const zpp_shm *s)
{
    return s ? s->fd : -1;
}

/* Unmaps and closes; accepts NULL. A daemon that mapped it keeps its own
 * mapping until the buffer is deregistered. */
void zpp_shm_destroy(zpp_shm *s)
{
    if (!s)
        return;
    munmap(s->ptr, s->size);
    close(s->fd);
    free(s);
}
