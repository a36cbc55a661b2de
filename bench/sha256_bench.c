/*
 * sha256_bench.c — the throughput of the SHA-256 that checks a published
 * replica's content key (daemon/sha256.c), on one core: the median of 5
 * one-shot hashes of a MIB-MiB buffer (default 256), after one unmeasured.
 * A benchmark, not a test. docs/hpz-sharing.md quotes it; the command and
 * its output are in bench/results/sha256-2026-11-28-s27/.
 *
 *   zpp-sha256-bench [MIB]
 *
 * It uses only sha256() and sha256_hex(), so it also builds against an
 * older daemon/sha256.c (the portable C of 0e1a1a9, say) for a comparison.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sha256.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    if (mib < 1 || mib > 65536) {
        fprintf(stderr, "usage: zpp-sha256-bench [MIB 1..65536]\n");
        return 2;
    }
    size_t n = (size_t)mib << 20;
    unsigned char *buf = malloc(n);
    if (!buf) {
        fprintf(stderr, "zpp-sha256-bench: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    double t[5];
    sha256(buf, n, d); /* unmeasured: pages touched, method fetched */
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        sha256(buf, n, d);
        t[r] = now_s() - t0;
    }
    qsort(t, 5, sizeof t[0], cmp);
    sha256_hex(d, hex);
    printf("sha256 of %ld MiB: median %.1f ms of 5, %.3f GB/s (min %.1f, max %.1f ms); digest %s\n",
           mib, t[2] * 1e3, (double)n / t[2] * 1e-9, t[0] * 1e3, t[4] * 1e3, hex);
    free(buf);
    return 0;
}
