#!/bin/bash
# session 35, call 7 (nvidia-h200-x2, the session's last device seconds): #11's 2x1 qwZ goal at 1 GiB
# alone with 60 goal pairs (session 34's plan: more pairs per size, so that each median's spread
# shrinks; zpp-bench -M 1024 skips the smaller sizes). Block 2048, -W 4, as sessions 25, 26, 34.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/kernels-2026-11-29-s35/s35x7.sh"
(OUT=$R/m MPS=0 LAYOUTS=2x1 TEST_MIB=0 FAILURE=0 BENCH_ARGS="-W 4 -b 2048 -P 60 -M 1024" BENCH_TIMEOUT=230 \
  timeout 250 bash scripts/gpu/run_multi.sh 1024) > $R/m.log 2>&1; echo "rc=$?" >> $R/m.log
for f in $(find $R -type f); do { echo "$DEV"; cat $f; } > $f.t && mv $f.t $f; done
grep -A30 "^goals" $R/m/bench-2x1.log | head -45
