#!/bin/bash
# session 14, one GPU: int4 -> fp32 dequantize whole tiles with one 4-byte code load per lane passed on by shuffles
# (ZK_DQX_SHFL=1) against two 2-byte loads per lane (the default), alternated: shf, dft, shf2. Working tree
# 2378f89 + the ZK_DQX_SHFL knob in kernels/quant.cu (default 0). Quick compare, no memcheck, no torch.
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="shf:-DZK_DQX_SHFL=1;dft:-DZK_DQX_SHFL=0;shf2:-DZK_DQX_SHFL=1" \
  ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "dequant" $OUT/k/bench.log $OUT/k/variants.log | head -60
cd $OUT && tar czf k.tgz k && rm -rf k
