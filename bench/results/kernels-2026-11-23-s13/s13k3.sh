#!/bin/bash
# session 13 calls 4 and 5 (H100): kernel_bench pairing every row with its own copy (call 4: tree 7b64929, single launches; call 5: d988dec, runs of 6); no trace;
# write-back output stores (ZK_ST_CS=0) alternated with
# the default (streaming) twice more; the default build's bench again at the end.
export NCCL_NVLS_ENABLE=0
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $OUT/device.txt
ZK_SANITIZE=0 ZK_TORCH=0 ZK_VARIANTS="st0:-DZK_ST_CS=0;cs1:-DZK_ST_CS=1;st0b:-DZK_ST_CS=0;cs1b:-DZK_ST_CS=1" \
  ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $OUT/k > $OUT/run.log 2>&1
echo rc=$?
{ echo "# the default build again, after the variants: $(date -u '+%F %T UTC')"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader
  /tmp/zk-gpu-build/default/kernel_bench 256; } > $OUT/k/bench-again.log 2>&1
date -u '+end %F %T UTC' >> $OUT/device.txt
cat $OUT/device.txt; tail -3 $OUT/run.log
grep -E "gpu state|int4 B=256 k=8|B=32" $OUT/k/bench.log $OUT/k/variants.log $OUT/k/bench-again.log | head -40
cd $OUT && tar czf k.tgz k && rm -rf k
