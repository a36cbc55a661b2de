#!/bin/bash
# session 27, call 2 (nvidia-h200, one GPU; the fix of cu_to_host's wait, working tree of .carry/tree + that fix, zppd only): what a shared-replica publish costs the cuda zppd's other jobs,
# before and after this session's change (the content key checked on a worker thread, hashed by libcrypto).
#  1. bench/publish_stall.py at 1 GiB and 4 GiB, alternating the tree's zppd (new) and session 26's
#     (zppd.old, 0e1a1a9: the check on the loop thread, portable C SHA-256), a fresh daemon per run, no MPS,
#     allow_legacy_ipc = true (PyTorch's default allocator: one cudaMalloc segment per tensor);
#  2. zpp-bench -S (session 26's review reshaped its window split, never run since) on the 2x1 layout with
#     both simulated nodes on this one GPU under MPS (GPU1=0): that it runs and prints its "share" lines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); sha_ni: $(grep -c -w sha_ni /proc/cpuinfo) of $(nproc)); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu; zppd.old = 0e1a1a9); command: bash bench/results/publish-2026-11-28-h200-s27/s27p2.sh" > $H
python3 -c "import torch; print('torch', torch.__version__)" >> $H 2>&1
stall() { # NAME BIN MIB
  local n=$1 bin=$2 mib=$3 T; T=$(mktemp -d)
  echo "== $n: $bin $mib MiB; start $(date -u '+%F %T UTC')" >> $H
  "$bin" -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -o store_budget=0 -o allow_legacy_ipc=true > $R/$n-zppd.log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do [ -S $T/z.sock ] && break; sleep 0.1; done
  timeout 150 python3 bench/publish_stall.py $T/z.sock $mib > $R/$n.log 2>&1; echo "   rc=$?" >> $H
  kill -TERM $pid; for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  rm -rf $T
}
stall new-1g-a $C/bin/zppd 1024
stall new-4g $C/bin/zppd 4096
stall new-1g-b $C/bin/zppd 1024
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in new-1g-a new-4g new-1g-b; do echo "== $n"; grep -vE "^\s*$" $R/$n.log | tail -8; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
