#!/bin/bash
# session 30, call 5 (nvidia-h200, one GPU): int4 reduce+requantize fed by the bulk copy engine
# (kernels/zk_rqt.cuh, frt_kernel: a producer warp per CTA copies each tile's codes and scales of
# all k chunks into shared memory, NS tiles ahead; the consumer warps run frv_kernel's arithmetic
# from there). Builds made on the build machine with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh,
# carried as .carry/zk/<build>/:
#   default  the tree (ZK_RQT=0: frv_kernel)
#   rqt      -DZK_RQT=1 (8 consumer warps, 3 stages, 2 CTAs per SM)
#   rqt3     -DZK_RQT=1 -DZK_RQT_NS=2 -DZK_RQT_MINB=3 (2 stages, 3 CTAs per SM)
#   rqt12    -DZK_RQT=1 -DZK_RQT_WC=12 -DZK_RQT_NS=2 (12 consumer warps, 2 stages, 2 CTAs per SM)
# 1. the full byte-compare of rqt (its reduce cases with k <= 8 and blocks 32-1024 go through
#    frt_kernel; rqt3's and rqt12's were dropped: the carry limit), compute-sanitizer memcheck of rqt's quick one;
# 2. kernel_bench 256 MiB, section reduce, the four builds alternated three times.
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) + the switches above; command: bash bench/results/kernels-2026-11-29-s30/s30k5.sh"
echo "$DEV" > $R/head.txt
for v in rqt; do
  { echo "$DEV"; timeout 200 $Z/$v/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "== $v" >> $R/head.txt; tail -8 $R/compare-$v.log >> $R/head.txt
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "$DEV"; timeout 150 $CS --tool memcheck --leak-check no --print-limit 20 $Z/rqt/gpu_compare 0x5EED quick; echo "memcheck rc=$?"; } > $R/sanitizer-rqt.log 2>&1
grep -E "ERROR SUMMARY|rc=" $R/sanitizer-rqt.log >> $R/head.txt
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default rqt rqt3 rqt12; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $R/head.txt
cat $R/head.txt; grep -E "^===|rc=|reduce\+requant" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
