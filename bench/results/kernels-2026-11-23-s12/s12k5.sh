#!/bin/bash
# session 12 call 5 (H100): default = prefetch + no load hold, in full; the old hold and dequantize knobs beside it
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader > $OUT/device.txt
ZK_VARIANTS="vh1:-DZK_VHOLD=1;dq4:-DZK_DQX_NV=4;vh0:-DZK_VHOLD=0;dq1:-DZK_DQX_NV=1;vh1b:-DZK_VHOLD=1;vh0b:-DZK_VHOLD=0" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
tail -3 $OUT/run.log
grep -E "=== variant|gpu_compare|requant|reduce_out|dequantize.*int4|failures" $OUT/k/variants.log | head -60
cd $OUT && tar czf k.tgz k && rm -rf k
