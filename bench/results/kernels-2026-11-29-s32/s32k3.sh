#!/bin/bash
# session 32, call 3 (nvidia-h200, one GPU): is frt_kernel (int4 reduce+requantize, k = 8) held by
# its arithmetic or by its memory traffic? Diagnostic builds that move the same bytes the same way
# (the copy engine brings all 8 chunks' codes and scales of every tile) but sum only the first 1, 4
# or 6 chunks (-DZK_RQT_SUMK=n: wrong bytes, timing only). Built on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk3.tar.xz:
#   default  this tree (ZK_AMT=1, sums all 8)
#   sum1 / sum4 / sum6
# kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk3; mkdir -p $Z; tar xJf .carry/zk3.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k3.sh"
H=$R/head.txt
echo "$DEV" > $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default sum1 sum4 sum6; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
