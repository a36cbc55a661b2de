#!/bin/bash
# session 14, second call on the same nvidia-h200-x2 (tree 8dd5ac6): run_multi 1024 again (bench only) for a
# second sample of the 7-round goals, and the one-node bench twice more for the small calls.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree 8dd5ac6 (CMake Release build, sm_90, carried as .carry/cu); command: .carry/s14x2.sh" > $H
echo "run_multi 1024 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m1 MPS=1 FAILURE=0 TEST_MIB=0 timeout 260 bash scripts/gpu/run_multi.sh 1024) > $R/m1.log 2>&1; echo "multi rc=$?" >> $H
for i in 2 3; do
echo "run_cuda bench 4 ($i) start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/b$i MPS=1 timeout 100 bash scripts/gpu/run_cuda.sh bench 4) > $R/b$i.log 2>&1; echo "bench rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for f in $R/b2/bench-1x2-mps.log $R/b3/bench-1x2-mps.log; do grep -A10 "^small calls" $f | grep -E "^(nccl|zppd|inproc|daemon|qwZ)"; done
for l in 2x1 2x2; do echo "== $l"; sed -n '/^goals/,$p' $R/m1/bench-$l.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
