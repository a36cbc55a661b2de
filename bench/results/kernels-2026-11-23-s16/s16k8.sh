#!/bin/bash
# session 16, call 8 (nvidia-h100-x1): is it the mix at DRAM or a store waiting for its load?
#   kernel_bench's traffic rows now include "readers apart": the same mix with reading and writing CTAs apart, so
#   that no store waits for a load.
#   dqp: -DZK_DQP=1   dequantize on a grid of 8 CTAs per SM looping over the tiles with plain stores, loading the
#        next tile's codes before storing the current one; chkdqp: -DZK_DQP=3, byte-compare only (3 CTAs, many tiles)
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="dqp:-DZK_DQP=1;chkdqp:-DZK_DQP=3" ZK_BENCH_ONLY=quant,traffic ZK_VARIANT_BENCH=quant,traffic \
  ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head
grep -E "Memset|dequant|traffic" $OUT/k/bench.log
grep -E "=== variant|dequant|traffic" $OUT/k/variants.log
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
