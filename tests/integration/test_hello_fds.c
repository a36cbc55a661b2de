/*
 * test_hello_fds.c — a descriptor that rides on a Hello (the reserved
 * stream-flag array) is closed by the daemon, so the next RegisterBuffer
 * registers the memfd it carries itself, not the Hello's leftover.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    int fd = zh_raw_connect(d.socket);
    ASSERT(fd >= 0);

    /* Hello for a 1-rank job, announcing one descriptor: a sealed memfd of
     * 8 KiB that is NOT the buffer registered next. */
    zpp_shm *decoy, *buf;
    ASSERT_EQ(zpp_shm_create(8192, &decoy), 0);
    ASSERT_EQ(zpp_shm_create(4096, &buf), 0);
    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = "hello-fds";
    h.world_size = 1;
    h.node_count = 1;
    h.gpu_uuid = "host";
    h.flags_nfds = 1;
    h.flags_size = 8192;
    h.nslots = 4;
    Zpp__Request req = ZPP__REQUEST__INIT;
    req.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req.req_id = 1;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    int dfd = zpp_shm_fd(decoy);
    ASSERT_EQ(zh_raw_request(fd, &req, &dfd, 1), 0);
    Zpp__Reply *rep = NULL;
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    zpp_reply_free(rep);

    /* Register 8 KiB of the 4 KiB buffer: refused, because the daemon maps
     * the descriptor this frame carries (had it claimed the Hello's 8 KiB
     * decoy instead, this would succeed). */
    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    rb.offset = 0;
    rb.length = 8192;
    rb.nfds = 1;
    Zpp__Request rr = ZPP__REQUEST__INIT;
    rr.version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    rr.req_id = 2;
    rr.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    rr.register_buffer = &rb;
    int bfd = zpp_shm_fd(buf);
    ASSERT_EQ(zh_raw_request(fd, &rr, &bfd, 1), 0);
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, ZPP_ERANGE);
    zpp_reply_free(rep);

    /* The whole 4 KiB buffer registers. */
    rb.length = 4096;
    rr.req_id = 3;
    ASSERT_EQ(zh_raw_request(fd, &rr, &bfd, 1), 0);
    ASSERT_EQ(zh_raw_reply(fd, 5000, &rep), 0);
    ASSERT_EQ(rep->code, 0);
    ASSERT_EQ(rep->register_buffer->length, 4096);
    zpp_reply_free(rep);

    close(fd);
    zpp_shm_destroy(decoy);
    zpp_shm_destroy(buf);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("1 passed, 0 failed\n");
    return 0;
}
