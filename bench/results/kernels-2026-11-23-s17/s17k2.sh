#!/bin/bash
# session 17, call 2 (one H200): the int4 sum with fp32-subnormal codes (ZK_PROBE_SUB4=2), whose build failed in
# call 1 (an unreachable-loop warning under -Werror), and with the slots split between the two decodings, so
# that the ALU and FMA pipes share the work (call 1's ncu: the default's ALU pipe 56 %, FMA heavy 57 %, lite 50 %).
# A timing probe: the int4 reductions' byte-compare fails by design (they sum q + 8); every other kernel passes.
#   sub32:  -DZK_PROBE_SUB4=2                        all four slots of a lane as fp32 subnormals (ALU: LOP3)
#   sub32h: -DZK_PROBE_SUB4=2 -DZK_SUB32_MASK=0x5    slots 0 and 2 so, 1 and 3 as widened fp16 subnormals
#   sub32q: -DZK_PROBE_SUB4=2 -DZK_SUB32_MASK=0x7    three of four slots so
#   dft:    the default again; sub32b: sub32 again (the spread)
# Then the SASS of sub32 and ncu (clocks as they are) of int4 reduce+requantize: default, sub32, sub32h.
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_VARIANTS="sub32:-DZK_PROBE_SUB4=2;sub32h:-DZK_PROBE_SUB4=2 -DZK_SUB32_MASK=0x5;sub32q:-DZK_PROBE_SUB4=2 -DZK_SUB32_MASK=0x7;dft:-DZK_DQX_NV=2;sub32b:-DZK_PROBE_SUB4=2" \
  ZK_BENCH_ONLY=reduce ZK_VARIANT_BENCH=reduce ZK_VARIANT_COMPARE=quick ZK_SANITIZE=0 ZK_TORCH=0 \
  bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
$CU/cuobjdump -sass -fun '_ZN2zk10frv_kernelILi4ELi4ELi8ELi1EEEvPKhmimmmPhPy' $B/sub32/qgz.o > $R/sub32-frv-int4.sass 2>&1
$CU/cuobjdump -sass -fun '_ZN2zk10frv_kernelILi4ELi4ELi8ELi1EEEvPKhmimmmPhPy' $B/sub32h/qgz.o > $R/sub32h-frv-int4.sass 2>&1
P=$($CU/ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' |
    grep -E '^sm__inst_executed_pipe_(alu|fma|fmaheavy|fmalite|fp16|xu|lsu|adu|cbu|uniform)$' |
    sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd,)
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio${P:+,$P}
for v in default sub32 sub32h; do
  ZK_BENCH_ONLY=reduce timeout 100 $CU/ncu --clock-control none --kernel-name-base demangled \
    --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --metrics $M --csv $B/$v/kernel_bench 256 > $R/ncu-rq-$v.csv 2> $R/ncu-rq-$v.err
  echo ncu rq $v rc=$?
done
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
grep -E "gpu_compare|FAIL" $R/k/compare.log $R/k/variants.log | head -20
grep -E "D2D|qgz" $R/k/bench.log
grep -E "=== variant|spill|qgz" $R/k/variants.log | grep -v " 0 bytes spill" | head -80
for f in $R/ncu-*.csv; do echo "== $f"; grep -E '^"[0-9]' $f | awk -F'","' '{print $13, $15}' | head -40; done
grep -cE "LOP3|FFMA|HADD2|SHF|FMUL" $R/sub32-frv-int4.sass
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
