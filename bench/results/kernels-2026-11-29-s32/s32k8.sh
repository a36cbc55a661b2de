#!/bin/bash
# session 32, call 8 (nvidia-h200, one GPU): frt_kernel<*, 8>'s chunk 0 sets each sum to u * s by
# FMUL instead of zeroing the sums and adding fma(u, s, +0) (-DZK_RQT_MUL0=1, rqt-mul0.patch
# beside this file): 32 fewer instructions per lane and tile; the value differs only where u * s
# is -0, and the output bytes then do not. Builds made on the build machine with ZK_BUILD_ONLY=1
# tests/gpu/run_gpu.sh, carried as .carry/zk8.tar.xz:  default (the tree)  mul0
# full byte-compare of mul0, memcheck of its quick compare; kernel_bench 256 MiB, section reduce,
# alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk8; mkdir -p $Z; tar xJf .carry/zk8.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k8.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/mul0/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-mul0.log 2>&1
tail -3 $R/compare-mul0.log >> $H
SAN=/usr/local/cuda/bin/compute-sanitizer
{ echo "$DEV"; timeout 150 $SAN --tool memcheck $Z/mul0/gpu_compare 0x5EED quick 2>&1 | tail -4; } > $R/memcheck-mul0.log 2>&1
echo "memcheck mul0: $(tail -1 $R/memcheck-mul0.log)" >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default mul0; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
