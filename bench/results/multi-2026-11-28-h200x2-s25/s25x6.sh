#!/bin/bash
# session 25, call 6 (nvidia-h200-x2): call 5's -D pairs had the daemon's qwZ 2.4-4.3 % behind the in-process qwZ
# at block 2048. One daemon-side difference is QWZ_EARLY: the daemon dequantizes the rank's own part on a second
# lane while NCCL gathers (the in-process qwZ does not). 256 MiB, -D -P 8 -W 4 -b 2048, fresh daemons under MPS,
# ZPP_QWZ_EARLY=0 then the default.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s25/s25x6.sh" > $H
for e in 0 1; do
  echo "== ZPP_QWZ_EARLY=$e: 2x1 -W 4 -b 2048 -D -P 8 at 256 MiB, start $(date -u '+%F %T UTC')" >> $H
  (export ZPP_QWZ_EARLY=$e; OUT=$R/e$e MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4 -b 2048 -D -P 8" timeout 100 bash scripts/gpu/run_multi.sh 256) > $R/e$e.log 2>&1; echo "   rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for e in 0 1; do echo "== EARLY=$e"; grep -E "^pairs " $R/e$e/bench-2x1.log; grep -E "^268435456 +(inproc_qwz_int8|zppd_qwz_int8) " $R/e$e/bench-2x1.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
