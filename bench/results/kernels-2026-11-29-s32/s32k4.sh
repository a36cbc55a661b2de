#!/bin/bash
# session 32, call 4 (nvidia-h200, one GPU): shorter chains in frt_kernel's requantize (call 3:
# summing 6 of the 8 chunks runs 92.5 %, all 8 81 %: the arithmetic holds it, and the per-tile
# requantize, with its long dependency chains, is a third of the warps' samples). Builds made on
# the build machine with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk4.tar.xz:
#   old      the tree before this session (3d7dd44)
#   default  this tree (ZK_AMT=1)
#   tredux   -DZK_TREDUX=1: a team's largest |x| by one redux.sync instead of 3 shuffles
#   invall   -DZK_INVALL=1: every lane divides for inv (no shuffle after the division)
#   both     both of them
#   nv2      -DZK_RQT_NV=2 -DZK_RQT_WC=4: each consumer lane sums 2 vectors (64 elements) of a
#            block, 4 consumer warps, 3 CTAs per SM, 127 registers
#   nv2b     nv2 with both
# full byte-compare of nv2 and both, quick of tredux / invall / nv2b; memcheck of nv2's quick
# compare; kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk4; mkdir -p $Z; tar xJf .carry/zk4.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k4.sh"
H=$R/head.txt
echo "$DEV" > $H
for v in nv2 both; do
  { echo "$DEV"; timeout 200 $Z/$v/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "$v full: $(tail -2 $R/compare-$v.log | tr '\n' ' ')" >> $H
done
for v in tredux invall nv2b; do
  { echo "$DEV"; timeout 100 $Z/$v/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "$v quick: $(tail -2 $R/compare-$v.log | tr '\n' ' ')" >> $H
done
SAN=/usr/local/cuda/bin/compute-sanitizer
{ echo "$DEV"; timeout 150 $SAN --tool memcheck $Z/nv2/gpu_compare 0x5EED quick 2>&1 | tail -4; } > $R/memcheck-nv2.log 2>&1
echo "memcheck nv2: $(tail -1 $R/memcheck-nv2.log)" >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in old default tredux invall both nv2 nv2b; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant " $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
