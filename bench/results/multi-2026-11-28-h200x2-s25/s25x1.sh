#!/bin/bash
# session 25, call 1 (nvidia-h200-x2): issue 11's 2x1 qwZ goal with qwZ's block as a variable. At block 256 qwZ
# moves 0.508 of the tensor (ceiling ~1.97x on the 2.0x wire); at 2048 it moves 0.502 (int8 error 0.83 %, the
# in-process ZeRO++ reference's blocks are 4096-8000). Runs alternate the block on fresh daemons under MPS, -W 4.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CALL=${CALL:-1}; ORDER=${ORDER:-2048 256}
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: CALL=$CALL ORDER='$ORDER' bash bench/results/multi-2026-11-28-h200x2-s25/s25x1.sh" > $H
i=0
for b in $ORDER; do
  i=$((i + 1))
  echo "== run $i: 2x1 -W 4 -b $b up to 1024 MiB, start $(date -u '+%F %T UTC')" >> $H
  (OUT=$R/b$b-$i MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 BENCH_ARGS="-W 4 -b $b" timeout 280 bash scripts/gpu/run_multi.sh 1024) > $R/b$b-$i.log 2>&1; echo "   rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for d in $R/b*/; do echo "== $d"; grep -m1 "^qwZ: int8" $d/bench-2x1.log; sed -n '/^goals/,/^speedup over/p' $d/bench-2x1.log | head -30; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
