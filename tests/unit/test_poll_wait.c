/*
 * test_poll_wait.c — poll_wait (daemon/poll_wait.h), the bounded wait of
 * cu_to_host: "not yet" answers are polled again until done (session 27
 * found cu_to_host failing a publish on the first "not yet": every publish
 * whose gather had not finished when its bytes were first asked for, on
 * the GPUs); a failure ends the wait at once; an answer that never comes
 * ends it after max_ms.
 */
#include "poll_wait.h"
#include "test.h"

struct script {
    int not_yet; /* "not yet" answers before the last one */
    int last;    /* then this */
    int asked;
};

static int query(void *arg)
{
    struct script *s = arg;
    s->asked++;
    return s->asked <= s->not_yet ? POLL_NOT_YET : s->last;
}

static void test_done_at_once(void)
{
    struct script s = {0, POLL_DONE, 0};
    ASSERT_EQ(poll_wait(query, &s, 1000, 10), POLL_DONE);
    ASSERT_EQ(s.asked, 1);
}

static void test_not_yet_then_done(void)
{
    struct script s = {5, POLL_DONE, 0};
    ASSERT_EQ(poll_wait(query, &s, 60000, 10), POLL_DONE);
    ASSERT_EQ(s.asked, 6);
}

static void test_failure_ends_the_wait(void)
{
    struct script s = {2, POLL_FAILED, 0};
    ASSERT_EQ(poll_wait(query, &s, 60000, 10), POLL_FAILED);
    ASSERT_EQ(s.asked, 3);
    /* any other answer counts as a failure too */
    struct script t = {1, 42, 0};
    ASSERT_EQ(poll_wait(query, &t, 60000, 10), POLL_FAILED);
    ASSERT_EQ(t.asked, 2);
}

static void test_bound(void)
{
    struct script s = {1 << 30, POLL_DONE, 0};
    uint64_t t0 = poll_wait_now_ms();
    ASSERT_EQ(poll_wait(query, &s, 30, 1000), POLL_NOT_YET);
    ASSERT(poll_wait_now_ms() - t0 > 30); /* it gave up only after the bound */
    ASSERT(s.asked > 1);
}

int main(void)
{
    test_done_at_once();
    test_not_yet_then_done();
    test_failure_ends_the_wait();
    test_bound();
    printf("test_poll_wait: ok\n");
    return 0;
}
