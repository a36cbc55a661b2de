#!/bin/bash
# session 34, call 7 (nvidia-h200-x2): call 6's old run again (its BUDGET=70 left 37 s when the run came up, and it was skipped): training at 1K tokens per rank with the fenced kernels' fix against the
# zppd before it: scripts/gpu/run_train.sh (GPT of 100.4M parameters, 2 simulated nodes x 2 ranks on two H200s,
# MPS), zppd-zeropp with this tree's zppd and FSDP2, then zppd-zeropp with b821eaf's zppd (.carry/old/zppd,
# ZPPD=; the same libzpp and zpp.torch), 100 steps each.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu; b821eaf's zppd as .carry/old/zppd); command: bash bench/results/multi-2026-11-29-h200x2-s34/s34x7.sh" > $H
python3 -c "import torch; print('torch', torch.__version__)" >> $H 2>&1
echo "== new + fsdp2 start $(date -u '+%F %T UTC')" >> $H
echo "== old start $(date -u '+%F %T UTC')" >> $H
(ZPPD=$PWD/.carry/old/zppd BUDGET=110 MPS=1 OUT=$R/old EST_MS_zppd_zeropp=52 timeout 120 bash scripts/gpu/run_train.sh zppd-zeropp:1024:100) > $R/old.out 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for d in old; do echo "== $d"; grep -E "^\|" $R/$d/summary.md | head -8; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
