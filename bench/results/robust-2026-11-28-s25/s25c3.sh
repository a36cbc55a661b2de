#!/bin/bash
# session 25, call 3 (nvidia-h200-x2): session 24's review commits (8351d03: the rotated gathers' member index
# named before the node loop; 6f74a13: cluster.c's one branch for a peer's ABORTED answer, test_rejoin's helper,
# the death test's dying rank as one function) had not run on a GPU.
#  1. run_multi.sh, MPS off: 2x1 correctness up to 16 MiB, bench up to 16 MiB, the three failure steps;
#  2. run_cuda.sh test 64 under MPS: 1x2, 2 virtual nodes x 1, two tenants, rejoin, admission, kill.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/robust-2026-11-28-s25/s25c3.sh" > $H
echo "run_multi start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 LAYOUTS=2x1 TEST_MIB=16 BENCH_ARGS="-P 0" timeout 200 bash scripts/gpu/run_multi.sh 16) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "run_cuda start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 150 bash scripts/gpu/run_cuda.sh test 64) > $R/c.log 2>&1; echo "run_cuda rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^== |^PASS lines|^FAIL|PASS death|FAIL death|SIGKILLs itself" $R/m/summary.txt | grep -v 'bench\|layout' | head -40
grep -E "^== .*exit|^PASS|^FAIL|PASS lines" $R/c/summary.txt | head -30
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
