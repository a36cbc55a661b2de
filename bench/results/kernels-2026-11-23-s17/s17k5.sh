#!/bin/bash
# session 17, call 5 (one H200): the int4 reduce+requantize at higher occupancy. ncu (call 2): issue slots 83 %
# busy with 2.0 other warps eligible per issue, and the 17 % idle cycles spent with every warp stalled (math-pipe
# throttle 1.20, fixed-latency wait 0.91, memory 0.98 per issue) at 6 warps per scheduler (80 registers, 3 CTAs
# per SM). More warps may fill those cycles. Variants that compile without spills for frv_kernel:
#   o4k2:   -DZK_VMINB=4 -DZK_VKB=2            64 registers, batches of 2 chunks (4 CTAs per SM)
#   k2:     -DZK_VKB=2                         the same batches at today's 80 registers (the control)
#   o4s2:   -DZK_VMINB=4 -DZK_RQ4=2            64 registers, 16 codes per chunk and lane
#   o5s2:   -DZK_VMINB=5 -DZK_RQ4=2            48 registers (5 CTAs per SM)
#   o4s2k8: -DZK_VMINB=4 -DZK_RQ4=2 -DZK_VKB=8 64 registers, batches of 8 chunks
#   dft:    the default again
# ZK_VMINB bounds the int4 reduce -> output vector kernel (frov) too; its rows are printed as well.
# Then ncu (clocks as they are) of int4 reduce+requantize for default, o4k2 and o4s2.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="o4k2:-DZK_VMINB=4 -DZK_VKB=2;k2:-DZK_VKB=2;o4s2:-DZK_VMINB=4 -DZK_RQ4=2;o5s2:-DZK_VMINB=5 -DZK_RQ4=2;o4s2k8:-DZK_VMINB=4 -DZK_RQ4=2 -DZK_VKB=8;dft:-DZK_DQX_NV=2" \
  ZK_BENCH_ONLY=reduce ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmalite.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
for v in default o4k2 o4s2; do
  ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)[24], \(int\)(8|16):4" --metrics $M --csv $B/$v/kernel_bench 256 > $R/ncu-rq-$v.csv 2> $R/ncu-rq-$v.err
  echo ncu rq $v rc=$?
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
grep -E "gpu_compare|FAIL" $R/k/compare.log $R/k/variants.log | head -20
grep -E "D2D|qgz" $R/k/bench.log
grep -E "=== variant|spill|qgz" $R/k/variants.log | grep -v " 0 bytes spill" | head -80
for f in $R/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $5, $13, $15}' | sed -E 's/\(const.*\) / /' | cut -c1-120 | head -14; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
