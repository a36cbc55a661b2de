#!/bin/bash
# session 23, call 3 (nvidia-h200-x2): the tree with Goodbye (a rank that closes on purpose says it; a
# disconnect without one is a death and aborts the job at once), after call 2 caught a client killed
# between calls holding node 0's next call for rejoin_timeout_ms:
#  1. run_multi.sh, MPS off: the 2x1 layout (correctness up to 16 MiB, bench up to 16 MiB) and the three
#     failure steps (node 1's zppd SIGKILLed; SIGSTOPped then resumed; node 1's rank SIGKILLed by itself);
#  2. run_cuda.sh test 64 under MPS: 1x2 and 2 virtual nodes x 1, two tenants, rejoin (a rank that leaves
#     with zpp_close and comes back), admission;
#  3. client/python/tests with torch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-28-s23/s23c3.sh" > $H
echo "run_multi start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 LAYOUTS=2x1 TEST_MIB=16 BENCH_ARGS="-P 0" timeout 200 bash scripts/gpu/run_multi.sh 16) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "run_cuda start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 120 bash scripts/gpu/run_cuda.sh test 64) > $R/c.log 2>&1; echo "run_cuda rc=$?" >> $H
echo "pytest start $(date -u '+%F %T UTC')" >> $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
timeout 240 python3 -m pytest -q -p no:cacheprovider client/python/tests -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "^== |^PASS lines|^FAIL|PASS death|FAIL death|SIGKILLs itself" $R/m/summary.txt | grep -v 'bench\|layout' | head -40
grep -E "^== .*exit|^PASS rejoin|^FAIL" $R/c/summary.txt | head -20
tail -3 $R/pytest.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
