#!/bin/bash
# session 14, third call (nvidia-h200-x2): the client polls a small call's done event before it makes the
# stream wait on it (ZPP_DONE_SPIN_US, default 20; 0 = one query). Working tree 8dd5ac6 + client/zpp_cuda.c
# change. The one-node bench 4 alternated default / ZPP_DONE_SPIN_US=0, twice each; then run_cuda test
# (1x2 and 2x1 against the host backend, concurrency, rejoin, admission, kill) with the default.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree 8dd5ac6 + the done-event poll of client/zpp_cuda.c (CMake Release build, sm_90, carried as .carry/cu); command: .carry/s14x3.sh" > $H
for i in 1 2; do
  for v in 20 0; do
    echo "bench 4 ZPP_DONE_SPIN_US=$v ($i) start $(date -u '+%F %T UTC')" >> $H
    (OUT=$R/b$v-$i MPS=1 ZPP_DONE_SPIN_US=$v timeout 100 bash scripts/gpu/run_cuda.sh bench 4) > $R/b$v-$i.log 2>&1; echo "bench rc=$?" >> $H
  done
done
echo "run_cuda test 256 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/t MPS=1 timeout 300 bash scripts/gpu/run_cuda.sh test 256) > $R/t.log 2>&1; echo "test rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for i in 1 2; do for v in 20 0; do echo "== spin $v ($i)"; grep -A10 "^small calls" $R/b$v-$i/bench-1x2-mps.log | grep -E "^(nccl|zppd|inproc|daemon|qwZ)"; done; done
grep -E "FAIL|kill-test: GPU|exit|PASS lines" $R/t/summary.txt | head -20
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
