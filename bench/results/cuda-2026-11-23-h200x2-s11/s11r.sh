#!/bin/bash
# session 11 review call: the final tree (ade32fe) on two H200s: gpu_compare (CMake build), fenced_bench,
# run_cuda all 256 under MPS.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib:${LD_LIBRARY_PATH:-}
{ echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); date: $(date -u '+%F %T UTC'); tree ade32fe (CMake Release build, sm_90, carried as .carry/cu); command: .carry/s11r.sh"
  CUDA_VISIBLE_DEVICES=0 timeout 240 .carry/cu/gpu/gpu_compare; echo "gpu_compare rc=$?"
  .carry/cu/gpu/fenced_bench 2000; echo "fenced_bench rc=$?"; } > $R/kernels.log 2>&1
(OUT=$R/all MPS=1 timeout 300 bash scripts/gpu/run_cuda.sh all 256) > $R/all.log 2>&1
echo "all rc=$?" >> $R/kernels.log
cp $R/all/summary.txt $R/all-summary.txt; cp $R/all/bench-1x2-mps.log $R/all-bench.log 2>/dev/null
tail -12 $R/kernels.log; grep -E "FAIL|kill-test: GPU|exit|PASS lines" $R/all-summary.txt | head -20
grep -A9 "^small calls" $R/all-bench.log | grep -E "^(nccl|zppd|daemon)"
tar czf $OUT/r.tgz -C $R kernels.log all-summary.txt all-bench.log; rm -rf $R
