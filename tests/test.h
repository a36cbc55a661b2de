/*
 * test.h — the tiny assertion kit of zppd's C tests. Each test is its own
 * program (ctest runs each with a time limit); a failed assertion prints
 * file:line and both values, then exits 1. Exit 77 means "skipped".
 */
#ifndef ZPP_TEST_H
#define ZPP_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_SKIP 77

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define ASSERT_INT_OP(a, op, b)                                                                    \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (!(a_ op b_)) {                                                                         \
            fprintf(stderr, "%s:%d: %s %s %s failed: %lld vs %lld\n", __FILE__, __LINE__, #a, #op, \
                    #b, a_, b_);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define ASSERT_EQ(a, b) ASSERT_INT_OP(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP(a, >=, b)

#define ASSERT_DBL_LE(a, b)                                                                        \
    do {                                                                                           \
        double a_ = (double)(a), b_ = (double)(b);                                                 \
        if (!(a_ <= b_)) {                                                                         \
            fprintf(stderr, "%s:%d: %s <= %s failed: %g vs %g\n", __FILE__, __LINE__, #a, #b, a_,  \
                    b_);                                                                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) != 0) {                                                                 \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" vs \"%s\"\n", __FILE__, __LINE__, #a,  \
                    #b, a_, b_);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,         \
                    h_ ? h_ : "(null)", n_);                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* splitmix64: reproducible random numbers from a seed. */
static inline uint64_t test_rand64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double test_uniform(uint64_t *s)
{
    return (double)(test_rand64(s) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
