#!/bin/bash
# session 17, call 7 (one GPU, the H100 then the H200): the phased dequantize (quant.cu dqs_kernel) as the default
# for fp32 from int4 (ZK_DQS=1), its only shape that gained in calls 4 and 6.
#   the tree: full byte-compare, with three new int4 -> fp32 cases of 50-67 M elements (two rounds of slabs,
#             odd tails, blocks 32, 256, 2048); kernel_bench 256
#   chk:   -DZK_DQS_MIN=1 -DZK_DQS_SMEM=8192 -DZK_DQS_SMS=3  every int4 -> fp32 size in many rounds of small
#          slabs, full byte-compare (not timed), then memcheck of its quick compare
#   nodqs: -DZK_DQS=0   the dequantize of session 16 (dqx_kernel only), timed
# Then the tree against nodqs at 64, 128 and 1024 MiB, twice each (dequantize rows).
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="chk:-DZK_DQS_MIN=1 -DZK_DQS_SMEM=8192 -DZK_DQS_SMS=3;nodqs:-DZK_DQS=0" \
  ZK_BENCH_ONLY=quant ZK_VARIANT_BENCH=quant ZK_VARIANT_COMPARE=full ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/chk/gpu_compare 0x5EED quick > $R/memcheck-chk.txt 2>&1
echo memcheck rc=$?
for mib in 64 128 1024; do
  for v in default nodqs default nodqs; do
    echo "=== $v $mib MiB" >> $R/bench-sizes.txt
    ZK_BENCH_ONLY=quant $B/$v/kernel_bench $mib 2>&1 | grep -E "D2D|dequant" >> $R/bench-sizes.txt
  done
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
cat $R/k/summary.txt
grep -E "gpu_compare|FAIL" $R/k/compare.log $R/k/variants.log | head
grep -E "ERROR SUMMARY|byte-compares" $R/memcheck-chk.txt
grep -E "D2D|Memset|dequant" $R/k/bench.log
grep -E "=== variant|dequant" $R/k/variants.log
grep -E "===|fp32 int4|D2D D" $R/bench-sizes.txt | grep -v again
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
