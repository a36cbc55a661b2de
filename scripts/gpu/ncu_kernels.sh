#!/usr/bin/env bash
# ncu_kernels.sh — Nsight Compute profiles of chosen kernels of kernel_bench:
# for each regular expression (matched against the demangled kernel name),
# the 6th launch (after kernel_bench's 5 warm-ups) with `--set full`, its
# details page and its per-instruction SASS counters, and the instruction
# mix and stall reasons of those counters (scripts/ncu_mix.py).
#
# Usage, on a GPU machine after tests/gpu/run_gpu.sh has built kernel_bench:
#   scripts/gpu/ncu_kernels.sh OUTDIR 'frv_kernel<.int.4,' 'fqx_kernel<.int.3, .int.8, .int.8,' ...
# Clocks are left as they are (--clock-control none): the device's rules.
# Under ncu every profiled launch starts with flushed caches and ends without
# paying for its dirty lines, so its duration is not kernel_bench's; read
# ratios, pipes and stalls from it, times from kernel_bench.
set -u
OUTDIR=$1
shift
B=${ZK_BUILD:-/tmp/zk-gpu-build}/default/kernel_bench
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUTDIR"
# every file of figures names its device and date
DEVLINE="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(date -u +%FT%TZ)"
echo "$DEVLINE" | tee "$OUTDIR/ncu.log" >"$OUTDIR/mix.txt"
"$NCU" --version >>"$OUTDIR/ncu.log" 2>&1
i=0
for re in "$@"; do
    i=$((i + 1))
    timeout 120 "$NCU" --clock-control none --kernel-name-base demangled -k "regex:$re" -s 5 -c 1 \
        --set full --import-source no -o "$OUTDIR/ncu_$i" "$B" "${ZK_BENCH_MIB:-256}" >>"$OUTDIR/ncu.log" 2>&1
    echo "== $i $re rc $?" >>"$OUTDIR/ncu.log"
    { echo "$DEVLINE"; "$NCU" -i "$OUTDIR/ncu_$i.ncu-rep" --page details --print-units base; } \
        >"$OUTDIR/ncu_$i.txt" 2>&1
    # (ncu_mix.py skips the device line)
    { echo "$DEVLINE"; "$NCU" -i "$OUTDIR/ncu_$i.ncu-rep" --page source --print-source sass --csv; } \
        >"$OUTDIR/ncu_${i}_sass.csv" 2>&1
    gzip -f "$OUTDIR/ncu_${i}_sass.csv"
    python3 "$ROOT/scripts/ncu_mix.py" "$OUTDIR/ncu_${i}_sass.csv.gz" >>"$OUTDIR/mix.txt"
done
