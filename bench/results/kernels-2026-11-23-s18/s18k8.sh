#!/bin/bash
# session 18, calls 8 (H200) and 9 (H100): the review's change: every int4 caller of codes_pack (quantize,
# reorder+quantize, the slot and vector reduce+requantize) now packs codes in the 8-instruction form that only
# the vector requantize had (codes_pack4_keep, ZK_VPACK, both gone): full byte-compare, memcheck of the quick
# compare, the whole kernel_bench 256.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_TORCH=0 bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "ERROR SUMMARY|byte-compares" $R/k/sanitizer.log | tail -3
grep -E "D2D|Memset|quantize|qgz|sum" $R/k/bench.log
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
