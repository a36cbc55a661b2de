#!/bin/bash
# session 15 call 1 (one H200): where the H200's short kernels spend their instructions.
# 1. run_gpu.sh: the tree's build (full byte-compare, paired bench) and two variants: vpfw (the int4 vector
#    reductions' prefetch shared out over the warp, one line per lane, -DZK_VPFW=1) and dft (the default again).
# 2. SASS of the default build's qgz.o, quant.o, sum.o and the vpfw build's qgz.o (cuobjdump, gzipped).
# 3. ncu, clocks left as they are (--clock-control none), instruction and issue counts of the fused
#    reductions and dequantize kernels, one launch of each instance (its 4th).
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="vpfw:-DZK_VPFW=1;dft:-DZK_VPFW=0" ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
mkdir -p $OUT/sass
for f in qgz quant sum; do $CU/cuobjdump -sass $B/default/$f.o > $OUT/sass/default-$f.sass 2>&1; done
$CU/cuobjdump -sass $B/vpfw/qgz.o > $OUT/sass/vpfw-qgz.sass 2>&1
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio
for v in default vpfw; do
  timeout 240 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:(frv_kernel|fro_kernel|frov_kernel|dqx_kernel|fqx_kernel):4" \
    --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/sass/ncu-$v.csv 2> $OUT/sass/ncu-$v.err
  echo ncu $v rc=$?
done
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "requant|reduce_out|dequant.*fp32|int4" $OUT/k/bench.log | head -30
grep -E "=== variant|requant|reduce_out" $OUT/k/variants.log | head -30
cd $OUT && tar czf k.tgz k && rm -rf k && tar czf sass.tgz sass && rm -rf sass && ls -la
