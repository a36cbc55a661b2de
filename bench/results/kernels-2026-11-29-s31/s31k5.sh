#!/bin/bash
# session 31, call 5 (nvidia-h200, one GPU): frt_kernel's shape with the guard kept (the tree's
# ZK_B4=1, ZK_RQT=1), built on the build machine with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh and
# carried as .carry/zk4.tar.xz:
#   default  the tree (3 stages, 2 CTAs per SM, 8 consumer warps)
#   g3       -DZK_RQT_NS=2 -DZK_RQT_MINB=3 (72 registers, no spill)
#   g3w6     -DZK_RQT_NS=3 -DZK_RQT_MINB=3 -DZK_RQT_WC=6
#   u3       -DZK_RQT_NS=2 -DZK_RQT_MINB=3 -DZK_B4G=0 (call 3's best, no guard)
# full byte-compare of g3; kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk4; mkdir -p $Z; tar xJf .carry/zk4.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s31/s31k5.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/g3/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-g3.log 2>&1
tail -8 $R/compare-g3.log >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default g3 g3w6 u3; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
