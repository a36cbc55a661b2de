#!/bin/bash
# session 28, call 5 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90 carried
# as .carry/cu): a shared hpZ replica read by another job on a GPU. bench/publish_stall.py now starts a
# third one-rank job ("reader") once the publish is in: it gathers the replica by its content key
# alone and hashes what it got, which must be the key. 1 GiB with PyTorch's default allocator (legacy
# IPC allowed) and 1 GiB with expandable segments (VMM, legacy IPC off), a fresh zppd each.
export NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/share-2026-11-29-h200-s28/s28c5.sh"
echo "$DEV" > $H
stall() { # NAME MIB ALLOC ZPPD-ARGS...
  local n=$1 mib=$2 alloc=$3 T; shift 3; T=$(mktemp -d)
  echo "== $n: $mib MiB, PYTORCH_CUDA_ALLOC_CONF='$alloc', zppd $*; start $(date -u '+%F %T UTC')" >> $H
  $C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -o store_budget=0 "$@" > $R/$n-zppd.log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do [ -S $T/z.sock ] && break; sleep 0.1; done
  PYTORCH_CUDA_ALLOC_CONF=$alloc timeout 150 python3 bench/publish_stall.py $T/z.sock $mib > $R/$n.log 2>&1; echo "   rc=$?" >> $H
  kill -TERM $pid; for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  sed -i "1i $DEV" $R/$n-zppd.log
  rm -rf $T
}
stall legacy-1g 1024 "" -o allow_legacy_ipc=true
stall vmm-1g 1024 expandable_segments:True
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in legacy-1g vmm-1g; do echo "== $n"; grep -vE "^\s*$" $R/$n.log | tail -8; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
