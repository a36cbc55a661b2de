#!/bin/bash
# session 32, call 1 (nvidia-h200, one GPU): who spins in frt_kernel (session 31 call 7's profile:
# the producer warp's wait on `empty` is 3.0 M of the kernel's 82.3 M warp instructions x 3, about
# 11 %, all three CTAs' producers on one SM sub-partition). Builds made on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk1.tar.xz:
#   old      the tree before this change (3d7dd44)
#   default  this tree, switches off (ZK_RQT_SELF=0, ZK_RQT_PSLEEP=0)
#   self     -DZK_RQT_SELF=1: no producer warp, the last consumer warp done with a stage refills it
#   self3    -DZK_RQT_SELF=1 -DZK_RQT_NS=3 -DZK_RQT_MINB=2
#   ps200    -DZK_RQT_PSLEEP=200: the producer sleeps 200 ns between tests of `empty`
#   ps1k     -DZK_RQT_PSLEEP=1000
# full byte-compare of self, quick of self3 / ps200; memcheck of self's quick compare; kernel_bench
# 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk1; mkdir -p $Z; tar xJf .carry/zk1.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k1.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/self/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-self.log 2>&1
tail -4 $R/compare-self.log >> $H
for v in self3 ps200; do
  { echo "$DEV"; timeout 100 $Z/$v/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "$v quick: $(tail -2 $R/compare-$v.log | tr '\n' ' ')" >> $H
done
SAN=/usr/local/cuda/bin/compute-sanitizer
{ echo "$DEV"; timeout 150 $SAN --tool memcheck $Z/self/gpu_compare 0x5EED quick 2>&1 | tail -4; } > $R/memcheck-self.log 2>&1
echo "memcheck self: $(tail -1 $R/memcheck-self.log)" >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in old default self self3 ps200 ps1k; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
