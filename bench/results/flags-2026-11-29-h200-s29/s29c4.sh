#!/bin/bash
# session 29, call 4 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu; the previous tree's zppd and zpp-bench as .carry/prev, tree in
# .carry/prev/tree): a fenced launch's done flag written after the replies instead of before.
#  1. under MPS, world 1: zpp-bench's small calls, the previous tree's zppd + zpp-bench and this
#     tree's alternated three times (done flags on in both), then this tree with ZPP_DONE_FLAGS=0;
#  2. MPS off: zpp-cuda-test -X twice (the answered-and-queued case), the 1x1 test against a
#     host zppd up to 64 MiB, and run_multi.sh's 2x1 correctness test on this GPU up to 64 MiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu P=$PWD/.carry/prev
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree), previous $(cat .carry/prev/tree) (CMake Release builds, sm_90, carried as .carry/cu and .carry/prev); command: bash bench/results/flags-2026-11-29-h200-s29/s29c4.sh"
echo "$DEV" > $H
T=$(mktemp -d)
. scripts/gpu/mps.sh
echo "$DEV" > $R/bench-mps.log
echo "== MPS bench start $(date -u '+%F %T UTC')" >> $H
if mps_start; then
  bench() { # NAME BINDIR [ENV...]
    local n=$1 b=$2; shift 2
    rm -f $T/c.sock
    $b/zppd -s $T/c.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-$n.log 2>&1 &
    local zp=$!
    for _ in $(seq 100); do [ -S $T/c.sock ] && break; sleep 0.1; done
    echo "#### $n $*" >> $R/bench-mps.log
    env "$@" timeout 60 $b/zpp-bench -s $T/c.sock -w 1 -n 1 -m 1 >> $R/bench-mps.log 2>&1
    echo "   $n rc=$?" >> $H
    kill $zp; wait $zp 2>/dev/null
    sed -i "1i $DEV" $R/zppd-$n.log
  }
  for round in 1 2 3; do
    bench prev-$round $P
    bench new-$round $C/bin
  done
  bench new-noflags $C/bin ZPP_DONE_FLAGS=0
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "$DEV" > $R/lost.log
lost() { # NAME
  local n=$1
  rm -f $T/z.sock $T/mark
  $C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-$n.log 2>&1 &
  local zp=$!
  for _ in $(seq 100); do [ -S $T/z.sock ] && break; sleep 0.1; done
  echo "#### $n" >> $R/lost.log
  timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z.sock -X $T/mark >> $R/lost.log 2>&1 &
  local tp=$!
  for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
  if [ -e $T/mark ]; then kill -9 $zp; else echo "   $n: no marker" >> $H; kill $zp; fi
  wait $zp 2>/dev/null
  wait $tp; echo "   $n: test rc=$?" >> $H
  sed -i "1i $DEV" $R/zppd-$n.log
}
echo "== lost start $(date -u '+%F %T UTC')" >> $H
lost lost-1
lost lost-2
echo "== 1x1 start $(date -u '+%F %T UTC')" >> $H
$C/bin/zppd -s $T/c.sock -l info -o peer_listen=127.0.0.1:0 -b cuda -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64 > $R/zppd-cuda.log 2>&1 &
cp=$!
$C/bin/zppd -s $T/h.sock -l info -o peer_listen=127.0.0.1:0 -b host -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G > $R/zppd-host.log 2>&1 &
hp=$!
for _ in $(seq 100); do [ -S $T/c.sock ] && [ -S $T/h.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/test-1x1.log
timeout 100 $C/bin/zpp-cuda-test -s $T/c.sock -H $T/h.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
kill $cp $hp; wait $cp $hp 2>/dev/null
sed -i "1i $DEV" $R/zppd-cuda.log $R/zppd-host.log
echo "== multi start $(date -u '+%F %T UTC')" >> $H
GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_TIMEOUT=1 FAILURE=0 OUT=$R/multi timeout 150 \
  scripts/gpu/run_multi.sh 64 > $R/multi.out 2>&1; echo "   multi rc=$?" >> $H
for f in $R/multi.out $R/multi/summary.txt $R/multi/bench-2x1.log; do [ -f $f ] && sed -i "1i $DEV" $f; done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
echo "== bench"; grep -E "^####|^zppd_|daemon overhead" $R/bench-mps.log | head -60
echo "== lost"; grep -E "^(####|PASS|FAIL|KNOWN)" $R/lost.log
echo "== 1x1"; grep -E "^FAIL" $R/test-1x1.log | head
echo "== multi"; grep -E "PASS lines|FAIL|exit" $R/multi/summary.txt | head
echo "== zppd warnings"; grep -hE "level=(warn|error)" $R/zppd-*.log | grep -v "not running under CUDA MPS" | head
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
