#!/bin/bash
# session 35, call 3 (nvidia-h200, one GPU): the session's final daemon on a GPU. Since call 2 the
# daemon changed in its log formatting (every string value escaped), the server (a uid's share of
# the descriptor budget, refusal lines rate-limited, Goodbye), an aborted job closing its backend
# side when its running call ends, a refused peer grant failing its allocation, the hpZ entry cap's
# eviction, config checks, metrics labels, and MADV_DONTDUMP on memfd mappings. Tree in .carry/tree,
# CMake build for sm_90 staged into .carry/cu.
# 1. one cuda zppd (MPS off): zpp-cuda-test 1 rank against a host zppd up to 64 MiB, two tenants'
#    concurrent jobs (-C 10000), the kill test (-K: a client SIGKILLed mid-call; memory back);
#    (call 3 started this zppd without allow_legacy_ipc = true, so the 1x1 test's legacy-IPC
#    case (-L) was refused, as it should be; call 4 ran part 1 again with it: ONLY_ONE=1)
# 2. run_multi.sh with both simulated nodes on the GPU (GPU1=0): 2x1 test to 64 MiB, zpp-bench at
#    256 MiB only (-M 256, no goal pairs), and the three failure steps.
R=$OUT/r; mkdir -p $R
export NCCL_NVLS_ENABLE=0
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s35/s35k3.sh"
C=$PWD/.carry/cu; B=$C/bin; export LD_LIBRARY_PATH=$C/lib
T=$(mktemp -d)
{
  echo "$DEV"
  $B/zppd -s $T/cuda.sock -b cuda -l info -o peer_listen= -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G > $T/zppd-cuda.log 2>&1 &
  zc=$!
  $B/zppd -s $T/host.sock -b host -l info -o peer_listen= -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G > $T/zppd-host.log 2>&1 &
  zh=$!
  for _ in $(seq 100); do [ -S $T/cuda.sock ] && [ -S $T/host.sock ] && break; sleep 0.1; done
  echo "== test 1x1 up to 64 MiB against the host backend"
  timeout 150 $B/zpp-cuda-test -s $T/cuda.sock -H $T/host.sock -w 1 -n 1 -m 64 -L > $T/t1.log 2>&1; echo "exit $?"
  grep -c ^PASS $T/t1.log | sed 's/^/PASS lines: /'; grep ^FAIL $T/t1.log | head
  echo "== two tenants' concurrent jobs, 10000 calls each"
  timeout 120 $B/zpp-cuda-test -s $T/cuda.sock -w 1 -C 10000 > $T/tc.log 2>&1; echo "exit $?"; tail -3 $T/tc.log
  echo "== kill test"
  timeout 150 $B/zpp-cuda-test -s $T/cuda.sock -w 1 -K > $T/tk.log 2>&1; echo "exit $?"; tail -6 $T/tk.log
  sleep 3; $B/zppctl -s $T/cuda.sock status | grep -A3 '^GPU'
  kill $zc $zh; wait $zc; echo "cuda zppd exit $?"; wait $zh
} > $R/one-daemon.txt 2>&1
for f in t1 tc tk zppd-cuda; do { echo "$DEV"; cat $T/$f.log; } > $R/$f.log; done
cat $R/one-daemon.txt
[ "${ONLY_ONE:-0}" = 1 ] && exit 0 # call 4: part 1 again (call 3's lacked allow_legacy_ipc for -L)
OUT=$R/multi GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_ARGS="-W 2 -P 0 -M 256" BENCH_TIMEOUT=150 \
  timeout 400 bash scripts/gpu/run_multi.sh 256 > $R/run_multi.out 2>&1
echo "run_multi rc=$?" >> $R/run_multi.out
for f in $R/multi/* $R/run_multi.out; do { echo "$DEV"; cat $f; } > $f.tmp && mv $f.tmp $f; done
grep -E "PASS lines|^PASS death|FAIL|exit|holds no job|rc=" $R/run_multi.out | head -40
