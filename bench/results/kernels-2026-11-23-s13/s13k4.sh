#!/bin/bash
# session 13 call 6 (H200): kernel_bench paired in runs (tree HEAD); write-back output stores
# (ZK_ST_CS=0) alternated with the default; dequantize's grid capped so that tiles loop (ZK_DQX_GRID).
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_SANITIZE=0 ZK_TORCH=0 ZK_VARIANTS="st0:-DZK_ST_CS=0;g1k:-DZK_DQX_GRID=1056;cs1:-DZK_ST_CS=1;g4k:-DZK_DQX_GRID=4224;st0b:-DZK_ST_CS=0" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|B=32|dequantize +fp32" $OUT/k/compare.log $OUT/k/bench.log $OUT/k/variants.log | head -40
cd $OUT && tar czf k.tgz k && rm -rf k
