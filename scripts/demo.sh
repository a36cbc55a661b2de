#!/usr/bin/env bash
# demo.sh — the body of `make demo`: starts zppd from a build tree on a
# temporary socket with a temporary config (host backend), runs zpp-demo
# against it (default: 4 client processes as 2 virtual nodes x 2 ranks, one
# ZeRO++ training step checked against exact results), prints its table,
# shows `zppctl status`, then stops the daemon with SIGTERM and checks that
# it exited 0 and removed its socket.
#
# usage: scripts/demo.sh [BUILD_DIR] [zpp-demo args...]   (BUILD_DIR: build)
set -euo pipefail

build=${1:-build}
shift || true
zppd="$build/daemon/zppd"
demo="$build/demo/zpp-demo"
zppctl="$build/client/zppctl"
for bin in "$zppd" "$demo"; do
    if [[ ! -x "$bin" ]]; then
        echo "demo: $bin not found; run 'make build' first" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zppd-demo.XXXXXX")
sock="$tmp/zppd.sock"
conf="$tmp/zppd.conf"
log="$tmp/zppd.log"
daemon_pid=""

cleanup() {
    if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -KILL "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "demo: $*" >&2
    echo "---- zppd log ($log) ----" >&2
    cat "$log" >&2 || true
    exit 1
}

cat >"$conf" <<CONF
# written by scripts/demo.sh
socket = $sock
socket_mode = 0600
backend = host
log_level = info
peer_listen = 127.0.0.1:0
CONF

echo "demo: starting $zppd -c $conf"
"$zppd" -c "$conf" 2>"$log" &
daemon_pid=$!

for _ in $(seq 1 100); do
    [[ -S "$sock" ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || fail "zppd exited during start-up"
    sleep 0.1
done
[[ -S "$sock" ]] || fail "zppd did not create $sock within 10 s"

demo_rc=0
"$demo" -s "$sock" "$@" || demo_rc=$?

if [[ -x "$zppctl" ]]; then
    echo
    echo "demo: zppctl status after the step:"
    "$zppctl" -s "$sock" status || echo "demo: (zppctl status failed)"
fi

kill -TERM "$daemon_pid"
daemon_rc=0
for _ in $(seq 1 100); do
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$daemon_pid" 2>/dev/null; then
    fail "zppd still running 10 s after SIGTERM"
fi
wait "$daemon_pid" || daemon_rc=$?
daemon_pid=""

[[ $demo_rc -eq 0 ]] || fail "zpp-demo failed (exit $demo_rc)"
[[ $daemon_rc -eq 0 ]] || fail "zppd exited $daemon_rc after SIGTERM (expected 0)"
[[ ! -e "$sock" ]] || fail "zppd left its socket $sock behind"
echo "demo: zppd stopped cleanly (SIGTERM, exit 0, socket removed)"
