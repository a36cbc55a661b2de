#!/usr/bin/env bash
# stage.sh — copies the GPU programs of a CUDA build (default build-cu) and
# the libraries the GPU machine lacks into .carry/cu (ignored by git), for
# the device tool's carry. NCCL and CUDA's driver come from that machine.
set -eu
build=${1:-build-cu}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.carry/cu/bin"
cp "$root/$build/daemon/zppd" "$root/$build/tests/cuda/zpp-cuda-test" \
   "$root/$build/bench/zpp-bench" "$root/$build/client/zppctl" \
   "$root/$build/tests/cuda/zpp-mps-probe" "$root/.carry/cu/bin/"
/work/shared/tools/stage-libs "$root/.carry/cu/lib" "$root"/.carry/cu/bin/*
# libzpp for the Python binding (zpp.torch finds it through ZPP_LIB)
cp -a "$root/$build"/client/libzpp.so* "$root/.carry/cu/lib/"
