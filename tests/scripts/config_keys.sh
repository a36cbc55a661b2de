#!/usr/bin/env bash
# config_keys.sh ROOT ZPPD — every key zppd knows (--print-config) is listed
# in deploy/zppd.conf and in docs/configuration.md, no listed key is
# unknown, and the example file with every key uncommented reads cleanly.
set -euo pipefail
root=$1 zppd=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$zppd" --print-config | awk '{print $1}' | sort >"$tmp/known"
grep -E '^#?[a-z_]+ =' "$root/deploy/zppd.conf" | sed 's/^#//' | awk '{print $1}' | sort -u >"$tmp/conf"
if ! diff -u "$tmp/known" "$tmp/conf"; then
    echo "config_keys: deploy/zppd.conf and zppd --print-config disagree (- known, + file)" >&2
    exit 1
fi
missing=0
while read -r key; do
    if ! grep -q "\`$key\`" "$root/docs/configuration.md"; then
        echo "config_keys: $key is not documented in docs/configuration.md" >&2
        missing=1
    fi
done <"$tmp/known"
[ "$missing" = 0 ]
sed -E 's/^#([a-z_]+ =)/\1/' "$root/deploy/zppd.conf" >"$tmp/all.conf"
out=$("$zppd" --check-config -c "$tmp/all.conf" 2>&1)
echo "$out"
grep -q ": 0 problem line(s)" <<<"$out"
echo "config_keys: $(wc -l <"$tmp/known") keys, all listed and documented"
