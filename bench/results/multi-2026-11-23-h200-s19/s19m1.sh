#!/bin/bash
# session 19, call 2 (one H200: no two-GPU machine lent): jobs across two zppd daemons with both simulated
# nodes on one GPU (GPU1=0: NCCL_HOSTID zpp-node0 / zpp-node1, CUDA_VISIBLE_DEVICES=0 for both). The tree's
# daemon and client had not run on a GPU since session 14 (b7a5116); this runs run_multi.sh's 2x1 layout:
# zpp-cuda-test up to 256 MiB against the host backend, zpp-bench up to 1 GiB (a proxy: both nodes share one
# GPU and its PCIe link, so its ratios are not issue 11's layout), then the member-death step. MPS on.
# Run from the repository root with the CMake Release build (sm_90) staged in .carry/cu (scripts/gpu/stage.sh).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-23-h200-s19/s19m1.sh" > $H
echo "run_multi 1024 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=1 GPU1=0 LAYOUTS=2x1 timeout 560 bash scripts/gpu/run_multi.sh 1024) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "PASS lines|FAIL|exit|death|failure" $R/m/summary.txt | head -30
sed -n '/^goals/,$p' $R/m/bench-2x1.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
