#!/bin/bash
# session 31, call 2 (nvidia-h200, one GPU):
# 1. int4 reduce+requantize on biased codes (ZK_B4; kernels of dbcf822 + b4.patch beside this
#    file, built on the build machine with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as
#    .carry/zk.tar.xz):
#      default  the tree's contract, acc = fma(q, scale, acc)
#      b41      -DZK_B4=1: u = q + 8 as fp16 subnormals, acc = fma(u, s, acc), 8 * sum(s) off at the end
#      b42      -DZK_B4=2: u placed by one LOP3 into an fp32 mantissa, acc = fma(2^(23-p) + u, s, acc),
#               the per-position bias off at the end
#      b41u, b42u  the same without the guard for scales >= 2^104 / 2^96 (-DZK_B4G=0)
#      b42p0, b42p1  b42 with positions {8,12,16} / {11,15,19} (-DZK_B4P=0 / 1)
#    full byte-compare of b41 and b42 against their own C reference, memcheck of b42's quick one;
#    kernel_bench 256 MiB, section reduce, every build alternated three times.
# 2. the tree's zpp-cuda-test -X with a thread in cuCtxSynchronize while zppd dies (.carry/cu,
#    CMake Release build for sm_90 of dbcf822), MPS off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=/tmp/zk; mkdir -p $Z; tar xJf .carry/zk.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s31/s31k2.sh"
H=$R/head.txt
echo "$DEV" > $H
for v in b41 b42; do
  { echo "$DEV"; timeout 240 $Z/$v/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-$v.log 2>&1
  echo "== $v" >> $H; tail -8 $R/compare-$v.log >> $H
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "$DEV"; timeout 150 $CS --tool memcheck --leak-check no --print-limit 20 $Z/b42/gpu_compare 0x5EED quick; echo "memcheck rc=$?"; } > $R/sanitizer-b42.log 2>&1
grep -E "ERROR SUMMARY|rc=" $R/sanitizer-b42.log >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default b41 b42 b41u b42u b42p0 b42p1; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T=$(mktemp -d /tmp/zpp-k.XXXXXX)
for n in 1 2; do
  $C/bin/zppd -s $T/z$n.sock -l info -o peer_listen= -b cuda > $R/zppd-lost$n.log 2>&1 & zp=$!
  for _ in $(seq 100); do [ -S $T/z$n.sock ] && break; sleep 0.1; done
  echo "$DEV" > $R/lost$n.log
  timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z$n.sock -X $T/mark$n >> $R/lost$n.log 2>&1 & tp=$!
  for _ in $(seq 300); do [ -e $T/mark$n ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
  [ -e $T/mark$n ] && kill -9 $zp
  wait $tp; echo "rc=$?" >> $R/lost$n.log; stop $zp
  echo "   -X run $n:" >> $H; grep -E '^(PASS|FAIL)|^rc=' $R/lost$n.log | cut -c1-200 | sed 's/^/      /' >> $H
  sed -i "1i $DEV" $R/zppd-lost$n.log
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|rc=|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
