#!/bin/sh
# k8s_validate_breaks.sh — k8s_validate.sh must fail on manifests broken in
# the ways it claims to catch: each case below copies deploy/ (and the
# validator's renderer) into a scratch tree, breaks one thing, and expects
# exit 1 with its message; the unbroken copy must pass.
# Usage: k8s_validate_breaks.sh SOURCE_DIR [ZPPD_BIN]   (77: skipped, as
# k8s_validate.sh, when kubernetes-validate is missing)
set -u
src=${1:?usage: k8s_validate_breaks.sh SOURCE_DIR [ZPPD_BIN]}
zppd=${2:-}
v=$src/tests/scripts/k8s_validate.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fresh() {
    rm -rf "$tmp/s"
    mkdir -p "$tmp/s/tests/scripts"
    cp -r "$src/deploy" "$tmp/s/"
    cp "$src/tests/scripts/kustomize_lite.py" "$tmp/s/tests/scripts/"
    mkdir -p "$tmp/s/daemon"
    cp "$src/daemon/main.c" "$tmp/s/daemon/" # zppd's stop deadline
}
fail=0
fresh
sh "$v" "$tmp/s" $zppd > "$tmp/out" 2>&1
r=$?
[ $r = 77 ] && { cat "$tmp/out"; exit 77; }
[ $r = 0 ] || { echo "FAIL: the unbroken copy does not pass:"; tail -20 "$tmp/out"; exit 1; }
echo "PASS: the unbroken copy passes"

# case NAME EXPECTED-MESSAGE: run after breaking the copy
case_() {
    sh "$v" "$tmp/s" $zppd > "$tmp/out" 2>&1
    r=$?
    if [ $r = 1 ] && grep -q -- "$2" "$tmp/out"; then
        echo "PASS: $1"
    else
        echo "FAIL: $1 (exit $r, expected 1 and '$2'):"; grep -E "FAIL|ERROR" "$tmp/out" | head -5
        fail=1
    fi
    fresh
}
m=$tmp/s/deploy/k8s-mps/mps.yaml

sed -i '/containers:/,$ s|value: /run/zppd-mps|value: /run/elsewhere|' "$m"
case_ "zppd names an MPS pipe directory it does not mount" "CUDA_MPS_PIPE_DIRECTORY /run/elsewhere is not a mounted directory"

sed -i '/containers:/,$ s|value: /run/zppd-mps|value: /run/elsewhere|' "$m"
sed -i 's|mountPath: /run/zppd-mps|mountPath: /run|' "$m"
case_ "containers of a pod name different MPS pipe directories" "different MPS pipe directories"

python3 - "$m" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = """        - name: mps-pipe
          hostPath:
            path: /run/zppd-mps
            type: DirectoryOrCreate"""
assert old in s
open(p, "w").write(s.replace(old, "        - name: mps-pipe\n          emptyDir: {}"))
PY
case_ "an MPS pipe directory on a volume the training pods cannot mount" "not on a hostPath volume"

sed -i 's|\["/bin/sh", "-c", "echo quit|["/usr/bin/no-such-tool", "-c", "echo quit|' "$m"
case_ "a preStop hook runs a binary the image lacks" "preStop runs /usr/bin/no-such-tool"

printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: zppd\ndata: {}\n' \
    > "$tmp/s/deploy/k8s/extra.yaml"
case_ "a manifest the kustomization does not list" "does not list extra.yaml"

sed -i '0,/^  name: zppd$/s//  name: zppd-typo/' "$m"
case_ "a patch that names no object of the base" "patch of DaemonSet zppd-typo matches 0 objects"

echo "namePrefix: x-" >> "$tmp/s/deploy/k8s-mps/kustomization.yaml"
case_ "a kustomization field the renderer does not know" "kustomization fields \['namePrefix'\]"

sed -i 's|^\( *\)restartPolicy: Always|&\n\1restartPolicyy: Always|' "$m"
case_ "a variant's rendering against the schemas (strict: an unknown field)" "restartPolicyy"

ds=$tmp/s/deploy/k8s/daemonset.yaml
sed -i 's|^    type: OnDelete|    type: RollingUpdate|' "$ds"
case_ "a DaemonSet that restarts zppd on every node by itself" "updateStrategy RollingUpdate"

sed -i 's|terminationGracePeriodSeconds: 60|terminationGracePeriodSeconds: 30|' "$ds"
case_ "a grace period shorter than zppd's stop deadline" "terminationGracePeriodSeconds 30"

sed -i '/startupProbe:/,/failureThreshold/ s|failureThreshold: 60|failureThreshold: 10|' "$ds"
case_ "a startup probe that gives up before cuda_start_wait_ms" "startupProbe allows 20s to start"

sed -i 's|"-t", "3", "health"|"health"|' "$ds"
case_ "a zppctl probe that outlasts the kubelet's timeout" "readinessProbe runs zppctl with a 10s timeout"

sed -i 's|metrics_listen = 0.0.0.0:9464|metrics_listen = 127.0.0.1:9464|' "$tmp/s/deploy/k8s/configmap.yaml"
case_ "a /healthz probe at an address zppd does not listen on" "livenessProbe GETs the pod's IP, but metrics_listen is 127.0.0.1:9464"

rm "$tmp/s/deploy/k8s/resourcequota.yaml"
sed -i '/resourcequota.yaml/d' "$tmp/s/deploy/k8s/kustomization.yaml"
case_ "a system-node-critical pod without the quota that admits it" "no ResourceQuota there scoped to it"

exit $fail
