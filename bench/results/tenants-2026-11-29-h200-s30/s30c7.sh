#!/bin/bash
# session 30, call 7 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): call 6's zpp-cuda-test -Y 200 three times with MPS off and three times
# under MPS (a fresh zppd for each run), for the spread of the calling thread's time per call.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/tenants-2026-11-29-h200-s30/s30c7.sh"
echo "$DEV" > $H
T=$(mktemp -d /tmp/zpp-s.XXXXXX)
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
ystream() { # TAG
  rm -f $T/y.sock
  $C/bin/zppd -s $T/y.sock -l info -o peer_listen= -b cuda > $R/zppd-$1.log 2>&1 & local zp=$!
  for _ in $(seq 100); do [ -S $T/y.sock ] && break; sleep 0.1; done
  echo "$DEV" > $R/stream-$1.log
  timeout -k 5 120 $C/bin/zpp-cuda-test -s $T/y.sock -Y 200 >> $R/stream-$1.log 2>&1; echo "rc=$?" >> $R/stream-$1.log
  stop $zp; sed -i "1i $DEV" $R/zppd-$1.log
  echo "   $1: $(grep -cE '^PASS' $R/stream-$1.log) PASS, $(grep -cE '^FAIL' $R/stream-$1.log) FAIL, $(tail -1 $R/stream-$1.log)" >> $H
  grep -E "^info: stream" $R/stream-$1.log | sed 's/^/      /' >> $H
}
for i in 1 2 3; do ystream nomps-$i; done
. scripts/gpu/mps.sh
if mps_start; then
  for i in 1 2 3; do ystream mps-$i; done
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
