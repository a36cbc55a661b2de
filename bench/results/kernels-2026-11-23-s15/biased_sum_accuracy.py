#!/usr/bin/env python3
"""The accuracy cost of summing biased int4 codes (way (a) of README.txt).

Eight chunks of 2^20 Gaussian values, each quantized to int4 in blocks of
256 (scale = absmax / 7, codes rounded to nearest). For each element:
  current: acc = fma(q, s, acc) chunk by chunk, from +0
  biased:  acc = fma(q + 8, s, acc) chunk by chunk, then acc - sum(8 * s)
both in fp32, emulated in numpy: each product of two fp32 values is exact
in fp64, and every step is rounded once to fp32. Prints each chain's
relative L2 error against the exact sum.

device:  no GPU: the development machine's CPU (AMD EPYC, 2 cores), Python 3.11.7, numpy 2.4.6
date:    2026-11-23 (session 15)
command: python3 bench/results/kernels-2026-11-23-s15/biased_sum_accuracy.py
output:  current 5.08e-08, biased 5.55e-07 (deterministic: fixed seed, IEEE arithmetic)
"""
import numpy as np

K, N, B = 8, 1 << 20, 256
rng = np.random.default_rng(1)


def quant4(x):
    xb = x.reshape(-1, B)
    am = np.abs(xb).max(1, keepdims=True).astype(np.float32)
    s = (am / np.float32(7)).astype(np.float32)
    inv = np.where(am > 0, np.float32(7) / am, 0).astype(np.float32)
    q = np.clip(np.rint(xb * inv), -7, 7).astype(np.int32)
    return q.reshape(-1), s.reshape(-1)


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32)


chunks = [quant4(rng.standard_normal(N).astype(np.float32)) for _ in range(K)]
acc = np.zeros(N, np.float32)
accb = np.zeros(N, np.float32)
bias = np.zeros(N // B, np.float32)
exact = np.zeros(N, np.float64)
for q, s in chunks:
    se = np.repeat(s, B).astype(np.float64)
    exact += q * se
    acc = f32(acc + q * se)
    accb = f32(accb + (q + 8) * se)
    bias = f32(bias + 8.0 * s.astype(np.float64))
accb = f32(accb - np.repeat(bias, B).astype(np.float64))


def rel(a):
    return np.linalg.norm(a.astype(np.float64) - exact) / np.linalg.norm(exact)


print("current fp32 chain, rel L2 vs exact: %.3g" % rel(acc))
print("biased fp32 chain,  rel L2 vs exact: %.3g" % rel(accb))
