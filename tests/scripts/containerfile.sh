#!/bin/sh
# containerfile.sh — checks deploy/Containerfile without a container engine:
# its build stage sees only what it COPYs, so a build context holding just
# those paths must pass the same CMake configure as its RUN line (a source
# that a CMakeLists names outside them fails `docker build`), and the
# runtime stage's ENTRYPOINT and copied files must be what the build stage
# installs and the tree has.
#
# Exit status: 0 pass, 1 fail.
# Usage: containerfile.sh SOURCE_DIR
set -u
src=${1:?usage: containerfile.sh SOURCE_DIR}
cf=$src/deploy/Containerfile
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "containerfile.sh: FAIL: $*"
    exit 1
}

# COPY SRC DEST of the build stage (up to the second FROM), relative DEST
# under its WORKDIR.
ctx=$tmp/src
mkdir -p "$ctx"
awk '/^FROM /{n++} n==1 && /^COPY / && !/--from/ {print $2, $3}' "$cf" >"$tmp/copies"
[ -s "$tmp/copies" ] || fail "no COPY lines in the build stage"
while read -r from to; do
    [ -e "$src/$from" ] || fail "COPY $from: not in the tree"
    case $to in
    /src/*) to=${to#/src/} ;;
    /* | *..*) fail "COPY $from $to: expected a destination under WORKDIR /src" ;;
    esac
    mkdir -p "$ctx/$(dirname "$to")"
    cp -R "$src/$from" "$ctx/$to" || exit 1
done <"$tmp/copies"

# The flags of the build stage's cmake line.
flags=$(sed -n 's/.*RUN cmake -S \. -B \/build \(.*\) \\$/\1/p' "$cf")
[ -n "$flags" ] || fail "no 'RUN cmake -S . -B /build ...' line"
echo "configure, with only the COPYed paths: cmake $flags"
# shellcheck disable=SC2086
if ! cmake -S "$ctx" -B "$tmp/build" $flags >"$tmp/cmake.log" 2>&1; then
    cat "$tmp/cmake.log"
    fail "CMake does not configure from the paths the Containerfile copies"
fi

# Runtime stage: the entrypoint and zppctl (the DaemonSet's probe) are
# installed under /out, and every COPY source of it exists.
grep -q 'install .* /out/usr/sbin/zppd' "$cf" || fail "the build stage installs no /usr/sbin/zppd"
grep -q '^ENTRYPOINT \["/usr/sbin/zppd"\]' "$cf" || fail "ENTRYPOINT is not /usr/sbin/zppd"
awk '/^FROM /{n++} n==2 && /^COPY / && !/--from/ {print $2}' "$cf" | while read -r from; do
    [ -e "$src/$from" ] || { echo "containerfile.sh: FAIL: COPY $from: not in the tree"; exit 1; }
done || exit 1
echo "containerfile.sh: ok"
