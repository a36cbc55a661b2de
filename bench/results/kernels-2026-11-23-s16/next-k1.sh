#!/bin/bash
# prepared in session 16, not run (one GPU, H100 first, then the H200): do the write-heavy dequantize shapes gain
# when DRAM sees their reads as one burst and then only writes?
#   kernel_bench's traffic rows gain "reads, then writes": the mix as two kernels, all reads then all writes (the
#   rate an L2-prefetched dequantize could approach; it pays one more launch).
#   pf1, pf1b: -DZK_DQX_L2PF=1   a small kernel first has the bulk copy engine prefetch the whole chunk (codes and
#         scales, when it fits in half the L2) into L2 as evict_last, then dequantize runs as before
#   pf2: -DZK_DQX_L2PF=2         the same prefetch as evict_normal, and the dequantize tile's bulk stores evict_first
#   dft: the default again
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="pf1:-DZK_DQX_L2PF=1;pf2:-DZK_DQX_L2PF=2;pf1b:-DZK_DQX_L2PF=1;dft:-DZK_DQX_NV=2" ZK_BENCH_ONLY=quant,traffic \
  ZK_VARIANT_BENCH=quant ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $OUT/device.txt
CU=/usr/local/cuda/bin
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active
for v in default pf1 pf2; do
  ZK_BENCH_ONLY=quant timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:dqx_kernel<\(int\)1, \(int\)4:4" --metrics $M --csv $B/$v/kernel_bench 256 > $OUT/ncu-$v.csv 2> $OUT/ncu-$v.err
  echo ncu $v rc=$?
done
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head
grep -E "Memset|dequant|traffic" $OUT/k/bench.log
grep -E "=== variant|dequant" $OUT/k/variants.log
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
