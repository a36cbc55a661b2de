#!/bin/bash
# session 12 call 2: the new default (ZK_VPF=1) in full, the old (pf0) and knobs beside it
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader > $OUT/device.txt
ZK_VARIANTS="pf0:-DZK_VPF=0;mb4:-DZK_VMINB=4;vh0:-DZK_VHOLD=0;kb2:-DZK_VKB=2;pf0b:-DZK_VPF=0;pf1b:-DZK_VPF=1" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
tail -5 $OUT/run.log
