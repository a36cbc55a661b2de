#!/bin/bash
# session 13 calls 12 (H200) and 13 (H100): the committed tree (103a17d: int8 vector reductions' loads with default
# caching too) in full (compare, memcheck, bench, torch); variants: every load evict-first (ZK_LD_CS=1) and the
# tree's policy (ZK_LD_CS=0), alternated.
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="lcs:-DZK_LD_CS=1;ldt:-DZK_LD_CS=0;lcsb:-DZK_LD_CS=1" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|ERROR SUMMARY|int8 B=256 |int4 B=256 k=8" $OUT/k/compare.log $OUT/k/sanitizer.log $OUT/k/bench.log $OUT/k/variants.log | head -40
cd $OUT && tar czf k.tgz k && rm -rf k
