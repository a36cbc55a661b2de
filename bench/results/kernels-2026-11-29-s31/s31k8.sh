#!/bin/bash
# session 31, call 8 (nvidia-h200, one GPU): a suspend-time hint on frt_kernel's mbarrier waits
# (call 7: the consumers' spin is ~14 % of their instructions). Kernels of the tree + the patch
# rqt-suspend.patch beside this file (ZK_RQT_SUSPEND ns, default 0 = no hint), built on the
# build machine with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk5.tar.xz:
#   default, sp200 (-DZK_RQT_SUSPEND=200), sp2k (2000), sp20k (20000).
# full byte-compare of sp2k; kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk5; mkdir -p $Z; tar xJf .carry/zk5.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s31/s31k8.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/sp2k/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-sp2k.log 2>&1
tail -3 $R/compare-sp2k.log >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default sp200 sp2k sp20k; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
