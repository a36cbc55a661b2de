/*
 * zpp-accuracy.c — prints the accuracy of zppd's block quantization for
 * every block size: relative L2 error ||x' - x|| / ||x|| of a quantize ->
 * dequantize round trip (the reference kernels, which the CUDA kernels match
 * byte for byte) on i.i.d. Gaussian data, for int8 and int4, read from fp32
 * and from bf16. docs/kernels.md quotes its output; tests/unit/test_quant.c
 * asserts the block-256 figures.
 *
 * Usage: zpp-accuracy [elements]   (default 2^22)
 */
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

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : DEFAULT_N;
    const uint32_t blocks[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    float *xf = malloc(n * sizeof *xf), *bf = malloc(n * sizeof *bf), *y = malloc(n * sizeof *y);
    uint16_t *xb = malloc(n * sizeof *xb);
    uint8_t *chunk = malloc(zk_chunk_bytes(n, 8, blocks[0]));
    if (!xf || !bf || !y || !xb || !chunk || n == 0) {
        fprintf(stderr, "zpp-accuracy: out of memory or n == 0\n");
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
