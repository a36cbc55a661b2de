#!/bin/bash
# session 12 call 4 (H200): reduce+requant staged through shared memory (ZK_RQS), against the default
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader > $OUT/device.txt
ZK_VARIANTS="rqs:-DZK_RQS=1;def:-DZK_VPF=1;rqs4:-DZK_RQS=1 -DZK_RQS_MINB=4;rqs64:-DZK_RQS=1 -DZK_RQS_THREADS=64 -DZK_RQS_MINB=10;defb:-DZK_VPF=1;rqsb:-DZK_RQS=1" \
  ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
tail -3 $OUT/run.log
grep -E "=== variant|gpu_compare|requant|failures" $OUT/k/variants.log | head -40
cd $OUT && tar czf k.tgz k && rm -rf k
