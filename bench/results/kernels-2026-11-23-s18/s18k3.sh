#!/bin/bash
# session 18, call 3 (one H100): the new defaults of call 2 (ZK_VLEAN=1, ZK_VPACK=1) on the GPU where every
# issue-9 goal was met, against session 17's kernels (old): full byte-compare of the tree, quick of old, the whole
# kernel_bench 256 of the tree, and the reduce rows alternated three times.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="old:-DZK_VLEAN=0 -DZK_VPACK=0" \
  ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for i in 1 2 3; do for v in default old; do
  echo "=== $v $i" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce $B/$v/kernel_bench 256 2>&1 | grep -E "D2D D|qgz" >> $R/alt.txt
done; done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "gpu_compare|FAIL" $R/k/variants.log | head
grep -E "D2D|Memset|quantize|qgz|sum" $R/k/bench.log
grep -E "=== variant|qgz" $R/k/variants.log
grep -E "===|int4" $R/alt.txt
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
