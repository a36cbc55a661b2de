#!/bin/bash
# session 18, call 4 (one H200): the final tree as run_gpu.sh runs it by default: full byte-compare, the whole
# kernel_bench 256 with the PyTorch rows, and compute-sanitizer memcheck of the quick compare (the int4 vector
# reductions' chunk loop changed in 9b0fb13).
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "ERROR SUMMARY|byte-compares|memcheck" $R/k/sanitizer.log | tail -5
grep -E "D2D|Memset|quantize|qgz|sum|torch" $R/k/bench.log
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
