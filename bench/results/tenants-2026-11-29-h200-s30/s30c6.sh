#!/bin/bash
# session 30, call 6 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): zpp_collective_stream (the stream's wait enqueued at submit, replies
# read later), MPS off and then under MPS:
#   zpp-cuda-test -Y 200 (ordering with replies 16 behind, a refused call, the thread's time per
#   call both ways); the one-rank test against the host backend (-w 1 -n 1 -m 64 -L: the
#   refactored zpp_collective_async path); -X (zppd SIGKILLed with an answered call queued).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/tenants-2026-11-29-h200-s30/s30c6.sh"
echo "$DEV" > $H
T=$(mktemp -d /tmp/zpp-s.XXXXXX)
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
start() { # NAME BACKEND: zppd on $T/NAME.sock, pid in ZP
  rm -f $T/$1.sock
  $C/bin/zppd -s $T/$1.sock -l info -o peer_listen= -b $2 -o allow_legacy_ipc=true > $R/zppd-$1.log 2>&1 & ZP=$!
  for _ in $(seq 100); do [ -S $T/$1.sock ] && break; sleep 0.1; done
}
ystream() { # TAG
  start y-$1 cuda; local zp=$ZP
  echo "$DEV" > $R/stream-$1.log
  timeout -k 5 120 $C/bin/zpp-cuda-test -s $T/y-$1.sock -Y 200 >> $R/stream-$1.log 2>&1; echo "rc=$?" >> $R/stream-$1.log
  stop $zp; sed -i "1i $DEV" $R/zppd-y-$1.log
  echo "   -Y 200 ($1): $(grep -E '^(PASS|FAIL)' $R/stream-$1.log | cut -c1-60 | tr '\n' '|') $(tail -1 $R/stream-$1.log)" >> $H
  grep -E "^info: stream" $R/stream-$1.log | sed 's/^/      /' >> $H
}
ystream nomps
start c cuda; cp_=$ZP; start h host; hp_=$ZP
echo "$DEV" > $R/test-1x1.log
timeout 120 $C/bin/zpp-cuda-test -s $T/c.sock -H $T/h.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 -L rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
stop $cp_ $hp_; sed -i "1i $DEV" $R/zppd-c.log $R/zppd-h.log
start z cuda; zp=$ZP
echo "$DEV" > $R/lost.log
timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z.sock -X $T/mark >> $R/lost.log 2>&1 & tp=$!
for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
[ -e $T/mark ] && kill -9 $zp
wait $tp; echo "rc=$?" >> $R/lost.log; stop $zp; sed -i "1i $DEV" $R/zppd-z.log
echo "   -X: $(grep -E '^(PASS|FAIL)' $R/lost.log | cut -c1-120)" >> $H
. scripts/gpu/mps.sh
if mps_start; then
  ystream mps
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
