#!/bin/bash
# session 32, call 6 (nvidia-h200, one GPU): the final tree (.carry/tree: the absmax tree of 37f0ed4).
#   new = the tree's kernels (ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh on the build machine);
#   old = the kernels of 3d7dd44 (before this session), kernel_bench only;
#   .carry/cu = the tree's CMake Release build for sm_90 (zppd, zpp-cuda-test).
# 1. full byte-compare of new; memcheck of its quick one;
# 2. kernel_bench 256 MiB, every section, new once; then section reduce, old and new alternated 3x;
# 3. the daemon on these kernels against the host backend (the C reference): the one-rank test
#    (-w 1 -n 1 -m 64 -L) and 2x1 across two cuda zppds with both simulated nodes on GPU 0
#    (run_multi.sh, up to 256 MiB); -X once.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk6; mkdir -p $Z; tar xJf .carry/zk6.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k6.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/new/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare.log 2>&1
tail -8 $R/compare.log >> $H
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "$DEV"; timeout 150 $CS --tool memcheck --leak-check no --print-limit 20 $Z/new/gpu_compare 0x5EED quick; echo "memcheck rc=$?"; } > $R/sanitizer.log 2>&1
grep -E "ERROR SUMMARY|rc=" $R/sanitizer.log >> $H
{ echo "$DEV"; timeout 200 $Z/new/kernel_bench 256; echo "rc=$?"; } > $R/bench.log 2>&1
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in old new; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T=$(mktemp -d /tmp/zpp-s.XXXXXX)
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
start() { # NAME BACKEND: zppd on $T/NAME.sock, pid in ZP
  rm -f $T/$1.sock
  $C/bin/zppd -s $T/$1.sock -l info -o peer_listen= -b $2 -o allow_legacy_ipc=true > $R/zppd-$1.log 2>&1 & ZP=$!
  for _ in $(seq 100); do [ -S $T/$1.sock ] && break; sleep 0.1; done
}
start c cuda; cp_=$ZP; start h host; hp_=$ZP
echo "$DEV" > $R/test-1x1.log
timeout 150 $C/bin/zpp-cuda-test -s $T/c.sock -H $T/h.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 -L rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
stop $cp_ $hp_; sed -i "1i $DEV" $R/zppd-c.log $R/zppd-h.log
start x cuda; zp=$ZP
echo "$DEV" > $R/lost.log
timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/x.sock -X $T/mark >> $R/lost.log 2>&1 & tp=$!
for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
[ -e $T/mark ] && kill -9 $zp
wait $tp; echo "rc=$?" >> $R/lost.log; stop $zp; sed -i "1i $DEV" $R/zppd-x.log
echo "   -X: $(grep -cE '^PASS' $R/lost.log) PASS, $(grep -cE '^FAIL' $R/lost.log) FAIL" >> $H
echo "== multi start $(date -u '+%F %T UTC')" >> $H
GPU1=0 LAYOUTS=2x1 FAILURE=0 TEST_MIB=256 BENCH_TIMEOUT=1 OUT=$R/multi timeout 240 scripts/gpu/run_multi.sh 256 \
  > $R/multi.out 2>&1; echo "   multi rc=$? (its benchmark step cut by BENCH_TIMEOUT=1 on purpose)" >> $H
grep -E "PASS lines|FAIL|exit" $R/multi/summary.txt 2>/dev/null | head -10 >> $H
for f in $R/multi/bench-2x1.log $R/multi/summary.txt $R/multi.out; do [ -f $f ] && sed -i "1i $DEV (line added by the script: the file is run_multi.sh's)" $f; done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt; grep -E "of copy|D2D|quantize|qgz|sum" $R/bench.log | head -60
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
