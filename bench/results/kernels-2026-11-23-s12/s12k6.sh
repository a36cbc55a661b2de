#!/bin/bash
# session 12 call 9 (H200): the committed kernels (25296f8 and after) in full; batch and occupancy knobs of the int4 vector reductions
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader > $OUT/device.txt
ZK_VARIANTS="kb8:-DZK_VKB=8;mb4:-DZK_VMINB=4;kb2:-DZK_VKB=2" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
tail -3 $OUT/run.log
grep -E "=== variant|gpu_compare|int4 B=256 k=8|int4 k=8" $OUT/k/variants.log | head -30
cd $OUT && tar czf k.tgz k && rm -rf k
