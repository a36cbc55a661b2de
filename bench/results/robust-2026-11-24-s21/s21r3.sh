#!/bin/bash
# session 21, call 7 (one H200): cu_job_close's new path for a job whose streams it cannot fence (the loop polls
# them until they drain), forced on every job close by ZPPD_TEST_CLOSE_NO_FENCE=1 in the daemons' environment:
#  1. run_multi.sh 2x1 on one GPU without MPS (GPU1=0 MPS=0) with the hook: correctness up to 16 MiB against the
#     host backend and the member-death step (a node gone: communicators aborted at once, then the wait);
#  2. the same without the hook (the fenced path as before), correctness only.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/robust-2026-11-24-s21/s21r3.sh" > $H
echo "hook start $(date -u '+%F %T UTC')" >> $H
(export ZPPD_TEST_CLOSE_NO_FENCE=1; OUT=$R/h MPS=0 GPU1=0 LAYOUTS=2x1 TEST_MIB=16 BENCH_ARGS="-m 16 -P 0" timeout 280 bash scripts/gpu/run_multi.sh 16) > $R/h.log 2>&1; echo "hook rc=$?" >> $H
echo "plain start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/p MPS=0 GPU1=0 LAYOUTS=2x1 TEST_MIB=16 FAILURE=0 BENCH_ARGS="-m 16 -P 0" timeout 200 bash scripts/gpu/run_multi.sh 16) > $R/p.log 2>&1; echo "plain rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for x in h p; do echo "== $x"; grep -E "PASS lines|FAIL|exit|PASS death|failure:" $R/$x/summary.txt | head -20; echo "closes without fences: $(grep -c 'closing a job without events' $R/$x/zppd.log)"; grep -c "never drained" $R/$x/zppd.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
