#!/usr/bin/env bash
# run_mps.sh — zppd beside other clients of one GPU's MPS server (any GPU
# machine; one GPU is enough). Under MPS a fatal fault of one client is
# delivered to every client of that GPU, zppd included, and the server then
# refuses new clients until all of them have exited (NVIDIA's MPS guide,
# "Error containment"). Two steps, each logged with PASS/FAIL lines:
#  1. a client SIGKILLed while its kernel runs: does the other client's
#     kernel (zpp-mps-probe spin) still finish? (recorded, not asserted:
#     it is the driver's behaviour, not ours)
#  2. a client faults (zpp-mps-probe fault 20: it stays alive 20 s after
#     its fault). While it lives, a fresh zppd (backend = auto) must not
#     fall back to the host backend: with cuda_start_wait_ms=0 it exits 1
#     naming the driver's error; with the default wait it logs that it is
#     waiting and starts on the cuda backend once the faulting client is
#     gone. ZPP_OLD=PATH also starts that zppd (an older build) in the same
#     state first and records which backend it chose.
#  3. the kill and the fault again, with a zppd already up and idle on the
#     GPU: it must exit 3 within 5 s (the server takes no new client until
#     it has), and a zppd started again then must serve a 1-rank job
#  4. (recorded, not asserted) whether a client that keeps running gets the
#     GPU back after such a fault by resetting the device (zpp-mps-probe
#     recover), after a fault and after a kill mid-kernel
# Binaries from .carry/cu (scripts/gpu/stage.sh); logs in $OUT (or ./out):
# summary.txt and zppd-mps.log.
#   scripts/gpu/run_mps.sh
set -u
. "$(dirname "$0")/procs.sh"
. "$(dirname "$0")/mps.sh"
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$C/bin
T=$(mktemp -d /tmp/zpp-mps.XXXXXX)
S=$OUT/summary.txt
L=$OUT/zppd-mps.log
: > "$L"
log() { echo "== $(date -u +%FT%T.%3NZ) $*" | tee -a "$S"; }
rc=0
pass() { log "PASS $*"; }
fail() { log "FAIL $*"; rc=1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } >> "$S"
mps_start || { log "cannot start the MPS control daemon"; exit 1; }
trap mps_stop EXIT

# zppd NAME ARGS...: starts zppd in the background on $T/NAME.sock
zppd_bg() {
  local name=$1; shift
  "${ZPPD:-$B/zppd}" -s "$T/$name.sock" -l info -o peer_listen= -b auto "$@" > "$T/$name.log" 2>&1 &
  echo $! > "$T/$name.pid"
}
# up NAME SECONDS: 0 once NAME's socket answers zppctl status
up() {
  local i
  for i in $(seq $(( $2 * 10 ))); do
    timeout 2 "$B/zppctl" -s "$T/$1.sock" status > "$T/$1.status" 2>&1 && return 0
    kill -0 "$(cat "$T/$1.pid")" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
keep_log() { echo "=================== zppd $1 ===================" >> "$L"; cat "$T/$1.log" >> "$L"; }

# 1. a client killed mid-kernel
log "step 1: two clients' kernels; one client SIGKILLed 2 s into its 30 s kernel"
"$B/zpp-mps-probe" spin 8 > "$T/b.out" 2>&1 & pb=$!
"$B/zpp-mps-probe" spin 30 > "$T/a.out" 2>&1 & pa=$!
sleep 2
kill -9 "$pa"; wait "$pa" 2>/dev/null
wait "$pb"; r=$?
log "the other client's 8 s kernel: $(cat "$T/b.out") (exit $r)"
sleep 1
log "a new client afterwards: $("$B/zpp-mps-probe" ping 2>&1)"

# 2. a client's fault, and zppd starting meanwhile
sleep 2
log "step 2: a client faults and stays alive 20 s"
"$B/zpp-mps-probe" fault 20 > "$T/c.out" 2>&1 & pc=$!
sleep 2
log "the faulting client: $(cat "$T/c.out")"
log "a new client meanwhile: $("$B/zpp-mps-probe" ping 2>&1)"
if [ -n "${ZPP_OLD:-}" ]; then
  ZPPD=$ZPP_OLD zppd_bg old
  if up old 5; then
    log "the older zppd (backend = auto) came up: $(head -1 "$T/old.status")"
  else
    log "the older zppd did not come up in 5 s: $(grep -E 'level=(error|warn)' "$T/old.log" | head -2)"
  fi
  stop_pids "$(cat "$T/old.pid")" > /dev/null; keep_log old
fi
t0=$(date +%s.%N)
zppd_bg nowait -o cuda_start_wait_ms=0
p=$(cat "$T/nowait.pid")
for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$p" 2>/dev/null; then
  fail "zppd with cuda_start_wait_ms=0 still runs after 10 s: $(head -1 "$T/nowait.status" 2>/dev/null)"
  stop_pids "$p" > /dev/null
else
  wait "$p"; r=$?
  msg=$(grep -E 'level=error' "$T/nowait.log" | head -1)
  [ "$r" = 1 ] && grep -q "cannot start" <<<"$msg" &&
    pass "zppd with cuda_start_wait_ms=0 exited 1, not on the host backend: $msg" ||
    fail "zppd with cuda_start_wait_ms=0: exit $r: $msg"
fi
keep_log nowait
zppd_bg wait
t1=$(date +%s.%N)
if up wait 40; then
  ready=$(awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}')
  be=$(head -1 "$T/wait.status")
  kill -0 "$pc" 2>/dev/null && alive="still alive" || alive="gone"
  if grep -q "backend cuda" <<<"$be" && grep -q "the GPUs are not ready: waiting" "$T/wait.log" &&
     [ "$alive" = gone ]; then
    pass "zppd (default wait) waited, then started on the cuda backend ${ready} s after its start, the faulting client $alive: $be"
  else
    fail "zppd (default wait) up after ${ready} s, the faulting client $alive: $be"
  fi
else
  fail "zppd (default wait) did not come up within 40 s: $(grep -E 'level=(error|warn)' "$T/wait.log" | head -3)"
fi
wait "$pc" 2>/dev/null
stop_pids "$(cat "$T/wait.pid")" > /dev/null; keep_log wait
# 3. the same two events while a zppd is already up and idle on the GPU:
# it must notice (its context is poisoned too) and exit 3 within a few
# seconds, since the MPS server takes no new client until it has; a zppd
# started again then (as systemd would) must serve a 1-rank job.
idle_check() { # $1: the step's name
  local p i st=
  p=$(cat "$T/idle.pid")
  for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then
    fail "$1: the idle zppd is still up 5 s later; a new client: $("$B/zpp-mps-probe" ping 2>&1)"
    return
  fi
  wait "$p"; st=$?
  msg=$(grep -E 'level=error' "$T/idle.log" | head -1 | cut -c1-400)
  [ "$st" = 3 ] && pass "$1: the idle zppd exited 3: $msg" || fail "$1: the idle zppd exited $st: $msg"
  keep_log idle
  zppd_bg idle
  if up idle 40; then
    timeout 60 "$B/zpp-cuda-test" -s "$T/idle.sock" -H "$T/host.sock" -w 1 -n 1 -m 1 \
      > "$T/job.out" 2>&1; r=$?
    [ "$r" = 0 ] &&
      pass "$1: a zppd started again: $(head -1 "$T/idle.status"); a 1-rank job on it passed ($(grep -c '^PASS' "$T/job.out") PASS)" ||
      fail "$1: a zppd started again; a 1-rank job on it: exit $r: $(grep -E '^FAIL' "$T/job.out" | head -1 | cut -c1-200)$(tail -2 "$T/job.out" | cut -c1-200)"
  else
    fail "$1: a zppd started again did not come up in 40 s: $(grep -E 'level=(error|warn)' "$T/idle.log" | head -2)"
  fi
}
# the host backend the 1-rank jobs compare with
"$B/zppd" -s "$T/host.sock" -l info -b host -o peer_listen= > "$T/host.log" 2>&1 &
echo $! > "$T/host.pid"
up host 10 || fail "the host zppd did not come up"
sleep 2
log "step 3a: zppd up and idle; another client SIGKILLed 2 s into its 30 s kernel"
zppd_bg idle
if up idle 40; then
  "$B/zpp-mps-probe" spin 30 > "$T/a3.out" 2>&1 & pa=$!
  sleep 2; kill -9 "$pa"; wait "$pa" 2>/dev/null
  idle_check "step 3a"
  kill -0 "$(cat "$T/idle.pid")" 2>/dev/null && stop_pids "$(cat "$T/idle.pid")" > /dev/null
else
  fail "zppd did not come up for step 3a: $(grep -E 'level=(error|warn)' "$T/idle.log" | head -2)"
fi
keep_log idle
sleep 2
log "step 3b: zppd up and idle; another client faults and exits 6 s later"
zppd_bg idle
if up idle 40; then
  "$B/zpp-mps-probe" fault 6 > "$T/c3.out" 2>&1 & pc=$!
  sleep 1; log "the faulting client: $(cat "$T/c3.out")"
  idle_check "step 3b"
  wait "$pc"
  kill -0 "$(cat "$T/idle.pid")" 2>/dev/null && stop_pids "$(cat "$T/idle.pid")" > /dev/null
else
  fail "zppd did not come up for step 3b: $(grep -E 'level=(error|warn)' "$T/idle.log" | head -2)"
fi
keep_log idle
stop_pids "$(cat "$T/host.pid")" > /dev/null

# 4. (observed) can a process that keeps running get a faulted GPU back?
# zpp-mps-probe recover idles, sees its context fail, resets the device and
# tries to use it again: what per-GPU recovery inside zppd would rely on.
sleep 2
log "step 4a: an idle client that resets the device; another client faults and exits 4 s later"
timeout 40 "$B/zpp-mps-probe" recover 20 > "$T/r4a.out" 2>&1 & pr=$!
sleep 1
"$B/zpp-mps-probe" fault 4 > "$T/c4.out" 2>&1
wait "$pr"
log "the resetting client: $(tr '\n' ' ' < "$T/r4a.out")"
log "a new client afterwards: $("$B/zpp-mps-probe" ping 2>&1)"
sleep 2
log "step 4b: an idle client that resets the device; another client SIGKILLed mid-kernel"
timeout 40 "$B/zpp-mps-probe" recover 20 > "$T/r4b.out" 2>&1 & pr=$!
sleep 1
"$B/zpp-mps-probe" spin 30 > /dev/null 2>&1 & pa=$!
sleep 2; kill -9 "$pa"; wait "$pa" 2>/dev/null
wait "$pr"
log "the resetting client: $(tr '\n' ' ' < "$T/r4b.out")"
log "a new client afterwards: $("$B/zpp-mps-probe" ping 2>&1)"
log "done, exit $rc"
exit $rc
