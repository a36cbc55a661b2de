#!/bin/bash
# session 33, call 1 (nvidia-h200, one GPU): first run of the tensor-core int4 reduce+requantize
# (kernels/zk_rqh.cuh, ZK_B4=2: the exact-sum contract), tree in .carry/tree.
#   default = the tree's kernels as they are (ZK_B4=1, frt_kernel);
#   x2 = -DZK_B4=2 (frh_kernel, 72 registers, 3 CTAs/SM); x2m2 = -DZK_B4=2 -DZK_RQH_MINB=2 (96 registers).
# 1. full byte-compare of x2 against its C reference (built with -DZK_B4=2); quick compare of x2m2;
# 2. kernel_bench section reduce at 256 MiB: default, x2, x2m2 alternated twice.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33a; mkdir -p $Z; tar xJf .carry/zk33a.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k1.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 200 $Z/x2/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-x2.log 2>&1
tail -6 $R/compare-x2.log >> $H
{ echo "$DEV"; timeout 100 $Z/x2m2/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-x2m2.log 2>&1
tail -3 $R/compare-x2m2.log >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2; do for v in default x2 x2m2; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 100 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "FAIL|fail" $R/compare-x2.log | head -20; grep -E "^===|reduce\+requant +int4|D2D" $R/alt.txt
