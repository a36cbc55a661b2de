#!/bin/bash
# session 13 call 2 (H100): the tree b03a171 in full (byte-compare, memcheck, bench with the cudaMemset row);
# variants: output stores write-back (ZK_ST_CS=0) alternated with the default streaming stores
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="st0:-DZK_ST_CS=0;cs1:-DZK_ST_CS=1;st0b:-DZK_ST_CS=0;cs1b:-DZK_ST_CS=1" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
tail -3 $OUT/run.log
grep -E "cudaMemcpy|cudaMemset|dequantize|B=32" $OUT/k/bench.log | head -30
grep -E "=== variant|gpu_compare|failures|cudaMemset|dequantize +(fp32|fp16|bf16) int[48]|B=32" $OUT/k/variants.log | head -80
cd $OUT && tar czf k.tgz k && rm -rf k
