/*
 * test_client_shm.c — zpp_shm_create gives a shared, zero-filled memfd
 * mapping whose size nobody can change afterwards (the daemon relies on it:
 * a shrink would SIGBUS it).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "zpp.h"

static void test_shm_is_sealed_against_resizing(void)
{
    zpp_shm *s = NULL;
    size_t n = 1u << 20;
    ASSERT_EQ(zpp_shm_create(n, &s), 0);
    ASSERT_EQ(zpp_shm_size(s), n);
    int fd = zpp_shm_fd(s);
    ASSERT_GE(fd, 0);
    int seals = fcntl(fd, F_GET_SEALS);
    ASSERT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    ASSERT_EQ(ftruncate(fd, (off_t)n / 2), -1);
    ASSERT_EQ(errno, EPERM);
    ASSERT_EQ(ftruncate(fd, (off_t)n * 2), -1);
    ASSERT_EQ(errno, EPERM);
    ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
    ASSERT_EQ(errno, EPERM);
    ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    ASSERT_EQ(st.st_size, (off_t)n);
    zpp_shm_destroy(s);
}

static void test_shm_is_shared_and_zeroed(void)
{
    zpp_shm *s = NULL;
    ASSERT_EQ(zpp_shm_create(4096, &s), 0);
    unsigned char *p = zpp_shm_ptr(s);
    ASSERT(p != NULL);
    for (int i = 0; i < 4096; i++)
        ASSERT_EQ(p[i], 0);
    p[100] = 0xab;
    unsigned char b = 0;
    ASSERT_EQ(pread(zpp_shm_fd(s), &b, 1, 100), 1);
    ASSERT_EQ(b, 0xab);
    zpp_shm_destroy(s);
}

static void test_shm_refuses_zero_bytes_and_accepts_null(void)
{
    zpp_shm *s = (zpp_shm *)0x1;
    ASSERT_EQ(zpp_shm_create(0, &s), ZPP_EINVAL);
    ASSERT_EQ((uintptr_t)s, 1); /* untouched */
    ASSERT_EQ(zpp_shm_create(16, NULL), ZPP_EINVAL);
    zpp_shm_destroy(NULL);
    ASSERT(zpp_shm_ptr(NULL) == NULL);
    ASSERT_EQ(zpp_shm_size(NULL), 0);
    ASSERT_EQ(zpp_shm_fd(NULL), -1);
}

int main(void)
{
    test_shm_is_sealed_against_resizing();
    test_shm_is_shared_and_zeroed();
    test_shm_refuses_zero_bytes_and_accepts_null();
    return 0;
}
