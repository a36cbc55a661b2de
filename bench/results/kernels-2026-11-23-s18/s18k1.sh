#!/bin/bash
# session 18, call 1 (one H200): the tree of session 17's end, whose device code changed after its last GPU run
# (the rounds' plan moved into kernels/zk_dqs_plan.h, dq_store shared by dqx/dqs): full byte-compare and the
# whole kernel_bench 256. Then, for the H200's one fused row short of its goal (int4 reduce+requantize, 72 %,
# issue-bound), where its instructions go: the SASS of frv_kernel<4, 4, 8, 1> and ncu's per-instruction
# executed counts (SourceCounters, clocks as they are).
export NCCL_NVLS_ENABLE=0
B=/tmp/zk-gpu-build
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader; date -u '+start %F %T UTC'; } > $R/device.txt
ZK_SANITIZE=0 ZK_TORCH=1 bash tests/gpu/run_gpu.sh $R/k > $R/run.log 2>&1
echo rc=$?
date -u '+bench end %F %T UTC' >> $R/device.txt
CU=/usr/local/cuda/bin
F=_ZN2zk10frv_kernelILi4ELi4ELi8ELi1EEEvPKhmimmmPhPy
$CU/cuobjdump -sass -fun $F $B/default/qgz.o > $R/frv-int4.sass 2>&1
echo cuobjdump rc=$?
ZK_BENCH_ONLY=reduce timeout 150 $CU/ncu --clock-control none --kernel-name-base demangled \
  --kernel-id "::regex:frv_kernel<\(int\)4, \(int\)4, \(int\)8:4" --section SourceCounters --section InstructionStats \
  -o $R/frv-int4 $B/default/kernel_bench 256 > $R/ncu-run.txt 2>&1
echo ncu rc=$?
$CU/ncu -i $R/frv-int4.ncu-rep --page source --print-source sass --csv > $R/frv-int4-source.csv 2> $R/ncu-src.err
echo ncu src rc=$?
$CU/ncu -i $R/frv-int4.ncu-rep --page details --print-details all --csv > $R/frv-int4-details.csv 2>> $R/ncu-src.err
date -u '+end %F %T UTC' >> $R/device.txt
cat $R/device.txt; tail -2 $R/run.log
cat $R/k/summary.txt
grep -E "D2D|Memset|quantize|qgz|sum|PyTorch|torch" $R/k/bench.log | head -60
wc -l $R/frv-int4.sass $R/frv-int4-source.csv; head -5 $R/frv-int4-source.csv; tail -3 $R/ncu-src.err
cd $OUT && tar czf r.tgz r && rm -rf r && ls -la
