#!/bin/bash
# session 29, call 2 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): the case done flags are for, made certain, and call 1's one failure.
#  1. zpp-cuda-test -X: one rank holds its own stream, submits a 4 MiB all-gather (answered at
#     once, its work queued behind the held stream on zppd's side), creates a marker; zppd is
#     SIGKILLed; once zpp_check says ZPP_ECLOSED the rank lets its stream go, which must be done
#     within 10 s. Three times with done flags, once without (ZPP_DONE_FLAGS=0: the known wait);
#  2. the 1x1 test again (call 1 ran out of output buffer for the fp32 reduce-scatter of one rank:
#     the test's sizing, fixed) against a host zppd, up to 64 MiB;
#  3. step 1 once under MPS (a private control daemon), with done flags.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/flags-2026-11-29-h200-s29/s29c2.sh"
echo "$DEV" > $H
echo "$DEV" > $R/lost.log
T=$(mktemp -d)
lost() { # NAME [ENV...]
  local n=$1; shift
  rm -f $T/z.sock $T/mark
  $C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-$n.log 2>&1 &
  local zp=$!
  for _ in $(seq 100); do [ -S $T/z.sock ] && break; sleep 0.1; done
  echo "#### $n $*" >> $R/lost.log
  env "$@" timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z.sock -X $T/mark >> $R/lost.log 2>&1 &
  local tp=$!
  for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
  if [ -e $T/mark ]; then kill -9 $zp; echo "   $n: zppd SIGKILLed at $(date -u +%T.%N)" >> $H; else echo "   $n: no marker" >> $H; kill $zp; fi
  wait $zp 2>/dev/null
  wait $tp; echo "   $n: test rc=$?" >> $H
  sed -i "1i $DEV" $R/zppd-$n.log
}
echo "== lost start $(date -u '+%F %T UTC')" >> $H
lost flags-1
lost flags-2
lost flags-3
lost noflags ZPP_DONE_FLAGS=0
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
echo "== MPS start $(date -u '+%F %T UTC')" >> $H
. scripts/gpu/mps.sh
if mps_start; then
  lost mps-flags
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
echo "== lost"; grep -E "^(####|PASS|FAIL|KNOWN|info: lost)" $R/lost.log
echo "== 1x1"; grep -E "^FAIL|rank 0" $R/test-1x1.log | head
echo "== zppd warnings"; grep -hE "level=(warn|error)" $R/zppd-*.log | grep -v "not running under CUDA MPS" | head -20
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
