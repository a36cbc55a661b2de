#!/bin/bash
# session 34, call 1 (nvidia-h200-x2): the tree of .carry/tree on two GPUs, the first two-GPU machine
# lent since session 26. Sessions 27-33 changed the publish path (poll_wait, checks on a worker), the
# sessions' done flags (session 29, run on one H200 only) and zpp.torch; none of it had run on two GPUs.
#  1. run_cuda.sh all 256 under MPS: 1x2 and 2 virtual nodes x 1 byte for byte against the host backend,
#     two tenants' concurrent jobs, rejoin, admission refusals, a 1 GiB shared-replica publish, the
#     one-node bench up to 256 MiB (small calls: the daemon's cost with the flags, 1x2), the kill test;
#  2. run_multi.sh 64, MPS off, 2x1 then 2x2: two cuda zppds as two simulated nodes, the correctness test
#     against the host backend, the bench (-P 0), then the three failure steps (zppd, stop, client).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-29-h200x2-s34/s34x1.sh" > $H
python3 -c "import torch; print('torch', torch.__version__)" >> $H 2>&1
echo "== run_cuda all 256 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 290 bash scripts/gpu/run_cuda.sh all 256) > $R/c.log 2>&1; echo "   rc=$?" >> $H
echo "== run_multi 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 LAYOUTS="2x1 2x2" TEST_MIB=64 BENCH_ARGS="-P 0" BENCH_TIMEOUT=60 timeout 280 bash scripts/gpu/run_multi.sh 64) > $R/m.log 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^== .*(exit|skipped)|^PASS lines|^FAIL|PASS: two|PASS kill|PASS rejoin|PASS admission|^publish|kill-test" $R/c/summary.txt | head -40
grep -A12 "^small calls" $R/c/bench-1x2-mps.log | head -16
grep -E "^== .*(exit|PASS|FAIL)|^PASS lines|^FAIL|PASS death|FAIL death" $R/m/summary.txt | head -40
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
