#!/bin/bash
# session 28, call 1 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): the GPU paths of session 27 that had not run on a GPU.
#  1. bench/publish_stall.py at 1 GiB and 4 GiB: a shared-replica publish whose gathered bytes
#     cu_to_host copies back through poll_wait (its final form; call 4 of session 27 ran the first);
#  2. zpp.torch's share_frozen in training (examples/train_gpt.py --freeze-blocks 6 --share-frozen,
#     2 simulated nodes x 1 rank, both ranks and both cuda zppds on this GPU, no MPS):
#     the deterministic zppd-plain run with it equals the one without, bit for bit
#     (run_train.sh pairs them), and zppd-zeropp with and without it;
#  3. zpp-cuda-test across two cuda zppds (2x1 with both simulated nodes on GPU 0) up to 256 MiB,
#     byte for byte against the host backend (the bench after it is cut at once: BENCH_TIMEOUT=1).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/verify-2026-11-29-h200-s28/s28c1.sh"
echo "$DEV" > $H
python3 -c "import torch; print('torch', torch.__version__)" >> $H 2>&1
stall() { # NAME MIB
  local n=$1 mib=$2 T; T=$(mktemp -d)
  echo "== $n: $mib MiB; start $(date -u '+%F %T UTC')" >> $H
  $C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -o store_budget=0 -o allow_legacy_ipc=true > $R/$n-zppd.log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do [ -S $T/z.sock ] && break; sleep 0.1; done
  timeout 150 python3 bench/publish_stall.py $T/z.sock $mib > $R/$n.log 2>&1; echo "   rc=$?" >> $H
  kill -TERM $pid; for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  sed -i "1i $DEV" $R/$n-zppd.log
  rm -rf $T
}
stall publish-1g 1024
stall publish-4g 4096
echo "== train start $(date -u '+%F %T UTC')" >> $H
NPROC=2 BUDGET=300 OUT=$R/train timeout 320 scripts/gpu/run_train.sh \
  zppd-plain:1024:60:fz6:det zppd-plain:1024:60:fz6:share:det zppd-zeropp:1024:100:fz6 zppd-zeropp:1024:100:fz6:share \
  > $R/train.out 2>&1; echo "   train rc=$?" >> $H
echo "== multi start $(date -u '+%F %T UTC')" >> $H
GPU1=0 LAYOUTS=2x1 FAILURE=0 TEST_MIB=256 BENCH_TIMEOUT=1 OUT=$R/multi timeout 200 scripts/gpu/run_multi.sh 256 \
  > $R/multi.out 2>&1; echo "   multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for n in publish-1g publish-4g; do echo "== $n"; grep -vE "^\s*$" $R/$n.log | tail -8; done
echo "== train"; grep -E "^== |^same|steps [0-9]+/" $R/train/summary.md | tail -20
echo "== multi"; grep -E "PASS lines|FAIL|exit" $R/multi/summary.txt | head -20
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
