#!/bin/bash
# session 12 call 3 (H200): the new default (ZK_VPF=1); pf0 (old), vh0 (no load hold) alternated
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader > $OUT/device.txt
ZK_VARIANTS="pf0:-DZK_VPF=0;vh0:-DZK_VHOLD=0;pf1:-DZK_VPF=1;pf0b:-DZK_VPF=0;vh0b:-DZK_VHOLD=0;pf1b:-DZK_VPF=1" \
  ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
tail -3 $OUT/run.log
cd $OUT && tar czf k.tgz k && rm -rf k
