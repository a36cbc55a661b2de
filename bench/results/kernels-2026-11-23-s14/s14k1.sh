#!/bin/bash
# session 14, one GPU: the dequantize tile (ZK_DQX_NV, vectors per thread; 2 chosen on 2026-11-22 with the
# bench that divided by one copy timed at the start) re-measured with the paired bench: the tree's own build,
# then nv1 / nv4 / nv8, and the default again (dft) for the spread. Quick compare, no memcheck, no torch.
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="nv1:-DZK_DQX_NV=1;nv4:-DZK_DQX_NV=4;nv8:-DZK_DQX_NV=8;dft:-DZK_DQX_NV=2" \
  ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "dequant" $OUT/k/bench.log $OUT/k/variants.log | head -60
cd $OUT && tar czf k.tgz k && rm -rf k
