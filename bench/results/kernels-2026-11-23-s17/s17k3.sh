#!/bin/bash
# session 17, call 3 (one GPU): does a dequantize run at the rate of "reads, then writes" (1:8 97-98 % of the copy
# on the H200 in call 1, against 87-91 % mixed) when a first kernel has loaded its whole chunk into L2?
# Call 1's bulk-copy prefetch (a hint) left the dequantize's DRAM reads as they were. Mode 3 loads every 16 bytes
# with an evict_last policy instead.
#   pf3: -DZK_DQX_L2PF=3 -DZK_DQX_L2PF_MAX=6   (chunks up to 3/4 of the L2; kernel_bench's int4 -> fp32 is 33 MiB)
#   dft: the default again
# Then both builds' dequantize rows at 128 MiB (chunks half as large), and ncu of dequantize int4 -> fp32 and of
# the loading kernel (DRAM bytes, L2 hit rate).
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="pf3:-DZK_DQX_L2PF=3 -DZK_DQX_L2PF_MAX=6;dft:-DZK_DQX_NV=2" \
  ZK_BENCH_ONLY=quant,traffic ZK_VARIANT_BENCH=quant,traffic ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for v in pf3 default pf3 default; do
  echo "=== $v 128 MiB" >> $R/bench128.txt
  ZK_BENCH_ONLY=quant $B/$v/kernel_bench 128 2>&1 | grep -E "D2D|dequant" >> $R/bench128.txt
done
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
MD=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active
for v in default pf3; do
  ZK_BENCH_ONLY=quant timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:dqx_kernel<\(int\)1, \(int\)4:4" --metrics $MD --csv $B/$v/kernel_bench 256 > $R/ncu-dq-$v.csv 2> $R/ncu-dq-$v.err
  echo ncu dq $v rc=$?
done
ZK_BENCH_ONLY=quant timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:l2pf_kernel:30" --metrics $MD --csv $B/pf3/kernel_bench 256 > $R/ncu-l2pf.csv 2> $R/ncu-l2pf.err
echo ncu l2pf rc=$?
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
grep -E "gpu_compare|FAIL" $R/k/compare.log $R/k/variants.log | head
grep -E "D2D|Memset|dequant|traffic" $R/k/bench.log
grep -E "=== variant|dequant|traffic" $R/k/variants.log
cat $R/bench128.txt
for f in $R/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $5, $13, $15}' | cut -c1-40,200- | head -20; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
