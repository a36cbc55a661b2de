#!/bin/bash
# session 16, call 2 (one GPU, H100 first): the write-heavy dequantize shapes against their traffic alone.
#   kernel_bench's new "traffic (no arith)" rows (bench/kernels/traffic.cu): each dequantize shape's mix of reads
#   and writes with no arithmetic, the reads as that shape's narrow code loads or as 16 bytes per lane.
#   wide, wideb: -DZK_DQX_WIDE=1   dequantize loads 16 bytes of codes per lane and hands them on through shared
#         memory (int4 -> fp32 loaded 2 bytes per lane and vector); the stores stay warp-contiguous
#   tmar, tmar8: -DZK_DQX_TMA=1 [-DZK_DQX_NV=8]  the bulk-store tile again, now waiting only for the bulk copy's
#         reads of shared memory (wait_group.read), not for its writes
#   st4f, st4fw: -DZK_ROSTAGE=1 -DZK_RO4F=1 [-DZK_DQX_WIDE=1]  call 1's best int4 -> fp32 reduction, again and
#         with the wide dequantize; dft: the default again
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="wide:-DZK_DQX_WIDE=1;tmar:-DZK_DQX_TMA=1;tmar8:-DZK_DQX_TMA=1 -DZK_DQX_NV=8;st4f:-DZK_ROSTAGE=1 -DZK_RO4F=1;st4fw:-DZK_ROSTAGE=1 -DZK_RO4F=1 -DZK_DQX_WIDE=1;wideb:-DZK_DQX_WIDE=1;dft:-DZK_DQX_NV=2" \
  ZK_VARIANT_BENCH=quant,traffic,reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio
for v in default wide; do
  ZK_BENCH_ONLY=quant timeout 150 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:dqx_kernel<1, 4:4" --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/ncu-$v.csv 2> $OUT/ncu-$v.err
  echo ncu $v rc=$?
done
ZK_BENCH_ONLY=traffic timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:traffic_kernel:4" --metrics $M --csv $B/default/kernel_bench 256 > $OUT/ncu-traffic.csv 2> $OUT/ncu-traffic.err
echo ncu traffic rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "Memset|dequant|traffic|reduce_out" $OUT/k/bench.log | head -30
grep -E "=== variant|dequant|traffic|reduce_out" $OUT/k/variants.log | head -150
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
