/* LD_PRELOAD: logs every open/fopen/mkdir/bind(AF_UNIX) path with its result
 * to $OPENTRACE_LOG (scratch tool for a deploy/ check). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
static int lfd = -1;
__attribute__((constructor)) static void init(void)
{
    const char *p = getenv("OPENTRACE_LOG");
    if (!p) return;
    int fd = (int)syscall(257, AT_FDCWD, p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) { lfd = fcntl(fd, F_DUPFD_CLOEXEC, 900); close(fd); }
}
static void logp(const char *fn, const char *path, long flags, long rc, int err)
{
    if (lfd < 0 || !path) return;
    char b[1200];
    int n = snprintf(b, sizeof b, "%d %s %s flags=0%lo rc=%ld%s%s\n", (int)getpid(), fn, path, flags, rc,
                     rc < 0 ? " err=" : "", rc < 0 ? strerror(err) : "");
    if (n > 0) { ssize_t w = write(lfd, b, (size_t)n); (void)w; }
}
#define REAL(name, ty) typedef ty; static name##_t real_##name; if (!real_##name) real_##name = (name##_t)dlsym(RTLD_NEXT, #name)
#define OPENLIKE(name) \
int name(const char *p, int fl, ...) { REAL(name, int (*name##_t)(const char *, int, ...)); mode_t m = 0; \
  if (fl & (O_CREAT | __O_TMPFILE)) { va_list a; va_start(a, fl); m = va_arg(a, int); va_end(a); } \
  int r = real_##name(p, fl, m); int e = errno; logp(#name, p, fl, r, e); errno = e; return r; }
OPENLIKE(open)
OPENLIKE(open64)
#define OPENATLIKE(name) \
int name(int d, const char *p, int fl, ...) { REAL(name, int (*name##_t)(int, const char *, int, ...)); mode_t m = 0; \
  if (fl & (O_CREAT | __O_TMPFILE)) { va_list a; va_start(a, fl); m = va_arg(a, int); va_end(a); } \
  int r = real_##name(d, p, fl, m); int e = errno; logp(#name, p, fl, r, e); errno = e; return r; }
OPENATLIKE(openat)
OPENATLIKE(openat64)
int __open_2(const char *p, int fl) { REAL(__open_2, int (*__open_2_t)(const char *, int)); int r = real___open_2(p, fl); int e = errno; logp("__open_2", p, fl, r, e); errno = e; return r; }
int __open64_2(const char *p, int fl) { REAL(__open64_2, int (*__open64_2_t)(const char *, int)); int r = real___open64_2(p, fl); int e = errno; logp("__open64_2", p, fl, r, e); errno = e; return r; }
FILE *fopen(const char *p, const char *m) { REAL(fopen, FILE *(*fopen_t)(const char *, const char *)); FILE *r = real_fopen(p, m); int e = errno; logp(m[0] == 'r' && !strchr(m, '+') ? "fopen_r" : "fopen_w", p, 0, r ? 0 : -1, e); errno = e; return r; }
FILE *fopen64(const char *p, const char *m) { REAL(fopen64, FILE *(*fopen64_t)(const char *, const char *)); FILE *r = real_fopen64(p, m); int e = errno; logp(m[0] == 'r' && !strchr(m, '+') ? "fopen64_r" : "fopen64_w", p, 0, r ? 0 : -1, e); errno = e; return r; }
int mkdir(const char *p, mode_t md) { REAL(mkdir, int (*mkdir_t)(const char *, mode_t)); int r = real_mkdir(p, md); int e = errno; logp("mkdir", p, md, r, e); errno = e; return r; }
int bind(int s, const struct sockaddr *a, socklen_t l) { REAL(bind, int (*bind_t)(int, const struct sockaddr *, socklen_t)); int r = real_bind(s, a, l); int e = errno;
  if (a && a->sa_family == AF_UNIX) { const struct sockaddr_un *u = (const void *)a; char q[110]; if (u->sun_path[0]) snprintf(q, sizeof q, "%s", u->sun_path); else snprintf(q, sizeof q, "@%s", u->sun_path + 1); logp("bind_unix", q, 0, r, e); }
  else if (a) { char q[16]; snprintf(q, sizeof q, "af%d", a->sa_family); logp("bind", q, 0, r, e); }
  errno = e; return r; }
int shm_open(const char *p, int fl, mode_t m) { REAL(shm_open, int (*shm_open_t)(const char *, int, mode_t)); int r = real_shm_open(p, fl, m); int e = errno; logp("shm_open", p, fl, r, e); errno = e; return r; }
int unlink(const char *p) { REAL(unlink, int (*unlink_t)(const char *)); int r = real_unlink(p); int e = errno; logp("unlink", p, 0, r, e); errno = e; return r; }
