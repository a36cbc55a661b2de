#!/usr/bin/env bash
# run_gpu.sh — the one command for a GPU machine: builds the kernels, the
# byte-compare program and the benchmark with nvcc/gcc alone (no CMake
# configure of the whole tree: the daemon's libuv/protobuf-c are not needed),
# runs the byte-compare (tests/gpu/gpu_compare.c), then the benchmark
# (bench/kernels/kernel_bench.c) and, where torch is importable, the
# plain-PyTorch-ops comparison (bench/kernels/torch_quant.py). It also
# builds $ZK_BUILD/default/fenced_bench (bench/kernels/fenced_bench.c, the
# small fenced kernels on two GPUs), which it does not run.
#
# Usage: tests/gpu/run_gpu.sh [OUTDIR]   (default $OUT or ./gpu-out)
# Environment:
#   ZK_VARIANTS="name:-DKNOB=v ...;name2:..."  also build, byte-compare and
#       benchmark these tuning variants (knobs in kernels/zk_cuda_common.cuh,
#       zk_fast.cuh); a variant whose name starts with "chk" is only
#       byte-compared, not timed. A variant's -D/-U flags also build its own
#       copy of the C reference (a switch such as -DZK_B4=1 changes both)
#   ZK_BENCH_MIB  input MiB per launch (default 256)
#   ZK_VARIANT_BENCH  the kernel_bench sections the variants time (ZK_BENCH_ONLY:
#       quant,traffic,reorder,reduce,sum; default all); the tree's own build times all
#   ZK_ARCH       nvcc -gencode flags (default sm_90 machine code)
#   ZK_VARIANT_COMPARE  "full" (default) or "quick" (sizes <= 70000) byte-compare
#       of each variant, to fit more variants into one device call
#   ZK_SANITIZE   1 (default) runs compute-sanitizer memcheck, 0 skips it;
#       ZK_SANITIZE_TIMEOUT its limit in seconds (default 150)
#   ZK_TORCH      1 (default) runs bench/kernels/torch_quant.py where torch is, 0 skips it
#   ZK_BUILD_ONLY 1 builds (the default build and the variants) and stops: on a
#       machine without a GPU, to carry $ZK_BUILD's programs to one that has
# Writes OUTDIR/build.log (with the -Xptxas -v register report),
# OUTDIR/registers.txt, OUTDIR/compare.log, OUTDIR/bench.log,
# OUTDIR/variants.log, OUTDIR/sanitizer.log, OUTDIR/summary.txt.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${1:-${OUT:-$ROOT/gpu-out}}
BUILD=${ZK_BUILD:-/tmp/zk-gpu-build}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ZK_ARCH:--gencode arch=compute_90,code=sm_90}
BENCH_MIB=${ZK_BENCH_MIB:-256}
VARIANTS=${ZK_VARIANTS:-}
VCOMPARE=${ZK_VARIANT_COMPARE:-full}
SANITIZE=${ZK_SANITIZE:-1}
T0=$(date +%s)
CUDA_HOME=$(dirname "$(dirname "$NVCC")")
mkdir -p "$OUTDIR" "$BUILD"

CFLAGS="-std=c11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE -I$ROOT -I$ROOT/kernels -I$CUDA_HOME/include"
NVFLAGS="-std=c++17 -O3 --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Xptxas=-v -Werror=all-warnings -I$ROOT/kernels $ARCH"

# build_variant NAME "EXTRA NVCC FLAGS": kernels + both programs in $BUILD/NAME.
# The C reference is built again for a variant whose flags hold -D/-U
# options (with those alone, e.g. -DZK_B4=1, which changes the reference as
# well as the kernels); otherwise the programs link $BUILD's.
build_variant() {
    local d="$BUILD/$1" extra="$2" refdefs="" ref="$BUILD" f
    for f in $extra; do
        case $f in -D?* | -U?*) refdefs="$refdefs $f" ;; esac
    done
    mkdir -p "$d"
    if [ -n "$refdefs" ]; then
        ref="$d"
        gcc $CFLAGS -ffp-contract=off -fno-fast-math $refdefs -c "$ROOT/kernels/quant_ref.c" -o "$d/quant_ref.o" &&
            gcc $CFLAGS -ffp-contract=off -fno-fast-math $refdefs -c "$ROOT/kernels/qgz_ref.c" -o "$d/qgz_ref.o" ||
            return 1
    fi
    "$NVCC" $NVFLAGS $extra -c "$ROOT/kernels/quant.cu" -o "$d/quant.o" &&
    "$NVCC" $NVFLAGS $extra -c "$ROOT/kernels/qgz.cu" -o "$d/qgz.o" &&
    "$NVCC" $NVFLAGS $extra -c "$ROOT/kernels/sum.cu" -o "$d/sum.o" &&
    "$NVCC" $NVFLAGS $extra -c "$ROOT/kernels/copy.cu" -o "$d/copy.o" &&
    "$NVCC" $NVFLAGS $extra -c "$ROOT/kernels/qdq.cu" -o "$d/qdq.o" &&
    "$NVCC" $ARCH "$BUILD/gpu_compare.o" "$d/quant.o" "$d/qgz.o" "$d/sum.o" "$d/copy.o" "$d/qdq.o" "$ref/quant_ref.o" "$ref/qgz_ref.o" -lm -o "$d/gpu_compare" &&
    "$NVCC" $ARCH "$BUILD/kernel_bench.o" "$BUILD/traffic.o" "$d/quant.o" "$d/qgz.o" "$d/sum.o" "$d/copy.o" "$d/qdq.o" "$ref/quant_ref.o" "$ref/qgz_ref.o" -lm -o "$d/kernel_bench" &&
    "$NVCC" $ARCH "$BUILD/fenced_bench.o" "$d/sum.o" "$d/copy.o" "$d/qdq.o" -o "$d/fenced_bench"
}

(
    echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') $(uname -n)"
    "$NVCC" --version | tail -2
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    set -x
    gcc $CFLAGS -ffp-contract=off -fno-fast-math -c "$ROOT/kernels/quant_ref.c" -o "$BUILD/quant_ref.o" &&
    gcc $CFLAGS -ffp-contract=off -fno-fast-math -c "$ROOT/kernels/qgz_ref.c" -o "$BUILD/qgz_ref.o" &&
    gcc $CFLAGS -c "$ROOT/tests/gpu/gpu_compare.c" -o "$BUILD/gpu_compare.o" &&
    gcc $CFLAGS -c "$ROOT/bench/kernels/kernel_bench.c" -o "$BUILD/kernel_bench.o" &&
    "$NVCC" $NVFLAGS -c "$ROOT/bench/kernels/traffic.cu" -o "$BUILD/traffic.o" &&
    gcc $CFLAGS -c "$ROOT/bench/kernels/fenced_bench.c" -o "$BUILD/fenced_bench.o" || exit 1
    # variants build in the background while the default builds
    IFS=';' read -ra vlist <<<"$VARIANTS"
    for v in "${vlist[@]}"; do
        [ -n "$v" ] && (build_variant "${v%%:*}" "${v#*:}" >"$BUILD/${v%%:*}.log" 2>&1) &
    done
    build_variant default ""
    rc=$?
    wait
    exit $rc
) >"$OUTDIR/build.log" 2>&1
rc=$?
# registers and spills per kernel of the default build, demangled
grep -E "Compiling entry function|registers|spill" "$OUTDIR/build.log" |
    sed -E "s/.*Compiling entry function '([^']+)'.*/\1/" | paste - - - |
    while IFS=$'\t' read -r fn spill regs; do
        printf '%-44s %-18s | %s\n' "$(echo "$fn" | c++filt | sed -E 's/\(anonymous namespace\):://; s/\(.*//; s/^void //')" \
            "$(echo "$regs" | sed -E 's/.*Used ([0-9]+) registers.*/\1 registers/')" \
            "$(echo "$spill" | sed -E 's/^ *//')"
    done >"$OUTDIR/registers.txt"
if [ $rc -ne 0 ]; then
    tail -40 "$OUTDIR/build.log"
    echo "run_gpu: BUILD FAILED"
    exit 1
fi

if [ "${ZK_BUILD_ONLY:-0}" = 1 ]; then
    echo "run_gpu: built in $BUILD (ZK_BUILD_ONLY=1: nothing run), $(($(date +%s) - T0)) s"
    exit 0
fi

# The GPU's clocks, power and throttle reasons just before a benchmark: the
# int4 reductions are near the instruction-issue limit and slow down with
# the SM clock (a hot GPU after a long compare), the copy does not.
gpu_state() {
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/# gpu state (sm clock, mem clock, power, temp, throttle mask): /'
}

"$BUILD/default/gpu_compare" 2>&1 | tee "$OUTDIR/compare.log" | tail -8
crc=${PIPESTATUS[0]}
gpu_state >"$OUTDIR/bench.log"
"$BUILD/default/kernel_bench" "$BENCH_MIB" 2>&1 | tee -a "$OUTDIR/bench.log"
brc=${PIPESTATUS[0]}
gpu_state >>"$OUTDIR/bench.log"
[ "${ZK_TORCH:-1}" = 1 ] &&
    python3 "$ROOT/bench/kernels/torch_quant.py" "$BENCH_MIB" 2>&1 | tee -a "$OUTDIR/bench.log" | tail -6
echo "run_gpu: $(($(date +%s) - T0)) s after the default build's compare and bench"

: >"$OUTDIR/variants.log"
IFS=';' read -ra vlist <<<"$VARIANTS"
for v in "${vlist[@]}"; do
    [ -n "$v" ] || continue
    name=${v%%:*}
    {
        echo "=== variant $name: ${v#*:}"
        if [ -x "$BUILD/$name/kernel_bench" ]; then
            grep -E "registers|spill" "$BUILD/$name.log" | paste - - | sed -E 's/ptxas info *: //' | sort | uniq -c
            if [ "$VCOMPARE" = quick ]; then
                "$BUILD/$name/gpu_compare" 0x5EED quick 2>&1 | tail -1
            else
                "$BUILD/$name/gpu_compare" 2>&1 | tail -1
            fi
            case $name in
            chk*) ;;
            *) gpu_state; ZK_BENCH_ONLY="${ZK_VARIANT_BENCH:-}" "$BUILD/$name/kernel_bench" "$BENCH_MIB" 2>&1 | tail -n +3; gpu_state ;;
            esac
        else
            echo "build failed"; tail -20 "$BUILD/$name.log"
        fi
    } >>"$OUTDIR/variants.log" 2>&1
done
[ -n "$VARIANTS" ] && grep -E "=== variant|gpu_compare:|quantize|dequantize|qgz|sum|Memcpy" "$OUTDIR/variants.log" |
    awk '/=== variant/{print; next} {printf "  %-22s %-24s %s\n", $1" "$2, $3" "$4" "$5, $0 ~ /%/ ? $NF : ""}' | tail -120

# memory checker over the small cases (no out-of-bounds reads or writes)
echo "run_gpu: $(($(date +%s) - T0)) s so far"
if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null; then
    timeout "${ZK_SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool memcheck --leak-check no --print-limit 20 \
        "$BUILD/default/gpu_compare" 0x5EED quick >"$OUTDIR/sanitizer.log" 2>&1
    echo "compute-sanitizer memcheck exit $?" | tee -a "$OUTDIR/sanitizer.log"
    tail -3 "$OUTDIR/sanitizer.log"
fi

{
    echo "gpu_compare exit $crc, kernel_bench exit $brc"
    tail -6 "$OUTDIR/compare.log"
    cat "$OUTDIR/bench.log"
    echo "-- registers/spills (-Xptxas -v), default build --"
    cat "$OUTDIR/registers.txt"
} >"$OUTDIR/summary.txt"
echo "run_gpu: compare exit $crc, bench exit $brc, $(($(date +%s) - T0)) s"
[ $crc -eq 0 ] && [ $brc -eq 0 ]
