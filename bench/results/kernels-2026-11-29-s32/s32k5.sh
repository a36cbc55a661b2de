#!/bin/bash
# session 32, call 5 (nvidia-h200, one GPU): would a decode split between the pipes pay? Timing
# only: frt_kernel<*, 8>'s odd chunks in ZK_B4 = 2's positional form (one LOP3 per code, FFMA with
# s: ALU), its even chunks in ZK_B4 = 1's (fp16 subnormals: LOP3 per two codes, HADD2.F32 per
# code), -DZK_B4MIX=1 (rqt-b4mix.patch beside this file; no contract has this form, so the bytes
# differ from the reference and are not compared). Builds made on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk5.tar.xz:
#   default  37f0ed4's kernels (the tree)
#   mix      -DZK_B4MIX=1
#   mixu     -DZK_B4MIX=1 -DZK_B4G=0 (no guard)
#   u        -DZK_B4G=0 (the tree without the guard)
# kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk5; mkdir -p $Z; tar xJf .carry/zk5.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k5.sh"
H=$R/head.txt
echo "$DEV" > $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default mix mixu u; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
