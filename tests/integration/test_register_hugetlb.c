/*
 * test_register_hugetlb.c — a memfd of huge pages (MFD_HUGETLB) is refused
 * at RegisterBuffer with ZPP_EINVAL, and the daemon keeps serving. Before
 * session 22 it was accepted (a regular file of the caller's, sealed
 * against shrinking); its owner could then punch a hole in it, take the
 * free huge pages, and zppd's next write into its mapping was a SIGBUS
 * that killed the daemon with every tenant's jobs. A memfd of ordinary
 * pages, sealed the same way, is taken. Skips (77) where the kernel makes
 * no hugetlb memfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

#define HUGE_BYTES (2u << 20)

static int sealed_memfd(unsigned flags)
{
    int fd = memfd_create("zpp-test", MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, HUGE_BYTES) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(void)
{
    int huge = sealed_memfd(MFD_HUGETLB);
    if (huge < 0) {
        printf("test_register_hugetlb: no hugetlb memfd here (%s): skipped\n", strerror(errno));
        return 77;
    }
    int plain = sealed_memfd(0);
    ASSERT(plain >= 0);
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    zpp_conn *c;
    ASSERT_EQ(zh_connect_join(&d, "huge", 0, 1, 1, &c), 0);
    uint64_t id = 0;
    ASSERT_EQ(zpp_register_fd(c, huge, 0, HUGE_BYTES, &id), ZPP_EINVAL);
    printf("hugetlb memfd: %s\n", zpp_last_error(c));
    ASSERT_CONTAINS(zpp_last_error(c), "huge pages");
    ASSERT_EQ(zpp_register_fd(c, plain, 0, HUGE_BYTES, &id), 0);
    zpp_result res;
    ASSERT_EQ(zpp_allgather(c, (zpp_bufref){id, 0}, (zpp_bufref){id, 0}, 1024, ZPP_FP32, &res),
              0);
    zpp_close(c);
    close(huge);
    close(plain);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_register_hugetlb: ok\n");
    return 0;
}
