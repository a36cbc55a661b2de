#!/bin/bash
# session 26, call 3 (nvidia-h200-x2): call 2 put the daemon's 2x1 cost on each call after a window's first
# (0.2-0.8 ms per call), which is where the hop from call k's done event through the client's stream and the host
# gate to call k+1 lies. zpp-bench -S 14 -i 4 now also pairs the in-process qwZ with the daemon's qwZ submitted 4
# deep (no hop on the GPU's path). Alternated: the default gate, the gate polling back to back
# (ZPPD_GATE_SPIN_US=1000000), twice each.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s26/s26x3.sh" > $H
run() { # NAME ENV
  echo "== $1: $2; start $(date -u '+%F %T UTC')" >> $H
  (export "$2"; OUT=$R/$1 MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4 -b 2048 -P 0 -R 1 -i 4 -S 14" timeout 120 bash scripts/gpu/run_multi.sh 256) > $R/$1.log 2>&1; echo "   rc=$?" >> $H
}
run def1 ZPP_X=0
run spin1 ZPPD_GATE_SPIN_US=1000000
run def2 ZPP_X=0
run spin2 ZPPD_GATE_SPIN_US=1000000
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in def1 spin1 def2 spin2; do echo "== $n"; grep -E "^share " $R/$n/bench-2x1.log | cut -c1-250; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
