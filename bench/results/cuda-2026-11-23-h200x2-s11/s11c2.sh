#!/bin/bash
# session 11 call 2: fenced kernels byte-compare (xs_leave marks: qdq mirrors only when it counted) + memcheck,
# fenced_bench; A/B small calls old = c475d47 / new, 3 rounds; full cuda check.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; B=/tmp/xb; mkdir -p $B
CU=/usr/local/cuda/bin/nvcc
NV="-std=c++17 -O3 -lineinfo --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Xptxas=-v -Ikernels -gencode arch=compute_90,code=sm_90"
CF="-std=c11 -O2 -D_GNU_SOURCE -I. -Ikernels -I/usr/local/cuda/include"
{
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); date: $(date -u '+%F %T UTC'); tree 680f52c + xs_leave marks (uncommitted); command: .carry/s11c2.sh (kernels/*.cu + tests/gpu/gpu_compare.c built with nvcc $NV; gpu_compare 0x5EED fenced; compute-sanitizer --tool memcheck gpu_compare 0x5EED fenced1)"
set -x
for k in quant qgz sum copy qdq; do $CU $NV -c kernels/$k.cu -o $B/$k.o 2>$B/$k.ptxas || { cat $B/$k.ptxas; exit 1; }; done
grep -A2 "Compiling entry.*qdq_kernel" $B/qdq.ptxas | grep -E "registers|spill" | head -12
gcc $CF -ffp-contract=off -fno-fast-math -c kernels/quant_ref.c -o $B/qr.o && gcc $CF -ffp-contract=off -fno-fast-math -c kernels/qgz_ref.c -o $B/gr.o && gcc $CF -c tests/gpu/gpu_compare.c -o $B/gc.o || exit 1
$CU -gencode arch=compute_90,code=sm_90 $B/gc.o $B/quant.o $B/qgz.o $B/sum.o $B/copy.o $B/qdq.o $B/qr.o $B/gr.o -lm -o $B/gpu_compare || exit 1
CUDA_VISIBLE_DEVICES=0 timeout 150 $B/gpu_compare 0x5EED fenced; echo "fenced rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/gpu_compare 0x5EED fenced1 2>&1 | tail -6; echo "memcheck fenced1 done"
gcc $CF -c bench/kernels/fenced_bench.c -o $B/fb.o && $CU -gencode arch=compute_90,code=sm_90 $B/fb.o $B/sum.o $B/copy.o $B/qdq.o -o $B/fenced_bench && true
mkdir -p $B/old && for k in sum copy qdq; do $CU $NV -I.carry/oldk/kernels -c .carry/oldk/kernels/$k.cu -o $B/old/$k.o 2>/dev/null || exit 1; done
$CU -gencode arch=compute_90,code=sm_90 $B/fb.o $B/old/sum.o $B/old/copy.o $B/old/qdq.o -o $B/fenced_bench_old
set +x
for i in 1 2; do echo "-- old kernels (851ba4e)"; $B/fenced_bench_old 3000; echo "-- new kernels"; $B/fenced_bench 3000; done
} > $R/fenced.log 2>&1
tail -12 $R/fenced.log
for i in 1 2 3; do
  (OUT=$R/old-$i MPS=1 ZPP_BIN=$PWD/.carry/cu-old/bin timeout 100 bash scripts/gpu/run_cuda.sh bench 4) > $R/old-$i.log 2>&1
  (OUT=$R/new-$i MPS=1 timeout 100 bash scripts/gpu/run_cuda.sh bench 4) > $R/new-$i.log 2>&1
done
for f in $R/*-[123]/bench*.log; do echo "== $f"; grep -A9 "^small calls" $f | grep -E "^(nccl|zppd|daemon)"; done 2>/dev/null
(OUT=$R/all MPS=1 timeout 280 bash scripts/gpu/run_cuda.sh all 256) > $R/all.log 2>&1
echo "all rc=$?"; grep -E "FAIL|kill-test: GPU|exit|PASS lines" $R/all/summary.txt | head -30
grep -A9 "^small calls" $R/all/bench*.log | grep -E "^(nccl|zppd|daemon)"
grep -E "^(67108864|268435456) " $R/all/bench*.log | head -20
tar czf $OUT/r.tgz -C $OUT r
