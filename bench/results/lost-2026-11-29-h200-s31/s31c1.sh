#!/bin/bash
# session 31, call 1 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): a lost call's output filled with NaN (libzpp's watcher, done flags).
#   zpp-cuda-test -X: zppd SIGKILLed with two answered calls queued behind the rank's held stream
#     (one by zpp_collective_async + zpp_wait_stream, one by zpp_collective_stream): both outputs
#     must be 0xFF throughout, the 4 MiB after them untouched; MPS off, ZPP_DONE_FLAGS=0 (KNOWN),
#     and under MPS;
#   regressions of the paths that now note outputs: -Y 200 (its refused call must leave the output
#   as it was), the one-rank test against the host backend (-w 1 -n 1 -m 64 -L), the one-rank
#   kill test (-w 1 -K: a client SIGKILLed with calls queued; zppd gives its memory back).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/lost-2026-11-29-h200-s31/s31c1.sh"
echo "$DEV" > $H
T=$(mktemp -d /tmp/zpp-s.XXXXXX)
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
start() { # NAME BACKEND: zppd on $T/NAME.sock, pid in ZP
  rm -f $T/$1.sock
  $C/bin/zppd -s $T/$1.sock -l info -o peer_listen= -b $2 -o allow_legacy_ipc=true > $R/zppd-$1.log 2>&1 & ZP=$!
  for _ in $(seq 100); do [ -S $T/$1.sock ] && break; sleep 0.1; done
}
lost() { # TAG [ENV...]
  local tag=$1; shift
  start x-$tag cuda; local zp=$ZP
  rm -f $T/mark-$tag
  echo "$DEV" > $R/lost-$tag.log
  env "$@" timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/x-$tag.sock -X $T/mark-$tag >> $R/lost-$tag.log 2>&1 & local tp=$!
  for _ in $(seq 300); do [ -e $T/mark-$tag ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
  [ -e $T/mark-$tag ] && kill -9 $zp
  wait $tp; echo "rc=$?" >> $R/lost-$tag.log; stop $zp; sed -i "1i $DEV" $R/zppd-x-$tag.log
  echo "   -X ($tag $*):" >> $H
  grep -E '^(PASS|FAIL|KNOWN)|^rc=' $R/lost-$tag.log | cut -c1-200 | sed 's/^/      /' >> $H
}
ystream() { # TAG
  start y-$1 cuda; local zp=$ZP
  echo "$DEV" > $R/stream-$1.log
  timeout -k 5 120 $C/bin/zpp-cuda-test -s $T/y-$1.sock -Y 200 >> $R/stream-$1.log 2>&1; echo "rc=$?" >> $R/stream-$1.log
  stop $zp; sed -i "1i $DEV" $R/zppd-y-$1.log
  echo "   -Y 200 ($1): $(grep -E '^(PASS|FAIL)' $R/stream-$1.log | cut -c1-70 | tr '\n' '|') $(tail -1 $R/stream-$1.log)" >> $H
}
lost flags
lost noflags ZPP_DONE_FLAGS=0
lost flags2
ystream nomps
start c cuda; cp_=$ZP; start h host; hp_=$ZP
echo "$DEV" > $R/test-1x1.log
timeout 120 $C/bin/zpp-cuda-test -s $T/c.sock -H $T/h.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 -L rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
stop $cp_ $hp_; sed -i "1i $DEV" $R/zppd-c.log $R/zppd-h.log
start k cuda; kp=$ZP
echo "$DEV" > $R/kill.log
timeout -k 5 170 $C/bin/zpp-cuda-test -s $T/k.sock -w 1 -K >> $R/kill.log 2>&1; echo "rc=$?" >> $R/kill.log
echo "   kill -w 1: $(tail -1 $R/kill.log); $(grep -E 'device memory|settled|kill-test: a new' $R/kill.log | tr '\n' ' ' | cut -c1-300)" >> $H
stop $kp; sed -i "1i $DEV" $R/zppd-k.log
. scripts/gpu/mps.sh
if mps_start; then
  lost mps
  ystream mps
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
