#!/bin/bash
# prepared in session 15, not run (one GPU, H200 or H100): the int4 reduce+requantize's overhead and decoding.
#   s8, s8k2: -DZK_RQ4=8 -DZK_VMINB=2 [-DZK_VKB=2]  32 bytes of codes per lane and chunk: loads, prefetch
#         and per-block work paid once per 64 codes (2 CTAs per SM, also for the int4 reduce -> bf16 kernel)
#   vm2:  -DZK_VMINB=2                 the default code at 2 CTAs per SM, the control for the three others
#   psub, psub8: -DZK_PROBE_SUB4=1 -DZK_VMINB=2 [-DZK_RQ4=8 -DZK_VKB=2]  a timing probe with wrong bytes by
#         design: the vector reductions sum the int4 codes as session 11's biased fp16 subnormals, without
#         the reference's change (its byte-compare fails for the int4 reductions, as it must)
#   vm2b, psubb: vm2 and psub built and timed again, for the spread; dft: the default again
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="s8:-DZK_RQ4=8 -DZK_VMINB=2;s8k2:-DZK_RQ4=8 -DZK_VMINB=2 -DZK_VKB=2;vm2:-DZK_VMINB=2;psub:-DZK_PROBE_SUB4=1 -DZK_VMINB=2;psub8:-DZK_PROBE_SUB4=1 -DZK_RQ4=8 -DZK_VMINB=2 -DZK_VKB=2;vm2b:-DZK_VMINB=2;psubb:-DZK_PROBE_SUB4=1 -DZK_VMINB=2;dft:-DZK_VMINB=3" \
  ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
for v in default s8 vm2 psub psub8; do
  ZK_BENCH_ONLY=reduce timeout 120 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<4:4" --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/ncu-$v.csv 2> $OUT/ncu-$v.err
  echo ncu $v rc=$?
done
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "requant|reduce_out" $OUT/k/bench.log | head -30
grep -E "=== variant|gpu_compare|requant|reduce_out" $OUT/k/variants.log | head -90
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
