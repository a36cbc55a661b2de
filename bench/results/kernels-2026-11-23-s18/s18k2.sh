#!/bin/bash
# session 18, call 2 (one H200): does cutting instructions speed up the int4 reduce+requantize (issue-bound,
# 1301 warp instructions per 32 codes a lane, call 1's ncu)? The tree has two cuts (zk_fast.cuh):
#   ZK_VLEAN=1  the next batch's L2 prefetch unrolled when whole (68 -> ~28 instructions per warp)
#   ZK_VPACK=1  int4 codes packed in 8 instructions per 8, not 10
# Variants:
#   old:  -DZK_VLEAN=0 -DZK_VPACK=0       session 17's kernels
#   k8m2: -DZK_VKB=8 -DZK_VMINB=2         all 8 chunks' loads in one batch, no prefetch, 2 CTAs per SM
#   nopf: -DZK_VPF=0                      no L2 prefetch at all
# Full byte-compare of the tree, quick of the variants; then reduce rows alternated dft/old, and ncu's
# instruction counts and issue of frv_kernel<4, 4, 8, 1> in each build.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="old:-DZK_VLEAN=0 -DZK_VPACK=0;k8m2:-DZK_VKB=8 -DZK_VMINB=2;nopf:-DZK_VPF=0" \
  ZK_BENCH_ONLY=reduce ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for i in 1 2 3; do for v in default old; do
  echo "=== $v $i" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce $B/$v/kernel_bench 256 2>&1 | grep -E "D2D D|qgz" >> $R/alt.txt
done; done
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmalite.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed
for v in default old k8m2 nopf; do
  ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --metrics $M --csv $B/$v/kernel_bench 256 > $R/ncu-rq-$v.csv 2> $R/ncu-rq-$v.err
  echo ncu rq $v rc=$?
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
cat $R/k/summary.txt | head -8
grep -E "gpu_compare|FAIL" $R/k/variants.log | head
grep -E "D2D|qgz" $R/k/bench.log
grep -E "=== variant|spill|qgz" $R/k/variants.log | grep -v " 0 bytes spill" | head -40
grep -E "===|int4" $R/alt.txt
for f in $R/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $13, $15}' | head -20; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
