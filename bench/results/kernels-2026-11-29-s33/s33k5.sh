#!/bin/bash
# session 33, call 5 (nvidia-h200, one GPU): frh_kernel with each block's B registers made where
# they are used (no per-tile arrays) and, as an option, each block's sums kept in its read code
# bytes until the requantization (ZK_RQH_STASH=1: fewer registers, the stage released at the
# tile's end); against the tree's frt_kernel (default).
#   s4m3 = -DZK_B4=2 -DZK_RQH_STASH=1 -DZK_RQH_MINB=3 (72 registers, 3 CTAs/SM); s4m2: MINB 2;
#   g1m3 = -DZK_B4=2 -DZK_RQH_G=1 -DZK_RQH_MINB=3 (a division per block, 72 registers);
#   g4m2 = -DZK_B4=2 (G 4, MINB 2: call 4's g4m2 with the per-block B).
# 1. quick byte-compare of each variant, full of s4m3; 2. kernel_bench reduce alternated twice.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33d; mkdir -p $Z; tar xJf .carry/zk33d.tar.xz -C $Z
V="s4m3 g1m3 g4m2 s4m2"
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k5.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 200 $Z/s4m3/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-s4m3-full.log 2>&1
echo "s4m3 full: $(tail -2 $R/compare-s4m3-full.log | tr '\n' ' ')" >> $H
for v in $V; do
  { echo "$DEV"; timeout 100 $Z/$v/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "$v: $(tail -2 $R/compare-$v.log | tr '\n' ' ')" >> $H
done
echo "$DEV" > $R/alt.txt
for i in 1 2; do for v in default $V; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 100 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
