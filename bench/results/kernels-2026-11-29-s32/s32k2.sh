#!/bin/bash
# session 32, call 2 (nvidia-h200, one GPU): fquantv's largest |x| of a block in a tree of max.NaN
# (ZK_AMT=1; session 31 call 7's profile: a chain of 32 FMNMX, ~25 warp samples a link, ~7 % of
# frt_kernel's samples), and frt_kernel's CTAs made smaller. Builds made on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk2.tar.xz:
#   old      the tree before this change (3d7dd44)
#   default  this tree (ZK_AMT=1)
#   chain    -DZK_AMT=0 (the chain, as old)
#   w6m4     -DZK_RQT_WC=6 -DZK_RQT_MINB=4 (6 consumer warps, 4 CTAs per SM: 24 consumer warps as now)
#   w4m6     -DZK_RQT_WC=4 -DZK_RQT_MINB=6 (4 consumer warps, 6 CTAs per SM, 64 registers)
# full byte-compare of default, quick of w6m4 / w4m6; memcheck of default's quick compare;
# kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk2; mkdir -p $Z; tar xJf .carry/zk2.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k2.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/default/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-default.log 2>&1
tail -4 $R/compare-default.log >> $H
for v in w6m4 w4m6; do
  { echo "$DEV"; timeout 100 $Z/$v/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "$v quick: $(tail -2 $R/compare-$v.log | tr '\n' ' ')" >> $H
done
SAN=/usr/local/cuda/bin/compute-sanitizer
{ echo "$DEV"; timeout 150 $SAN --tool memcheck $Z/default/gpu_compare 0x5EED quick 2>&1 | tail -4; } > $R/memcheck-default.log 2>&1
echo "memcheck default: $(tail -1 $R/memcheck-default.log)" >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in old default chain w6m4 w4m6; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant " $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
