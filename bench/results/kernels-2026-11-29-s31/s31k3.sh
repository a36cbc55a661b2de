#!/bin/bash
# session 31, call 3 (nvidia-h200, one GPU): the copy-engine-fed int4 reduce+requantize (session
# 30's frt_kernel, ZK_RQT) with the biased sums of call 2 (ZK_B4) in its consumer warps: the
# hypothesis that frv_kernel is held by load latency once its instructions are cut, and frt by
# issue once its loads are off the warps. Kernels of the tree named in .carry/tree +
# rqt-b4.patch beside this file, built on the build machine with ZK_BUILD_ONLY=1
# tests/gpu/run_gpu.sh, carried as .carry/zk2.tar.xz:
#   default   the tree
#   rqt       -DZK_RQT=1 (session 30's frt, the tree's arithmetic)
#   rqtb41u   -DZK_RQT=1 -DZK_B4=1 -DZK_B4G=0
#   rqtb41    -DZK_RQT=1 -DZK_B4=1
#   rqtb42    -DZK_RQT=1 -DZK_B4=2
#   rqtb41u3  -DZK_RQT=1 -DZK_B4=1 -DZK_B4G=0 -DZK_RQT_NS=2 -DZK_RQT_MINB=3
#   rqtb41u12 -DZK_RQT=1 -DZK_B4=1 -DZK_B4G=0 -DZK_RQT_WC=12 -DZK_RQT_NS=2
# 1. full byte-compare of rqtb41u, rqtb41, rqtb42 against their own C reference; memcheck of
#    rqtb41u's quick compare;
# 2. kernel_bench 256 MiB, section reduce, every build alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk2; mkdir -p $Z; tar xJf .carry/zk2.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s31/s31k3.sh"
H=$R/head.txt
echo "$DEV" > $H
for v in rqtb41u rqtb41 rqtb42; do
  { echo "$DEV"; timeout 240 $Z/$v/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "== $v" >> $H; tail -8 $R/compare-$v.log >> $H
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "$DEV"; timeout 150 $CS --tool memcheck --leak-check no --print-limit 20 $Z/rqtb41u/gpu_compare 0x5EED quick; echo "memcheck rc=$?"; } > $R/sanitizer-rqtb41u.log 2>&1
grep -E "ERROR SUMMARY|rc=" $R/sanitizer-rqtb41u.log >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default rqt rqtb41u rqtb41 rqtb42 rqtb41u3 rqtb41u12; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|rc=|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
