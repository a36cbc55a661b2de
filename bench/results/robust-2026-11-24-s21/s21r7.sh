#!/bin/bash
# session 21, call 11 (one H200): the tree after the session-21 review (job.c, server.c, config.c, peer.c refactors, libzpp env
# helper and next_seq check, zppctl -t through libzpp, zpp.torch helpers); as call 10. (Call 10: reload refusal, stop signals ignored at the end,
# libzpp reply timeout; before it, as call 8: the audits of the admin side, client, metrics,
# main, kernels references; read backpressure; failed calls record their done events; unfenced job close) on
# the GPU path, as call 6. (Call 6: job.c: a rank leaving a forming job keeps
# its place; peer.c: parked Joins capped apart; admin.c; coll.c: invalidate-all with a content key; the bench's
# and gate's switches) on the GPU path:
#  1. run_multi.sh's 2x1 layout on one GPU without MPS (GPU1=0 MPS=0): correctness up to 64 MiB against the
#     host backend, zpp-bench up to 64 MiB, and the member-death step (node 1's zppd SIGKILLed mid-job);
#  2. client/python/tests with torch against the carried zppd and libzpp.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-24-s21/s21r7.sh" > $H
echo "run_multi 64 start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=0 GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_ARGS="-P 0" timeout 330 bash scripts/gpu/run_multi.sh 64) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "pytest start $(date -u '+%F %T UTC')" >> $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
timeout 240 python3 -m pytest -q -p no:cacheprovider client/python/tests -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
grep -E "PASS lines|FAIL|exit|EABORTED|member|failure:" $R/m/summary.txt | head -30
tail -3 $R/pytest.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
