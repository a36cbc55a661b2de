#!/bin/bash
# session 16, call 3 (one GPU, H100): pipelined bulk-store dequantize, and the traffic rows with bulk stores.
#   tmar:  -DZK_DQX_TMA=1          call 2's best dequantize again (one tile per CTA, bulk store, wait for its reads)
#   dqt, dqt4, dqtc4: -DZK_DQT=1 [-DZK_DQX_NV=4 | -DZK_DQT_CTAS=4]  a grid of 8 (4) CTAs per SM loops over the
#         tiles, loads the next tile's codes before decoding the current one into one of two shared buffers,
#         and the bulk copy engine stores each buffer while the CTA goes on
#   chkdqt: -DZK_DQT=1 -DZK_DQT_GRID=3   byte-compare only: 3 CTAs, many tiles each (both buffers reused)
#   cand:  -DZK_ROSTAGE=1 -DZK_RO4F=1 -DZK_DQT=1   the candidate default; dft: the default again
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="tmar:-DZK_DQX_TMA=1;dqt:-DZK_DQT=1;dqt4:-DZK_DQT=1 -DZK_DQX_NV=4;dqtc4:-DZK_DQT=1 -DZK_DQT_CTAS=4;chkdqt:-DZK_DQT=1 -DZK_DQT_GRID=3;cand:-DZK_ROSTAGE=1 -DZK_RO4F=1 -DZK_DQT=1;dqtb:-DZK_DQT=1;dft:-DZK_DQX_NV=2" \
  ZK_VARIANT_BENCH=quant,traffic,reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
for v in default tmar dqt; do
  ZK_BENCH_ONLY=quant timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:dq[xt]_kernel<\(int\)1, \(int\)4:4" --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/ncu-$v.csv 2> $OUT/ncu-$v.err
  echo ncu $v rc=$?
done
ZK_BENCH_ONLY=traffic timeout 60 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:traffic_kernel<16, 8:4" --metrics $M --csv $B/default/kernel_bench 256 > $OUT/ncu-traffic.csv 2> $OUT/ncu-traffic.err
echo ncu traffic rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "Memset|dequant|traffic|reduce_out" $OUT/k/bench.log | head -30
grep -E "=== variant|dequant|traffic|reduce_out" $OUT/k/variants.log | grep -v "1:[248] read [2-8]B" | head -150
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
