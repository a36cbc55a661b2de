#!/usr/bin/env bash
# A/B of the int4 fused reductions: old = HEAD's kernels (.carry/oldk), new = the working tree.
set -u
R=$OUT; export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $R/device.txt
NV=/usr/local/cuda/bin/nvcc
FL="-std=c++17 -O3 --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -gencode arch=compute_90,code=sm_90"
O=/tmp/oldb; mkdir -p $O
( cd .carry/oldk && for f in quant qgz sum copy qdq; do $NV $FL -Ikernels -c kernels/$f.cu -o $O/$f.o & done; wait
  gcc -std=c11 -O2 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Ikernels -I/usr/local/cuda/include -c kernels/quant_ref.c -o $O/quant_ref.o
  gcc -std=c11 -O2 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Ikernels -I/usr/local/cuda/include -c kernels/qgz_ref.c -o $O/qgz_ref.o
  gcc -std=c11 -O2 -D_GNU_SOURCE -I. -Ikernels -I/usr/local/cuda/include -c bench/kernels/kernel_bench.c -o $O/kb.o
  $NV -gencode arch=compute_90,code=sm_90 $O/kb.o $O/quant.o $O/qgz.o $O/sum.o $O/copy.o $O/qdq.o $O/quant_ref.o $O/qgz_ref.o -lm -o $O/kernel_bench ) > $R/old-build.log 2>&1
ls -la $O/kernel_bench >> $R/old-build.log
ZK_SANITIZE=0 ZK_TORCH=0 ZK_VARIANTS="${VARS:-}" ZK_VARIANT_COMPARE=quick bash tests/gpu/run_gpu.sh $R/new > $R/new-stdout.txt 2>&1
for i in 1 2 3; do
  $O/kernel_bench 256 > $R/old-$i.log 2>&1
  /tmp/zk-gpu-build/default/kernel_bench 256 > $R/new-$i.log 2>&1
done
cd $R && tar czf ab.tgz *.txt *.log new && rm -rf new *.log
