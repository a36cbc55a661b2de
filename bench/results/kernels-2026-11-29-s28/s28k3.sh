#!/bin/bash
# session 28, call 7 (nvidia-h200, one GPU): ncu's counters of int4 reduce+requantize (B = 256, k = 8)
# in the build for 8 chunks (default, tree 68929e4's kernels) and the kernel for any k (vk0,
# -DZK_VK8=0): instructions, issue slots busy, stalls per issue, pipes, DRAM. The same builds as
# call 6 (.carry/zk). ncu at the SM's own clock (--clock-control none).
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
CU=/usr/local/cuda/bin
echo "# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) (kernels of 68929e4); command: bash bench/results/kernels-2026-11-29-s28/s28k3.sh" > $R/head.txt
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__warps_launched.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
for v in default vk0; do
  ZK_BENCH_ONLY=reduce timeout 150 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --metrics $M --csv $Z/$v/kernel_bench 256 > $R/ncu-$v.csv 2> $R/ncu-$v.err
  echo "ncu $v rc=$?" >> $R/head.txt
  sed -i "1i $(head -1 $R/head.txt)" $R/ncu-$v.csv $R/ncu-$v.err
done
cat $R/head.txt
for v in default vk0; do echo "== $v"; grep -E '"frv_kernel' $R/ncu-$v.csv | awk -F'","' '{print $(NF-2)" = "$NF}' | head -20; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
