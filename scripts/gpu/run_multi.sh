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
# Then failures across the daemons (FAILURE=0 skips them, FAILURES picks):
# a fresh 2x1 pair with peer_timeout_ms=5000 runs zpp-cuda-test -D
# (all-gathers until a call fails); once its marker appears, node 1's zppd
# is SIGKILLed (zppd), or SIGSTOPped and later resumed (stop), or node 1's
# rank SIGKILLs itself with a call in flight (client): node 0's rank must
# fail with ZPP_EABORTED naming node 1 within the bound, node 1's rank must
# not hang; the daemons still up must then hold no job and no deferred
# release within 15 s, and a new job across both must run (zpp-cuda-test
# -m 1; after a SIGKILL on node 1's zppd started again). Their output is
# appended to test-2x1.log.
# Binaries and their libraries come prebuilt in .carry/cu
# (scripts/gpu/stage.sh BUILD_DIR); NCCL and the CUDA driver come from the
# machine. At most 6 files land in $OUT (or ./out): summary.txt,
# test-2x1.log, bench-2x1.log, test-2x2.log, bench-2x2.log, zppd.log (the
# tail of every daemon's log). The bench takes ~2 minutes a layout at
# MAX_MIB=1024 (since session 21 it adds qwZ's 31 goal pairs at each goal
# size, ~1 minute: BENCH_ARGS="-P 0" leaves them out), the correctness test
# under a minute, each failure step ~1 minute; every step has a time
# limit. A call of the device tool runs at most 10 minutes: a benchmark-only
# run of both layouts fits, a full one may not (LAYOUTS, FAILURE=0).
#   scripts/gpu/run_multi.sh [MAX_MIB]
# Environment:
#   LAYOUTS="2x1 2x2"   which layouts, in order
#   TEST_MIB            sizes of the correctness test (default min(MAX_MIB, 256));
#                       0 skips it (a benchmark-only run)
#   MPS=1               run everything under an MPS control daemon
#                       (CUDA_MPS_PIPE_DIRECTORY=/tmp/zpp-mps,
#                        CUDA_MPS_LOG_DIRECTORY=/tmp/zpp-mps-log)
#   PEER_TIMEOUT_MS     the daemons' peer_timeout_ms (default 30000: the
#                       loop thread waits inside NCCL while communicators
#                       connect, and misses heartbeats meanwhile)
#   BENCH_ARGS          extra zpp-bench arguments (e.g. "-i 5")
#   BENCH_TIMEOUT       seconds zpp-bench may run per layout (default 330)
#   ZPPD_OPTS           extra arguments of every cuda zppd of the run
#                       (e.g. "-o default_stages=1": qgZ's pipeline stages)
#   FAILURE=0           skip the failure steps
#   FAILURES="zppd stop client"  which failure steps, in order (above)
#   GPU1=0              node 1's GPU in the 2x1 layout and the failure
#                       steps (default 1): 0 puts both simulated nodes on one
#                       GPU, for a machine of one GPU (NCCL accepts two ranks
#                       on one GPU when their NCCL_HOSTID differ; the clients
#                       take device rank % visible GPUs, so GPU 0 then).
#                       Run the failure steps so with MPS=0: under MPS
#                       the two zppds share one GPU's fault domain, and the
#                       kill reaches node 0 as an illegal address
#                       (bench/results/multi-2026-11-23-h200-s19/)
#   NCCL_*              passed through to daemons, test and bench alike
set -u
. "$(dirname "$0")/procs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_RAS_ENABLE=0
max=${1:-1024}
test_mib=${TEST_MIB:-$(( max < 256 ? max : 256 ))}
layouts=${LAYOUTS:-2x1 2x2}
pto=${PEER_TIMEOUT_MS:-30000}
gpu1=${GPU1:-1}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$C/bin
T=$(mktemp -d /tmp/zpp-multi.XXXXXX)
S=$OUT/summary.txt
L=$OUT/zppd.log
# every log names the machine it ran on (the results under bench/results/ quote them)
DEVICE="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) x$(nvidia-smi -L 2>/dev/null | wc -l)"
echo "$DEVICE" > "$L"
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$S"; }

{
  date -u; uname -r; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nvidia-smi topo -m
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
  echo "run_multi.sh MAX_MIB=$max TEST_MIB=$test_mib LAYOUTS='$layouts' MPS=${MPS:-0} GPU1=$gpu1" \
       "PEER_TIMEOUT_MS=$pto BENCH_ARGS='${BENCH_ARGS:-}'"
  echo "NCCL environment (daemons, test and bench; the daemons and bench ranks of node n add NCCL_HOSTID=zpp-node<n>):"
  env | grep '^NCCL_' | sort | sed 's/^/  /'
  echo "zppd switches set (docs/configuration.md, docs/cuda.md \"Switches\"; none: the defaults):"
  env | grep -E '^ZPPD?_' | sort | sed 's/^/  /'
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

# tails NAME: zppd NAME's warnings and errors and its last lines, to zppd.log
tails() {
  {
    echo "=================== zppd-$1.log: warnings and errors (first 40) ==================="
    grep -E 'level=(warn|error)' "$T/zppd-$1.log" | head -40
    echo "=================== zppd-$1.log: last 60 lines ==================="
    tail -60 "$T/zppd-$1.log"
  } >> "$L"
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
    tails "$name"
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
base=(-b cuda -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64)
common=("${base[@]}" -o peer_timeout_ms="$pto")
for lay in $layouts; do
  case $lay in
    2x1) G=1; cvd0=0; cvd1=$gpu1 ;;
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
  if [ "$test_mib" -gt 0 ]; then
  log "test $lay up to $test_mib MiB${HOSTD:+ (compared with the host backend)}"
  echo "$DEVICE" > "$OUT/test-$lay.log"
  timeout 100 "$B/zpp-cuda-test" -s "$sock" -A 127.0.0.1:7399 -n 2 -G "$G" "${hostarg[@]}" \
    -m "$test_mib" >> "$OUT/test-$lay.log" 2>&1; r=$?
  log "test $lay exit $r"; [ $r = 0 ] || rc=1
  grep -c '^PASS' "$OUT/test-$lay.log" | sed 's/^/PASS lines: /' | tee -a "$S"
  grep -E '^FAIL' "$OUT/test-$lay.log" | head -20 | tee -a "$S"
  tail -2 "$OUT/test-$lay.log" | tee -a "$S"
  fi

  log "bench $lay up to $max MiB"
  # shellcheck disable=SC2086
  timeout "${BENCH_TIMEOUT:-330}" "$B/zpp-bench" -s "$sock" -A 127.0.0.1:7399 -n 2 -G "$G" -m "$max" \
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

# clean NAME SOCK: the daemon holds no job and no deferred release within
# 15 s (0), or says what it holds (1)
clean() {
  local name=$1 sk=$2 js j d t
  for t in $(seq 0 30); do
    js=$(timeout 5 "$B/zppctl" -s "$sk" status --json 2>&1)
    j=$(printf '%s\n' "$js" | grep -o '"jobs": *[0-9]*' | head -1 | grep -o '[0-9]*$')
    d=$(printf '%s\n' "$js" | grep -o '"deferred_releases": *[0-9]*' |
        awk -F: '{ s += $2 } END { print s + 0 }')
    [ "${j:-x}" = 0 ] && [ "$d" = 0 ] && break
    sleep 0.5
  done
  if [ "${j:-x}" = 0 ] && [ "$d" = 0 ]; then
    log "failure: PASS $name holds no job and no deferred release after $(( t / 2 )).$(( t % 2 * 5 )) s"
    return 0
  fi
  log "failure: FAIL $name still has jobs ${j:-?} and deferred releases $d after 15 s"
  printf '%s\n' "$js" | tee -a "$S"
  return 1
}

# Failures across the daemons (FAILURE=0 skips them; FAILURES lists which,
# default "zppd stop client"), each on the 2x1 layout with a fresh pair of
# daemons with peer_timeout_ms=5000 (heartbeats every 1000 ms, the
# default). zpp-cuda-test -D runs all-gathers; once rank 0 has made 20
# calls it creates the marker, and then, by HOW (zpp-cuda-test -E):
#   zppd    node 1's zppd is SIGKILLed;
#   stop    node 1's zppd is SIGSTOPped (its sockets stay open: heartbeats
#           time out instead of failing) and resumed (SIGCONT) once the
#           peer timeout and 3 s have passed;
#   client  node 1's rank SIGKILLs itself with its next call in flight.
# Node 0's rank must fail with ZPP_EABORTED naming node 1 within the bound.
# Then the daemons still up must hold no job and no deferred release within
# 15 s, and a new job across both must run (zpp-cuda-test -m 1): after
# `zppd`, with node 1's zppd started again with the same arguments; after
# `stop` and `client`, on the same two daemons. The output goes to
# test-2x1.log. Returns 0 when every check passed; the daemons are stopped.
failure_step() {
  local how=$1 fpto=5000 mark="$T/death.marker" flog="$OUT/test-2x1.log" sock="$T/z-{node}.sock"
  [ -s "$flog" ] || echo "$DEVICE" > "$flog" # (no 2x1 layout ran before it)
  # The bound on node 0's rank, from its last successful call: the
  # heartbeats' peer_timeout_ms (NCCL usually sees the dead peer sooner,
  # and the device error then names node 1 within two heartbeat periods),
  # then 5 s of slack. An abort caused by another node aborts the
  # communicators at once (BE_CLOSE_ABORT_NOW), so NCCL's kernels, and rank
  # 0's stream behind them, stop waiting for node 1 then.
  local bound=$(( fpto + 5000 ))
  local a0=(CUDA_VISIBLE_DEVICES=0 NCCL_HOSTID=zpp-node0 -- "${base[@]}"
            -o peer_timeout_ms="$fpto" -o peer_listen=127.0.0.1:7399)
  local a1=(CUDA_VISIBLE_DEVICES=$gpu1 NCCL_HOSTID=zpp-node1 -- "${base[@]}"
            -o peer_timeout_ms="$fpto" -o peer_listen=127.0.0.1:7400)
  local hostarg=() keep=() e n1 p1 tp r st bad=0 what
  case $how in
    zppd) what="node 1's zppd to be SIGKILLed" ;;
    stop) what="node 1's zppd to be SIGSTOPped, then resumed" ;;
    client) what="node 1's rank to SIGKILL itself with a call in flight" ;;
    *) log "failure: unknown kind $how"; return 1 ;;
  esac
  [ -n "$HOSTD" ] && hostarg=(-H "$T/host.sock")
  log "failure ($how): fresh 2x1 daemons, peer_timeout_ms=$fpto; $what during all-gathers"
  rm -f "$T"/z-*.sock "$mark"
  start "failure-$how-node0" "$T/z-0.sock" "${a0[@]}" || return 1
  start "failure-$how-node1" "$T/z-1.sock" "${a1[@]}" || return 1
  n1=${PIDS[-1]}; p1=${n1#*:}

  echo "=================== failure ($how): $what (zpp-cuda-test -D -E $how," \
       "bound $bound ms) ===================" >> "$flog"
  log "failure ($how): zpp-cuda-test -D (bound $bound ms) started; waiting for its marker (60 s at most)"
  timeout -k 10 100 "$B/zpp-cuda-test" -s "$sock" -A 127.0.0.1:7399 -n 2 -G 1 -D "$mark" \
    -T "$bound" -E "$how" >> "$flog" 2>&1 &
  tp=$!
  for _ in $(seq 600); do
    [ -e "$mark" ] && break
    kill -0 "$tp" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -e "$mark" ]; then
    log "failure ($how): no marker (the test ended or took over 60 s): nothing done to node 1"
    kill "$tp" 2>/dev/null; wait "$tp"
    tail -5 "$flog" | tee -a "$S"
    return 1
  fi
  case $how in
    zppd)
      kill -9 "$p1"
      wait "$p1" 2>/dev/null; st=$?
      log "failure: marker seen; zppd failure-zppd-node1 (pid $p1) SIGKILLed, exit status $st"
      echo "zppd failure-zppd-node1 exit status $st (SIGKILLed)" >> "$S"
      tails failure-zppd-node1
      for e in "${PIDS[@]}"; do [ "$e" = "$n1" ] || keep+=("$e"); done
      PIDS=("${keep[@]}") ;;
    stop)
      kill -STOP "$p1"
      log "failure: marker seen; zppd failure-stop-node1 (pid $p1) SIGSTOPped"
      sleep $(( fpto / 1000 + 3 ))
      kill -CONT "$p1"
      log "failure: zppd failure-stop-node1 resumed (SIGCONT)" ;;
    client)
      log "failure: marker seen; node 1's rank is to SIGKILL itself" ;;
  esac
  wait "$tp"; r=$?
  log "failure ($how): zpp-cuda-test -D exit $r"; [ $r = 0 ] || bad=1
  grep -E '^(PASS|FAIL) death|SIGKILLs itself' "$flog" | tail -4 | tee -a "$S"
  grep -E '^info: death: .*stalled' "$flog" | tail -2 | tee -a "$S"

  # The aborted job leaves a daemon once its ranks have gone and its
  # communicators once the reaper has aborted them (deferred releases).
  clean "node 0" "$T/z-0.sock" || bad=1
  if [ "$how" = zppd ]; then
    rm -f "$T/z-1.sock"
    start failure-zppd-node1-again "$T/z-1.sock" "${a1[@]}" || return 1
    log "failure: node 1's zppd started again (same arguments); a new job across both, up to 1 MiB"
  else
    kill -0 "$p1" 2>/dev/null || { log "failure ($how): FAIL node 1's zppd is gone"; bad=1; }
    clean "node 1" "$T/z-1.sock" || bad=1
    log "failure ($how): a new job across the same two daemons, up to 1 MiB"
  fi
  echo "=================== failure ($how): a new job after it (zpp-cuda-test -m 1)" \
       "===================" >> "$flog"
  local from; from=$(( $(wc -l < "$flog") + 1 ))  # this step's lines only
  timeout 100 "$B/zpp-cuda-test" -s "$sock" -A 127.0.0.1:7399 -n 2 -G 1 "${hostarg[@]}" -m 1 \
    >> "$flog" 2>&1; r=$?
  log "failure ($how): test after it exit $r"; [ $r = 0 ] || bad=1
  tail -n +"$from" "$flog" | grep -E '^FAIL' | tail -5 | tee -a "$S"
  tail -2 "$flog" | tee -a "$S"
  stop "${PIDS[@]}"; PIDS=()
  return $bad
}
if [ "${FAILURE:-1}" != 0 ]; then
  for how in ${FAILURES:-zppd stop client}; do
    failure_step "$how" || rc=1
    [ ${#PIDS[@]} -gt 0 ] && stop "${PIDS[@]}"
    PIDS=()
  done
fi
cleanup
trap - EXIT
log "done, exit $rc"
exit $rc
