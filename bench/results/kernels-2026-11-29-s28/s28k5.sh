#!/bin/bash
# session 28, call 9 (nvidia-h200, one GPU): the final tree's kernels in full, as issue 9 asks in one
# command: tests/gpu/run_gpu.sh (build with nvcc there for sm_90, -Xptxas -v register report, the
# full byte-compare against the C reference, kernel_bench at 256 MiB with every section, the
# plain-PyTorch-ops quantize beside it, compute-sanitizer memcheck of the quick compare).
R=$OUT/r; mkdir -p $R
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(git rev-parse --short HEAD 2>/dev/null || cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s28/s28k5.sh"
ZK_BENCH_MIB=256 bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1; echo "run_gpu rc=$?" >> $R/run.log
for f in $R/run.log $R/k/*; do [ -f "$f" ] && sed -i "1i $DEV" "$f"; done
tail -20 $R/run.log
grep -E "qgz reduce\+requant|dequantize +fp32 int4|of copy" $R/k/bench.log | head -5
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
