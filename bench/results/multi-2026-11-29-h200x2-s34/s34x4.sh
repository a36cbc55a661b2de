#!/bin/bash
# session 34, call 4 (nvidia-h200-x2): the fenced kernels' abort word read once per launch (xs_aborted)
# instead of once per CTA, against the tree before it (b821eaf), on two H200s:
#  1. bench/kernels/fenced_bench 2000 (the kernels alone, GPU 0 and GPU 1 members, 4 KiB - 2 MiB),
#     old / new / old / new (.carry/zk/{old,new}, carried with .carry/cu-old in .carry/x4/x4.tar.xz: tests/gpu/run_gpu.sh ZK_BUILD_ONLY=1 builds of each tree,
#     both with this session's fenced_bench.c);
#  2. the new build's gpu_compare 0x5EED fenced (every fenced case, the new abort and 128-CTA cases);
#  3. run_cuda.sh bench 16 under MPS (1 node x 2 GPUs), zppd and zpp-bench of b821eaf (.carry/cu-old/bin,
#     ZPP_BIN) and of this tree, alternated three times;
#  4. run_cuda.sh all 64 under MPS with this tree (correctness against the host backend, concurrency,
#     rejoin, admission, publish, bench, kill).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .carry/x4/x4.tar.xz -C .carry || exit 1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu; b821eaf's in .carry/cu-old); command: bash bench/results/multi-2026-11-29-h200x2-s34/s34x4.sh"
echo "$DEV" > $H
for i in 1 2; do for v in old new; do
  echo "== fenced_bench $v-$i start $(date -u '+%F %T UTC')" >> $H
  { echo "$DEV"; timeout 60 .carry/zk/$v/fenced_bench 2000; echo "rc=$?"; } > $R/fenced-$v-$i.log 2>&1
done; done
echo "== gpu_compare fenced start $(date -u '+%F %T UTC')" >> $H
{ echo "$DEV"; timeout 120 .carry/zk/new/gpu_compare 0x5EED fenced; echo "gpu_compare rc=$?"; } > $R/compare-fenced.log 2>&1
for i in 1 2 3; do for v in old new; do
  echo "== run_cuda bench 16 $v-$i start $(date -u '+%F %T UTC')" >> $H
  b=$PWD/.carry/cu/bin; [ $v = old ] && b=$PWD/.carry/cu-old/bin
  (ZPP_BIN=$b OUT=$R/b-$v-$i MPS=1 timeout 80 bash scripts/gpu/run_cuda.sh bench 16) > $R/b-$v-$i.log 2>&1; echo "   rc=$?" >> $H
done; done
echo "== run_cuda all 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 240 bash scripts/gpu/run_cuda.sh all 64) > $R/c.log 2>&1; echo "   rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for f in $R/fenced-*.log; do echo "== $(basename $f)"; grep -vE "^#" $f | head -40; done
tail -4 $R/compare-fenced.log
for d in $R/b-*/; do echo "== $(basename $d)"; grep -E "^daemon overhead" $d/bench-1x2-mps.log
  grep -E "^(65536|1048576|16777216) +(zppd_allgather_bf16|zppd_qwz_int8|zppd_reduce_scatter_bf16|nccl_allgather_bf16) " $d/bench-1x2-mps.log; done
grep -E "^== .*(exit|skipped)|^PASS lines|^FAIL|PASS: two|PASS kill|^publish" $R/c/summary.txt | head -30
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
