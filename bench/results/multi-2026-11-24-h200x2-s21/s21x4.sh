#!/bin/bash
# session 21, call 4 (nvidia-h200, GPU1=0: both simulated nodes on one GPU): the bench after every timed window
# got one untimed call of its kind first; 2x1 bench only, under MPS, -D (the goal pairs for qwZ, the wire's half
# all-gather and the in-process qwZ, interleaved), up to 1 GiB; then the same without -D on fresh daemons (the
# 2x2 layout needs two GPUs).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-24-h200x2-s21/s21x4.sh" > $H
echo "== d1: 2x1 -D up to 1024 MiB, start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/d1 MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 GPU1=0 BENCH_ARGS="-D" timeout 330 bash scripts/gpu/run_multi.sh 1024) > $R/d1.log 2>&1; echo "   rc=$?" >> $H
echo "== b1: 2x1 up to 1024 MiB, start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/b1 MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 GPU1=0 timeout 240 bash scripts/gpu/run_multi.sh 1024) > $R/b1.log 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^pairs" $R/d1/bench-2x1.log
sed -n '/^goals/,/^speedup over/p' $R/d1/bench-2x1.log
echo "== b1 2x1"; sed -n '/^goals/,/^speedup over/p' $R/b1/bench-2x1.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
