#!/bin/bash
# session 35, call 6 (nvidia-h200-x2, lent late in the session): the session's final daemon on two
# GPUs, where peer access (this session's grant_access change) and the one-node fenced path run.
#  1. run_cuda.sh test 256 under MPS: 1x2 and 2 virtual nodes x 1 byte for byte against the host
#     backend, two tenants' concurrent jobs, rejoin, admission refusals, a 1 GiB shared-replica
#     publish, the kill test;
#  2. run_multi.sh 64, MPS off, 2x1 then 2x2: two cuda zppds as two simulated nodes, the correctness
#     test against the host backend (no bench, no failure steps: they ran on one GPU in call 3).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/kernels-2026-11-29-s35/s35x6.sh"
echo "$DEV" > $H
echo "== run_cuda test 256 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 200 bash scripts/gpu/run_cuda.sh test 256) > $R/c.log 2>&1; echo "   rc=$?" >> $H
echo "== run_multi 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 LAYOUTS="2x1 2x2" TEST_MIB=64 FAILURE=0 BENCH_ARGS="-P 0 -M 64" BENCH_TIMEOUT=40 timeout 150 bash scripts/gpu/run_multi.sh 64) > $R/m.log 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
for f in $(find $R -type f ! -name head.txt); do { echo "$DEV"; cat $f; } > $f.t && mv $f.t $f; done
cat $H
grep -E "^== .*(exit|skipped)|^PASS lines|^FAIL|PASS: two|PASS kill|PASS rejoin|PASS admission|^publish|kill-test" $R/c/summary.txt | head -40
grep -E "^== .*(exit|PASS|FAIL)|^PASS lines|^FAIL" $R/m/summary.txt | head -20
