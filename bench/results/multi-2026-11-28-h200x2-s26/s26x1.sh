#!/bin/bash
# session 26, call 1 (nvidia-h200-x2): where does the daemon's 2x1 qwZ lose 2-4 % against the same qwZ in-process
# (session 25)? zpp-bench -S 24: pairs (in-process qwZ, zppd qwZ, zppd qwZ, in-process qwZ) and (NCCL AG, zppd AG,
# zppd AG, NCCL AG) at 256 MiB, block 2048, 4 untimed + 4 timed calls per window; fresh daemons under MPS per
# setting: the default (with NCCL_DEBUG=INFO at init, to compare the daemon's communicator with the client's),
# ZPP_QWZ_EARLY=0, ZPP_NCCL_BLOCKING=1, ZPPD_GATE_SPIN_US=1000000 (the host gate polling back to back all along),
# then the default again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s26/s26x1.sh" > $H
run() { # NAME ENV...
  local n=$1; shift
  echo "== $n: $* ; start $(date -u '+%F %T UTC')" >> $H
  (export "$@"; OUT=$R/$n MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4 -b 2048 -P 0 -R 1 -i 4 -S 24" timeout 115 bash scripts/gpu/run_multi.sh 256) > $R/$n.log 2>&1; echo "   rc=$?" >> $H
}
run def1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING,ENV
run early0 ZPP_QWZ_EARLY=0
run block1 ZPP_NCCL_BLOCKING=1
run spin ZPPD_GATE_SPIN_US=1000000
run def2 ZPP_X=0
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in def1 early0 block1 spin def2; do echo "== $n"; grep -E "^share " $R/$n/bench-2x1.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
