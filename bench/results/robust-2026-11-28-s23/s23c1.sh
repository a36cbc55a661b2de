#!/bin/bash
# session 23, call 1 (nvidia-h200-x2): the tree of session 22 (its commits never ran on a GPU: the fenced
# kernels' xs_enter now refuses to read members after an abort or a timeout, releases fenced on every GPU,
# gates opened at abort, publish hashing never waits on a client; hpZ store charged by the VMM granule;
# libzpp timeouts) plus session 23's test changes:
#  1. tests/gpu/run_gpu.sh: the kernels built on the device, the full byte-compare (now also: an aborted or
#     timed-out fenced kernel leaves its output unwritten), kernel_bench at 256 MiB, memcheck;
#  2. scripts/gpu/run_cuda.sh all 256 under MPS: 1 node x 2 GPUs and 2 virtual nodes x 1 (peer access, the
#     fenced one-node kernels), two tenants at once, rejoin, admission, bench, the SIGKILLed client;
#  3. client/python/tests with torch against the carried zppd and libzpp.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-28-s23/s23c1.sh" > $H
echo "kernels start $(date -u '+%F %T UTC')" >> $H
ZK_TORCH=0 timeout 200 bash tests/gpu/run_gpu.sh $R/k > $R/k.log 2>&1; echo "run_gpu rc=$?" >> $H
echo "run_cuda start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/c MPS=1 timeout 240 bash scripts/gpu/run_cuda.sh all 256) > $R/c.log 2>&1; echo "run_cuda rc=$?" >> $H
echo "pytest start $(date -u '+%F %T UTC')" >> $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
timeout 200 python3 -m pytest -q -p no:cacheprovider client/python/tests -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
tail -3 $R/k.log; head -8 $R/k/summary.txt
grep -E "ERROR SUMMARY|byte-compares" $R/k/sanitizer.log | tail -2
grep -E "^== |^PASS|^FAIL" $R/c/summary.txt | head -40
tail -3 $R/pytest.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
