#!/bin/bash
# session 19, call 13 (one H200): after the review, zpp_check's cuda side rewritten as one pass: run_multi.sh's
# 2x1 layout on one GPU under MPS (GPU1=0 MPS=1), correctness up to 16 MiB, every rank ending with zpp_check;
# no member-death step.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-23-h200-s19/s19m12.sh" > $H
echo "run_multi 16 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=1 GPU1=0 LAYOUTS=2x1 TEST_MIB=16 FAILURE=0 timeout 300 bash scripts/gpu/run_multi.sh 16) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "PASS lines|FAIL|exit" $R/m/summary.txt | head
grep -E "check rank" $R/m/test-2x1.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
