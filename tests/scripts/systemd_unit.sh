#!/bin/sh
# systemd_unit.sh — checks deploy/zppd.service for ctest: a copy whose
# ExecStart names this build's zppd must pass `systemd-analyze verify` with
# no complaint about the unit, and `systemd-analyze security --offline=yes`
# rates it (the score is printed for docs/operations.md, never asserted: it
# moves with systemd's version). Also: the unit's DeviceAllow= patterns
# must cover the /proc/devices names of the GPU and InfiniBand devices of
# old and new drivers, RemoveIPC= must stay off (GPU clients run as zppd's
# uid: it would delete their /dev/shm files), and deploy/zppd-mps.service
# with the drop-in its header documents must pass verify too.
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

sec=$(systemd-analyze security --offline=yes "$unit" 2>&1)
rc=$?
printf '%s\n' "$sec" | grep -v '✓'
if [ $rc -ne 0 ] && ! printf '%s\n' "$sec" | grep -q "Overall exposure level"; then
    echo "systemd_unit.sh: FAIL: systemd-analyze security could not rate the unit"
    exit 1
fi
score=$(printf '%s\n' "$sec" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
echo "systemd_unit.sh: verify ok; security exposure ${score:-?} ($(systemd-analyze --version | head -n1))"
exit 0
