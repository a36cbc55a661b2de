#!/bin/bash
# session 28, call 8 (nvidia-h200, one GPU): with the build for 8 chunks in place (call 6), is int4
# reduce+requantize better with more warps per SM? ncu (call 7) shows 34 % of warps active (3 CTAs of
# 256 threads at 80 registers) and stalls on loads as often as on busy pipes. Builds (tree of
# .carry/tree, made on the build machine with tests/gpu/run_gpu.sh's nvcc flags, .carry/zk/<build>/):
#   default  S = 4 slots per lane, 3 CTAs per SM (80 registers)
#   s2b4     -DZK_RQ4=2 -DZK_VMINB=4: S = 2, 4 CTAs per SM (64 registers, no spill)
#   s4b4     -DZK_RQ4=4 -DZK_VMINB=4: S = 4, 4 CTAs per SM (64 registers, 36-44 bytes spilled)
#   s2       -DZK_RQ4=2: S = 2, 3 CTAs per SM (72 registers)
# (ZK_VMINB also bounds the int4 reduce -> output vector kernels.) kernel_bench 256 MiB, section
# reduce, alternated three times. Timing only: a build kept as the default gets the full byte-compare.
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
echo "# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) + the switches above; command: bash bench/results/kernels-2026-11-29-s28/s28k4.sh" > $R/alt.txt
for i in 1 2 3; do for v in default s2b4 s4b4 s2; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
grep -E "^===|int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
