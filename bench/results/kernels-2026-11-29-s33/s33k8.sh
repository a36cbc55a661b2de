#!/bin/bash
# session 33, call 8 (nvidia-h200, one GPU): Nsight Compute profile of call 7's n2 (the second
# form of frh_kernel), with scripts/gpu/ncu_kernels.sh; packed with DEVICE.txt first.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk33f; mkdir -p $Z; tar xJf .carry/zk33f.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s33/s33k8.sh"
echo "$DEV" > $R/head.txt
mkdir -p /tmp/p1/default; cp $Z/n2/kernel_bench /tmp/p1/default/
ZK_BENCH_ONLY=reduce ZK_BUILD=/tmp/p1 timeout 200 scripts/gpu/ncu_kernels.sh $R/ncu 'frh_kernel'; echo "ncu rc=$?" >> $R/head.txt
rm -f $R/ncu/*.ncu-rep; sed -i "1i $DEV" $R/ncu/ncu_1.txt 2>/dev/null
echo "$DEV" > $R/DEVICE.txt
tar czf $R/ncu.tgz -C $R DEVICE.txt ncu && rm -rf $R/ncu $R/DEVICE.txt
cat $R/head.txt
