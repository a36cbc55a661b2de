#!/bin/bash
# session 23, call 2 (nvidia-h200-x2): jobs across two daemons on session 22's tree with session 23's
# failure steps (scripts/gpu/run_multi.sh, MPS off: a client SIGKILLed under MPS would fault its GPU for
# every process there, docs/cuda.md):
#  1. both layouts (2x1, 2x2 on 2 GPUs): correctness up to 64 MiB against the host backend, zpp-bench up to
#     64 MiB without the goal pairs;
#  2. the three failure steps: node 1's zppd SIGKILLed; node 1's zppd SIGSTOPped (its heartbeats time out with
#     its sockets open) and resumed; node 1's rank SIGKILLed by itself with a call in flight. Each: node 0's
#     rank must fail with ZPP_EABORTED naming node 1 within 10 s, the daemons left must hold nothing, and a
#     new job across both must run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/robust-2026-11-28-s23/s23c2.sh" > $H
echo "run_multi 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 TEST_MIB=64 BENCH_ARGS="-P 0" timeout 540 bash scripts/gpu/run_multi.sh 64) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^== |^PASS lines|^FAIL|PASS death|FAIL death|SIGKILLs itself" $R/m/summary.txt | head -70
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
