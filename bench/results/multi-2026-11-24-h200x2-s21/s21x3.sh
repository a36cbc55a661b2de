#!/bin/bash
# session 21, call 3 (nvidia-h200, GPU1=0: both simulated nodes on one GPU): where the daemon's 2x1 qwZ loses
# 3-5 % against the in-process qwZ (call 2). 2x1 only, bench only (-m 512: goal sizes 256 and 512 MiB, qwZ's
# 31 goal pairs each), under MPS, once per daemon setting, the default first and last:
#   base | ZPP_QWZ_EARLY=0 | ZPPD_GATE_SPIN_US=0 | ZPP_NCCL_BLOCKING=1 | base
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-24-h200x2-s21/s21x3.sh" > $H
i=0
for cfg in base ZPP_QWZ_EARLY=0 ZPPD_GATE_SPIN_US=0 ZPP_NCCL_BLOCKING=1 base; do
  i=$((i+1))
  echo "== $i $cfg start $(date -u '+%F %T UTC')" >> $H
  envs=(); [ "$cfg" != base ] && envs=("$cfg")
  (env "${envs[@]}" OUT=$R/a$i MPS=1 FAILURE=0 TEST_MIB=0 LAYOUTS=2x1 GPU1=0 timeout 110 bash scripts/gpu/run_multi.sh 512) > $R/a$i.log 2>&1
  echo "   rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
i=0
for cfg in base ZPP_QWZ_EARLY=0 ZPPD_GATE_SPIN_US=0 ZPP_NCCL_BLOCKING=1 base; do
  i=$((i+1)); echo "== $i $cfg"
  grep -E "^(268435456|536870912) +(nccl_allgather|wire_allgather|inproc_qwz|zppd_qwz|zppd_allgather)" $R/a$i/bench-2x1.log
  sed -n '/^qwZ.s goal pairs/,/^$/p' $R/a$i/bench-2x1.log | tail -3
done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
