#!/bin/bash
# session 32, call 7 (nvidia-h200, one GPU): the guard for huge scales once a tile instead of per
# chunk. The tree tests each chunk's scale (FMNMX) and, when a lane met one >= 2^104, sums again
# with the reference's steps (about a point: the tree without the guard runs ~1 point faster, call
# 5). -DZK_RQT_VOTE=1 (rqt-vote.patch beside this file): each lane tests its share of the warp's
# tile scales once, one __any_sync; a warp with a huge scale sums with the reference's steps, the
# others in the fast form with no test. Same contract, same bytes. Builds made on the build machine
# with ZK_BUILD_ONLY=1 tests/gpu/run_gpu.sh, carried as .carry/zk7.tar.xz:
#   default  the tree (37f0ed4's kernels)   vote  -DZK_RQT_VOTE=1   u  -DZK_B4G=0 (no guard)
# full byte-compare of vote (its D_WIDE reductions reach scales above 2^104), memcheck of its quick
# compare; kernel_bench 256 MiB, section reduce, alternated three times.
R=$OUT/r; mkdir -p $R
Z=/tmp/zk7; mkdir -p $Z; tar xJf .carry/zk7.tar.xz -C $Z
DEV="# device: $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv,noheader | head -1); tree $(cat .carry/tree); command: bash bench/results/kernels-2026-11-29-s32/s32k7.sh"
H=$R/head.txt
echo "$DEV" > $H
{ echo "$DEV"; timeout 240 $Z/vote/gpu_compare 0x5EED; echo "gpu_compare rc=$?"; } > $R/compare-vote.log 2>&1
tail -3 $R/compare-vote.log >> $H
SAN=/usr/local/cuda/bin/compute-sanitizer
{ echo "$DEV"; timeout 150 $SAN --tool memcheck $Z/vote/gpu_compare 0x5EED quick 2>&1 | tail -4; } > $R/memcheck-vote.log 2>&1
echo "memcheck vote: $(tail -1 $R/memcheck-vote.log)" >> $H
echo "$DEV" > $R/alt.txt
for i in 1 2 3; do for v in default vote u; do
  echo "=== $v $i $(date -u '+%T')" >> $R/alt.txt
  ZK_BENCH_ONLY=reduce timeout 120 $Z/$v/kernel_bench 256 > $R/kb.tmp 2>&1; echo "rc=$?" >> $R/alt.txt
  grep -E "D2D|qgz|^kernel_bench" $R/kb.tmp >> $R/alt.txt
done; done
rm -f $R/kb.tmp
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "^===|reduce\+requant +int4" $R/alt.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
