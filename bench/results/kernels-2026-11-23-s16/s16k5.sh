#!/bin/bash
# session 16, call 5 (nvidia-h200): the int8 reduce -> bf16 (87 % of the copy on the H200, 58 % issue, 34 %
# occupancy at 73 registers in session 15's profile), with the new defaults (staged stores) in the tree:
#   ro8, ro8b: -DZK_RO8=2      int8 reduce -> output through the vector kernel (staged stores, 16 codes per lane)
#   mb4: -DZK_ROMINB=4         the slot kernel held to 64 registers (4 CTAs per SM; 5 would spill)
#   dft: the default again
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="ro8:-DZK_RO8=2;mb4:-DZK_ROMINB=4;ro8b:-DZK_RO8=2;dft:-DZK_VMINB=3" \
  ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 ZK_BENCH_ONLY=reduce bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -2 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
grep -E "spill" $OUT/k/build.log | grep -v " 0 bytes spill stores" | head
grep -vE "^#" $OUT/k/bench.log | head -20
grep -E "=== variant|requant|reduce_out" $OUT/k/variants.log | head -60
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
