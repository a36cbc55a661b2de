#!/bin/bash
# session 24, call 4 (nvidia-h200-x2): call 3 found 4 untimed calls before every window (-W 4) take the daemon's
# 2x1 qwZ pairs at 256 MiB to 1.90-1.96x where 1 gave 1.84-1.86x (the wire and the in-process qwZ unmoved). Here
# issue 11's goal sizes with -W 4: 2x1 up to 1 GiB, twice, on fresh daemons under MPS, without -D.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-28-h200x2-s24/s24x4.sh" > $H
for i in 1 2; do
  echo "== run $i: 2x1 -W 4 up to 1024 MiB, start $(date -u '+%F %T UTC')" >> $H
  (OUT=$R/w4-$i MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4" timeout 265 bash scripts/gpu/run_multi.sh 1024) > $R/w4-$i.log 2>&1; echo "   rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for d in $R/w*/; do echo "== $d"; sed -n '/^goals/,/^speedup over/p' $d/bench-2x1.log | head -30; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
