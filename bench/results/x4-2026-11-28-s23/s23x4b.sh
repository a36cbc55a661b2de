#!/bin/bash
# session 23, call 5 (nvidia-h200-x4): call 4 found zppd's one-node gathers on 4 GPUs at 0.55x NCCL's
# all-gather (qwZ 0.90x) where 2 GPUs gave 1.06-1.55x: the peer-access path (each GPU loading its 3 peers'
# shards over NVLink) does not scale to 4 members. zpp-bench on 1 node x 4 GPUs under MPS, up to 1 GiB,
# with each ZPPD_PEER setting, alternated: off (NCCL inside the daemon), copy, load (the default).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/x4-2026-11-28-s23/s23x4b.sh" > $H
for p in off load copy off load; do
  echo "ZPPD_PEER=$p start $(date -u '+%F %T UTC')" >> $H
  (export ZPPD_PEER=$p; OUT=$R/$p-$(date +%s) W=4 MPS=1 timeout 60 bash scripts/gpu/run_cuda.sh bench 1024) > /dev/null 2>&1; echo "rc=$?" >> $H
done
cat $H
for d in $R/*-*/; do echo "== $d"; grep -E '^daemon overhead|^(268435456|536870912|1073741824) +(zppd_qwz_int8|zppd_allgather_bf16|zppd_reduce_scatter|inproc_qwz)' $d/bench-1x2-mps.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
