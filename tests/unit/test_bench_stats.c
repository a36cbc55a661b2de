/*
 * test_bench_stats.c — zpp-bench's statistics (bench/stats.h): the median
 * and the sign test's interval for it, which decide how a goal near the
 * wire's ceiling is reported. The interval's ranks against the binomial
 * table, the order statistics it picks on a known sample, and by
 * simulation: over many samples of a skewed distribution with a known
 * median, the interval covers it as often as it claims.
 */
#include <math.h>

#include "bench/stats.h"
#include "test.h"

static void test_ranks(void)
{
    /* n -> k at 95 %, the classical table (n = 100: x(40) .. x(61)) */
    static const int n[] = {1, 5, 6, 7, 8, 9, 10, 15, 20, 31, 50, 100};
    static const int k[] = {0, 0, 1, 1, 1, 2, 2, 4, 6, 10, 18, 40};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        ASSERT_EQ(zb_median_ci_rank(n[i], 0.95, NULL), k[i]);
    ASSERT_EQ(zb_median_ci_rank(0, 0.95, NULL), 0);
    ASSERT_EQ(zb_median_ci_rank(ZB_MAX_SAMPLES + 1, 0.95, NULL), 0);
    ASSERT_EQ(zb_median_ci_rank(31, 1.0, NULL), 0);
    ASSERT_EQ(zb_median_ci_rank(31, 0.0, NULL), 0);
    /* a looser confidence never widens the interval */
    for (int m = 6; m <= ZB_MAX_SAMPLES; m++)
        ASSERT_GE(zb_median_ci_rank(m, 0.90, NULL), zb_median_ci_rank(m, 0.95, NULL));
}

static void test_median_ci(void)
{
    double v[31], saved[31], med, lo, hi;
    for (int i = 0; i < 31; i++)
        v[i] = (double)((i * 17) % 31) + 1; /* 1..31, shuffled */
    memcpy(saved, v, sizeof v);
    double cov = zb_median_ci(v, 31, 0.95, &med, &lo, &hi);
    ASSERT(med == 16 && lo == 10 && hi == 22);
    ASSERT(fabs(cov - 0.9705506) < 1e-6); /* 1 - 2 P(B <= 9), B ~ Bin(31, 1/2) */
    ASSERT(memcmp(saved, v, sizeof v) == 0);
    ASSERT(zb_median(v, 31) == 16);
    double e[4] = {4, 1, 3, 2};
    ASSERT(zb_median(e, 4) == 2.5);
    /* too few samples for an interval: the median at both ends, coverage 0 */
    cov = zb_median_ci(e, 4, 0.95, &med, &lo, &hi);
    ASSERT(cov == 0 && med == 2.5 && lo == 2.5 && hi == 2.5);
    ASSERT(zb_median(e, 0) == 0 && zb_median(e, ZB_MAX_SAMPLES + 1) == 0);
}

/* Exponential samples (median ln 2), n = 7, 35, 63: over 4000 samples the
 * interval covers the median as often as claimed, within the simulation's
 * own spread (+-0.3 % at 1 sigma: 1.5 % is 5 sigma). */
static void test_coverage(void)
{
    uint64_t seed = 20261124;
    const double truth = log(2.0);
    for (int n = 7; n <= 63; n += 28) {
        int covered = 0, trials = 4000;
        double claimed = 0;
        for (int t = 0; t < trials; t++) {
            double v[63], med, lo, hi;
            for (int i = 0; i < n; i++)
                v[i] = -log(1.0 - test_uniform(&seed));
            claimed = zb_median_ci(v, n, 0.95, &med, &lo, &hi);
            ASSERT(lo <= med && med <= hi);
            covered += lo <= truth && truth <= hi;
        }
        double got = (double)covered / trials;
        ASSERT_DBL_LE(0.95, claimed);
        ASSERT_DBL_LE(claimed - 0.015, got);
        ASSERT_DBL_LE(got, claimed + 0.015);
    }
}

int main(void)
{
    test_ranks();
    test_median_ci();
    test_coverage();
    printf("bench stats: ok\n");
    return 0;
}
