#!/bin/bash
# session 28, call 6 (nvidia-h200, one GPU): int4 reduce+requantize with a build of its vector
# kernel for k = 8 chunks (ZK_VK8, kernels/zk_fast.cuh: the sums start at the first chunk's FFMA
# instead of being zeroed before a loop of unknown length; 80 registers, no spill). Builds made on
# the build machine with tests/gpu/run_gpu.sh's nvcc flags, carried as .carry/zk/<build>/:
#   default  the tree (ZK_VK8=1)
#   vk0      -DZK_VK8=0 (the kernel of before)
# 1. the full byte-compare of the default build (every kernel against the C reference; its reduce
#    cases include k = 8), and compute-sanitizer memcheck of its quick compare;
# 2. kernel_bench 256 MiB, section reduce, the two builds alternated three times.
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s28/s28k2.sh"
echo "$DEV" > $R/head.txt
{ echo "$DEV"; timeout 200 $Z/default/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare.log 2>&1
tail -8 $R/compare.log >> $R/head.txt
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "$DEV"; timeout 150 $CS --tool memcheck --leak-check no --print-limit 20 $Z/default/gpu_compare 0x5EED quick; echo "memcheck rc=$?"; } > $R/sanitizer.log 2>&1
grep -E "ERROR SUMMARY|rc=" $R/sanitizer.log >> $R/head.txt
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default vk0; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $R/head.txt
cat $R/head.txt; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
