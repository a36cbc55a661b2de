#!/bin/bash
# session 20, call 1 (one H200): the int4 vector sums with the codes widened by tensor-core MMAs
# (ZK_VMMA=1, zk_fast.cuh codes_float4m: SHF + 4 LOP3 + 2 mma.m16n8k8 per 8 codes, the identity as B and
# the biases as C, instead of codes_float4h's SHF + 4 LOP3 + 4 HADD2 + 8 HADD2.F32). Same IEEE values, so
# the variants must pass the full byte-compare against the unchanged C reference.
# Variants:
#   mma:   -DZK_VMMA=1                 (ptxas spills 72 bytes at the 80-register cap)
#   mmak2: -DZK_VMMA=1 -DZK_VKB=2      batches of 2 chunks' loads (no spill)
#   mmab2: -DZK_VMMA=1 -DZK_VMINB=2    2 CTAs per SM (128 registers)
# Full byte-compare of every build; reduce rows alternated three times; SASS opcode counts and ncu
# counters of frv_kernel<4, 4, 8, 1> (int4 reduce+requantize, B = 256, k = 8) in each build.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
V="default mma mmak2 mmab2"
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="mma:-DZK_VMMA=1;mmak2:-DZK_VMMA=1 -DZK_VKB=2;mmab2:-DZK_VMMA=1 -DZK_VMINB=2" \
  ZK_BENCH_ONLY=reduce ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=full ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+compare end %F %T UTC' >> $R/device.txt
for i in 1 2 3; do for v in $V; do
  echo "=== $v $i" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce $B/$v/kernel_bench 256 2>&1 | grep -E "D2D D|qgz" >> $R/alt.txt
done; done
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
F=_ZN2zk10frv_kernelILi4ELi4ELi8ELi1EEEvPKhmimmmPhPy
for v in $V; do
  $CU/cuobjdump -sass -fun $F $B/$v/qgz.o > $R/frv-$v.sass 2>&1
  echo "== $v: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' $R/frv-$v.sass) instructions" >> $R/sass-ops.txt
  grep -oE '^ +/\*[0-9a-f]{4}\*/ +(@!?U?P[0-9T] +)?[A-Z0-9_.]+' $R/frv-$v.sass | awk '{print $NF}' | sed 's/\..*//' \
    | sort | uniq -c | sort -rn | head -25 >> $R/sass-ops.txt
done
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmalite.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed
for v in $V; do
  ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --metrics $M --csv $B/$v/kernel_bench 256 > $R/ncu-rq-$v.csv 2> $R/ncu-rq-$v.err
  echo ncu rq $v rc=$?
done
ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --section ComputeWorkloadAnalysis --csv \
  $B/mmak2/kernel_bench 256 > $R/ncu-rq-mmak2-pipes.csv 2> $R/ncu-rq-mmak2-pipes.err
echo ncu pipes rc=$?
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -12 $R/k/summary.txt
grep -E "gpu_compare|spill|FAIL|fail" $R/k/variants.log | head -20
grep -E "D2D|qgz" $R/k/bench.log
grep -E "===|int4" $R/alt.txt
cat $R/sass-ops.txt | head -60
for f in $R/ncu-rq-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $13, $15}' | cut -c1-160 | head -20; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
