#!/bin/bash
# session 16, calls 6 and 7 (nvidia-h100-x1, then nvidia-h200): the committed kernels with this session's new
# defaults (ZK_DQX_TMA=1, ZK_ROSTAGE=1, ZK_RO4F=1, ZK_ROMINB=4) as the tree's build: full byte-compare,
# compute-sanitizer memcheck, the full bench with the plain-PyTorch rows; the previous defaults beside it
# (old, oldb), their dequantize and reduce rows paired the same way.
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
OLD="-DZK_DQX_TMA=0 -DZK_ROSTAGE=0 -DZK_RO4F=0 -DZK_ROMINB=0"
ZK_VARIANTS="old:$OLD;oldb:$OLD" ZK_VARIANT_BENCH=quant,reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=1 \
  ZK_SANITIZE_TIMEOUT=120 ZK_TORCH=1 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
tail -2 $OUT/k/sanitizer.log
grep -vE "^#" $OUT/k/bench.log | head -50
grep -E "=== variant|dequant|requant|reduce_out" $OUT/k/variants.log | head -60
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
