#!/usr/bin/env bash
# run_multi.sh — jobs across two zppd daemons on one GPU machine (issue 11;
# the device tool's nvidia-h200-x2): two simulated nodes, told apart by
# NCCL_HOSTID, so that NCCL moves the data between them over its network
# transport. For each layout: start two cuda zppds (node 0 = the leader,
# peer service on 127.0.0.1:7399; node 1 on :7400), run zpp-cuda-test across
# them (compared with one host zppd hosting the same N x G shape as virtual
# nodes, and with exact values), then zpp-bench (zppd against in-process
# NCCL with the same NCCL_HOSTID split), then stop the daemons.
#   2x1: each daemon owns one GPU (CUDA_VISIBLE_DEVICES=0 / =1), 2 ranks;
#   2x2: each daemon owns both GPUs; ranks 0,1 = node 0 on GPUs 0,1, ranks
#        2,3 = node 1 on GPUs 0,1 (each GPU carries one rank of each node).
#   2x2x4: four GPUs (nvidia-h200-x4): node 0 owns GPUs 0,1, node 1 GPUs 2,3.
# Binaries and their libraries come prebuilt in .carry/cu
# (scripts/gpu/stage.sh BUILD_DIR); NCCL and the CUDA driver come from the
# machine. At most 6 files land in $OUT (or ./out): summary.txt,
# test-2x1.log, bench-2x1.log, test-2x2.log, bench-2x2.log, zppd.log (the
# tail of every daemon's log). Both layouts at MAX_MIB=1024: ~4-5 minutes;
# every step has a time limit, the sum stays under 10 minutes.
#   scripts/gpu/run_multi.sh [MAX_MIB]
# Environment:
#   LAYOUTS="2x1 2x2"   which layouts, in order
#   TEST_MIB            sizes of the correctness test (default min(MAX_MIB, 256))
#   MPS=1               run everything under an MPS control daemon
#                       (CUDA_MPS_PIPE_DIRECTORY=/tmp/zpp-mps,
#                        CUDA_MPS_LOG_DIRECTORY=/tmp/zpp-mps-log)
#   PEER_TIMEOUT_MS     the daemons' peer_timeout_ms (default 30000: the
#                       loop thread waits inside NCCL while communicators
#                       connect, and misses heartbeats meanwhile)
#   BENCH_ARGS          extra zpp-bench arguments (e.g. "-i 5")
#   ZPPD_OPTS           extra arguments of every cuda zppd of the run
#                       (e.g. "-o default_stages=1": qgZ's pipeline stages)
#   NCCL_*              passed through to daemons, test and bench alike
set -u
. "$(dirname "$0")/procs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_RAS_ENABLE=0
max=${1:-1024}
test_mib=${TEST_MIB:-$(( max < 256 ? max : 256 ))}
layouts=${LAYOUTS:-2x1 2x2}
pto=${PEER_TIMEOUT_MS:-30000}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$C/bin
T=$(mktemp -d /tmp/zpp-multi.XXXXXX)
S=$OUT/summary.txt
L=$OUT/zppd.log
: > "$L"
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$S"; }

{
  date -u; uname -r; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nvidia-smi topo -m
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
  echo "run_multi.sh MAX_MIB=$max TEST_MIB=$test_mib LAYOUTS='$layouts' MPS=${MPS:-0}" \
       "PEER_TIMEOUT_MS=$pto BENCH_ARGS='${BENCH_ARGS:-}'"
  echo "NCCL environment (daemons, test and bench; the daemons and bench ranks of node n add NCCL_HOSTID=zpp-node<n>):"
  env | grep '^NCCL_' | sort | sed 's/^/  /'
} > "$S" 2>&1
for b in zppd zpp-cuda-test zpp-bench zppctl; do
  [ -x "$B/$b" ] || { log "missing $B/$b: run scripts/gpu/stage.sh BUILD_DIR first"; exit 1; }
done

PIDS=()     # daemons of the current layout: "name:pid"
mps_on=0
if [ "${MPS:-0}" = 1 ]; then
  . "$(dirname "$0")/mps.sh"
  if mps_start; then mps_on=1; log "MPS control daemon started"
  else log "MPS: nvidia-cuda-mps-control -d failed; going on without MPS"; fi
fi

# start NAME SOCKET [ENV=VALUE ...] -- zppd args...
start() {
  local name=$1 sock=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local lg="$T/zppd-$name.log"
  # shellcheck disable=SC2086  # ZPPD_OPTS is a list of words
  env "${envs[@]}" "$B/zppd" -s "$sock" -l info "$@" ${ZPPD_OPTS:-} > "$lg" 2>&1 &
  local p=$!
  PIDS+=("$name:$p")
  for _ in $(seq 100); do
    [ -S "$sock" ] && return 0
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  log "zppd $name did not start"; tail -20 "$lg" | tee -a "$S"; return 1
}

# stop NAME:PID...: SIGTERM, SIGKILL after 10 s; the log tails go to zppd.log
stop() {
  local e name p pids=()
  for e in "$@"; do pids+=("${e#*:}"); done
  stop_pids "${pids[@]}" > /dev/null
  for e in "$@"; do
    name=${e%%:*}; p=${e#*:}
    if kill -0 "$p" 2>/dev/null; then
      log "zppd $name did not stop in 10 s: SIGKILL"; kill -9 "$p" 2>/dev/null
    fi
    wait "$p" 2>/dev/null; local st=$?
    echo "zppd $name exit status $st" >> "$S"
    {
      echo "=================== zppd-$name.log: warnings and errors (first 40) ==================="
      grep -E 'level=(warn|error)' "$T/zppd-$name.log" | head -40
      echo "=================== zppd-$name.log: last 60 lines ==================="
      tail -60 "$T/zppd-$name.log"
    } >> "$L"
  done
}

cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop "${PIDS[@]}"
  PIDS=()
  [ -n "${HOSTD:-}" ] && stop "$HOSTD"
  HOSTD=
  if [ $mps_on = 1 ]; then mps_stop; mps_on=0; log "MPS quit"; fi
}
trap cleanup EXIT

# One host zppd for the comparisons: it hosts all ranks of a job as
# virtual nodes (node_count from Hello); no peer service needed.
HOSTD=
if start host "$T/host.sock" -- -b host -o host_threads=8 -o peer_listen= \
     -o store_budget=16G -o store_budget_per_tenant=16G; then
  HOSTD=${PIDS[-1]}; PIDS=()
fi

rc=0
common=(-b cuda -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64
        -o peer_timeout_ms="$pto")
for lay in $layouts; do
  case $lay in
    2x1) G=1; cvd0=0; cvd1=1 ;;
    2x2) G=2; cvd0=0,1; cvd1=0,1 ;;
    2x2x4) G=2; cvd0=0,1; cvd1=2,3 ;; # four GPUs: one rank per GPU (issue 14)
    *) log "unknown layout $lay"; rc=1; continue ;;
  esac
  log "layout $lay: node 0 CUDA_VISIBLE_DEVICES=$cvd0 NCCL_HOSTID=zpp-node0 peer :7399 (leader)," \
      "node 1 CUDA_VISIBLE_DEVICES=$cvd1 NCCL_HOSTID=zpp-node1 peer :7400"
  rm -f "$T"/z-*.sock
  ok=1
  start "$lay-node0" "$T/z-0.sock" CUDA_VISIBLE_DEVICES="$cvd0" NCCL_HOSTID=zpp-node0 -- \
    "${common[@]}" -o peer_listen=127.0.0.1:7399 || ok=0
  [ $ok = 1 ] && { start "$lay-node1" "$T/z-1.sock" CUDA_VISIBLE_DEVICES="$cvd1" \
    NCCL_HOSTID=zpp-node1 -- "${common[@]}" -o peer_listen=127.0.0.1:7400 || ok=0; }
  if [ $ok = 0 ]; then rc=1; stop "${PIDS[@]}"; PIDS=(); continue; fi
  sock="$T/z-{node}.sock"

  hostarg=()
  [ -n "$HOSTD" ] && hostarg=(-H "$T/host.sock")
  log "test $lay up to $test_mib MiB${HOSTD:+ (compared with the host backend)}"
  timeout 100 "$B/zpp-cuda-test" -s "$sock" -A 127.0.0.1:7399 -n 2 -G "$G" "${hostarg[@]}" \
    -m "$test_mib" > "$OUT/test-$lay.log" 2>&1; r=$?
  log "test $lay exit $r"; [ $r = 0 ] || rc=1
  grep -c '^PASS' "$OUT/test-$lay.log" | sed 's/^/PASS lines: /' | tee -a "$S"
  grep -E '^FAIL' "$OUT/test-$lay.log" | head -20 | tee -a "$S"
  tail -2 "$OUT/test-$lay.log" | tee -a "$S"

  log "bench $lay up to $max MiB"
  # shellcheck disable=SC2086
  timeout 140 "$B/zpp-bench" -s "$sock" -A 127.0.0.1:7399 -n 2 -G "$G" -m "$max" \
    ${BENCH_ARGS:-} > "$OUT/bench-$lay.log" 2>&1; r=$?
  log "bench $lay exit $r"; [ $r = 0 ] || rc=1
  sed -n '/^goals/,$p' "$OUT/bench-$lay.log" | tee -a "$S"
  [ $r = 0 ] || tail -5 "$OUT/bench-$lay.log" | tee -a "$S"

  for n in 0 1; do
    echo "--- zppctl status, $lay node $n" >> "$S"
    timeout 5 "$B/zppctl" -s "$T/z-$n.sock" status >> "$S" 2>&1 || true
  done
  stop "${PIDS[@]}"; PIDS=()
done
cleanup
trap - EXIT
log "done, exit $rc"
exit $rc
