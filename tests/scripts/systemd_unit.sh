#!/bin/sh
# systemd_unit.sh — checks deploy/zppd.service for ctest: a copy whose
# ExecStart names this build's zppd must pass `systemd-analyze verify` with
# no complaint about the unit, and `systemd-analyze security --offline=yes`
# rates it (the score is printed for docs/operations.md, never asserted: it
# moves with systemd's version).
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
