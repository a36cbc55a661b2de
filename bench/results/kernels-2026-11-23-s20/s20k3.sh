#!/bin/bash
# session 20, call 3 (one H200): call 2 again for the pipelined variants, whose build had failed there
# ("loop is not reachable" under -Werror; fixed in zk_fast.cuh before this call). Variants:
#   mmapl:   -DZK_VMMA=1 -DZK_VKB=2 -DZK_VMMA_PL=1   next slot's MMAs before this slot's FMAs
#   mmak2:   -DZK_VMMA=1 -DZK_VKB=2                  call 1's best MMA variant, unpipelined (reference)
#   mmas2pl: -DZK_VMMA=1 -DZK_RQ4=2 -DZK_RO4=2 -DZK_VMMA_PL=1
# Full byte-compare of every build; reduce rows alternated three times; SASS opcode counts and ncu
# counters of the int4 reduce+requantize (B = 256, k = 8) in each build.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
V="default mmapl mmak2 mmas2pl"
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="mmapl:-DZK_VMMA=1 -DZK_VKB=2 -DZK_VMMA_PL=1;mmak2:-DZK_VMMA=1 -DZK_VKB=2;mmas2pl:-DZK_VMMA=1 -DZK_RQ4=2 -DZK_RO4=2 -DZK_VMMA_PL=1" \
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
for v in $V; do
  case $v in *s2*) F=_ZN2zk10frv_kernelILi4ELi2ELi16ELi1EEEvPKhmimmmPhPy ;; *) F=_ZN2zk10frv_kernelILi4ELi4ELi8ELi1EEEvPKhmimmmPhPy ;; esac
  $CU/cuobjdump -sass -fun $F $B/$v/qgz.o > $R/frv-$v.sass 2>&1
  echo "== $v: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' $R/frv-$v.sass) instructions" >> $R/sass-ops.txt
  grep -oE '^ +/\*[0-9a-f]{4}\*/ +(@!?U?P[0-9T] +)?[A-Z0-9_.]+' $R/frv-$v.sass | awk '{print $NF}' | sed 's/\..*//' \
    | sort | uniq -c | sort -rn | head -12 >> $R/sass-ops.txt
done
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed
for v in $V; do
  ZK_BENCH_ONLY=reduce timeout 60 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)[24], \(int\)(8|16), \(int\)1>:4" --metrics $M --csv $B/$v/kernel_bench 256 > $R/ncu-rq-$v.csv 2> $R/ncu-rq-$v.err
  echo ncu rq $v rc=$?
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
head -8 $R/k/summary.txt
grep -E "=== variant|gpu_compare:|spill" $R/k/variants.log | grep -v " 0 bytes spill" | head -20
grep -E "===|int4" $R/alt.txt
cat $R/sass-ops.txt
for f in $R/ncu-rq-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $13, $15}' | cut -c1-160 | head -20; done
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
