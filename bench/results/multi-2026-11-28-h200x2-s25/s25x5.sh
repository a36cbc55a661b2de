#!/bin/bash
# session 25, call 5 (nvidia-h200-x2): calls 1-2's throughput rounds had the daemon's qwZ 4 % behind the in-process
# qwZ on average (11 of 12 size-runs) where session 24's -D pairs at 256 MiB had it within 0-1 %. Here -D (the
# wire's half all-gather and the in-process qwZ in pairs interleaved with qwZ's), -W 4, -b 2048, 10 pairs per
# size, up to 512 MiB, fresh daemons under MPS.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s25/s25x5.sh" > $H
echo "== 2x1 -W 4 -b 2048 -D -P 10 up to 512 MiB, start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/d MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4 -b 2048 -D -P 10" timeout 300 bash scripts/gpu/run_multi.sh 512) > $R/d.log 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^pairs " $R/d/bench-2x1.log
grep -E "^(268435456|536870912) +(wire_allgather_half|inproc_qwz_int8|zppd_qwz_int8|zppd_allgather_bf16) " $R/d/bench-2x1.log
sed -n '/^goals/,/^speedup over/p' $R/d/bench-2x1.log | head -14
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
