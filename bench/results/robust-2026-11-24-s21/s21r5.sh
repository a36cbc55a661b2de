#!/bin/bash
# session 21, call 9 (one H200): after call 8's one failure (rank 0's all-gather refused by NCCL itself as node 1
# died: ZPP_EBACKEND with NCCL's words instead of ZPP_EABORTED naming node 1), such a call is held until the job's
# abort names the node. run_multi.sh 2x1 on one GPU without MPS (GPU1=0 MPS=0): once in full (correctness up to
# 64 MiB, bench, member death), then the member-death step alone three more times (LAYOUTS=" ").
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/robust-2026-11-24-s21/s21r5.sh" > $H
echo "full start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m0 MPS=0 GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_ARGS="-P 0" timeout 200 bash scripts/gpu/run_multi.sh 64) > $R/m0.log 2>&1; echo "full rc=$?" >> $H
for i in 1 2 3; do
  (OUT=$R/m$i MPS=0 GPU1=0 LAYOUTS=" " timeout 100 bash scripts/gpu/run_multi.sh 16) > $R/m$i.log 2>&1; echo "death-only #$i rc=$?" >> $H
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
for i in 0 1 2 3; do echo "== m$i"; grep -E "PASS lines|FAIL|PASS death|exit status|test 2x1 exit" $R/m$i/summary.txt | cut -c1-400 | head -12; grep -c "waiting for the heartbeats to name a node" $R/m$i/zppd.log; done
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
