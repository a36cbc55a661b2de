#!/bin/bash
# session 29, call 6 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu; the previous tree's zppd and zpp-bench as .carry/prev, tree in
# .carry/prev/tree): what sessions on the client's flags alone cost or save.
#  1. under MPS, world 1: zpp-bench's small calls, the previous tree (events, plus done flags)
#     and this one (flags alone) alternated three times, then this one with ZPP_DONE_FLAGS=0
#     (events alone);
#  2. MPS off, zpp.torch (train_gpt.py, 2 simulated nodes x 1 rank on this GPU,
#     scripts/gpu/run_train.sh NPROC=2): the deterministic zppd-plain / zppd-hpz pair (compared
#     bit for bit), then zppd-zeropp with the flags and with ZPP_DONE_FLAGS=0, twice each;
#  3. bench/publish_stall.py at 1 GiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu P=$PWD/.carry/prev
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree), previous $(cat .carry/prev/tree) (CMake Release builds, sm_90, carried as .carry/cu and .carry/prev); command: bash bench/results/flags-2026-11-29-h200-s29/s29c6.sh"
echo "$DEV" > $H
T=$(mktemp -d)
. scripts/gpu/mps.sh
echo "$DEV" > $R/bench-mps.log
echo "== MPS bench start $(date -u '+%F %T UTC')" >> $H
if mps_start; then
  bench() { # NAME BINDIR [ENV...]
    local n=$1 b=$2; shift 2
    rm -f $T/c.sock
    $b/zppd -s $T/c.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-$n.log 2>&1 &
    local zp=$!
    for _ in $(seq 100); do [ -S $T/c.sock ] && break; sleep 0.1; done
    echo "#### $n $*" >> $R/bench-mps.log
    env "$@" timeout 60 $b/zpp-bench -s $T/c.sock -w 1 -n 1 -m 1 >> $R/bench-mps.log 2>&1
    echo "   $n rc=$?" >> $H
    kill $zp; wait $zp 2>/dev/null
    sed -i "1i $DEV" $R/zppd-$n.log
  }
  for round in 1 2 3; do
    bench prev-$round $P
    bench new-$round $C/bin
  done
  bench new-events $C/bin ZPP_DONE_FLAGS=0
  mps_stop 2>> $H
else
  echo "   cannot start MPS" >> $H
fi
echo "== train start $(date -u '+%F %T UTC')" >> $H
NPROC=2 BUDGET=200 OUT=$R/train timeout 220 scripts/gpu/run_train.sh \
  zppd-plain:1024:60:det zppd-hpz:1024:60:det zppd-zeropp:1024:100 > $R/train.out 2>&1
echo "   train rc=$?" >> $H
NPROC=2 BUDGET=90 OUT=$R/train-events ZPP_DONE_FLAGS=0 timeout 100 scripts/gpu/run_train.sh \
  zppd-zeropp:1024:100 > $R/train-events.out 2>&1
echo "   train (ZPP_DONE_FLAGS=0) rc=$?" >> $H
NPROC=2 BUDGET=90 OUT=$R/train-2 timeout 100 scripts/gpu/run_train.sh \
  zppd-zeropp:1024:100 > $R/train-2.out 2>&1
echo "   train (flags, again) rc=$?" >> $H
echo "== publish start $(date -u '+%F %T UTC')" >> $H
$C/bin/zppd -s $T/p.sock -l info -o peer_listen=127.0.0.1:0 -o store_budget=0 -o allow_legacy_ipc=true > $R/zppd-publish.log 2>&1 &
pp=$!
for _ in $(seq 100); do [ -S $T/p.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/publish.log
timeout 120 python3 bench/publish_stall.py $T/p.sock 1024 >> $R/publish.log 2>&1; echo "   publish rc=$?" >> $H
kill $pp; wait $pp 2>/dev/null
sed -i "1i $DEV" $R/zppd-publish.log
for f in $R/train.out $R/train-events.out $R/train-2.out $R/train/summary.md $R/train-events/summary.md $R/train-2/summary.md; do [ -f $f ] && sed -i "1i $DEV" $f; done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
echo "== bench"; grep -E "^####|^zppd_|daemon overhead" $R/bench-mps.log | head -60
echo "== train"; grep -hE "^same|steps [0-9]+/" $R/train/summary.md $R/train-events/summary.md $R/train-2/summary.md | cut -c1-120
python3 - "$R" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + '/train*/train-results.tar.gz')):
    import tarfile
    t = tarfile.open(f)
    for m in t.getmembers():
        if m.name.endswith('rank0.json'):
            j = json.load(t.extractfile(m))
            print(f.split('/')[-2], m.name.split('/')[-2], 'median_step_ms', round(j['median_step_ms'], 1), 'final_loss', j['final_loss'])
PY
echo "== publish"; grep -vE "^\s*$" $R/publish.log | tail -5
echo "== zppd warnings"; grep -hE "level=(warn|error)" $R/zppd-*.log | grep -v "not running under CUDA MPS" | head
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
