#!/bin/bash
# session 33, call 6 (nvidia-h200, one GPU): timing probe for frt_kernel<8, 8>: the bias taken
# first (the sums start at -8 * (sum of the scales) and no FFMA takes it off at the end: one FFMA
# an element fewer; -DZK_RQT_B4F=1, wrong bytes against today's contract, timing only), against
# the tree's build (default). kernel_bench section reduce, 256 MiB, alternated three times.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33e; mkdir -p $Z; tar xJf .carry/zk33e.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k6.sh"
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default b4f; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 100 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
grep -E "^===|reduce\+requant +int4" $R/alt.txt
