#!/usr/bin/env bash
# install-deps.sh — installs the Debian/Ubuntu packages that zppd's build,
# demo and tests need, and only those that are missing. Runs apt-get
# non-interactively, with sudo when not root; `apt-get update` runs only when
# something has to be installed. Exit 0 when everything is present.
#
# Then the Python modules of the tests (pytest and numpy for the Python
# client's suite, kubernetes-validate for the manifests of deploy/k8s/) with
# `python3 -m pip install --quiet`, again only those missing.
#
# The libFuzzer/sanitizer runtime must match clang's major version:
# libclang-rt-<major>-dev, from the installed clang, else from the
# distribution's clang package, else 14 (Debian 12). ZPP_CLANG_RT overrides.
set -euo pipefail

clang_rt() {
    local major=""
    if command -v clang >/dev/null 2>&1; then
        major=$(clang -dumpversion 2>/dev/null | cut -d. -f1)
    elif command -v apt-cache >/dev/null 2>&1; then
        major=$(apt-cache depends clang 2>/dev/null | grep -o 'clang-[0-9]*' | head -n1 |
            cut -d- -f2 || true)
    fi
    echo "libclang-rt-${major:-14}-dev"
}

pkgs=(
    cmake
    pkg-config
    build-essential
    clang
    "${ZPP_CLANG_RT:-$(clang_rt)}"
    libuv1-dev
    libprotobuf-c-dev
    protobuf-c-compiler
    libsystemd-dev
    libgrpc-dev
    libssl-dev
    # tests: promtool and a Prometheus server (metrics.prometheus), curl
    prometheus
    curl
    python3
    python3-pip
)

# Python modules: import name, pip name.
py_mods=(
    "pytest pytest"
    "numpy numpy"
    "kubernetes_validate kubernetes-validate"
)

pip_deps() {
    local py=${PYTHON:-python3} want=() m
    for m in "${py_mods[@]}"; do
        "$py" -c "import ${m% *}" >/dev/null 2>&1 || want+=("${m#* }")
    done
    if [[ ${#want[@]} -eq 0 ]]; then
        echo "install-deps: all ${#py_mods[@]} Python modules present"
        return 0
    fi
    echo "install-deps: pip install ${want[*]}"
    # A Debian python3 refuses pip outside a venv (PEP 668) unless told.
    "$py" -m pip install --quiet "${want[@]}" ||
        "$py" -m pip install --quiet --break-system-packages "${want[@]}"
}

missing=()
for p in "${pkgs[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$p")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all ${#pkgs[@]} packages present"
    pip_deps
    exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: apt-get not found; install these packages by hand" >&2
    exit 1
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps: not root and sudo not found; run as root" >&2
        exit 1
    fi
    sudo_cmd=(sudo)
fi

"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
# With fresh package lists, the clang runtime's version can be read now.
if [[ -z "${ZPP_CLANG_RT:-}" ]]; then
    for i in "${!missing[@]}"; do
        if [[ "${missing[$i]}" == libclang-rt-*-dev ]]; then
            missing[i]=$(clang_rt)
        fi
    done
fi
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
pip_deps
