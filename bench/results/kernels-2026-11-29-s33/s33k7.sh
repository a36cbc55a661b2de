#!/bin/bash
# session 33, call 7 (nvidia-h200, one GPU): the second form of the tensor-core int4
# reduce+requantize (exact sums, ZK_B4=2): each MMA covers the 4 blocks of a warp (K = chunk x
# block, N = block x digit), a lane keeps whole elements (two MMAs per digit pair, no swap), and
# teams of 8 lanes requantize as fquantv does (tensor-core-exact-sums-2.patch).
#   n2 = -DZK_B4=2 (96 registers, 2 CTAs/SM); n3 = -DZK_B4=2 -DZK_RQH_MINB=3 (72, spills);
#   default = the tree's frt_kernel.
# 1. full byte-compare of n2, quick of n3; 2. kernel_bench reduce alternated three times.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33f; mkdir -p $Z; tar xJf .carry/zk33f.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k7.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 200 $Z/n2/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-n2-full.log 2>&1
echo "n2 full: $(tail -2 $R/compare-n2-full.log | tr '\n' ' ')" >> $H
{ echo "$DEV"; timeout 100 $Z/n3/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-n3.log 2>&1
echo "n3: $(tail -2 $R/compare-n3.log | tr '\n' ' ')" >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default n2 n3; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 100 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -iE "fail" $R/compare-n2-full.log | head -8; grep -E "^===|reduce\+requant +int4" $R/alt.txt
