#!/bin/bash
# session 31, call 7 (run twice: the first regex matched no kernel) (nvidia-h200, one GPU): what holds the tree's int4 reduce+requantize now
# (frt_kernel<8, 8>: B = 256, k = 8, 2 stages, 3 CTAs per SM, biased sums) under Nsight Compute:
# scripts/gpu/ncu_kernels.sh on the tree's kernel_bench (built on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zkf.tar.xz); then kernel_bench's own
# figure for the same build (section reduce, once).
R=$OUT/r; mkdir -p $R
mkdir -p /tmp/zkf-run && tar xJf .carry/zkf.tar.xz -C /tmp/zkf-run
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s31/s31k7.sh"
echo "$DEV" > $R/head.txt
ZK_BUILD=/tmp/zkf-run/zkf timeout 400 scripts/gpu/ncu_kernels.sh $R/ncu 'frt_kernel<.int.8, .int.8>'; echo "ncu rc=$?" >> $R/head.txt
{ echo "$DEV"; ZK_BENCH_ONLY=reduce timeout 120 /tmp/zkf-run/zkf/default/kernel_bench 256; echo "rc=$?"; } > $R/bench-reduce.log 2>&1
grep -E "reduce\+requant +int4" $R/bench-reduce.log >> $R/head.txt
rm -f $R/ncu/*.ncu-rep
sed -i "1i $DEV" $R/ncu/ncu_1.txt 2>/dev/null
echo "end $(date -u '+%F %T UTC')" >> $R/head.txt
cat $R/head.txt; cat $R/ncu/mix.txt | head -60
grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|Executed Ipc|Achieved Occupancy|Registers Per|Theoretical Occ|Block Limit|L2 Hit|Warp Cycles Per Issued|No Eligible|One or More" $R/ncu/ncu_1.txt | head -40
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
