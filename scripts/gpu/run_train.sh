#!/usr/bin/env bash
# run_train.sh — issue 12's training proof in ONE device call on the device
# tool's nvidia-h200-x2: examples/train_gpt.py (GPT, 100.4M parameters,
# bf16) in the 2 x 2-on-2-GPUs layout: two simulated nodes (two cuda zppds,
# NCCL_HOSTID=zpp-node0 / zpp-node1, peer ports 7399 (leader) / 7400),
# 4 ranks, rank r on node r/2 and GPU r%2 (each GPU carries one rank of
# each node). Nothing persists between device calls, so every run starts
# from scratch and must end inside this call; no checkpoints.
#
#   scripts/gpu/run_train.sh [MODE:TOKENS:STEPS[:TAG]...]...
#
# TAGs (each also ends the run's name, -TAG): det (--deterministic), and
# zpp.torch's knobs of train_gpt.py: k<N> (--blocks-per-unit N), slots<N>
# (--slots N), small<N> (--small-slots N), gs<N> (--grad-slots N), pf<N>
# (--prefetch N), nsp (--no-step-prefetch: step() does not start the next
# forward's first gathers), fz<N> (--freeze-blocks N: a frozen base) and
# share (--share-frozen: its units read from the node's shared replica;
# N a multiple of the units' blocks); e.g. zppd-zeropp:1024:100:k3:gs3. Without a tag a run
# gets train_gpt.py's defaults. $FAST_PLAN below is the plan for one call
# of about 6 minutes (the knob sweep, the baselines, the det pair).
#
# The plan runs in the order given (default: $DEFAULT_PLAN below: (b) (e)
# (f) (a) (d) at 1K tokens per rank, 300 steps, then the ablations, 4K, and
# the deterministic zppd-plain / zppd-hpz pair).
# Before each run the script estimates its time (startup + steps x step
# time: measured in this call where it can, else the defaults below) and
# skips it, saying so, when it does not fit in what is left of $BUDGET.
# A run that turns out slower stops cleanly (train_gpt.py --deadline, all
# ranks at the same step, its JSON written) by its own hard limit (1.6x its
# estimate, at least 30 s more, never past the budget); one that makes no
# progress is killed ($STALL_S s without a step, $FIRST_ROW_S s to the
# first), and after two zppd runs that failed before their first step the
# other zppd runs are skipped. ":det" runs with --deterministic
# (tag suffix -det); a det pair of zppd-plain and zppd-hpz of equal TOKENS,
# STEPS and tags is compared bit for bit (scripts/plot_train.py --same).
# Modes: zppd-plain zppd-zeropp zppd-qwz zppd-hpz zppd-qgz torch-sharded
# fsdp2 hsdp. The cuda zppds are started fresh for each zppd run (clean
# memory figures, a failure does not carry over) and stopped after it.
#
# Environment:
#   BUDGET=540        seconds for the whole call, from the script's start
#   NPROC=4           ranks (torchrun --nproc-per-node), split over the two
#                     nodes; NPROC=2 is 2 nodes x 1 rank, which one GPU can
#                     hold (nvidia-h200: both ranks and daemons on GPU 0)
#   MPS=1             run daemons and torchrun under a private MPS control
#                     daemon (CUDA_MPS_PIPE_DIRECTORY=/tmp/zpp-mps,
#                     CUDA_MPS_LOG_DIRECTORY=/tmp/zpp-mps-log), quit at the end
#   TRAIN_ARGS        extra train_gpt.py arguments for every run ("--gpu-map
#                     rank" on nvidia-h200-x4: one GPU per rank, node 0 on
#                     GPUs 0-1 and node 1 on GPUs 2-3)
#   PROFILE=1         train_gpt.py --profile for every run (per step: forward,
#                     backward, optimizer, time waited for zppd; PROFILE=0: off)
#   EST_MS_<mode>     step-time guess (ms at 1K tokens; mode with _ for -),
#                     e.g. EST_MS_zppd_zeropp=200; defaults below
#   STARTUP_S=40      startup guess (torchrun, torch import, data, model,
#                     NCCL/daemon job setup), replaced by what this call measures
#   PEER_TIMEOUT_MS=30000  the daemons' peer_timeout_ms
#   PYTHON=python3    the Python with torch
#   ZPPD, ZPPCTL      the daemon and zppctl (default .carry/cu/bin/...)
#   CPU_TEST=1        a dry run of this script's own logic on a machine
#                     without a GPU: one host-backend zppd ($ZPPD) serves
#                     both node sockets, no nvidia-smi; TRAIN_ARGS must say
#                     "--device cpu" (and a tiny model), ZPP_LIB name a host
#                     libzpp (examples/README.md has the command)
# Needs (scripts/gpu/stage.sh BUILD_DIR, carried as .carry/cu): bin/zppd,
# bin/zppctl, lib/* and lib/libzpp.so.0 of a CUDA build (ZPP_LIB points at
# it; zpp.cuda must find the zpp_cuda.h calls in it); python3 with torch.
# Output ($OUT, or ./out): summary.md (the plan, what ran, was cut or
# skipped, the step-time / memory table, loss checks, NCCL's view of the
# nodes) and train-results.tar.gz (every run's rank CSV/JSON, stdout,
# nvidia-smi samples, both daemons' logs and status; MPS logs); curves.png
# too where matplotlib is installed (scripts/plot_train.py draws it later
# from the tarball otherwise).
set -u
. "$(dirname "$0")/procs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_RAS_ENABLE=0 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
# VMM memory for the daemon's registrations (the recommended path,
# docs/cuda.md); allow_legacy_ipc below covers the other allocator too
# (PYTORCH_CUDA_ALLOC_CONF= , empty, selects it). The same allocator
# setting for every mode, baselines included.
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF-expandable_segments:True}
unset NCCL_HOSTID  # set per daemon here, per rank by train_gpt.py
PY=${PYTHON:-python3}
T_START=$(date +%s)
BUDGET=${BUDGET:-540}
NPROC=${NPROC:-4}
DEADLINE=$(( T_START + BUDGET ))
RESERVE=25  # seconds kept for the summary, the tarball and stopping MPS
DEFAULT_PLAN="zppd-zeropp:1024:300 fsdp2:1024:300 hsdp:1024:300 zppd-plain:1024:300
  torch-sharded:1024:300 zppd-qgz:1024:300 zppd-qwz:1024:300 zppd-hpz:1024:300
  zppd-zeropp:4096:100 fsdp2:4096:100 hsdp:4096:100 zppd-plain:1024:100:det zppd-hpz:1024:100:det"
# One call of about 6 minutes (~390 s measured for this much on 2026-11-22's
# timings): the new knobs at 100 steps, the baselines, the det pair.
FAST_PLAN="zppd-zeropp:1024:100:k2 fsdp2:1024:100 hsdp:1024:100 zppd-zeropp:1024:100:k3
  zppd-zeropp:1024:100:k4 zppd-plain:1024:100:det zppd-hpz:1024:100:det zppd-zeropp:1024:100:k1
  zppd-zeropp:1024:100:k3:slots3:gs3:pf2"
if [ "${1:-}" = fast ]; then PLAN=$(echo $FAST_PLAN)
elif [ $# -gt 0 ]; then PLAN="$*"; else PLAN=$(echo $DEFAULT_PLAN); fi
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
C=$ROOT/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "${ZPP_LIB:-}" ]; then  # the first that is there (a carry may drop the symlinks)
  for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { ZPP_LIB=$C/lib/$f; break; }; done
fi
export ZPP_LIB=${ZPP_LIB:-$C/lib/libzpp.so.0}
ZPPD=${ZPPD:-$C/bin/zppd}
ZPPCTL=${ZPPCTL:-$C/bin/zppctl}
CPU_TEST=${CPU_TEST:-0}
BACKEND=cuda; LEADER=(--leader 127.0.0.1:7399)
[ "$CPU_TEST" = 1 ] && { BACKEND=host; LEADER=(); }  # one host daemon holds both nodes
smi() { [ "$CPU_TEST" = 1 ] || nvidia-smi "$@"; }
export PYTHONPATH=$ROOT/client/python${PYTHONPATH:+:$PYTHONPATH}
T=$(mktemp -d /tmp/zt-XXXX)   # short: sun_path is 108 bytes
RUNS=$T/runs
mkdir -p "$RUNS"
S=$OUT/summary.md
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$S"; }
now() { date +%s; }

{
  echo "# run_train.sh, $(date -u +%FT%TZ)"
  echo "command: $0 $*; git $(git rev-parse --short HEAD 2>/dev/null || echo '(no .git)')"
  echo '```'
  smi --query-gpu=index,name,memory.total,driver_version --format=csv
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
             "gpus", torch.cuda.device_count())
if torch.cuda.is_available(): print("nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  echo "ZPP_LIB=$ZPP_LIB BUDGET=$BUDGET NPROC=$NPROC MPS=${MPS:-0} PROFILE=${PROFILE:-1} TRAIN_ARGS='${TRAIN_ARGS:-}'"
  echo "PYTORCH_CUDA_ALLOC_CONF=$PYTORCH_CUDA_ALLOC_CONF OMP_NUM_THREADS=$OMP_NUM_THREADS"
  echo "plan: $PLAN"
  env | grep -E '^(NCCL|CUDA|ZPPD?)_' | sort
  echo '```'
} > "$S" 2>&1
# the console names the machine too (it is kept beside the summary)
DEVICE_LINE="device: $(smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | paste -sd';' | sed 's/^ *//'), $(date -u +%FT%TZ)"
[ "$CPU_TEST" = 1 ] && DEVICE_LINE="device: none (CPU_TEST dry run on $(hostname)), $(date -u +%FT%TZ)"
log "$DEVICE_LINE"

# ---- checks before anything starts --------------------------------------
# Without the daemon or a CUDA libzpp the zppd runs are skipped (and
# torch-sharded, which imports zpp, without a loadable libzpp); the
# baselines still run.
NO_ZPPD=   # why zppd-* runs cannot run, if they cannot
NO_ZPP=    # why torch-sharded cannot
[ -x "$ZPPD" ] || NO_ZPPD="missing $ZPPD (scripts/gpu/stage.sh BUILD_DIR, carry .carry/cu)"
want=True; [ "$CPU_TEST" = 1 ] && want=any  # the host daemon serves either build
if ! "$PY" -c 'import zpp' >> "$S" 2>&1; then
  NO_ZPP="libzpp does not load from ZPP_LIB=$ZPP_LIB"; NO_ZPPD=$NO_ZPP
elif ! "$PY" -c 'import sys, zpp, zpp.cuda as z; print("libzpp", zpp.library_path, "cuda calls:", z.available())
assert sys.argv[1] in ("any", str(z.available())), "libzpp is not a CUDA build"' $want >> "$S" 2>&1; then
  NO_ZPPD="ZPP_LIB=$ZPP_LIB is not a CUDA build of libzpp (cp BUILD/client/libzpp.so.0 .carry/cu/lib/)"
fi
[ -n "$NO_ZPPD" ] && log "zppd runs will be skipped: $NO_ZPPD"

# ---- MPS ------------------------------------------------------------------
mps_on=0
if [ "${MPS:-0}" = 1 ]; then
  . "$(dirname "$0")/mps.sh"
  if mps_start; then mps_on=1; log "MPS control daemon started"
  else log "MPS: nvidia-cuda-mps-control -d failed"; fi
  # a CUDA client on every GPU must come up under it, else no MPS at all
  if [ $mps_on = 1 ] && ! timeout 60 "$PY" -c 'import torch
for d in range(torch.cuda.device_count()): torch.zeros(1, device=f"cuda:{d}").add_(1).item()' >> "$S" 2>&1
  then
    log "MPS: a CUDA client failed under it: MPS quit"
    mps_stop; mps_on=0
  fi
  if [ $mps_on = 1 ]; then echo "MPS servers: $(echo get_server_list | nvidia-cuda-mps-control | paste -sd' ')" >> "$S"
  else log "going on without MPS"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; fi
fi

# GPU memory in use with nothing of ours running: subtracted from the
# per-run peaks (gpumem.csv: MiB per GPU, both ranks on it and both daemons)
IDLE=$(smi --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ' | paste -sd,)
echo "idle memory.used per GPU (MiB): $IDLE" >> "$S"

# ---- daemons ----------------------------------------------------------------
DPIDS=()
start_daemons() { # DIR: two cuda zppds, logs into DIR
  local d=$1 n port sock
  DPIDS=()
  rm -f "$T"/z-*.sock
  for n in 0 1; do
    port=$(( 7399 + n )); sock=$T/z-$n.sock
    if [ "$CPU_TEST" = 1 ] && [ $n = 1 ]; then ln -s "$T/z-0.sock" "$sock"; break; fi
    NCCL_HOSTID=zpp-node$n NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,ENV} \
      "$ZPPD" -s "$sock" -b "$BACKEND" -l info -o peer_listen=127.0.0.1:$port \
      -o peer_timeout_ms="${PEER_TIMEOUT_MS:-30000}" -o allow_legacy_ipc=true \
      -o store_budget=24G -o store_budget_per_tenant=48G -o max_pending_per_session=64 \
      -o call_timeout_ms="${CALL_TIMEOUT_MS:-60000}" \
      > "$d/zppd-$n.log" 2>&1 &
    DPIDS+=($!)
    local ok=0
    for _ in $(seq 150); do
      [ -S "$sock" ] && { ok=1; break; }
      kill -0 "${DPIDS[-1]}" 2>/dev/null || break
      sleep 0.1
    done
    [ $ok = 1 ] || { log "zppd node $n did not start"; tail -20 "$d/zppd-$n.log" | tee -a "$S"; return 1; }
  done
}
stop_daemons() { # DIR: status into DIR, SIGTERM, SIGKILL after 10 s
  local d=$1 n p
  [ ${#DPIDS[@]} -gt 0 ] || return 0
  if [ -x "$ZPPCTL" ]; then
    for n in 0 1; do timeout 5 "$ZPPCTL" -s "$T/z-$n.sock" status > "$d/zppctl-$n.txt" 2>&1; done
  fi
  stop_pids "${DPIDS[@]}" > /dev/null
  for p in "${DPIDS[@]}"; do
    kill -0 "$p" 2>/dev/null && { log "zppd $p did not stop in 10 s: SIGKILL"; kill -9 "$p"; }
    wait "$p" 2>/dev/null
  done
  DPIDS=()
}

SMI=
TP=
cleanup() {
  [ -n "$SMI" ] && kill "$SMI" 2>/dev/null
  SMI=
  [ -n "$TP" ] && killrun KILL
  TP=
  [ ${#DPIDS[@]} -gt 0 ] && stop_daemons "$T"
  if [ $mps_on = 1 ]; then mps_stop; mps_on=0; log "MPS quit"; fi
  if [ "${MPS:-0}" = 1 ] && [ ! -d "$RUNS/mps-log" ]; then
    mkdir -p "$RUNS/mps-log"
    for f in /tmp/zpp-mps-log/*.log; do  # each kept log names its device first
      [ -f "$f" ] && { echo "# $DEVICE_LINE; MPS log of this call"; cat "$f"; } > "$RUNS/mps-log/${f##*/}"
    done
  fi
}
trap cleanup EXIT

# watch_run TAG CSV END: returns when the run $TP ends; kills its process
# group when it makes no progress or runs past END.
STALL_S=${STALL_S:-45}
FIRST_ROW_S=${FIRST_ROW_S:-100}
killrun() { # SIGNAL: the run's process group (setsid made it), else the run alone
  local pg
  pg=$(ps -o pgid= -p "$TP" 2>/dev/null | tr -d ' ')
  if [ "$pg" = "$TP" ]; then kill "-$1" -- "-$TP" 2>/dev/null; else kill "-$1" "$TP" 2>/dev/null; fi
}
watch_run() {
  local tag=$1 csv=$2 end=$3 n last_n=-1 last_t limit=$FIRST_ROW_S why=
  last_t=$(now)
  while kill -0 "$TP" 2>/dev/null; do
    sleep 2
    n=0; [ -f "$csv" ] && n=$(grep -c '^[0-9]' "$csv")  # step rows only
    if [ "$n" != "$last_n" ]; then
      [ "$n" -gt 0 ] && limit=$STALL_S
      last_n=$n; last_t=$(now)
    fi
    if [ $(( $(now) - last_t )) -gt "$limit" ]; then why="no new step in ${limit} s"
    elif [ "$(now)" -gt "$end" ]; then why="past its hard limit"; fi
    if [ -n "$why" ]; then
      log "run $tag: $why: killing it"
      killrun TERM
      for _ in 1 2 3 4 5; do kill -0 "$TP" 2>/dev/null || break; sleep 1; done
      killrun KILL
      return
    fi
  done
}

# ---- estimates ------------------------------------------------------------------
declare -A MEAS   # mode:tpr -> measured ms per step (train_gpt.py's median)
STARTUP=${STARTUP_S:-40}
est_ms() { # MODE TPR -> ms per step
  local m=$1 tpr=$2 v k best=0
  v=${MEAS[$m:$tpr]:-}
  [ -n "$v" ] && { echo "$v"; return; }
  v=${MEAS[$m:1024]:-}  # measured at 1K: 4x the tokens cost less than 4x (fsdp2: less at all)
  [ -n "$v" ] && [ "$tpr" -gt 1024 ] && { echo $(( v * tpr / 2048 > v ? v * tpr / 2048 : v )); return; }
  if [ "${m#zppd-}" != "$m" ]; then  # another zppd mode measured at this size: 1.3x it
    for k in "${!MEAS[@]}"; do
      [ "${k#zppd-}" != "$k" ] && [ "${k##*:}" = "$tpr" ] && [ "${MEAS[$k]}" -gt $best ] && best=${MEAS[$k]}
    done
    [ $best -gt 0 ] && { echo $(( best * 13 / 10 )); return; }
  fi
  # Defaults: about 1.5x the medians of bench/results/train-2026-11-22-
  # h200x2-b/ (zeropp 47, qgz 59, qwz 74, plain/hpz 86-88, torch-sharded 75,
  # fsdp2 92, hsdp 86 ms); too high a guess skips a run that would fit.
  local var=EST_MS_${m//-/_}
  case $m in
    fsdp2) v=${!var:-140} ;;
    hsdp) v=${!var:-130} ;;
    torch-sharded) v=${!var:-115} ;;
    zppd-zeropp) v=${!var:-75} ;;
    zppd-qgz) v=${!var:-90} ;;
    *) v=${!var:-130} ;;
  esac
  [ "$tpr" -gt 1024 ] && v=$(( v * tpr / 2048 ))
  echo "$v"
}

smi_peak() { # SAMPLES ("index, MiB" lines) -> peak MiB per GPU above idle, "a,b"
  "$PY" - "$1" "$IDLE" <<'EOF'
import sys
idle = [float(x) for x in sys.argv[2].split(",") if x]
peak = list(idle)
for line in open(sys.argv[1]):
    try:
        gpu, mib = (float(x) for x in line.split(","))
    except ValueError:
        continue  # the header, a partial last line
    if 0 <= int(gpu) < len(peak):
        peak[int(gpu)] = max(peak[int(gpu)], mib)
print(",".join(f"{p - i:.0f}" for p, i in zip(peak, idle)))
EOF
}

# ---- the runs -------------------------------------------------------------------------
rc=0
DONE=()
SKIPPED=()
ZFAIL=0  # zppd runs that failed before their first step: after 2, no more zppd runs
for item in $PLAN; do
  IFS=: read -r m tpr steps tags <<< "$item"
  case $m in
    zppd-plain|zppd-zeropp|zppd-qwz|zppd-hpz|zppd-qgz|torch-sharded|fsdp2|hsdp) ;;
    *) log "unknown mode in '$item': skipped"; SKIPPED+=("$item (unknown mode)"); continue ;;
  esac
  tpr=${tpr:-1024}; steps=${steps:-300}
  tag=$m-$tpr-s$steps
  extra=()
  [ "${PROFILE:-1}" = 1 ] && extra+=(--profile)
  bad=
  for t in ${tags//:/ }; do
    case $t in
      det) extra+=(--deterministic) ;;
      k[0-9]*) extra+=(--blocks-per-unit "${t#k}") ;;
      slots[0-9]*) extra+=(--slots "${t#slots}") ;;
      small[0-9]*) extra+=(--small-slots "${t#small}") ;;
      gs[0-9]*) extra+=(--grad-slots "${t#gs}") ;;
      pf[0-9]*) extra+=(--prefetch "${t#pf}") ;;
      nsp) extra+=(--no-step-prefetch) ;;
      fz[0-9]*) extra+=(--freeze-blocks "${t#fz}") ;;
      share) extra+=(--share-frozen) ;;
      *) bad=$t; break ;;
    esac
    tag=$tag-$t
  done
  if [ -n "$bad" ]; then log "unknown tag '$bad' in '$item': skipped"; SKIPPED+=("$item (unknown tag)"); continue; fi
  if [ "${m#zppd-}" != "$m" ] && [ -n "$NO_ZPPD" ]; then
    log "skip $tag: $NO_ZPPD"; SKIPPED+=("$tag (no zppd)"); rc=1; continue
  fi
  if [ "$m" = torch-sharded ] && [ -n "$NO_ZPP" ]; then
    log "skip $tag: $NO_ZPP"; SKIPPED+=("$tag (no libzpp)"); rc=1; continue
  fi
  if [ "${m#zppd-}" != "$m" ] && [ $ZFAIL -ge 2 ]; then
    log "skip $tag: two zppd runs failed before their first step"; SKIPPED+=("$tag (zppd runs fail)"); continue
  fi
  ms=$(est_ms "$m" "$tpr")
  need=$(( STARTUP + steps * ms * 11 / 10 / 1000 ))
  left=$(( DEADLINE - RESERVE - $(now) ))
  if [ $need -gt $left ]; then
    log "skip $tag: needs ~${need} s (startup ${STARTUP} s + $steps x ${ms} ms), ${left} s left"
    SKIPPED+=("$tag (~${need} s needed, ${left} s left)")
    continue
  fi
  cap=$(( need * 16 / 10 > need + 30 ? need * 16 / 10 : need + 30 )); [ $cap -gt $left ] && cap=$left
  t0=$(now)
  run_end=$(( t0 + cap ))
  out=$RUNS/$tag
  mkdir -p "$out"
  if [ "${m#zppd-}" != "$m" ]; then
    start_daemons "$out" || { rc=1; stop_daemons "$out"; SKIPPED+=("$tag (daemons did not start)"); continue; }
  fi
  log "run $tag: $steps steps, estimate ${need} s (${ms} ms/step), hard limit ${cap} s"
  # one line per GPU and sample: "index, memory.used"
  echo "# $DEVICE_LINE; run $tag; nvidia-smi --query-gpu=index,memory.used -lms 500" > "$out/smi.csv"
  smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 >> "$out/smi.csv" 2>/dev/null &
  SMI=$!
  # The training loop stops itself 10 s before run_end (all ranks at one
  # step, JSON written). The watch below is the guard against a hang: no
  # new row in rank0.csv for $STALL_S s (the first within $FIRST_ROW_S s),
  # or past run_end + 15 s, and the run's process group is killed.
  # shellcheck disable=SC2086
  NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,ENV} \
  setsid "$PY" -m torch.distributed.run --standalone --nproc-per-node "$NPROC" \
    examples/train_gpt.py --mode "$m" --nodes 2 \
    --socket "$T/z-{node}.sock" ${LEADER[@]+"${LEADER[@]}"} --job-id "gpt-$tag-$$" \
    --tokens-per-rank "$tpr" --steps "$steps" --out "$out" --deadline $(( run_end - 10 )) \
    ${extra[@]+"${extra[@]}"} ${TRAIN_ARGS:-} > "$out/stdout.log" 2>&1 &
  TP=$!
  watch_run "$tag" "$out/rank0.csv" $(( run_end + 15 ))
  wait "$TP"; r=$?; TP=
  kill "$SMI" 2>/dev/null; wait "$SMI" 2>/dev/null; SMI=
  { echo "# $DEVICE_LINE; run $tag; peak memory.used per GPU above idle ($IDLE MiB), MiB, from smi.csv"
    smi_peak "$out/smi.csv"; } > "$out/gpumem.csv"
  [ "${m#zppd-}" != "$m" ] && stop_daemons "$out"
  wall=$(( $(now) - t0 ))
  log "run $tag exit $r, ${wall} s"
  if [ $r != 0 ]; then
    rc=1
    # the first Python traceback of any rank, then the end of the output
    grep -v -E 'NCCL INFO' "$out/stdout.log" | grep -m1 -A40 'Traceback (most recent call last)' \
      | tee -a "$S"
    echo "..." | tee -a "$S"
    grep -v -E 'NCCL INFO|^ |^\[[0-9]\]:|^-----|^=====' "$out/stdout.log" | tail -8 | tee -a "$S"
    for f in "$out"/zppd-*.log; do
      [ -f "$f" ] && { echo "--- $f: warnings/errors"; grep -E 'level=(warn|error)' "$f" | head -10; } | tee -a "$S"
    done
  fi
  # measured step time and startup feed the next estimates
  read -r med train_s <<< "$("$PY" - "$out" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1] + "/rank0.json"))
    print(int(j["median_step_ms"] or 0), int(j["train_s"] or 0))
except Exception:
    print(0, 0)
EOF
)"
  if [ "${med:-0}" -gt 0 ]; then
    MEAS[$m:$tpr]=$(( med * 11 / 10 ))  # evaluations included
    su=$(( wall - train_s )); [ $su -gt 5 ] && STARTUP=$(( su + 5 ))
    DONE+=("$tag")
  else
    SKIPPED+=("$tag (failed: exit $r, no summary)")
    nrows=0; [ -f "$out/rank0.csv" ] && nrows=$(grep -c '^[0-9]' "$out/rank0.csv")  # step rows only
    [ "${m#zppd-}" != "$m" ] && [ "$nrows" -eq 0 ] && ZFAIL=$(( ZFAIL + 1 ))
  fi
done

# ---- summary ----------------------------------------------------------------------------
{
  echo
  echo "## Runs"
  echo "done: ${DONE[*]:-none}"
  echo "skipped or failed: ${SKIPPED[*]:-none}"
  echo
  echo "## Table"
  echo
  echo "scripts/plot_train.py. Losses: mean over the $NPROC ranks (each its own batch); eval: the held-out"
  echo "batches, equal on every rank. Peak alloc: torch's max_memory_allocated per rank (max over"
  echo "ranks; not the daemons' memory). GPU column: nvidia-smi peak memory.used per GPU above idle"
  case " ${TRAIN_ARGS:-} " in
    *" --gpu-map rank "*) echo "(MiB; each GPU carries the rank of its index, and in zppd modes its node's daemon's share)." ;;
    *) echo "(MiB; each GPU carries 2 ranks, and in zppd modes both daemons' share)." ;;
  esac
  echo
} >> "$S"
pairs=()
for a in "${DONE[@]}"; do
  case $a in zppd-hpz-*-det|zppd-hpz-*-det-*) b=zppd-plain-${a#zppd-hpz-}; [ -d "$RUNS/$b" ] && pairs+=(--same "$a" "$b") ;; esac
  # a det run reading its frozen units from the shared replica, against the
  # same run gathering them
  case $a in *-share-*det*|*-det*-share*) b=${a/-share/}; [ -d "$RUNS/$b" ] && pairs+=(--same "$a" "$b") ;; esac
done
"$PY" scripts/plot_train.py "$RUNS" ${pairs[@]+"${pairs[@]}"} --png "$OUT/curves.png" >> "$S" 2>&1 || rc=1
{
  echo
  echo "## Per run (rank 0): steps done, cut, setup s, train s, hpZ plain-gather support, zpp.torch counters"
  echo '```'
  for a in "${DONE[@]}"; do
    "$PY" - "$RUNS/$a" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1] + "/rank0.json"))
print(f"{sys.argv[1].rsplit('/', 1)[1]:28s} steps {j['steps_done']}/{j['steps']} cut {j['stopped_early']} "
      f"setup {j['setup_s']} train {j['train_s']} eval {j['final_eval_loss']:.4f} "
      f"hpz_plain {j.get('hpz_plain')} {j.get('zpp_stats') or ''} {j.get('zpp_config') or ''}")
EOF
  done
  echo '```'
  echo
  echo "## NCCL's view of the nodes (NCCL_DEBUG=INFO, INIT/ENV), per run: hosts set and communicator shapes"
  echo '```'
  for a in "${DONE[@]}"; do
    echo "$a:"
    cat "$RUNS/$a"/stdout.log "$RUNS/$a"/zppd-*.log 2>/dev/null \
      | grep -o -E 'NCCL_HOSTID set by environment to [^ ]+|nRanks [0-9]+ nNodes [0-9]+ localRanks [0-9]+' \
      | sort | uniq -c | sed 's/^/  /'
  done
  echo '```'
} >> "$S" 2>&1

cleanup
trap - EXIT
# the archive names its machine too, as every result does: its first member
# is DEVICE.txt (beside runs/), and runs/DEVICE.txt says the same inside
echo "# $DEVICE_LINE; plan: $PLAN" > "$RUNS/DEVICE.txt"
cp "$RUNS/DEVICE.txt" "$T/DEVICE.txt"
pack() { tar czf "$OUT/train-results.tar.gz" --sort=name -C "$T" DEVICE.txt runs 2>/dev/null; }
pack
sz=$(stat -c %s "$OUT/train-results.tar.gz" 2>/dev/null || echo 0)
if [ "$sz" -gt $(( 15 * 1024 * 1024 )) ]; then  # the device tool brings back 16 MiB a file
  log "tarball ${sz} bytes: logs cut to their last 2 MiB"
  find "$RUNS" -name '*.log' -size +2M -exec sh -c 'tail -c 2M "$1" > "$1.t" && mv "$1.t" "$1"' _ {} \;
  pack
fi
log "done in $(( $(now) - T_START )) s, exit $rc"
exit $rc
