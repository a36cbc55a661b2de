#!/bin/bash
# session 30, call 1 (nvidia-h200, one GPU): the write-heavy dequantize shapes (fp32 from int4 and
# int8, 16-bit from int4: 91-93 % of the copy on an H200, goal 95 %) in read-ahead spans: per span of
# ZK_DQPF_SPAN code bytes, one kernel of L2 prefetches (kernels/zk_cuda_common.cuh l2_read_ahead)
# then dqx_kernel reading the span from L2, so that DRAM sees the span's reads as one burst and then
# only writes ("1:8 reads, then writes" traffic row: 97 %). Builds made on the build machine with
# ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh (its nvcc flags), carried as .carry/zk/<build>/:
#   default  the tree (tree file) without the switch
#   pf       -DZK_DQPF=1 (spans of 16 MiB, evict-last read-ahead)
#   pfn      -DZK_DQPF=1 -DZK_DQPF_LAST=0 (normal eviction)
#   pf8      -DZK_DQPF=1 -DZK_DQPF_SPAN=8u<<20
#   pf32     -DZK_DQPF=1 -DZK_DQPF_SPAN=32u<<20
# 1. the full byte-compare of pf (its large dequantize cases go through the spans);
# 2. kernel_bench 256 MiB, sections quant and traffic (new rows: "read ahead"), builds alternated 3x.
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) + the switches above; command: bash bench/results/kernels-2026-11-29-s30/s30k1.sh"
echo "$DEV" > $R/head.txt
{ echo "$DEV"; timeout 240 $Z/pf/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-pf.log 2>&1
tail -8 $R/compare-pf.log >> $R/head.txt
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default pf pfn pf8 pf32; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=quant,traffic timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|Memset|dequantize|traffic|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $R/head.txt
cat $R/head.txt; grep -E "^===|rc=|dequantize +(fp32|bf16 int4|fp16 int4)|1:8 (reads|read ahead|read 16)|1:4 (reads|read ahead|read 16)" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
