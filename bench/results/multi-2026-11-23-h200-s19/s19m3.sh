#!/bin/bash
# session 19, call 4 (one H200): the tree after the GPU start policy moved into every build (d0c7ae7):
# scripts/gpu/run_mps.sh again (zppd.old = call 2's build), then run_multi.sh's 2x1 layout on one GPU without
# MPS (GPU1=0 MPS=0), correctness up to 64 MiB against the host backend, zpp-bench up to 64 MiB, no
# member-death step (call 3 ran it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-23-h200-s19/s19m3.sh" > $H
echo "run_mps start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/mps ZPP_OLD=$PWD/.carry/cu/bin/zppd.old timeout 170 bash scripts/gpu/run_mps.sh) > $R/mps.log 2>&1; echo "mps rc=$?" >> $H
echo "run_multi 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 GPU1=0 LAYOUTS=2x1 TEST_MIB=64 FAILURE=0 timeout 330 bash scripts/gpu/run_multi.sh 64) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
cat $R/mps/summary.txt
grep -E "PASS|FAIL|exit" $R/m/summary.txt | head -30
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
