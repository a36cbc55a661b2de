/*
 * zpp-accuracy.c — prints the accuracy of zppd's block quantization for
 * every block size: relative L2 error ||x' - x|| / ||x|| of a quantize ->
 * dequantize round trip (the reference kernels, which the CUDA kernels match
 * byte for byte) on i.i.d. Gaussian data, for int8 and int4, read from fp32
 * and from bf16. docs/kernels.md quotes its output; tests/unit/test_quant.c
 * asserts the block-256 figures.
 *
 * Usage: zpp-accuracy [elements]   (default 2^22; a decimal count from 1 to
 * SIZE_MAX / 8, so that every buffer size below is exact)
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "zpp_kernels.h"

#define DEFAULT_N (1u << 22)
#define SEED 42u
#define TWO_PI 6.283185307179586

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform(uint64_t *s)
{
    return (double)(rng(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Relative L2 error of a round trip of x (n elements of dtype, widened in xf). */
static double rel_err(const void *x, const float *xf, int dtype, uint64_t n, int bits,
                      uint32_t block, uint8_t *chunk, float *y)
{
    zk_quantize_ref(x, dtype, n, n, bits, block, chunk);
    zk_dequantize_ref(chunk, n, n, bits, block, y, ZK_FP32);
    double e2 = 0, r2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = (double)y[i] - xf[i];
        e2 += d * d;
        r2 += (double)xf[i] * xf[i];
    }
    return sqrt(e2 / r2);
}

/* The element count of argv[1]: decimal digits only (strtoull alone would
 * take "-1" as 2^64 - 1 and "10x" as 10), 1 <= n <= SIZE_MAX / 8 (the
 * largest buffer is 4n bytes, the int8 chunk about 1.125n + 32). */
static int parse_count(const char *s, uint64_t *n)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0 || v > SIZE_MAX / 8)
        return -1;
    *n = v;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t n = DEFAULT_N;
    if (argc > 2 || (argc == 2 && parse_count(argv[1], &n) != 0)) {
        fprintf(stderr, "usage: zpp-accuracy [elements]   (1 to %zu, default %u)\n",
                (size_t)(SIZE_MAX / 8), DEFAULT_N);
        return 2;
    }
    const uint32_t blocks[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    float *xf = malloc((size_t)n * sizeof *xf), *bf = malloc((size_t)n * sizeof *bf);
    float *y = malloc((size_t)n * sizeof *y);
    uint16_t *xb = malloc((size_t)n * sizeof *xb);
    uint8_t *chunk = malloc((size_t)zk_chunk_bytes(n, 8, blocks[0]));
    if (!xf || !bf || !y || !xb || !chunk) {
        fprintf(stderr, "zpp-accuracy: out of memory for %llu elements\n", (unsigned long long)n);
        free(xf);
        free(bf);
        free(y);
        free(xb);
        free(chunk);
        return 1;
    }
    uint64_t s = SEED;
    for (uint64_t i = 0; i < n; i++) {
        double u1 = uniform(&s), u2 = uniform(&s);
        xf[i] = (float)(sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(TWO_PI * u2));
        zk_narrow(xf[i], xb, ZK_BF16, i);
        bf[i] = zk_widen(xb, ZK_BF16, i);
    }
    printf("relative L2 error of quantize -> dequantize, %llu i.i.d. N(0,1) elements\n",
           (unsigned long long)n);
    printf("| block | int8 (fp32 in) | int8 (bf16 in) | int4 (fp32 in) | int4 (bf16 in) |\n");
    printf("|---:|---:|---:|---:|---:|\n");
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        printf("| %u | %.3f%% | %.3f%% | %.2f%% | %.2f%% |\n", blocks[b],
               100 * rel_err(xf, xf, ZK_FP32, n, 8, blocks[b], chunk, y),
               100 * rel_err(xb, bf, ZK_BF16, n, 8, blocks[b], chunk, y),
               100 * rel_err(xf, xf, ZK_FP32, n, 4, blocks[b], chunk, y),
               100 * rel_err(xb, bf, ZK_BF16, n, 4, blocks[b], chunk, y));
    }
    free(xf);
    free(bf);
    free(y);
    free(xb);
    free(chunk);
    return 0;
}
