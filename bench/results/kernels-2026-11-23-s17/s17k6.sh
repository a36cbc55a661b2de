#!/bin/bash
# session 17, call 6 (one H100): the H100's own "reads, then writes" rows (never run on it), and the rounds of
# slab reads, then writes (ZK_DQX_PHASE, from dequantize-l2-phase-attempt.patch, applied here on the device
# copy only) for its one short shape, int4 -> fp32 (94.3-94.6 % of the copy in session 16, goal 95 %).
#   chkph1: -DZK_DQX_PHASE=1 -DZK_DQS_MIN=1 -DZK_DQS_SMEM=8192 -DZK_DQS_SMS=3  full byte-compare (not timed)
#   ph, phb: -DZK_DQX_PHASE=1;  dft: the default again
# Then ph against the default at 1024 MiB, twice each.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
patch -p1 < bench/results/kernels-2026-11-23-s17/dequantize-l2-phase-attempt.patch > $R/patch.log 2>&1 || { cat $R/patch.log; exit 1; }
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="chkph1:-DZK_DQX_PHASE=1 -DZK_DQS_MIN=1 -DZK_DQS_SMEM=8192 -DZK_DQS_SMS=3;ph:-DZK_DQX_PHASE=1;dft:-DZK_DQX_NV=2;phb:-DZK_DQX_PHASE=1" \
  ZK_BENCH_ONLY=quant,traffic ZK_VARIANT_BENCH=quant ZK_VARIANT_COMPARE=full ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for v in ph default ph default; do
  echo "=== $v 1024 MiB" >> $R/bench1024.txt
  ZK_BENCH_ONLY=quant $B/$v/kernel_bench 1024 2>&1 | grep -E "D2D|dequant" >> $R/bench1024.txt
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
grep -E "gpu_compare|FAIL" $R/k/compare.log $R/k/variants.log | head
grep -E "D2D|Memset|dequant|traffic" $R/k/bench.log
grep -E "=== variant|dequant" $R/k/variants.log
cat $R/bench1024.txt
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
