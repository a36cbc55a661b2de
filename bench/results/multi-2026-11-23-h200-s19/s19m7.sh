#!/bin/bash
# session 19, call 8 (one H200): the final tree (cu_health asking each GPU's context once a second while jobs
# run) under load: run_multi.sh's 2x1 layout on one GPU under MPS (GPU1=0 MPS=1), correctness up to 256 MiB
# against the host backend and zpp-bench up to 256 MiB, no member-death step (under MPS on one GPU it cannot
# pass: call 2). No health check may fire: every daemon must end with exit status 0.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-23-h200-s19/s19m7.sh" > $H
echo "run_multi 256 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=1 GPU1=0 LAYOUTS=2x1 TEST_MIB=256 FAILURE=0 timeout 400 bash scripts/gpu/run_multi.sh 256) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "PASS|FAIL|exit" $R/m/summary.txt | head -30
grep -E "sticky|asking the GPU" $R/m/zppd.log | head -5
sed -n '/^goals/,$p' $R/m/bench-2x1.log | head -12
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
