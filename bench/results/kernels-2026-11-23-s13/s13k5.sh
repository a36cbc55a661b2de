#!/bin/bash
# session 13 call 7 (H200): the committed tree in full (tree c203707, write-back stores the default; compare, memcheck, bench, torch);
# variants: input loads with default caching (ZK_LD_CS=0) alternated with evict-first (the default).
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="ld0:-DZK_LD_CS=0;ld1:-DZK_LD_CS=1;ld0b:-DZK_LD_CS=0" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|ERROR SUMMARY|B=32|int8 B=256 |dequantize +fp32" $OUT/k/compare.log $OUT/k/bench.log $OUT/k/variants.log | head -40
cd $OUT && tar czf k.tgz k && rm -rf k
