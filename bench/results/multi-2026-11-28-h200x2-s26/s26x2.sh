#!/bin/bash
# session 26, call 2 (nvidia-h200-x2): call 1 put the daemon's 2x1 cost on its plain all-gather as much as on its qwZ
# (~0.4-1.3 ms per 23-46 ms call, whatever the switches). Where in a window is it paid? zpp-bench -S with each window
# split at its first call: under MPS with 4 and 8 timed calls per window, then without MPS.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s26/s26x2.sh" > $H
run() { # NAME MPS ITERS PAIRS
  echo "== $1: MPS=$2 -i $3 -S $4; start $(date -u '+%F %T UTC')" >> $H
  (OUT=$R/$1 MPS=$2 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4 -b 2048 -P 0 -R 1 -i $3 -S $4" timeout 120 bash scripts/gpu/run_multi.sh 256) > $R/$1.log 2>&1; echo "   rc=$?" >> $H
}
run i4 1 4 20
run i8 1 8 12
run nomps 0 4 20
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in i4 i8 nomps; do echo "== $n"; grep -E "^share " $R/$n/bench-2x1.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
