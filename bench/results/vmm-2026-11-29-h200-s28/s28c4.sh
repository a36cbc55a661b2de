#!/bin/bash
# session 28, call 4 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90 carried
# as .carry/cu): registrations of more than 16 VMM chunks (the cap is 256 since this session).
#  1. bench/publish_stall.py at 1 GiB and 4 GiB with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#     (VMM memory: 52 and 205 of PyTorch's 20 MiB chunks) against a cuda zppd with legacy IPC off;
#  2. examples/train_gpt.py with units of 8 blocks of d 2048 (403M parameters, an 806 MB bf16 unit:
#     41 chunks), zppd-plain and zppd-zeropp, 2 simulated nodes x 1 rank on this GPU, expandable
#     segments (run_train.sh's default), 30 steps each.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/vmm-2026-11-29-h200-s28/s28c4.sh"
echo "$DEV" > $H
stall() { # NAME MIB
  local n=$1 mib=$2 T; T=$(mktemp -d)
  echo "== $n: $mib MiB, expandable segments, allow_legacy_ipc=false; start $(date -u '+%F %T UTC')" >> $H
  $C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -o store_budget=0 > $R/$n-zppd.log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do [ -S $T/z.sock ] && break; sleep 0.1; done
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 bench/publish_stall.py $T/z.sock $mib > $R/$n.log 2>&1; echo "   rc=$?" >> $H
  kill -TERM $pid; for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  sed -i "1i $DEV" $R/$n-zppd.log
  grep -E "descriptors|RegisterBuffer refused" $R/$n-zppd.log | head -3 >> $H
  rm -rf $T
}
stall vmm-1g 1024
stall vmm-4g 4096
echo "== train start $(date -u '+%F %T UTC')" >> $H
NPROC=2 BUDGET=260 OUT=$R/train STARTUP_S=60 EST_MS_zppd_plain=400 EST_MS_zppd_zeropp=300 \
  TRAIN_ARGS="--d-model 2048 --layers 8 --heads 16" timeout 280 scripts/gpu/run_train.sh \
  zppd-plain:1024:30:k8 zppd-zeropp:1024:30:k8 > $R/train.out 2>&1; echo "   train rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in vmm-1g vmm-4g; do echo "== $n"; grep -vE "^\s*$" $R/$n.log | tail -8; done
echo "== train"; grep -E "^== |^\| zppd|steps [0-9]+/" $R/train/summary.md | tail -16
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
