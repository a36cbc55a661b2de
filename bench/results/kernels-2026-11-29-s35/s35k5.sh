#!/bin/bash
# session 35, call 5 (nvidia-h200, one GPU): zpp.torch after the Python audit (08a27cc: tied
# parameters, arguments checked before joining, a failed construction closing its connection,
# an idempotent close) on a GPU. Tree in .carry/tree, CMake build staged into .carry/cu.
# 1. the Python package's pytest suite with the machine's torch (host backend daemons);
# 2. examples/train_gpt.py, one rank on the GPU against a cuda zppd: zppd-zeropp and zppd-plain,
#    4 layers, 1K tokens, 60 steps each (a smoke test of the CUDA path, not a benchmark).
R=$OUT/r; mkdir -p $R
export NCCL_NVLS_ENABLE=0
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s35/s35k5.sh"
C=$PWD/.carry/cu; B=$C/bin
export LD_LIBRARY_PATH=$C/lib ZPP_LIB=$C/lib/libzpp.so.0 ZPPD_BIN=$B/zppd PYTHONPATH=$PWD/client/python
{
  echo "$DEV"
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  if python3 -c "import pytest, numpy" 2>/dev/null; then
    timeout 240 python3 -m pytest -q -p no:cacheprovider client/python/tests 2>&1 | tail -15
    echo "pytest exit ${PIPESTATUS[0]}"
  else
    echo "pytest or numpy missing: suite not run"
  fi
} > $R/pytest.txt 2>&1
cat $R/pytest.txt
T=$(mktemp -d)
$B/zppd -s $T/cuda.sock -b cuda -l info -o peer_listen= -o store_budget=16G -o store_budget_per_tenant=16G > $T/zppd.log 2>&1 &
zc=$!
for _ in $(seq 100); do [ -S $T/cuda.sock ] && break; sleep 0.1; done
{
  echo "$DEV"
  for mode in zppd-zeropp zppd-plain; do
    echo "== $mode"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 timeout 150 python3 examples/train_gpt.py \
      --mode $mode --socket $T/cuda.sock --layers 4 --tokens-per-rank 1024 --steps 60 \
      --warmup 5 --eval-every 0 --out $T/$mode > $T/$mode.log 2>&1
    echo "exit $?"; tail -4 $T/$mode.log
    tail -3 $T/$mode/rank0.csv 2>/dev/null
  done
} > $R/train.txt 2>&1
kill $zc; wait $zc; echo "zppd exit $?" >> $R/train.txt
{ echo "$DEV"; cat $T/zppd.log; } > $R/zppd.log
for m in zppd-zeropp zppd-plain; do { echo "$DEV"; cat $T/$m.log; } > $R/$m.log; done
cat $R/train.txt
