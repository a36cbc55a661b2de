#!/bin/bash
# session 20 (nvidia-h200-x2, lent at the session's end): the tree after session 20's fixes, run_multi.sh 1024
# bench-only (FAILURE=0 TEST_MIB=0) under MPS in both layouts, twice, for issue 11's goals at 256 MiB - 1 GiB
# (2x1 qwZ was 1.83-2.02x at 256 MiB over session 14's three runs, goal 1.9x).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-24-h200x2-s20/s20x1.sh" > $H
for i in 1 2; do
  echo "run_multi 1024 #$i start $(date -u '+%F %T UTC')" >> $H
  (OUT=$R/m$i MPS=1 FAILURE=0 TEST_MIB=0 timeout 250 bash scripts/gpu/run_multi.sh 1024) > $R/m$i.log 2>&1; echo "multi #$i rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for i in 1 2; do for l in 2x1 2x2; do echo "== #$i $l"; sed -n '/^goals/,$p' $R/m$i/bench-$l.log; done; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
