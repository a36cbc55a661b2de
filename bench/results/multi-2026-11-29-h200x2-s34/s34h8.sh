#!/bin/bash
# session 34, call 8 (nvidia-h200, one GPU): the fenced kernels' new abort look (677d6d3) under the sanitizers.
# .carry/zknew/gpu_compare: tests/gpu/run_gpu.sh ZK_BUILD_ONLY=1 of this tree, whose one-member fenced cases
# (gpu_compare SEED fenced1, the ones compute-sanitizer can run: it serialises launches) now include one member
# of 64 and 128 CTAs. Runs: the whole fenced section (groups on streams of one GPU), then fenced1 under
# compute-sanitizer memcheck, racecheck and synccheck.
R=$OUT/r; mkdir -p $R
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (gpu_compare built by tests/gpu/run_gpu.sh, sm_90, carried as .carry/zknew); command: bash bench/results/multi-2026-11-29-h200x2-s34/s34h8.sh"
G=.carry/zknew/gpu_compare
{ echo "$DEV"; timeout 120 $G 0x5EED fenced; echo "gpu_compare fenced rc=$?"; } > $R/compare-fenced.log 2>&1
for t in memcheck racecheck synccheck; do
  { echo "$DEV"; timeout 150 compute-sanitizer --tool $t --print-limit 20 $G 0x5EED fenced1; echo "compute-sanitizer $t rc=$?"; } > $R/sanitizer-$t.log 2>&1
done
for f in $R/*.log; do echo "== $(basename $f)"; tail -4 $f; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
