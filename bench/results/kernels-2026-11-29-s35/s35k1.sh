#!/bin/bash
# session 35, call 1 (nvidia-h200, one GPU): the write-heavy dequantize shapes (fp32 from int4 and
# int8, 16-bit from int4: 90.5-94.2 % of the copy on an H200, goal 95 %) with each span's codes and
# scales first LOADED into L2 evict-last (keep_kernel: real loads, so the kernel ends once the lines
# are in) with the persisting L2 set-aside at the device's largest (cudaLimitPersistingL2CacheSize),
# then dequantized: DRAM should see a read burst, then only writes, as the "reads, then writes"
# traffic row (96.7-97.8 % for 1:8). Session 30 tried prefetch instructions (which end when asked,
# not when the lines arrive) with no set-aside, and lost. Builds made on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh (its nvcc flags), carried xz-packed as .carry/zk35.tar.xz:
#   default  the tree (tree file) without the switch; new traffic rows "kept ahead, ..."
#   dk       -DZK_DQKEEP=1 (spans of 24 MiB of codes)
#   dk16     -DZK_DQKEEP=1 -DZK_DQKEEP_KIB=16384
#   dk32     -DZK_DQKEEP=1 -DZK_DQKEEP_KIB=32768
#   dkna     -DZK_DQKEEP=1 -DZK_DQKEEP_ASIDE=0 (no set-aside: evict-last alone)
#   dkx      -DZK_DQKEEP=1 -DZK_DQS=0 (fp32 from int4 through dqx_kernel in the spans, not rounds)
#   chkdk    -DZK_DQKEEP=1 -DZK_DQKEEP_KIB=1024 (byte-compare only: the large cases in many spans)
# 1. full byte-compare of the default build (the tree since session 34, incl. 6208fe1) and of chkdk;
# 2. kernel_bench 256 MiB: default sections quant,traffic; the others quant; alternated 3x.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk35; mkdir -p $Z; tar xJf .carry/zk35.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) + the switches above; command: bash bench/results/kernels-2026-11-29-s35/s35k1.sh"
echo "$DEV" > $R/head.txt
( { echo "$DEV"; timeout 300 $Z/default/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-default.log 2>&1 ) &
( { echo "$DEV"; timeout 300 $Z/chkdk/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-chkdk.log 2>&1 ) &
wait
for f in default chkdk; do echo "== compare $f"; tail -9 $R/compare-$f.log; done >> $R/head.txt
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default dk dk16 dk32 dkna dkx; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  S=quant; [ $v = default ] && S=quant,traffic
  ZK_BENCH_ONLY=$S timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|Memset|dequantize|traffic|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $R/head.txt
cat $R/head.txt; grep -E "^===|rc=|dequantize +(fp32|bf16 int4|fp16 int4)|1:8 (reads|read 16B/lane  |kept)|1:4 (reads|read 16B/lane  |kept)|^kernel_bench" $R/alt.txt | head -150
