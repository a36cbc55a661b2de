#!/bin/bash
# session 18, call 6 (one H200): int4 reduce+requantize staged through shared memory (zk_fast.cuh frs_kernel,
# ZK_RQS=1 in the tree): whole tiles of 8192 elements come in by the bulk copy engine, two tiles in flight per CTA,
# a persistent grid; frv_kernel takes the rest. Since call 5 each warp signals a spent buffer on an "empty" mbarrier
# and only the producer waits for all eight (ZK_RQS_EMPTY=1) instead of a __syncthreads per tile. Variants:
#   nors:   -DZK_RQS=0                                the tree of call 4 (frv_kernel alone), timed
#   sync:   -DZK_RQS_EMPTY=0                          call 5's frs (a __syncthreads per tile), timed
#   chkrqs: -DZK_RQS_MIN_TILES=1 -DZK_RQS_CTAS=3      every piece with a whole tile staged, 3 CTAs (many tiles each,
#                                                     both buffers' barrier phases), full byte-compare, not timed
# Then the reduce rows alternated (tree, nors) three times, memcheck of chkrqs' quick compare, ncu of the int4
# requant in the tree (frs_kernel<8>) and in nors (frv_kernel<4, 4, 8, 1>).
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="nors:-DZK_RQS=0;sync:-DZK_RQS_EMPTY=0;chkrqs:-DZK_RQS_MIN_TILES=1 -DZK_RQS_CTAS=3" \
  ZK_BENCH_ONLY=reduce ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=full ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
for i in 1 2 3; do for v in default nors; do
  echo "=== $v $i" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce $B/$v/kernel_bench 256 2>&1 | grep -E "D2D D|qgz" >> $R/alt.txt
done; done
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
timeout 200 $CU/compute-sanitizer --tool memcheck $B/chkrqs/gpu_compare 0x5EED quick > $R/memcheck-chkrqs.txt 2>&1
echo memcheck rc=$?
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmalite.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed
ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:frs_kernel<\(int\)8:4" --metrics $M --csv $B/default/kernel_bench 256 > $R/ncu-rq-frs.csv 2> $R/ncu-rq-frs.err
echo ncu frs rc=$?
ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --metrics $M --csv $B/nors/kernel_bench 256 > $R/ncu-rq-nors.csv 2> $R/ncu-rq-nors.err
echo ncu nors rc=$?
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "gpu_compare|FAIL" $R/k/variants.log | head
grep -E "FAIL" $R/k/compare.log | head
grep -E "D2D|qgz" $R/k/bench.log
grep -E "=== variant|spill|qgz" $R/k/variants.log | grep -v " 0 bytes spill" | head -30
grep -E "===|int4" $R/alt.txt
grep -E "ERROR SUMMARY|byte-compares" $R/memcheck-chkrqs.txt
for f in $R/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $13, $15}' | head -20; tail -2 ${f%.csv}.err; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
