#!/bin/bash
# session 19, call 1 (one H200): speed of the int4 vector sums through biased floats (ZK_I4B=1,
# zk_fast.cuh codes_f4b: 3 shifts + 8 LOP3 + 8 FFMA per 8 codes, against codes_float4h's 17 + 8,
# plus 2 bias FFMAs per chunk and one FADD per element). A prototype: the C reference still has
# the old arithmetic, so the variant's byte-compare is expected to fail; only its speed counts.
# Reduce rows alternated default / i4b three times, then ncu's instruction counts and issue of
# frv_kernel<4, 4, 8, 1> (reduce+requantize) and frov_kernel int4 -> bf16 in both builds.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="i4b:-DZK_I4B=1" ZK_BENCH_ONLY=reduce ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick \
  ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for i in 1 2 3; do for v in default i4b; do
  echo "=== $v $i" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce $B/$v/kernel_bench 256 2>&1 | grep -E "D2D D|qgz" >> $R/alt.txt
done; done
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed
for v in default i4b; do
  ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:fro?v_kernel<.*\(int\)4, \(int\)4:4" --metrics $M --csv $B/$v/kernel_bench 256 > $R/ncu-$v.csv 2> $R/ncu-$v.err
  echo ncu $v rc=$?
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "gpu_compare|spill" $R/k/variants.log | head
grep -E "D2D|qgz" $R/k/bench.log
grep -E "===|int4" $R/alt.txt
for f in $R/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $5, $13, $15}' | cut -c1-200 | head -40; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
