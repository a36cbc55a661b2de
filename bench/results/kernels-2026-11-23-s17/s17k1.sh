#!/bin/bash
# session 17, call 1 (one GPU; the H200 first): two questions in one call.
# 1. Does the int4 sum gain on the H200, where it is bound by instruction issue, when each biased code is read as
#    an fp32 subnormal (one LOP3 per code, no widening; ZK_PROBE_SUB4=2, zk_fast.cuh: probe_sub32_batch)? A
#    timing probe: its int4 reductions sum q + 8 and take 8 * sum(s) off, which the C reference does not, so
#    their byte-compare fails by design (the other kernels must pass).
#      sub32, sub32b: -DZK_PROBE_SUB4=2 (twice, for the spread)
# 2. Do the write-heavy dequantize shapes gain when their whole chunk is first prefetched into L2?
#    kernel_bench's int4 -> fp32 chunk is 33 MiB, so the prefetch needs ZK_DQX_L2PF_MAX=6 (3/4 of the L2).
#      pf1: -DZK_DQX_L2PF=1 -DZK_DQX_L2PF_MAX=6   evict_last prefetch
#      pf2: -DZK_DQX_L2PF=2 -DZK_DQX_L2PF_MAX=6   evict_normal prefetch, evict_first bulk stores
#      dft: the default again
# Then: SASS of the sub32 build's qgz.o; ncu (clocks as they are) of int4 reduce+requantize (default, sub32) with
# the issue, stall and per-pipe figures, and of dequantize int4 -> fp32 (default, pf1, pf2) with DRAM and L2.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="sub32:-DZK_PROBE_SUB4=2;pf1:-DZK_DQX_L2PF=1 -DZK_DQX_L2PF_MAX=6;pf2:-DZK_DQX_L2PF=2 -DZK_DQX_L2PF_MAX=6;dft:-DZK_DQX_NV=2;sub32b:-DZK_PROBE_SUB4=2" \
  ZK_VARIANT_BENCH=quant,reduce,traffic ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
$CU/cuobjdump -sass $B/sub32/qgz.o 2>&1 | gzip > $OUT/sub32-qgz.sass.gz
$CU/cuobjdump -sass $B/default/qgz.o 2>&1 | gzip > $OUT/default-qgz.sass.gz
# per-pipe instruction metrics under the names this ncu knows
P=$($CU/ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' |
    grep -E '^sm__inst_executed_pipe_(alu|fma|fmaheavy|fmalite|fp16|xu|lsu|adu|cbu|uniform)$' |
    sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd,)
echo "pipe metrics: $P" > $OUT/ncu-pipes.txt
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio${P:+,$P}
for v in default sub32; do
  ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/ncu-rq-$v.csv 2> $OUT/ncu-rq-$v.err
  echo ncu rq $v rc=$?
done
MD=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active
for v in default pf1 pf2; do
  ZK_BENCH_ONLY=quant timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:dqx_kernel<\(int\)1, \(int\)4:4" --metrics $MD --csv $B/$v/kernel_bench 256 > $OUT/ncu-dq-$v.csv 2> $OUT/ncu-dq-$v.err
  echo ncu dq $v rc=$?
done
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "Memset|D2D|dequant|traffic|qgz" $OUT/k/bench.log
grep -E "=== variant|spill|dequant|traffic|qgz" $OUT/k/variants.log | grep -v " 0 bytes spill" | head -150
for f in $OUT/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $13, $15}' | head -40; done
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
