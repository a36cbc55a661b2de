#!/bin/bash
# session 30, call 4 (nvidia-h200, one GPU):
# 1. the dequantize tile on the H200 (session 14 measured ZK_DQX_NV only on an H100): vectors per
#    thread and tile 2 (the tree), 8, and 8 with fp32 from int4 through dqx_kernel too
#    (ZK_DQS=0) instead of the rounds; kernel_bench 256 MiB, section quant, alternated 3x.
#    Builds made on the build machine with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as
#    .carry/zk/<build>/ (4 and the byte-compare were dropped: the carry limit).
# 2. the tree's zpp-cuda-test (CMake Release build for sm_90, .carry/cu) after held_stream's
#    refactor: -X (zppd SIGKILLed with an answered call queued) and -K -w 1 (a client SIGKILLed
#    with calls queued), MPS off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
Z=$PWD/.carry/zk
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree) + the switches above; command: bash bench/results/kernels-2026-11-29-s30/s30k4.sh"
echo "$DEV" > $R/head.txt
echo "(no byte-compare in this call: the carry limit; the tile changes no arithmetic)" > $R/compare-nv8.log
tail -3 $R/compare-nv8.log >> $R/head.txt
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default nv8 nv8s0; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=quant timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|Memset|quantize|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T=$(mktemp -d /tmp/zpp-k.XXXXXX)
$C/bin/zppd -s $T/z.sock -l info -o peer_listen= -b cuda > $R/zppd-lost.log 2>&1 & zp=$!
for _ in $(seq 100); do [ -S $T/z.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/lost.log
timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z.sock -X $T/mark >> $R/lost.log 2>&1 & tp=$!
for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
[ -e $T/mark ] && kill -9 $zp
wait $tp; echo "rc=$?" >> $R/lost.log; stop $zp
echo "   -X: $(grep -E '^(PASS|FAIL)' $R/lost.log | tr '\n' ' ') $(tail -1 $R/lost.log)" >> $R/head.txt
sed -i "1i $DEV" $R/zppd-lost.log
$C/bin/zppd -s $T/k.sock -l info -o peer_listen= -b cuda > $R/zppd-kill.log 2>&1 & kp=$!
for _ in $(seq 100); do [ -S $T/k.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/kill.log
timeout -k 5 170 $C/bin/zpp-cuda-test -s $T/k.sock -w 1 -K >> $R/kill.log 2>&1; echo "rc=$?" >> $R/kill.log
stop $kp
echo "   -K -w 1: $(grep -E '^(PASS|FAIL)|delta' $R/kill.log | tr '\n' ' ') $(tail -1 $R/kill.log)" >> $R/head.txt
sed -i "1i $DEV" $R/zppd-kill.log
echo "end $(date -u '+%F %T UTC')" >> $R/head.txt
cat $R/head.txt; grep -E "^===|rc=|dequantize" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
