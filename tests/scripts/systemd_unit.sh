#!/bin/sh
# systemd_unit.sh — checks deploy/zppd.service for ctest: a copy whose
# ExecStart names this build's zppd must pass `systemd-analyze verify` with
# no complaint about the unit, and `systemd-analyze security --offline=yes`
# rates it (the score is printed for docs/operations.md, never asserted: it
# moves with systemd's version). Also: the unit's DeviceAllow= patterns
# must cover the /proc/devices names of the GPU and InfiniBand devices of
# old and new drivers, RemoveIPC= must stay off (GPU clients run as zppd's
# uid: it would delete their /dev/shm files), and deploy/zppd-mps.service
# with the drop-in its header documents must pass verify too. And the
# unit's lifecycle against zppd's: exit 3 (a sticky device error) is
# restarted, TimeoutStopSec= outlasts zppd's own stop deadline
# (daemon/main.c), TimeoutStartSec= its wait for GPUs that are not ready
# (cuda_start_wait_ms of deploy/zppd.conf), the unit is ordered after the
# NVIDIA units the GPUs need, and deploy/zppd.sysusers.conf creates its
# user and group.
#
# Exit status: 0 pass, 1 fail, 77 (ctest: skipped) without systemd-analyze.
# Usage: systemd_unit.sh SOURCE_DIR ZPPD_BIN
set -u
src=${1:?usage: systemd_unit.sh SOURCE_DIR ZPPD_BIN}
zppd=${2:?usage: systemd_unit.sh SOURCE_DIR ZPPD_BIN}
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "systemd_unit.sh: skipped: systemd-analyze not found"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
unit=$tmp/zppd.service
sed "s|^ExecStart=/usr/sbin/zppd |ExecStart=$zppd |" "$src/deploy/zppd.service" >"$unit"
grep -q "^ExecStart=$zppd " "$unit" || {
    echo "systemd_unit.sh: FAIL: no 'ExecStart=/usr/sbin/zppd ' line to point at the build"
    exit 1
}

# verify exits 0 on some problems (unknown keys are warnings): any line
# that names our unit is a failure too.
out=$(systemd-analyze verify "$unit" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ] || printf '%s\n' "$out" | grep -q "zppd.service"; then
    echo "systemd_unit.sh: FAIL: systemd-analyze verify complains about the unit"
    exit 1
fi

# DevicePolicy=closed: every device class zppd needs must match one
# DeviceAllow=char-PATTERN (systemd matches /proc/devices names with
# fnmatch, as `case` does). "nvidia" is /dev/nvidia[0-9]* from driver 545
# on, "nvidia-frontend" before; infiniband_verbs: NCCL's IB/RoCE transport.
pats=$(sed -n 's/^DeviceAllow=char-\([^ ]*\).*/\1/p' "$unit")
for name in nvidia nvidia-frontend nvidia-uvm nvidia-caps infiniband_verbs; do
    hit=""
    for p in $pats; do
        # shellcheck disable=SC2254
        case "$name" in $p) hit=1 ;; esac
    done
    if [ -z "$hit" ]; then
        echo "systemd_unit.sh: FAIL: no DeviceAllow=char-PATTERN matches /proc/devices name '$name'"
        exit 1
    fi
done
if grep -qiE '^RemoveIPC=(yes|true|on|1)' "$unit"; then
    echo "systemd_unit.sh: FAIL: RemoveIPC= would delete the /dev/shm files of zppd's uid," \
        "which its GPU clients share, at every stop"
    exit 1
fi

# Lifecycle. The last value of a key wins, as in systemd.
key() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
usec() { systemd-analyze timespan "$1" 2>/dev/null | sed -n 's/^ *μs: //p'; }
restart=$(key Restart)
case $restart in
on-failure | always) ;;
*)
    echo "systemd_unit.sh: FAIL: Restart=$restart: zppd exits 3 after a sticky device error" \
        "and must be started again (on-failure)"
    exit 1
    ;;
esac
if sed -n 's/^RestartPreventExitStatus=//p' "$unit" | tr ' ' '\n' | grep -qx 3; then
    echo "systemd_unit.sh: FAIL: RestartPreventExitStatus= holds 3, the sticky device error's exit"
    exit 1
fi
deadline_ms=$(sed -n 's/^#define STOP_DEADLINE_MS \([0-9]*\).*/\1/p' "$src/daemon/main.c")
stop_us=$(usec "$(key TimeoutStopSec)")
if [ -z "$deadline_ms" ] || [ -z "$stop_us" ]; then
    echo "systemd_unit.sh: FAIL: no STOP_DEADLINE_MS in daemon/main.c or no TimeoutStopSec= in the unit"
    exit 1
fi
if [ "$stop_us" -lt $(((deadline_ms + 10000) * 1000)) ]; then
    echo "systemd_unit.sh: FAIL: TimeoutStopSec=$(key TimeoutStopSec): zppd lets calls run" \
        "${deadline_ms} ms after SIGTERM, then aborts its jobs; give it 10 s more than that"
    exit 1
fi
wait_ms=$("$zppd" --print-config -c "$src/deploy/zppd.conf" 2>/dev/null |
    sed -n 's/^cuda_start_wait_ms = \([0-9]*\)$/\1/p')
start_us=$(usec "$(key TimeoutStartSec)")
if [ -z "$wait_ms" ] || [ -z "$start_us" ]; then
    echo "systemd_unit.sh: FAIL: no cuda_start_wait_ms from zppd --print-config, or no TimeoutStartSec="
    exit 1
fi
if [ "$start_us" -lt $(((wait_ms + 30000) * 1000)) ]; then
    echo "systemd_unit.sh: FAIL: TimeoutStartSec=$(key TimeoutStartSec): zppd sends READY=1 only" \
        "after its GPUs open, which may wait cuda_start_wait_ms (${wait_ms} ms); give it 30 s more"
    exit 1
fi
for u in nvidia-persistenced.service nvidia-fabricmanager.service; do
    sed -n 's/^After=//p' "$unit" | tr ' ' '\n' | grep -qx "$u" || {
        echo "systemd_unit.sh: FAIL: the unit is not ordered After=$u"
        exit 1
    }
done

# deploy/zppd.sysusers.conf creates the unit's User= and Group= (else the
# unit fails at start: "Failed to determine user credentials").
if command -v systemd-sysusers >/dev/null 2>&1; then
    mkdir -p "$tmp/sysroot/etc" || exit 1
    if ! systemd-sysusers --root="$tmp/sysroot" "$src/deploy/zppd.sysusers.conf" >/dev/null 2>&1 ||
        ! grep -q "^$(key User):" "$tmp/sysroot/etc/passwd" ||
        ! grep -q "^$(key Group):" "$tmp/sysroot/etc/group"; then
        echo "systemd_unit.sh: FAIL: deploy/zppd.sysusers.conf does not create User=$(key User)" \
            "and Group=$(key Group) of the unit"
        exit 1
    fi
fi

# zppd-mps.service (its binary need not exist here) and the drop-in for
# zppd.service that its header spells out.
mps=$src/deploy/zppd-mps.service
mkdir "$tmp/mps" "$tmp/mps/zppd.service.d" || exit 1
cp "$unit" "$tmp/mps/zppd.service"
sed 's|/usr/bin/nvidia-cuda-mps-control|/bin/true|g' "$mps" >"$tmp/mps/zppd-mps.service"
sed -n '/^#   \/etc\/systemd\/system\/zppd.service.d\/mps.conf/,/^# [^ ]/p' "$mps" |
    sed -n 's/^#     //p' >"$tmp/mps/zppd.service.d/mps.conf"
grep -q '^Requires=zppd-mps.service' "$tmp/mps/zppd.service.d/mps.conf" || {
    echo "systemd_unit.sh: FAIL: no drop-in (mps.conf) found in the header of zppd-mps.service"
    exit 1
}
out=$(cd "$tmp/mps" && systemd-analyze verify ./zppd-mps.service ./zppd.service 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ] || printf '%s\n' "$out" | grep -q "zppd"; then
    echo "systemd_unit.sh: FAIL: systemd-analyze verify complains about zppd-mps.service or the drop-in"
    exit 1
fi
# nvidia-cuda-mps-control setuid()s to its own uid for every MPS server it
# starts; with @privileged (or @setuid) filtered no server ever starts.
if grep -qE '^SystemCallFilter=~.*@(privileged|setuid)' "$mps"; then
    echo "systemd_unit.sh: FAIL: zppd-mps.service filters @privileged/@setuid: the MPS control" \
        "daemon could not start a server (setuid to its own uid)"
    exit 1
fi
mps_score=$(systemd-analyze security --offline=yes "$tmp/mps/zppd-mps.service" 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')

sec=$(systemd-analyze security --offline=yes "$unit" 2>&1)
rc=$?
printf '%s\n' "$sec" | grep -v '✓'
if [ $rc -ne 0 ] && ! printf '%s\n' "$sec" | grep -q "Overall exposure level"; then
    echo "systemd_unit.sh: FAIL: systemd-analyze security could not rate the unit"
    exit 1
fi
score=$(printf '%s\n' "$sec" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
echo "systemd_unit.sh: verify ok; security exposure ${score:-?}, zppd-mps.service ${mps_score:-?}" \
    "($(systemd-analyze --version | head -n1))"
exit 0
