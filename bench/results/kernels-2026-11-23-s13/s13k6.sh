#!/bin/bash
# session 13 calls 8 (H200) and 9 (H100): the committed tree (5df68a1) in full: default caching for loads of 8+ bytes
# per lane, write-back stores (compare, memcheck, bench, torch); variants: every load evict-first (ZK_LD_CS=1,
# the loads before 5df68a1) alternated with the tree's policy.
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="lcs:-DZK_LD_CS=1;ldt:-DZK_LD_CS=0;lcsb:-DZK_LD_CS=1" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|ERROR SUMMARY|int8 B=256 |int4 B=256 k=8" $OUT/k/compare.log $OUT/k/sanitizer.log $OUT/k/bench.log $OUT/k/variants.log | head -40
cd $OUT && tar czf k.tgz k && rm -rf k
