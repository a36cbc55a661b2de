#!/bin/bash
# session 21, call 2 (nvidia-h200, GPU1=0: both simulated nodes on one GPU; the two-GPU machine was withdrawn
# after call 1): 2x1 only, bench only, under MPS, with -D: qwZ's 31 goal pairs and the
# same pairs for the wire's half all-gather and the in-process qwZ, interleaved, to see where 2x1 qwZ's
# shortfall against the wire comes from (call 1: pairs 1.86-1.92x, the rounds' wire 2.04-2.10x).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-24-h200x2-s21/s21x2.sh" > $H
echo "run_multi 1024 2x1 -D start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/d1 MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 GPU1=0 BENCH_ARGS="-D" timeout 540 bash scripts/gpu/run_multi.sh 1024) > $R/d1.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^pairs" $R/d1/bench-2x1.log
sed -n '/^goals/,$p' $R/d1/bench-2x1.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
