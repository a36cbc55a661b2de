#!/bin/bash
# session 24, call 1 (nvidia-h200-x4): gathers by peer access now read their members round from each
# reader's own index (be_gather_member, commit 6133bd0) instead of every GPU reading member 0, then 1, ...
#  1. run_cuda.sh test 256, W=4, ZPPD_PEER_GATHER_MAX=0 (every large gather by peer access): 1 node x 4 GPUs
#     and 2 virtual nodes x 2 against the host backend, byte for byte;
#  2. zpp-bench on 1 node x 4 GPUs under MPS, up to 1 GiB, alternated: ZPPD_PEER_GATHER_MAX=0 (the rotated
#     peer reads) and the default 2 (gathers of more than 2 members through NCCL), twice each, then
#     ZPPD_PEER=copy with the limit off once.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/x4-2026-11-28-s24/s24x1.sh" > $H
nvidia-smi topo -m >> $H 2>&1
echo "run_cuda test start $(date -u '+%F %T UTC')" >> $H
(export ZPPD_PEER_GATHER_MAX=0; OUT=$R/t W=4 MPS=1 timeout 230 bash scripts/gpu/run_cuda.sh test 256) > $R/t.log 2>&1; echo "run_cuda test rc=$?" >> $H
for v in 0 2 0 2 copy; do
  echo "variant $v start $(date -u '+%F %T UTC')" >> $H
  if [ $v = copy ]; then
    (export ZPPD_PEER=copy ZPPD_PEER_GATHER_MAX=0; OUT=$R/b-copy-$(date +%s) W=4 MPS=1 timeout 60 bash scripts/gpu/run_cuda.sh bench 1024) > /dev/null 2>&1
  else
    (export ZPPD_PEER_GATHER_MAX=$v; OUT=$R/b-max$v-$(date +%s) W=4 MPS=1 timeout 60 bash scripts/gpu/run_cuda.sh bench 1024) > /dev/null 2>&1
  fi
  echo "rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
grep -v '^GPU\|^\s' $H
grep -E "^== .*exit|^PASS lines|^FAIL|^PASS (rejoin|admission|kill|concurrent)" $R/t/summary.txt | head -30
for d in $R/b-*/; do echo "== $d"; grep -E '^daemon overhead|^(268435456|536870912|1073741824) +(nccl_allgather|zppd_qwz_int8|zppd_allgather_bf16|zppd_hpz|zppd_reduce_scatter|inproc_qwz)' $d/bench-1x2-mps.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
