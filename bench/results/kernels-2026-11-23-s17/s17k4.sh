#!/bin/bash
# session 17, call 4 (one GPU): dequantize in rounds of "reads, then writes" (ZK_DQX_PHASE=1, quant.cu dqs_kernel):
# one launch per round; each CTA (one per SM) has the bulk copy engine read a slab of codes and scales (up to
# 200 KiB) into shared memory, then decodes and writes. Chunks of 8 MiB of codes or more.
#   chkph1: -DZK_DQX_PHASE=1 -DZK_DQS_MIN=1 -DZK_DQS_SMEM=8192 -DZK_DQS_SMS=3   full byte-compare, every size
#           through dqs_kernel in many rounds of small slabs (not timed)
#   chkph2: -DZK_DQX_PHASE=1 -DZK_DQS_MIN=1   full byte-compare, every size through dqs_kernel (not timed)
#   ph, phb: -DZK_DQX_PHASE=1   timed twice;  dft: the default again
# Then compute-sanitizer memcheck of chkph1's quick compare, and ph against the default at 1024 MiB (several rounds).
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="chkph1:-DZK_DQX_PHASE=1 -DZK_DQS_MIN=1 -DZK_DQS_SMEM=8192 -DZK_DQS_SMS=3;chkph2:-DZK_DQX_PHASE=1 -DZK_DQS_MIN=1;ph:-DZK_DQX_PHASE=1;dft:-DZK_DQX_NV=2;phb:-DZK_DQX_PHASE=1" \
  ZK_BENCH_ONLY=quant,traffic ZK_VARIANT_BENCH=quant ZK_VARIANT_COMPARE=full ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $R/device.txt
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/chkph1/gpu_compare 0x5EED quick > $R/memcheck-chkph1.txt 2>&1
echo memcheck rc=$?
for v in ph default ph default; do
  echo "=== $v 1024 MiB" >> $R/bench1024.txt
  ZK_BENCH_ONLY=quant $B/$v/kernel_bench 1024 2>&1 | grep -E "D2D|dequant" >> $R/bench1024.txt
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
grep -E "gpu_compare|FAIL" $R/k/compare.log $R/k/variants.log | head
tail -3 $R/memcheck-chkph1.txt
grep -E "D2D|Memset|dequant|1:8|1:4" $R/k/bench.log
grep -E "=== variant|dequant|registers" $R/k/variants.log | grep -v "0 bytes spill" | head -60
cat $R/bench1024.txt
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
