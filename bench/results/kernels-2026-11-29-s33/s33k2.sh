#!/bin/bash
# session 33, call 2 (nvidia-h200, one GPU): Nsight Compute profile of frh_kernel (the x2 build of
# call 1, tree in .carry/tree) and, for comparison, frt_kernel (the default build), with
# scripts/gpu/ncu_kernels.sh (--set full, the 6th launch, per-instruction stalls by ncu_mix.py).
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33a; mkdir -p $Z; tar xJf .carry/zk33a.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k2.sh"
echo "$DEV" > $R/head.txt
mkdir -p /tmp/p1/default /tmp/p2/default
cp $Z/x2/kernel_bench /tmp/p1/default/; cp $Z/default/kernel_bench /tmp/p2/default/
ZK_BENCH_ONLY=reduce ZK_BUILD=/tmp/p1 timeout 250 scripts/gpu/ncu_kernels.sh $R/ncu-x2 'frh_kernel'; echo "ncu x2 rc=$?" >> $R/head.txt
ZK_BENCH_ONLY=reduce ZK_BUILD=/tmp/p2 timeout 250 scripts/gpu/ncu_kernels.sh $R/ncu-default 'frt_kernel<.int.8, .int.8>'; echo "ncu default rc=$?" >> $R/head.txt
rm -f $R/ncu-*/*.ncu-rep
for f in $R/ncu-*/ncu_1.txt; do sed -i "1i $DEV" $f 2>/dev/null; done
cat $R/head.txt; head -80 $R/ncu-x2/mix.txt
grep -E "Duration|Registers|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|Bank Conflicts|Theoretical Occupancy" $R/ncu-x2/ncu_1.txt | head -30
