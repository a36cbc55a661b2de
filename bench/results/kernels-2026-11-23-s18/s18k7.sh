#!/bin/bash
# session 18, call 7 (one H200): dequantize in rounds (dqs_kernel) with more CTAs per SM. Session 17's rounds
# (one 512-thread CTA per SM, 200 KiB slabs) did not lift fp32 from int4 on the H200 (90.9 against 91.2 %) though
# DRAM serves that mix phased at 97-98 %: 16 warps per SM may keep too few stores in flight there. New knob
# ZK_DQS_PER_SM (CTAs per SM and round, slab ZK_DQS_SMEM each). Variants (full byte-compare each):
#   p2: -DZK_DQS_PER_SM=2 -DZK_DQS_SMEM=102400u           fp32 from int4, 2 CTAs per SM
#   p4: -DZK_DQS_PER_SM=4 -DZK_DQS_SMEM=51200u            4 CTAs per SM
#   a2: -DZK_DQS=2 -DZK_DQS_PER_SM=2 -DZK_DQS_SMEM=102400u every dequantize shape in rounds, 2 per SM
#   a4: -DZK_DQS=2 -DZK_DQS_PER_SM=4 -DZK_DQS_SMEM=51200u  every shape, 4 per SM
# Then the dequantize rows of the tree and each variant twice, alternated.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="p2:-DZK_DQS_PER_SM=2 -DZK_DQS_SMEM=102400u;p4:-DZK_DQS_PER_SM=4 -DZK_DQS_SMEM=51200u;a2:-DZK_DQS=2 -DZK_DQS_PER_SM=2 -DZK_DQS_SMEM=102400u;a4:-DZK_DQS=2 -DZK_DQS_PER_SM=4 -DZK_DQS_SMEM=51200u" \
  ZK_BENCH_ONLY=quant ZK_VARIANT_BENCH=quant ZK_VARIANT_COMPARE=full ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for i in 1 2; do for v in default p2 p4 a2 a4; do
  echo "=== $v $i" >> $R/alt.txt
  ZK_BENCH_ONLY=quant $B/$v/kernel_bench 256 2>&1 | grep -E "D2D D|dequant" >> $R/alt.txt
done; done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "gpu_compare|FAIL" $R/k/variants.log | head
grep -E "D2D|dequant" $R/k/bench.log
grep -E "=== variant|dequant" $R/k/variants.log
grep -E "===|dequant" $R/alt.txt
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
