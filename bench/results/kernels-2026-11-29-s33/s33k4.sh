#!/bin/bash
# session 33, call 4 (nvidia-h200, one GPU): frh_kernel with a tile body without bounds tests
# for whole tiles (rqh_tile<true>), the scales read at the tile's start again, the divisions
# shared by G blocks; against the tree's frt_kernel (default).
#   g4m2 = -DZK_B4=2 (G = 4, MINB = 2, the file's defaults); g2m2: G = 2; g4m3: MINB = 3.
# 1. full byte-compare of g4m2, quick of the others (C reference built with the same flags);
# 2. kernel_bench section reduce at 256 MiB, all alternated twice;
# 3. ncu of g4m2's frh_kernel (per-instruction stalls), packed in one tarball.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33c; mkdir -p $Z; tar xJf .carry/zk33c.tar.xz -C $Z
V="g4m2 g2m2 g4m3"
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k4.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 200 $Z/g4m2/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-g4m2-full.log 2>&1
echo "g4m2 full: $(tail -2 $R/compare-g4m2-full.log | tr '\n' ' ')" >> $H
for v in $V; do
  { echo "$DEV"; timeout 100 $Z/$v/gpu_compare 0x5EED quick; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "$v: $(tail -2 $R/compare-$v.log | tr '\n' ' ')" >> $H
done
echo "$DEV" > $R/alt.txt
for i in 1 2; do for v in default $V; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 100 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
mkdir -p /tmp/p1/default; cp $Z/g4m2/kernel_bench /tmp/p1/default/
ZK_BENCH_ONLY=reduce ZK_BUILD=/tmp/p1 timeout 200 scripts/gpu/ncu_kernels.sh $R/ncu 'frh_kernel'; echo "ncu rc=$?" >> $H
rm -f $R/ncu/*.ncu-rep; sed -i "1i $DEV" $R/ncu/ncu_1.txt 2>/dev/null
tar czf $R/ncu.tgz -C $R ncu && rm -rf $R/ncu
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
