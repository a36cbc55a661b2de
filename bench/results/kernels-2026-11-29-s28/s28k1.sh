#!/bin/bash
# session 28, call 3 (nvidia-h200, one GPU): can the dequantize rounds (dqs_kernel: fp32 from int4,
# 90.1-91.2 % of the copy on an H200 in session 18) come nearer the "reads, then writes" traffic row
# (97.5 % for 1:8 there)? Within a round each CTA writes as soon as its own slab has arrived, so the
# round's reads and writes still overlap at DRAM. Probes (kernels/quant.cu, kernel_bench builds made on
# the build machine with tests/gpu/run_gpu.sh's flags, carried as .carry/zk/<build>/kernel_bench):
#   default   the tree
#   bar       -DZK_DQS_BAR=1: every CTA of a round waits, once its slab is in, for all the others
#             (a spin on a global counter; all CTAs resident, one per SM)
#   t1024     -DZK_DQS_THREADS=1024: twice the threads (warps issuing stores) per CTA
#   bart1024  both
#   bar2      -DZK_DQS_BAR=1 -DZK_DQS=2: every dequantize shape in rounds, with the wait
# kernel_bench 256 MiB, section quant (quantize and dequantize rows) and traffic, builds alternated
# three times; each run under a 120 s timeout (a barrier that never opens hangs).
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
echo "# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) + the probe switches above; command: bash bench/results/kernels-2026-11-29-s28/s28k1.sh" > $R/alt.txt
for i in 1 2 3; do for v in default bar t1024 bart1024 bar2; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=quant,traffic timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|dequantize|traffic|^kernel_bench" $R/kb.tmp | grep -v "torch" >> $R/alt.txt
done; done
echo "end $(date -u '+%F %T UTC')" >> $R/alt.txt
cat $R/alt.txt | grep -E "^===|rc=|D2D|dequantize +fp32 int4|dequantize +bf16 int4 B=256|dequantize +fp32 int8|1:8 reads"
tar czf $OUT/r.tgz -C $R alt.txt; rm -rf $R
