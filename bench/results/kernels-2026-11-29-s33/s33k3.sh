#!/bin/bash
# session 33, call 3 (nvidia-h200, one GPU): frh_kernel with the next tile's scales read ahead
# (rqh_prologue) and the divisions shared by G blocks, against the tree's frt_kernel (default).
#   gGmM = -DZK_B4=2 -DZK_RQH_G=G -DZK_RQH_MINB=M; g2m2n3 adds -DZK_RQT_NS=3 (three stages).
# 1. quick byte-compare of every variant (its C reference built with the same flags);
# 2. kernel_bench section reduce at 256 MiB, all alternated twice;
# 3. ncu of g2m2's frh_kernel (per-instruction stalls), packed in one tarball.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33b; mkdir -p $Z; tar xJf .carry/zk33b.tar.xz -C $Z
V="g1m3 g1m2 g2m2 g4m2 g2m2n3"
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k3.sh"
H=$R/head.txt
echo "$DEV" > $H
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
mkdir -p /tmp/p1/default; cp $Z/g2m2/kernel_bench /tmp/p1/default/
ZK_BENCH_ONLY=reduce ZK_BUILD=/tmp/p1 timeout 200 scripts/gpu/ncu_kernels.sh $R/ncu 'frh_kernel'; echo "ncu rc=$?" >> $H
rm -f $R/ncu/*.ncu-rep; sed -i "1i $DEV" $R/ncu/ncu_1.txt 2>/dev/null
tar czf $R/ncu.tgz -C $R ncu && rm -rf $R/ncu
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
