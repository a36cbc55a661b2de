/*
 * test_done_flags.c — libzpp's done-flag blocks and their watcher
 * (client/done_flags.c), without CUDA: the flags are plain host memory
 * here, written by the test where zppd's stream would write them.
 *
 * What must hold: a flag is raised by the client only once the pipe's
 * write end, zppd's, is closed everywhere (the session ended or zppd died),
 * never before; then every value promised on the block is raised, flags
 * the daemon wrote already stay as they are, and a wait enqueued after the
 * hang-up raises its own flag; a block returns to the pool only when both
 * its connection and its pipe are done with it, and its values keep
 * growing; a forked child that holds the write end keeps the flags down
 * until it exits; at a hang-up the outputs noted for calls that will never
 * run are handed to on_lost, before their flags rise, and no others: not a
 * finished call's, not one forgotten (deregistered), not a closed
 * connection's.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/done_flags.h"
#include "test.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to ms for flag slot of b to reach v; 1 if it did. */
static int wait_reached(zpp_dflags *b, int slot, uint32_t v, int ms)
{
    int64_t end = now_ms() + ms;
    while (!zpp__dflags_reached(b, slot, v)) {
        if (now_ms() > end)
            return 0;
        usleep(1000);
    }
    return 1;
}

/* A fresh block: a sealed memfd of one page, every flag 0. */
static void test_fresh_block(void)
{
    zpp_dflags *b = NULL;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    int seals = fcntl(b->memfd, F_GET_SEALS);
    ASSERT(seals >= 0);
    ASSERT((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW));
    ASSERT_EQ(lseek(b->memfd, 0, SEEK_END), ZPP_DFLAGS_BYTES);
    for (int i = 0; i < ZPP_DFLAGS_N; i++)
        ASSERT_EQ(b->flags[i], 0);
    zpp__dflags_put(b); /* never watched: pooled at once */
}

/* The daemon's session ends normally: it wrote what it ran, closes the
 * pipe; the client raises only what was promised and never written (a
 * refused call), and the block is pooled once its connection puts it. */
static void test_session_end(void)
{
    zpp_dflags *b = NULL;
    int rfd, wfd, pooled, held;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    ASSERT_EQ(zpp__dflags_pipe(&rfd, &wfd), 0);
    ASSERT_EQ(zpp__dflags_watch(b, rfd), 0);
    uint32_t v3 = zpp__dflags_arm(b, 3), v5 = zpp__dflags_arm(b, 5);
    ASSERT(v5 != v3);
    __atomic_store_n(&b->flags[3], v3, __ATOMIC_RELEASE); /* "zppd's stream" */
    usleep(50000);
    ASSERT_EQ(zpp__dflags_reached(b, 5, v5), 0); /* the pipe is open: nobody raises it */
    zpp__dflags_after_wait(b, 5, v5);           /* nor does a wait while it is */
    ASSERT_EQ(zpp__dflags_reached(b, 5, v5), 0);
    zpp__dflags_counts(&pooled, &held);
    ASSERT_GE(held, 1);
    close(wfd); /* the daemon is done with the flags */
    ASSERT_EQ(wait_reached(b, 5, v5, 5000), 1);
    ASSERT_EQ(b->flags[3], v3);
    ASSERT_EQ(atomic_load(&b->hup), 1);
    /* a wait enqueued after the hang-up raises its own flag */
    uint32_t v7 = zpp__dflags_arm(b, 7);
    zpp__dflags_after_wait(b, 7, v7);
    ASSERT_EQ(zpp__dflags_reached(b, 7, v7), 1);
    /* pooled once the connection lets go; the next get reuses it and the
     * values keep growing */
    int p0, h0;
    zpp__dflags_counts(&p0, &h0);
    zpp__dflags_put(b);
    zpp__dflags_counts(&pooled, &held);
    ASSERT_EQ(pooled, p0 + 1);
    zpp_dflags *again = NULL;
    ASSERT_EQ(zpp__dflags_get(&again), 0);
    ASSERT(again == b);
    ASSERT_EQ(atomic_load(&again->hup), 0);
    uint32_t v = zpp__dflags_arm(again, 3);
    ASSERT((int32_t)(v - v7) > 0);
    zpp__dflags_put(again);
}

/* The connection closes first (zpp_close with calls whose writes are still
 * to come): the block is not pooled, so no new connection can share it
 * while zppd may still write it; it is once the pipe hangs up. */
static void test_put_before_hangup(void)
{
    zpp_dflags *b = NULL;
    int rfd, wfd, p0, h0, pooled, held;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    ASSERT_EQ(zpp__dflags_pipe(&rfd, &wfd), 0);
    ASSERT_EQ(zpp__dflags_watch(b, rfd), 0);
    uint32_t v = zpp__dflags_arm(b, 0);
    zpp__dflags_counts(&p0, &h0);
    zpp__dflags_put(b);
    zpp__dflags_counts(&pooled, &held);
    ASSERT_EQ(pooled, p0);
    zpp_dflags *other = NULL;
    ASSERT_EQ(zpp__dflags_get(&other), 0);
    ASSERT(other != b);
    close(wfd);
    ASSERT_EQ(wait_reached(b, 0, v, 5000), 1);
    int64_t end = now_ms() + 5000;
    do {
        zpp__dflags_counts(&pooled, &held);
        if (pooled == p0 + 1)
            break;
        usleep(1000);
    } while (now_ms() < end);
    ASSERT_EQ(pooled, p0 + 1);
    zpp__dflags_put(other);
}

/* A connection on the flags alone writes ready flags from its streams: its
 * block is pooled only once every promised ready write has landed, so that
 * a late one cannot lower a flag a later connection's call waits on. */
static void test_ready_writes_hold_the_block(void)
{
    zpp_dflags *b = NULL;
    int rfd, wfd, p0, h0, pooled, held;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    ASSERT_EQ(atomic_load(&b->ready_used), 0);
    ASSERT_EQ(zpp__dflags_pipe(&rfd, &wfd), 0);
    ASSERT_EQ(zpp__dflags_watch(b, rfd), 0);
    atomic_store(&b->ready_used, 1);
    uint32_t v = zpp__dflags_arm(b, 2);
    zpp__dflags_counts(&p0, &h0);
    close(wfd);
    ASSERT_EQ(wait_reached(b, 2, v, 5000), 1); /* the done flag, raised at the hang-up */
    zpp__dflags_put(b);
    usleep(20000);
    zpp__dflags_counts(&pooled, &held);
    ASSERT_EQ(pooled, p0); /* ready flag 2 still below v: "a stream" may write it yet */
    __atomic_store_n(&b->flags[ZPP_DFLAGS_N + 2], v, __ATOMIC_RELEASE);
    zpp__dflags_counts(&pooled, &held);
    ASSERT_EQ(pooled, p0 + 1);
    zpp_dflags *again = NULL;
    ASSERT_EQ(zpp__dflags_get(&again), 0);
    ASSERT(again == b);
    ASSERT_EQ(atomic_load(&again->ready_used), 0);
    zpp__dflags_put(again);
}

/* zppd as another process that holds the write end and dies: the flags
 * stay down while it lives, and come up within a bound once it is gone.
 * Bytes written on the pipe (zppd writes none) do not count as a hang-up. */
static void test_daemon_process_dies(void)
{
    zpp_dflags *b = NULL;
    int rfd, wfd;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    ASSERT_EQ(zpp__dflags_pipe(&rfd, &wfd), 0);
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) { /* "zppd": holds wfd, writes a stray byte, waits to be killed */
        close(rfd);
        close(go[1]);
        char x = 'z';
        ssize_t w = write(wfd, &x, 1);
        (void)w;
        char c;
        ssize_t r = read(go[0], &c, 1); /* until killed */
        (void)r;
        _exit(0);
    }
    close(wfd); /* only the child holds the write end now */
    close(go[0]);
    ASSERT_EQ(zpp__dflags_watch(b, rfd), 0);
    uint32_t v = zpp__dflags_arm(b, 9);
    usleep(200000);
    ASSERT_EQ(zpp__dflags_reached(b, 9, v), 0);
    ASSERT_EQ(atomic_load(&b->hup), 0);
    int64_t t0 = now_ms();
    kill(pid, SIGKILL);
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_EQ(wait_reached(b, 9, v, 5000), 1);
    printf("info: raised %lld ms after the kill\n", (long long)(now_ms() - t0));
    close(go[1]);
    zpp__dflags_put(b);
}

/* A forked child of a process with a watcher starts its own: its blocks
 * are watched and raised like the parent's. */
static void test_fork_child_has_a_watcher(void)
{
#ifdef UNDER_TSAN
    /* ThreadSanitizer cannot start threads in the child of a threaded fork */
    printf("info: fork child's watcher not checked under ThreadSanitizer\n");
    return;
#endif
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        zpp_dflags *b = NULL;
        int rfd, wfd;
        if (zpp__dflags_get(&b) || zpp__dflags_pipe(&rfd, &wfd) || zpp__dflags_watch(b, rfd))
            _exit(2);
        uint32_t v = zpp__dflags_arm(b, 1);
        close(wfd);
        _exit(wait_reached(b, 1, v, 5000) ? 0 : 3);
    }
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
}

/* What on_lost was given, and whether any of the flags it was to come
 * before had risen by then. */
static struct {
    int calls, n, early;
    uint64_t at[ZPP_DFLAGS_N], len[ZPP_DFLAGS_N];
    zpp_dflags *b;
    uint32_t v[ZPP_DFLAGS_N];
    int watch[ZPP_DFLAGS_N], nwatch;
    void *ctx;
} lost;

static void on_lost(void *ctx, const uint64_t *at, const uint64_t *len, int n)
{
    lost.ctx = ctx;
    for (int i = 0; i < n && lost.n < ZPP_DFLAGS_N; i++, lost.n++) {
        lost.at[lost.n] = at[i];
        lost.len[lost.n] = len[i];
    }
    for (int i = 0; i < lost.nwatch; i++)
        lost.early += zpp__dflags_reached(lost.b, lost.watch[i], lost.v[lost.watch[i]]);
    __atomic_add_fetch(&lost.calls, 1, __ATOMIC_SEQ_CST); /* read while the watcher runs */
}

/* zppd dies with four calls answered: slot 1's and 6's never ran, slot 2's
 * finished, slot 3's output was deregistered, slot 4's has none. Only 1 and
 * 6 are filled, in one on_lost call, before any flag rises. */
static void test_lost_outputs_filled(void)
{
    zpp_dflags *b = NULL;
    int rfd, wfd, ctx_tag;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    memset(&lost, 0, sizeof lost);
    lost.b = b;
    b->on_lost = on_lost;
    b->lost_ctx = &ctx_tag;
    ASSERT_EQ(zpp__dflags_pipe(&rfd, &wfd), 0);
    ASSERT_EQ(zpp__dflags_watch(b, rfd), 0);
    static const uint64_t at[7] = {0, 0x10000, 0x20000, 0x30000, 0x40000, 0, 0x60000};
    static const uint64_t len[7] = {0, 4096, 512, 64, 0, 0, 1ull << 33};
    for (int s = 1; s <= 6; s++) {
        if (s == 5)
            continue;
        zpp__dflags_note(b, s, at[s], len[s]);
        lost.v[s] = zpp__dflags_arm(b, s);
    }
    lost.watch[0] = 1, lost.watch[1] = 3, lost.watch[2] = 4, lost.watch[3] = 6;
    lost.nwatch = 4;
    __atomic_store_n(&b->flags[2], lost.v[2], __ATOMIC_RELEASE); /* "zppd's stream" */
    zpp__dflags_forget(b, 0x30000 + 63, 0x30000 + 64);            /* the last byte meets it */
    zpp__dflags_forget(b, 0x10000 + 4096, 0x20000);               /* touches 1's end: not */
    usleep(20000);
    ASSERT_EQ(__atomic_load_n(&lost.calls, __ATOMIC_SEQ_CST), 0); /* nothing while the pipe is open */
    close(wfd);
    for (int s = 1; s <= 6; s++)
        if (s != 5)
            ASSERT_EQ(wait_reached(b, s, lost.v[s], 5000), 1);
    ASSERT_EQ(lost.calls, 1);
    ASSERT(lost.ctx == &ctx_tag);
    ASSERT_EQ(lost.early, 0);
    ASSERT_EQ(lost.n, 2);
    int seen1 = 0, seen6 = 0;
    for (int i = 0; i < lost.n; i++) {
        seen1 += lost.at[i] == at[1] && lost.len[i] == len[1];
        seen6 += lost.at[i] == at[6] && lost.len[i] == len[6];
    }
    ASSERT_EQ(seen1, 1);
    ASSERT_EQ(seen6, 1);
    zpp__dflags_put(b);

    /* A connection that closed forgot its notes: its memory may be freed
     * while zppd still holds the pipe, and nothing is filled at the end. */
    memset(&lost, 0, sizeof lost);
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    b->on_lost = on_lost;
    ASSERT_EQ(zpp__dflags_pipe(&rfd, &wfd), 0);
    ASSERT_EQ(zpp__dflags_watch(b, rfd), 0);
    zpp__dflags_note(b, 0, 0x70000, 128);
    uint32_t v = zpp__dflags_arm(b, 0);
    zpp__dflags_put(b);
    close(wfd);
    ASSERT_EQ(wait_reached(b, 0, v, 5000), 1);
    ASSERT_EQ(__atomic_load_n(&lost.calls, __ATOMIC_SEQ_CST), 0);
}

/* Values wrap: the promise after 0xffffffff skips 0 (every flag's first
 * value), and a raise to a value past the wrap is a raise. */
static void test_wrap(void)
{
    zpp_dflags *b = NULL;
    ASSERT_EQ(zpp__dflags_get(&b), 0);
    atomic_store(&b->next, 0xfffffffeu);
    ASSERT_EQ(zpp__dflags_arm(b, 2), 0xffffffffu);
    ASSERT_EQ(zpp__dflags_arm(b, 2), 1u);
    __atomic_store_n(&b->flags[2], 0xfffffff0u, __ATOMIC_RELEASE);
    ASSERT_EQ(zpp__dflags_reached(b, 2, 1u), 0);
    zpp__dflags_raise(b, 2, 1u);
    ASSERT_EQ(zpp__dflags_reached(b, 2, 1u), 1);
    zpp__dflags_raise(b, 2, 0xfffffff0u); /* older: no change */
    ASSERT_EQ(b->flags[2], 1u);
    zpp__dflags_put(b);
}

int main(void)
{
    test_fresh_block();
    test_session_end();
    test_put_before_hangup();
    test_ready_writes_hold_the_block();
    test_daemon_process_dies();
    test_fork_child_has_a_watcher();
    test_wrap();
    test_lost_outputs_filled();
    printf("8 passed, 0 failed\n");
    return 0;
}
