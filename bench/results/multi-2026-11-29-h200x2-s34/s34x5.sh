#!/bin/bash
# session 34, call 5 (nvidia-h200-x2): issue 11's 2x1 goal run as session 26's calls 4-5, again, on this session's tree (the fenced kernels' change does not reach 2x1):
# block 2048, 30 goal pairs per size (-P 30), 4 direct pairs of the daemon's work against the same work
# in-process (-S 4) at every goal size: 256 MiB - 1 GiB, -W 4, fresh daemons under MPS.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-29-h200x2-s34/s34x5.sh" > $H
echo "== goal: 2x1 -W 4 -b 2048 -P 30 -S 4 up to 1 GiB; start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/goal MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_TIMEOUT=560 BENCH_ARGS="-W 4 -b 2048 -P 30 -S 4" timeout 585 bash scripts/gpu/run_multi.sh 1024) > $R/goal.log 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^share " $R/goal/bench-2x1.log | cut -c1-200
sed -n '/^goals/,$p' $R/goal/bench-2x1.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
