#!/bin/bash
# session 12: L2 prefetch knobs of the vector reductions
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader > $OUT/device.txt
ZK_VARIANTS="pf1:-DZK_VPF=1;p3:-DZK_VPERSIST=3;pf1p3:-DZK_VPF=1 -DZK_VPERSIST=3;pf1p6:-DZK_VPF=1 -DZK_VPERSIST=6;kb2pf3:-DZK_VKB=2 -DZK_VPF=3;kb2pf3mb4:-DZK_VKB=2 -DZK_VPF=3 -DZK_VMINB=4" \
  ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
tail -5 $OUT/run.log
