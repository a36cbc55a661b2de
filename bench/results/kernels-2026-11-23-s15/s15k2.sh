#!/bin/bash
# prepared in session 15, not run (one GPU, H200 or H100): reduce -> output stores and occupancy, the dequantize tile and stores.
#   st4f: -DZK_ROSTAGE=1 -DZK_RO4F=1  int4 -> fp32 through the vector kernel, every vector kernel's outputs
#         stored through shared memory (512 contiguous bytes per warp store)
#   rf:   -DZK_RO4F=1                  int4 -> fp32 through the vector kernel, stores as they were
#   st8:  -DZK_ROSTAGE=1 -DZK_RO8=2    int8 reduce -> output through the vector kernel, staged stores
#   mb4:  -DZK_ROMINB=4                the slot kernel reduce -> output held to 64 registers (4 CTAs per SM)
#   dq4, dq8: -DZK_DQX_NV=4 / 8        dequantize tile
#   tma, tma8: -DZK_DQX_TMA=1 [-DZK_DQX_NV=8]  dequantize writes each tile to shared memory and the bulk
#         copy engine stores it (cp.async.bulk), for the write-heavy shapes
#   stcs: -DZK_ST_CS=1                 evict-first stores again (the write-heavy dequantize shapes); dft: the default again
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="st4f:-DZK_ROSTAGE=1 -DZK_RO4F=1;rf:-DZK_RO4F=1;st8:-DZK_ROSTAGE=1 -DZK_RO8=2;mb4:-DZK_ROMINB=4;dq4:-DZK_DQX_NV=4;dq8:-DZK_DQX_NV=8;tma:-DZK_DQX_TMA=1;tma8:-DZK_DQX_TMA=1 -DZK_DQX_NV=8;stcs:-DZK_ST_CS=1;dft:-DZK_DQX_NV=2" \
  ZK_VARIANT_BENCH=quant,reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
for v in st4f st8; do
  ZK_BENCH_ONLY=reduce timeout 200 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:(fro_kernel|frov_kernel):4" --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/ncu-$v.csv 2> $OUT/ncu-$v.err
  echo ncu $v rc=$?
done
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "reduce_out|dequant" $OUT/k/bench.log | head -30
grep -E "=== variant|reduce_out|dequant" $OUT/k/variants.log | head -90
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
