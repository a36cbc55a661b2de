#!/bin/bash
# session 24, call 3 (nvidia-h200-x2): 2x1 qwZ at 256 MiB, the goal pairs with -D (qwZ, the wire's half all-gather
# and the in-process qwZ, interleaved), with 1 untimed call before every window (zpp-bench's default, -W 1) and with 4
# (-W 4), in the order W1 W4 W4 W1, each on fresh daemons under MPS. Session 21's pairs had the daemon's first qwZ
# window of a pair 3.5 % slower than its second (23.15 against 22.35 ms, multi-2026-11-24-h200x2-s21/call4): does
# a longer warm-up close that?
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s24/s24x3.sh" > $H
i=0
for w in 1 4 4 1; do
  i=$((i+1))
  echo "== run $i: 2x1 -D -W $w up to 256 MiB, start $(date -u '+%F %T UTC')" >> $H
  (OUT=$R/w$w-$i MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-D -W $w" timeout 150 bash scripts/gpu/run_multi.sh 256) > $R/w$w-$i.log 2>&1; echo "   rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for d in $R/w*/; do echo "== $d"; grep -E "^pairs|^268435456 +(nccl_allgather|wire_allgather|inproc_qwz|zppd_qwz)" $d/bench-2x1.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
