#!/bin/bash
# session 14 call 4 (nvidia-h200-x2): the tree b7a5116 (kernels of 103a17d; zpp-bench with the in-process qwZ row, the client polling small calls' done events
# and 7 ordered rounds) in full: run_cuda all 256 under MPS, then run_multi 1024 (bench only:
# FAILURE=0 TEST_MIB=0) in both layouts, then the one-node bench again for a second small-call sample.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree b7a5116 (CMake Release build, sm_90, carried as .carry/cu); command: .carry/s14x4.sh" > $H
echo "run_cuda all 256 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/all MPS=1 timeout 300 bash scripts/gpu/run_cuda.sh all 256) > $R/all.log 2>&1; echo "all rc=$?" >> $H
echo "run_multi 1024 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m1 MPS=1 FAILURE=0 TEST_MIB=0 timeout 260 bash scripts/gpu/run_multi.sh 1024) > $R/m1.log 2>&1; echo "multi rc=$?" >> $H
echo "run_cuda bench 4 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/b2 MPS=1 timeout 100 bash scripts/gpu/run_cuda.sh bench 4) > $R/b2.log 2>&1; echo "bench rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "FAIL|kill-test: GPU|exit|PASS lines" $R/all/summary.txt | head -20
for f in $R/all/bench-1x2-mps.log $R/b2/bench-1x2-mps.log; do grep -E "^in-process qwZ" $f; grep -A10 "^small calls" $f | grep -E "^(nccl|zppd|inproc|daemon|qwZ)"; done
for l in 2x1 2x2; do echo "== $l"; sed -n '/^goals/,$p' $R/m1/bench-$l.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
