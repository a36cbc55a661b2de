/* stats.h — the few statistics zpp-bench reports: the median of a sample
 * and a distribution-free confidence interval for it.
 *
 * The simulated wire between two daemons on one host is noisy (a round's
 * speedup spreads 1.6-2.4x around ~2x), so a goal a few percent under the
 * wire's ceiling is judged on a sample's median, and the bench prints how
 * far that median can be trusted: the interval [x(k), x(n+1-k)] of the
 * sorted sample covers the true median with probability at least
 * 1 - 2 P(B < k), B ~ Binomial(n, 1/2), whatever the distribution
 * (the sign test's interval). Header-only, so that the CPU tests check the
 * same code the GPU bench runs (tests/unit/test_bench_stats.c). */
#ifndef ZPP_BENCH_STATS_H
#define ZPP_BENCH_STATS_H

#include <stdlib.h>
#include <string.h>

#define ZB_MAX_SAMPLES 128

static int zb_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* w = v[0..n) sorted; 0 < n <= ZB_MAX_SAMPLES. Returns the median. */
static inline double zb_sorted(const double *v, int n, double *w)
{
    memcpy(w, v, (size_t)n * sizeof w[0]);
    qsort(w, (size_t)n, sizeof w[0], zb_cmp_d);
    return n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
}

/* The median of v[0..n), 0 < n <= ZB_MAX_SAMPLES (0 otherwise); v is left
 * unchanged. */
static inline double zb_median(const double *v, int n)
{
    double w[ZB_MAX_SAMPLES];
    return n < 1 || n > ZB_MAX_SAMPLES ? 0 : zb_sorted(v, n, w);
}

/* The 1-based rank k of the lower end of the median's interval for n
 * samples at confidence `conf` (e.g. 0.95): the largest k with
 * 2 P(B <= k - 1) <= 1 - conf. 0 when n is too small for any interval at
 * that confidence (n < 6 at 0.95). *tail (may be NULL) gets P(B < k). */
static inline int zb_median_ci_rank(int n, double conf, double *tail)
{
    double p = 1, cdf = 0, below = 0; /* P(B = j), from P(B = 0) = 2^-n; P(B <= j); P(B < k) */
    int k = 0;
    if (n >= 1 && n <= ZB_MAX_SAMPLES && conf > 0 && conf < 1) {
        for (int i = 0; i < n; i++)
            p /= 2;
        for (int j = 0; j <= n / 2; j++) {
            cdf += p;
            if (2 * cdf > 1 - conf)
                break;
            k = j + 1;
            below = cdf;
            p = p * (double)(n - j) / (double)(j + 1);
        }
    }
    if (tail)
        *tail = below;
    return k;
}

/* The median of v[0..n) and its interval at `conf`: *lo = x(k), *hi =
 * x(n+1-k) of the sorted sample. Returns the interval's actual coverage
 * (1 - 2 P(B < k)), or 0 with *lo = *hi = the median when n is too small
 * for an interval at `conf`. */
static inline double zb_median_ci(const double *v, int n, double conf, double *med, double *lo,
                                  double *hi)
{
    double w[ZB_MAX_SAMPLES], tail;
    *med = *lo = *hi = 0;
    if (n < 1 || n > ZB_MAX_SAMPLES)
        return 0;
    *med = *lo = *hi = zb_sorted(v, n, w);
    int k = zb_median_ci_rank(n, conf, &tail);
    if (k < 1)
        return 0;
    *lo = w[k - 1];
    *hi = w[n - k];
    return 1 - 2 * tail;
}

#endif
