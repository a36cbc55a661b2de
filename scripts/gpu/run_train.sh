#!/usr/bin/env bash
# run_train.sh — issue 12's training proof on the device tool's
# nvidia-h200-x2: examples/train_gpt.py (about 100M parameters, bf16) in the
# 2 x 2-on-2-GPUs layout: two simulated nodes (two cuda zppds, NCCL_HOSTID
# split), 4 ranks, each physical GPU carrying one rank of each node
# (rank r: node r/2, GPU r%2).
#
# UNTESTED: written on a machine without a GPU (2026-11-22); the Python side
# ran on CPU with the host backend (every mode, examples/README.md).
#
#   scripts/gpu/run_train.sh TOKENS_PER_RANK STEPS MODE...
#   e.g. scripts/gpu/run_train.sh 1024 300 zppd-zeropp fsdp2 hsdp
# Modes: zppd-plain zppd-zeropp zppd-qwz zppd-hpz zppd-qgz torch-sharded
# fsdp2 hsdp. One device call holds at most 10 minutes: split the 16 runs
# (8 modes x 1K/4K tokens) over calls. Every run checkpoints into
# build-train/ckpt/<mode>-<tpr> (ignored by git: /build*/; kept on the warm
# machine between calls, never carried) and resumes from there, and stops
# cleanly after $RUN_SECONDS (default 240) per run: call the script again
# with the same arguments on the same warm machine to go on.
#
# Needs (staged by scripts/gpu/stage.sh build-cu into .carry/cu, and carried):
#   .carry/cu/bin/zppd, .carry/cu/lib/* (NCCL/CUDA driver come from the
#   machine), and a CUDA build of libzpp at .carry/cu/lib/libzpp.so.0
#   (cp build-cu/client/libzpp.so.0 .carry/cu/lib/). python3 there has torch.
# Output: $OUT/summary.txt (one line per run) and $OUT/train-<tpr>-<first
# mode>.tar.gz (every rank's CSV/JSON and the daemons' logs): 2 files a call.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_RAS_ENABLE=0 PYTHONUNBUFFERED=1
# VMM memory for the daemon's registrations (the recommended path,
# docs/cuda.md); allow_legacy_ipc below covers the other allocator too.
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
tpr=${1:?usage: run_train.sh TOKENS_PER_RANK STEPS MODE...}
steps=${2:?usage: run_train.sh TOKENS_PER_RANK STEPS MODE...}
shift 2
[ $# -gt 0 ] || { echo "name at least one mode" >&2; exit 2; }
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
C=$ROOT/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ZPP_LIB=${ZPP_LIB:-$(ls "$C"/lib/libzpp.so.0 "$C"/lib/libzpp.so 2>/dev/null | head -1)}
export PYTHONPATH=$ROOT/client/python${PYTHONPATH:+:$PYTHONPATH}
RUNS=$ROOT/build-train
T=$(mktemp -d /tmp/zt-XXXX)   # short: sun_path is 108 bytes
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$OUT/summary.txt"; }

{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())'
  echo "ZPP_LIB=$ZPP_LIB"
} >> "$OUT/summary.txt" 2>&1

# Two cuda daemons = two simulated nodes. NCCL_HOSTID makes NCCL treat them
# as different hosts (so a GPU may carry one rank of each); peer ports fixed
# so the clients can name node 0's as the leader.
start() { # node port
  local n=$1 port=$2 sock=$T/zppd-$1.sock
  NCCL_HOSTID=zpp-node$n "$C/bin/zppd" -s "$sock" -b cuda -l info -o peer_listen=127.0.0.1:$port \
    -o allow_legacy_ipc=true -o store_budget=24G -o store_budget_per_tenant=48G \
    -o max_pending_per_session=64 > "$T/zppd-$n.log" 2>&1 &
  echo $! > "$T/zppd-$n.pid"
  for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.1; done
  log "zppd node $n did not start"; tail -20 "$T/zppd-$n.log" | tee -a "$OUT/summary.txt"; return 1
}
stop() { local p; p=$(cat "$T/zppd-$1.pid" 2>/dev/null) && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; }

need_zppd=0
for m in "$@"; do case $m in zppd-*) need_zppd=1 ;; esac; done
if [ $need_zppd = 1 ]; then
  python3 -c 'import zpp.cuda as z; assert z.available(), "libzpp is not a CUDA build"' \
    >> "$OUT/summary.txt" 2>&1 || { log "no CUDA libzpp: stage it (see the header)"; exit 1; }
  start 0 7399 && start 1 7400 || exit 1
fi

rc=0
for m in "$@"; do
  tag=$m-$tpr
  out=$RUNS/$tag
  mkdir -p "$out" "$RUNS/ckpt/$tag"
  log "run $tag: $steps steps"
  # NCCL_HOSTID for the torch.distributed modes is set per rank by the
  # script (zpp-node<node>); the job id carries the run so a resumed run
  # joins a fresh job.
  timeout $(( ${RUN_SECONDS:-240} + 150 )) torchrun --standalone --nproc-per-node 4 \
    examples/train_gpt.py --mode "$m" --nodes 2 \
    --socket "$T/zppd-{node}.sock" --leader 127.0.0.1:7399 --job-id "gpt-$tag-$$" \
    --tokens-per-rank "$tpr" --steps "$steps" --out "$out" \
    --ckpt-dir "$RUNS/ckpt/$tag" --ckpt-every 100 --resume --max-seconds "${RUN_SECONDS:-240}" \
    > "$out/stdout.log" 2>&1
  r=$?
  log "run $tag exit $r"; [ $r = 0 ] || { rc=1; tail -30 "$out/stdout.log" | tee -a "$OUT/summary.txt"; }
  python3 - "$out" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys, glob
js = [json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/rank*.json"))]
if js:
    j0 = js[0]
    print(f"{j0['mode']:14s} tpr {j0['tokens_per_rank']} steps {j0['steps_done']} "
          f"loss {sum(j['final_loss'] for j in js)/len(js):.4f} eval {j0['final_eval_loss']:.4f} "
          f"median_ms {[round(j['median_step_ms'] or 0, 1) for j in js]} "
          f"peak_alloc_mib {[round(j['peak_mem_allocated_mib'] or 0) for j in js]} "
          f"hpz_plain {j0.get('hpz_plain')} stats {j0.get('zpp_stats')}")
EOF
done
if [ $need_zppd = 1 ]; then
  stop 0; stop 1
  cp "$T"/zppd-*.log "$RUNS/" 2>/dev/null
fi
tar czf "$OUT/train-$tpr-$1.tar.gz" -C "$RUNS" --exclude ckpt . 2>/dev/null
exit $rc
