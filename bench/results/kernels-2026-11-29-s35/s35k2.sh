#!/bin/bash
# session 35, call 2 (nvidia-h200, one GPU), tree in .carry/tree (built here: build-cu staged by
# scripts/gpu/stage.sh into .carry/cu; l2aside built from l2aside.c in this directory, in .carry/x35):
# 1. does a persisting L2 set-aside taken by ANOTHER process slow this one's copies? (call 1 found
#    that inside one process it makes everything ~2.7x slower) l2aside probe alone; then with a
#    second process holding the device's largest set-aside (set), then one that also marks 32 MiB
#    persisting (setlines); then alone again;
# 2. the tree's two daemons with both simulated nodes on the one GPU (GPU1=0): 2x1 correctness test
#    to 64 MiB, zpp-bench with -M 256 (session 34's new minimum size: only 256 MiB rows and goal
#    pairs), and the three failure steps (MPS off).
R=$OUT/r; mkdir -p $R
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s35/s35k2.sh"
L=.carry/x35/l2aside
{
  echo "$DEV"
  $L probe; $L probe
  $L set 25 & sleep 8; $L probe; $L probe; wait
  $L setlines 25 & sleep 8; $L probe; $L probe; wait
  $L probe
} > $R/l2aside.txt 2>&1
cat $R/l2aside.txt
export NCCL_NVLS_ENABLE=0
OUT=$R/multi GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_ARGS="-W 2 -P 6 -M 256" BENCH_TIMEOUT=200 \
  timeout 450 bash scripts/gpu/run_multi.sh 256 > $R/run_multi.out 2>&1
echo "run_multi rc=$?" >> $R/run_multi.out
for f in $R/multi/*; do { echo "$DEV"; cat $f; } > $f.tmp && mv $f.tmp $f; done
{ echo "$DEV"; cat $R/run_multi.out; } > $R/x && mv $R/x $R/run_multi.out
tail -30 $R/run_multi.out; cat $R/multi/summary.txt 2>/dev/null | tail -30
