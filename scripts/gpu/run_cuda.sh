#!/usr/bin/env bash
# run_cuda.sh — the cuda backend's checks on a GPU machine (the device
# tool's nvidia-h200-x2): the GPU integration test in 1 node x 2 GPUs and
# 2 virtual nodes x 1 GPU, two tenants' concurrent jobs, a job whose ranks
# leave between calls and rejoin (-R; it reads the cuda zppd's log), a job
# refused for its GPU memory (-M, on a second cuda zppd started with
# job_max_device_memory = 1M, then one with tenant_max_device_memory = 1M,
# each stopped after), a shared replica's publish (bench/publish_stall.py,
# where torch is), the SIGKILL test, and
# zpp-bench. At most 6 files land in $OUT (the device tool brings back 8):
# the rejoin and admission tests append to test-2x1.log. Binaries and
# their libraries come prebuilt in .carry/cu (scripts/gpu/stage.sh); NCCL
# and the CUDA driver come from the machine. Logs go to $OUT (or ./out).
#   [MPS=1] scripts/gpu/run_cuda.sh [all|test|bench|kill] [MAX_MIB]
# W=N (default 2) ranks, one per GPU (W=4 on nvidia-h200-x4; the virtual-
# node test then runs 2 nodes x W/2).
# ZPP_BIN=DIR takes zppd, zpp-cuda-test and zpp-bench from DIR instead of
# .carry/cu/bin (an older tree's build, for an A/B in one call).
# ZPPD_OPTS="-o KEY=VALUE ..." adds config overrides to the cuda zppd (e.g.
# -o busy_poll_us=0); the summary lists them with the switches.
# MPS=1 runs everything (daemons and clients) under a private CUDA MPS
# control daemon (docs/cuda.md, "MPS"); its logs get the suffix -mps.
set -u
. "$(dirname "$0")/procs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_RAS_ENABLE=0
what=${1:-all}
W=${W:-2}
max=${2:-1024}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=${ZPP_BIN:-$C/bin} # ZPP_BIN: binaries of another tree (A/B), same libraries
T=$(mktemp -d)
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$OUT/summary.txt"; }
sfx=
if [ "${MPS:-0}" = 1 ]; then
  sfx=-mps
  . "$(dirname "$0")/mps.sh"
  mps_start || { log "cannot start the MPS control daemon"; exit 1; }
  trap mps_stop EXIT
fi

{
  echo "#### run_cuda.sh $* (MPS=${MPS:-0})"
  echo "binaries: $B"
  date -u; uname -r; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nvidia-smi topo -m
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
  echo "NCCL and zppd switches set (none: the defaults):"
  env | grep -E '^(NCCL|ZPPD?)_' | sort | sed 's/^/  /'
} >> "$OUT/summary.txt" 2>&1

start() { # name socket args...
  local name=$1 sock=$2; shift 2
  local lg="$T/zppd-$name.log"; [ "$name" = cuda ] && lg="$OUT/zppd-cuda$sfx.log"
  "$B/zppd" -s "$sock" -l info -o peer_listen=127.0.0.1:0 "$@" > "$lg" 2>&1 &
  echo $! > "$T/$name.pid"
  for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.1; done
  log "zppd $name did not start"; tail -20 "$lg" | tee -a "$OUT/summary.txt"; return 1
}
stop() { local p; p=$(cat "$T/$1.pid" 2>/dev/null) && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; }
halt() { # name: SIGTERM, SIGKILL after 10 s (then 1)
  local p; p=$(cat "$T/$1.pid" 2>/dev/null) || return 0
  [ -z "$(stop_pids "$p")" ] && return 0
  log "zppd $1 did not stop in 10 s: SIGKILL"; kill -9 "$p"; wait "$p" 2>/dev/null; return 1
}

# shellcheck disable=SC2086 # ZPPD_OPTS is a list of -o KEY=VALUE words
start cuda "$T/cuda.sock" -b cuda -o allow_legacy_ipc=true -o store_budget=16G \
  -o store_budget_per_tenant=16G -o max_pending_per_session=64 ${ZPPD_OPTS:-} || exit 1
rc=0
if [ "$what" = all ] || [ "$what" = test ]; then
  start host1 "$T/host1.sock" -b host -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G
  start host2 "$T/host2.sock" -b host -o virtual_nodes=2 -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G
  log "test 1x2 up to $max MiB"
  timeout 150 "$B/zpp-cuda-test" -s "$T/cuda.sock" -H "$T/host1.sock" -w "$W" -n 1 -m "$max" -L \
    > "$OUT/test-1x2$sfx.log" 2>&1; r=$?; log "test 1x2 exit $r"; [ $r = 0 ] || rc=1
  grep -c ^PASS "$OUT/test-1x2$sfx.log" | sed 's/^/PASS lines: /' | tee -a "$OUT/summary.txt"
  grep ^FAIL "$OUT/test-1x2$sfx.log" | head -20 | tee -a "$OUT/summary.txt"
  m2=$(( max < 256 ? max : 256 ))
  log "test 2x1 (virtual nodes) up to $m2 MiB"
  # the host backend's reference dominates: 75 s with W=4 on four H200s
  # (x4-2026-11-28-s23), past 80 s in the next run (x4-2026-11-28-s24)
  timeout $(( W > 2 ? 160 : 80 )) "$B/zpp-cuda-test" -s "$T/cuda.sock" -H "$T/host2.sock" -w "$W" -n 2 -m "$m2" \
    > "$OUT/test-2x1$sfx.log" 2>&1; r=$?; log "test 2x1 exit $r"; [ $r = 0 ] || rc=1
  grep -c ^PASS "$OUT/test-2x1$sfx.log" | sed 's/^/PASS lines: /' | tee -a "$OUT/summary.txt"
  grep ^FAIL "$OUT/test-2x1$sfx.log" | head -20 | tee -a "$OUT/summary.txt"
  stop host1; stop host2
  log "two concurrent jobs of two tenants, 10000 calls each"
  timeout 120 "$B/zpp-cuda-test" -s "$T/cuda.sock" -w "$W" -C 10000 >> "$OUT/test-2x1$sfx.log" 2>&1
  r=$?; log "concurrent test exit $r"; [ $r = 0 ] || rc=1
  grep -i "concurrent" "$OUT/test-2x1$sfx.log" | tail -3 | tee -a "$OUT/summary.txt"
  # Within rejoin_timeout_ms (default 30 s); the test counts its job's
  # lines in the cuda zppd's log (communicators made once, 2 rejoins).
  log "rejoin: rank $((W - 1))'s process leaves between calls, a new one takes its place, rank 0 reconnects"
  timeout 40 "$B/zpp-cuda-test" -s "$T/cuda.sock" -w "$W" -R -l "$OUT/zppd-cuda$sfx.log" \
    >> "$OUT/test-2x1$sfx.log" 2>&1; r=$?; log "rejoin test exit $r"; [ $r = 0 ] || rc=1
  grep -E "^(PASS|FAIL) rejoin" "$OUT/test-2x1$sfx.log" | tail -8 | tee -a "$OUT/summary.txt"
  # No job fits 1 MiB of device memory (a rank's counters alone take 2 MiB):
  # refused at formation, by the job limit and then by the tenant's, each on
  # a cuda zppd of its own. Their logs stay in $T; their abort lines go to
  # the test log.
  for key in job_max_device_memory tenant_max_device_memory; do
    log "admission: a second cuda zppd with $key = 1M"
    if start admit "$T/admit.sock" -b cuda -o "$key=1M"; then
      timeout 40 "$B/zpp-cuda-test" -s "$T/admit.sock" -w "$W" -M "$key" \
        >> "$OUT/test-2x1$sfx.log" 2>&1; r=$?; log "admission test ($key) exit $r"
      [ $r = 0 ] || rc=1
      grep -E "job aborted|job freed" "$T/zppd-admit.log" | tail -4 >> "$OUT/test-2x1$sfx.log"
      halt admit || rc=1
      rm -f "$T/admit.sock"
    else
      rc=1
      halt admit # a zppd that started but never made its socket
    fi
  done
  grep -E "^(PASS|FAIL) admission" "$OUT/test-2x1$sfx.log" | tail -8 | tee -a "$OUT/summary.txt"
  # A shared replica on the GPU (docs/hpz-sharing.md), where torch is: a
  # 1 GiB publish (PyTorch's default allocator, legacy IPC), read back by
  # its key bit for bit, published again (dedup), a wrong key refused, and
  # another job's calls timed through it (bench/publish_stall.py).
  if python3 -c "import torch" 2>/dev/null; then
    lib=; for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { lib=$C/lib/$f; break; }; done
    log "publish: bench/publish_stall.py, 1024 MiB"
    ZPP_LIB=$lib PYTHONPATH=$PWD/client/python timeout 150 python3 bench/publish_stall.py "$T/cuda.sock" 1024 \
      >> "$OUT/test-2x1$sfx.log" 2>&1; r=$?; log "publish exit $r"; [ $r = 0 ] || rc=1
    grep -E "^(publish|busy|FAIL)" "$OUT/test-2x1$sfx.log" | tail -6 | tee -a "$OUT/summary.txt"
  else
    log "publish: skipped (no torch)"
  fi
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  log "bench 1x2 up to $max MiB"
  timeout 180 "$B/zpp-bench" -s "$T/cuda.sock" -w "$W" -n 1 -m "$max" > "$OUT/bench-1x2$sfx.log" 2>&1
  r=$?; log "bench exit $r"; [ $r = 0 ] || rc=1
fi
if [ "$what" = all ] || [ "$what" = test ] || [ "$what" = kill ]; then
  # last: a daemon left wedged by it must not cost the other results
  log "kill test"
  timeout 150 "$B/zpp-cuda-test" -s "$T/cuda.sock" -w "$W" -K > "$OUT/test-kill$sfx.log" 2>&1
  r=$?; log "kill test exit $r"; [ $r = 0 ] || rc=1
  tail -6 "$OUT/test-kill$sfx.log" | tee -a "$OUT/summary.txt"
  # What the daemon still holds, until its deferred releases and imports
  # are gone (or 40 s): the test's own settle check can end early.
  for i in $(seq 9); do
    js=$(timeout 5 "$B/zppctl" -s "$T/cuda.sock" status --json 2>&1)
    { echo "-- after kill +$((i * 5 - 5)) s"; timeout 5 "$B/zppctl" -s "$T/cuda.sock" status | grep -A4 '^GPU'
      nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; } \
      >> "$OUT/test-kill$sfx.log" 2>&1
    echo "$js" | grep -q '"gpus":\[{' &&
      ! echo "$js" | grep -q '"imports":[1-9]' && ! echo "$js" | grep -q '"deferred_releases":[1-9]' && break
    sleep 5
  done
  tail -8 "$OUT/test-kill$sfx.log" >> "$OUT/summary.txt"
fi
timeout 5 "$B/zppctl" -s "$T/cuda.sock" status >> "$OUT/summary.txt" 2>&1 || true
halt cuda || rc=1
log "daemon stopped; exit code of zppd-cuda: see its log tail"
tail -5 "$OUT/zppd-cuda$sfx.log" >> "$OUT/summary.txt"
exit $rc
