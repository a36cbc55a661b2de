#!/usr/bin/env bash
# session 11: the small fenced kernels on two H200s without the daemon (fenced_bench), tools probe
set -u
R=$OUT; export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; nvidia-smi topo -m; command -v nsys ncu; ls /usr/local/cuda/bin; ls /opt/nvidia 2>/dev/null; } > $R/env.txt 2>&1
B=/tmp/fb; mkdir -p $B
NV=/usr/local/cuda/bin/nvcc
FL="-std=c++17 -O3 --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Xptxas=-v -Ikernels -gencode arch=compute_90,code=sm_90"
{ for f in copy qdq sum; do $NV $FL -c kernels/$f.cu -o $B/$f.o & done; wait
  gcc -std=c11 -O2 -Wall -D_GNU_SOURCE -I. -Ikernels -I/usr/local/cuda/include -c bench/kernels/fenced_bench.c -o $B/fb.o &&
  $NV -gencode arch=compute_90,code=sm_90 $B/fb.o $B/copy.o $B/qdq.o $B/sum.o -o $B/fenced_bench; } > $R/build.txt 2>&1
FB=$B/fenced_bench
for i in 1 2; do $FB 3000 > $R/fenced-$i.txt 2>&1; done
CUDA_VISIBLE_DEVICES=0 $FB 3000 > $R/fenced-1gpu.txt 2>&1
NS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NS" ]; then
  $NS profile -o /tmp/fb --force-overwrite true -t cuda $FB 300 > $R/nsys-run.txt 2>&1
  $NS stats -r cuda_gpu_kern_sum /tmp/fb.nsys-rep > $R/nsys-kern.txt 2>&1
fi
cd $R && tar czf r.tgz *.txt
