#!/bin/bash
# session 13 call 11 (H100): tree 635a6b8; dequantize with a thread's vectors adjacent (ZK_DQX_CONTIG=1,
# NV 2/4/8) alternated with the default layout. No memcheck, no torch (the committed default ran both in calls 8-9).
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_SANITIZE=0 ZK_TORCH=0 ZK_VARIANTS="dc4:-DZK_DQX_CONTIG=1 -DZK_DQX_NV=4;dc8:-DZK_DQX_CONTIG=1 -DZK_DQX_NV=8;d0:-DZK_DQX_CONTIG=0;dc2:-DZK_DQX_CONTIG=1 -DZK_DQX_NV=2;dc4b:-DZK_DQX_CONTIG=1 -DZK_DQX_NV=4" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "=== variant|gpu_compare:|dequantize" $OUT/k/compare.log $OUT/k/bench.log $OUT/k/variants.log | head -70
cd $OUT && tar czf k.tgz k && rm -rf k
