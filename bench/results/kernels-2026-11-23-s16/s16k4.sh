#!/bin/bash
# session 16, call 4 (nvidia-h200): the new defaults (bulk-store dequantize tile ZK_DQX_TMA=1, staged reduce ->
# output stores ZK_ROSTAGE=1, int4 -> fp32 through the vector kernel ZK_RO4F=1) as the tree's build, with the full
# byte-compare, compute-sanitizer memcheck and the full bench; the previous defaults beside them (old, oldb); and
# session 15's prepared int4 reduce+requantize variants (s15k3.sh):
#   s8: -DZK_RQ4=8 -DZK_VMINB=2   32 bytes of codes per lane and chunk; vm2: -DZK_VMINB=2, its control
#   psub, psub8: -DZK_PROBE_SUB4=1 -DZK_VMINB=2 [-DZK_RQ4=8 -DZK_VKB=2]  a timing probe with wrong bytes by design
#         (int4 codes summed as biased fp16 subnormals); its byte-compare fails for the int4 reductions, as it must
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_VARIANTS="old:-DZK_DQX_TMA=0 -DZK_ROSTAGE=0 -DZK_RO4F=0;s8:-DZK_RQ4=8 -DZK_VMINB=2;vm2:-DZK_VMINB=2;psub:-DZK_PROBE_SUB4=1 -DZK_VMINB=2;psub8:-DZK_PROBE_SUB4=1 -DZK_RQ4=8 -DZK_VMINB=2 -DZK_VKB=2;oldb:-DZK_DQX_TMA=0 -DZK_ROSTAGE=0 -DZK_RO4F=0" \
  ZK_VARIANT_BENCH=quant,reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=1 ZK_SANITIZE_TIMEOUT=120 ZK_TORCH=0 bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu_compare|FAIL" $OUT/k/compare.log $OUT/k/variants.log | head -20
tail -3 $OUT/k/sanitizer.log
grep -vE "^#" $OUT/k/bench.log | head -45
grep -E "=== variant|dequant|requant|reduce_out" $OUT/k/variants.log | head -120
cd $OUT && tar czf k.tgz k && rm -rf k && ls -la
