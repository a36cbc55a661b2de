#!/bin/bash
# session 21, call 1 (nvidia-h200-x2): the full run_multi.sh 1024 under MPS (correctness test at 256 MiB,
# bench with qwZ's 31 goal pairs per goal size, member-death step), both layouts, on the tree that added
# the goal pairs (bench/stats.h).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-24-h200x2-s21/s21x1.sh" > $H
echo "run_multi 1024 full start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m1 MPS=1 timeout 570 bash scripts/gpu/run_multi.sh 1024) > $R/m1.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^== |^PASS lines|^FAIL" $R/m1/summary.txt | head -60
for l in 2x1 2x2; do echo "== $l"; sed -n '/^goals/,$p' $R/m1/bench-$l.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
