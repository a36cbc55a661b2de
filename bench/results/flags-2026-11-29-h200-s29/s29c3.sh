#!/bin/bash
# session 29, call 3 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): done flags where users run them.
#  1. under MPS (a private control daemon), one cuda zppd, world 1: zpp-bench's small calls with
#     done flags on and off (ZPP_DONE_FLAGS=0), each with the default small-call spin and with
#     ZPP_DONE_SPIN_US=0 (every stream waits), alternated twice;
#  2. MPS off, zpp.torch (examples/train_gpt.py, 2 simulated nodes x 1 rank on this GPU,
#     scripts/gpu/run_train.sh NPROC=2): the deterministic zppd-plain / zppd-hpz pair (compared
#     bit for bit), then zppd-zeropp with done flags and with ZPP_DONE_FLAGS=0 (step times);
#  3. bench/publish_stall.py at 1 GiB (a publish, a gather by key from a third job).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/flags-2026-11-29-h200-s29/s29c3.sh"
echo "$DEV" > $H
T=$(mktemp -d)
echo "== MPS bench start $(date -u '+%F %T UTC')" >> $H
. scripts/gpu/mps.sh
echo "$DEV" > $R/bench-mps.log
if mps_start; then
  $C/bin/zppd -s $T/c.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-mps.log 2>&1 &
  zp=$!
  for _ in $(seq 100); do [ -S $T/c.sock ] && break; sleep 0.1; done
  for round in 1 2; do
    for spin in 20 0; do
      for f in 1 0; do
        echo "#### round $round ZPP_DONE_FLAGS=$f ZPP_DONE_SPIN_US=$spin (MPS)" >> $R/bench-mps.log
        ZPP_DONE_FLAGS=$f ZPP_DONE_SPIN_US=$spin timeout 60 $C/bin/zpp-bench -s $T/c.sock -w 1 -n 1 -m 1 >> $R/bench-mps.log 2>&1
        echo "   round $round spin $spin flags $f rc=$?" >> $H
      done
    done
  done
  kill $zp; wait $zp 2>/dev/null
  sed -i "1i $DEV" $R/zppd-mps.log
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "== train start $(date -u '+%F %T UTC')" >> $H
NPROC=2 BUDGET=250 OUT=$R/train timeout 270 scripts/gpu/run_train.sh \
  zppd-plain:1024:60:det zppd-hpz:1024:60:det zppd-zeropp:1024:100 > $R/train.out 2>&1
echo "   train rc=$?" >> $H
NPROC=2 BUDGET=90 OUT=$R/train-noflags ZPP_DONE_FLAGS=0 timeout 100 scripts/gpu/run_train.sh \
  zppd-zeropp:1024:100 > $R/train-noflags.out 2>&1
echo "   train (ZPP_DONE_FLAGS=0) rc=$?" >> $H
echo "== publish start $(date -u '+%F %T UTC')" >> $H
$C/bin/zppd -s $T/p.sock -l info -o peer_listen=127.0.0.1:0 -o store_budget=0 -o allow_legacy_ipc=true > $R/zppd-publish.log 2>&1 &
pp=$!
for _ in $(seq 100); do [ -S $T/p.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/publish.log
timeout 120 python3 bench/publish_stall.py $T/p.sock 1024 >> $R/publish.log 2>&1; echo "   publish rc=$?" >> $H
kill $pp; wait $pp 2>/dev/null
sed -i "1i $DEV" $R/zppd-publish.log
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
echo "== bench"; grep -E "^####|^zppd_|daemon overhead" $R/bench-mps.log | head -60
echo "== train"; grep -E "^== |^same|steps [0-9]+/|ms/step|step_ms" $R/train/summary.md $R/train-noflags/summary.md 2>/dev/null | tail -30
echo "== publish"; grep -vE "^\s*$" $R/publish.log | tail -6
echo "== zppd warnings"; grep -hE "level=(warn|error)" $R/zppd-*.log | grep -v "not running under CUDA MPS" | head
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
