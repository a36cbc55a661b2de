#!/bin/bash
# session 29, call 1 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): done flags (docs/cuda.md, "Done flags") on the GPU.
#  1. scripts/gpu/run_multi.sh, 2x1 with both simulated nodes on GPU 0, MPS off: the correctness
#     test across two cuda zppds up to 64 MiB (every call's stream waits on done flags), then the
#     failure steps zppd (node 1's zppd SIGKILLed during all-gathers: node 1's rank must now see
#     its stream drain and zpp_check say ZPP_ECLOSED) and client;
#  2. one cuda zppd, one rank (world 1): zpp-cuda-test against a host zppd up to 64 MiB, and two
#     tenants' concurrent jobs of 10000 calls each;
#  3. zpp-bench's small calls, world 1, with ZPP_DONE_SPIN_US=0 (every call's stream waits),
#     done flags on and off (ZPP_DONE_FLAGS=0), alternated twice.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/flags-2026-11-29-h200-s29/s29c1.sh"
echo "$DEV" > $H
echo "== multi start $(date -u '+%F %T UTC')" >> $H
GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_TIMEOUT=1 FAILURES="zppd client" OUT=$R/multi timeout 330 \
  scripts/gpu/run_multi.sh 64 > $R/multi.out 2>&1; echo "   multi rc=$?" >> $H
T=$(mktemp -d)
start() { # name sock args
  local n=$1 s=$2; shift 2
  $C/bin/zppd -s $s -l info -o peer_listen=127.0.0.1:0 "$@" > $R/zppd-$n.log 2>&1 &
  echo $! > $T/$n.pid
  for _ in $(seq 100); do [ -S $s ] && return 0; sleep 0.1; done; echo "zppd $n did not start" >> $H
}
stop() { kill $(cat $T/$1.pid) 2>/dev/null; wait $(cat $T/$1.pid) 2>/dev/null; sed -i "1i $DEV" $R/zppd-$1.log; }
start cuda $T/cuda.sock -b cuda -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64
start host $T/host.sock -b host -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G
echo "== 1x1 test start $(date -u '+%F %T UTC')" >> $H
echo "$DEV" > $R/test-1x1.log
timeout 100 $C/bin/zpp-cuda-test -s $T/cuda.sock -H $T/host.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
timeout 100 $C/bin/zpp-cuda-test -s $T/cuda.sock -w 1 -C 10000 >> $R/test-1x1.log 2>&1
echo "   concurrent rc=$?" >> $H
stop host
echo "== bench start $(date -u '+%F %T UTC')" >> $H
echo "$DEV" > $R/bench.log
for round in 1 2; do
  for f in 1 0; do
    echo "#### round $round ZPP_DONE_FLAGS=$f ZPP_DONE_SPIN_US=0" >> $R/bench.log
    ZPP_DONE_FLAGS=$f ZPP_DONE_SPIN_US=0 timeout 60 $C/bin/zpp-bench -s $T/cuda.sock -w 1 -n 1 -m 1 >> $R/bench.log 2>&1
    echo "   bench round $round flags $f rc=$?" >> $H
  done
done
$C/bin/zppctl -s $T/cuda.sock status > $R/status-after.txt 2>&1
stop cuda
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
echo "== multi"; grep -E "PASS lines|FAIL|exit|death" $R/multi/summary.txt | head -30
echo "== 1x1"; grep -E "^FAIL|concurrent" $R/test-1x1.log | head
echo "== bench"; grep -E "^####|^(zppd|NCCL|in-process).*[0-9]|daemon overhead" $R/bench.log | head -40
echo "== daemon warnings"; grep -hE "level=(warn|error)" $R/zppd-cuda.log $R/multi/zppd.log | head -20
grep -iE "deferred" $R/status-after.txt | head
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
