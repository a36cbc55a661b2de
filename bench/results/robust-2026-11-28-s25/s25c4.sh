#!/bin/bash
# session 25, call 4 (nvidia-h200-x2): the review commits of sessions 23-25 on GPUs. e2ebd31 replaced the cuda
# backend's comm_index_of / comm_size_of (each rank's NCCL rank and communicator size at creation) and the host
# backend's copies with backend.h's be_comm_index / be_comm_size; cb51b9c rewords the death test's verdict for a
# killed zppd's own rank.
#  1. run_multi.sh 16, MPS off: 2x1 and 2x2 (GLOBAL, INTRA and INTER communicators) correctness up to 16 MiB
#     against the host backend, bench up to 16 MiB, the zppd failure step;
#  2. run_cuda.sh test 64 under MPS: 1x2, 2 virtual nodes x 1, two tenants, rejoin, admission, kill.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/robust-2026-11-28-s25/s25c4.sh" > $H
echo "run_multi start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 LAYOUTS="2x1 2x2" TEST_MIB=16 FAILURES=zppd BENCH_ARGS="-P 0" timeout 240 bash scripts/gpu/run_multi.sh 16) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "run_cuda start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 150 bash scripts/gpu/run_cuda.sh test 64) > $R/c.log 2>&1; echo "run_cuda rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^== .*(exit|PASS|FAIL)|^PASS lines|^FAIL|PASS death|FAIL death" $R/m/summary.txt | head -30
grep -E "^== .*exit|^PASS lines|^FAIL|PASS: two|PASS kill|PASS rejoin: 0" $R/c/summary.txt | head -20
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
