#!/bin/bash
# session 24, call 2 (nvidia-h200-x4), tree with ZPPD_PEER_GATHER_MAX's default 0 (commit c95b3b9):
#  1. zpp-bench on 1 node x 4 GPUs under MPS, up to 1 GiB, the defaults (no switch set);
#  2. issue 12's training proof with one GPU per rank: two simulated nodes (two cuda zppds, NCCL_HOSTID
#     split), 4 ranks, node 0 on GPUs 0-1 and node 1 on GPUs 2-3 (train_gpt.py --gpu-map rank), under MPS:
#     zppd-zeropp, fsdp2 and hsdp at 1K tokens per rank (300 steps) and 4K (100 steps).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/x4-2026-11-28-s24/s24x2.sh" > $H
echo "bench start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/b W=4 MPS=1 timeout 60 bash scripts/gpu/run_cuda.sh bench 1024) > /dev/null 2>&1; echo "rc=$?" >> $H
echo "train start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/train BUDGET=470 MPS=1 TRAIN_ARGS="--gpu-map rank" EST_MS_fsdp2=100 EST_MS_hsdp=95 EST_MS_zppd_zeropp=50 \
  bash scripts/gpu/run_train.sh zppd-zeropp:1024:300 fsdp2:1024:300 hsdp:1024:300 zppd-zeropp:4096:100 fsdp2:4096:100 hsdp:4096:100) > $R/train.log 2>&1
echo "train rc=$? end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E '^daemon overhead|^(268435456|536870912|1073741824) +(nccl_allgather|zppd_qwz_int8|zppd_allgather_bf16|zppd_hpz|zppd_reduce_scatter|inproc_qwz)' $R/b/bench-1x2-mps.log
sed -n '/^## Table/,$p' $R/train/summary.md | head -60
tail -5 $R/train.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
