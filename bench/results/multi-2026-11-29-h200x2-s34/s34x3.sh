#!/bin/bash
# session 34, call 3 (nvidia-h200-x2): why call 1's one-node calls of 64 KiB - 16 MiB are slower than session 14's
# (1 MiB all-gather 0.090 ms against 0.027, qwZ 0.163 against 0.028). run_cuda.sh bench 16 (1 node x 2 GPUs,
# MPS) with one switch at a time, in three rounds: default, ZPP_DONE_FLAGS=0 (the client's sessions on
# interprocess events, as in session 14), ZPPD_XSYNC=0 (no fenced kernels), ZPPD_LAUNCHERS=0 (no launcher threads).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-29-h200x2-s34/s34x3.sh" > $H
for i in 1 2 3; do
  for v in default ZPP_DONE_FLAGS=0 ZPPD_XSYNC=0 ZPPD_LAUNCHERS=0; do
    n=${v%%=*}-$i; e=(); [ $v = default ] || e=("$v")
    echo "== $n ($v) start $(date -u '+%F %T UTC')" >> $H
    (env "${e[@]}" OUT=$R/$n MPS=1 timeout 80 bash scripts/gpu/run_cuda.sh bench 16) > $R/$n.log 2>&1; echo "   rc=$?" >> $H
  done
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for d in $R/*/; do n=$(basename $d); echo "== $n"; grep -E "^daemon overhead" $d/bench-1x2-mps.log
  grep -E "^(65536|1048576|16777216) +(zppd_allgather_bf16|zppd_qwz_int8|zppd_reduce_scatter_bf16|nccl_allgather_bf16) " $d/bench-1x2-mps.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
