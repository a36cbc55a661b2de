#!/bin/bash
# session 19, call 3 (one H200): call 2's member-death step failed on one GPU under MPS: node 1's zppd
# SIGKILLed, node 0's zppd (the same GPU, another MPS client) saw an illegal address and exited 3, as the
# daemon does after a sticky error. Two checks of that, on the tree with the GPU start policy
# (daemon/gpu_start.h; zppd.old in .carry/cu/bin is call 2's build, before it):
#  1. scripts/gpu/run_mps.sh: how MPS treats a client killed mid-kernel and a client's fault, and that a
#     fresh zppd (backend = auto) beside a faulted client waits for the GPU instead of serving the host
#     backend (ZPP_OLD: what the build before did in the same state);
#  2. run_multi.sh's 2x1 layout on one GPU without MPS (GPU1=0 MPS=0): the member-death step, each node
#     in its own context; zpp-bench up to 64 MiB only, no correctness run (call 2 passed it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) + the working tree's scripts (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-23-h200-s19/s19m2.sh" > $H
echo "run_mps start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/mps ZPP_OLD=$PWD/.carry/cu/bin/zppd.old timeout 170 bash scripts/gpu/run_mps.sh) > $R/mps.log 2>&1; echo "mps rc=$?" >> $H
echo "run_multi 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 GPU1=0 LAYOUTS=2x1 TEST_MIB=0 timeout 330 bash scripts/gpu/run_multi.sh 64) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
cat $R/mps/summary.txt
grep -E "PASS|FAIL|exit|death|failure" $R/m/summary.txt | head -30
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
