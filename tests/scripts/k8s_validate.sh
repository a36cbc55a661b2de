#!/bin/sh
# k8s_validate.sh — validates every manifest of deploy/k8s/ against the
# Kubernetes JSON schemas bundled with PyPI's kubernetes-validate (offline:
# the schemas ship in the package), strictly (unknown fields fail), for the
# oldest and the newest Kubernetes version the manifests claim to support.
#
# Exit status: 0 pass, 1 fail, 77 (ctest: skipped) when kubernetes-validate
# is missing — except under CI=true, where that fails (`make deps`).
# Usage: k8s_validate.sh SOURCE_DIR
set -u
src=${1:?usage: k8s_validate.sh SOURCE_DIR}
KUBE_VERSIONS="1.28.0 1.34.0"

kv=""
if command -v kubernetes-validate >/dev/null 2>&1; then
    kv=kubernetes-validate
elif python3 -c 'import kubernetes_validate' >/dev/null 2>&1; then
    kv="python3 -m kubernetes_validate"
fi
if [ -z "$kv" ]; then
    if [ "${CI:-}" = "true" ]; then
        echo "k8s_validate.sh: kubernetes-validate missing (CI=true: make deps must install it)" >&2
        exit 1
    fi
    echo "k8s_validate.sh: skipped: pip install kubernetes-validate"
    exit 77
fi
set -- "$src"/deploy/k8s/*.yaml
[ -f "$1" ] || { echo "k8s_validate.sh: FAIL: no manifests in deploy/k8s"; exit 1; }
rc=0
for v in $KUBE_VERSIONS; do
    echo "== Kubernetes $v"
    # No network: the package must use its bundled schemas.
    $kv --strict -k "$v" "$@" || rc=1
done
[ $rc -eq 0 ] && echo "k8s_validate.sh: ok" || echo "k8s_validate.sh: FAIL"
exit $rc
