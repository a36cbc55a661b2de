#!/bin/bash
# session 23, call 4 (nvidia-h200-x4, lent for the first time): issue 14's layouts with one rank per
# physical GPU, as far as one call allows, on tree 7320ec5 under MPS:
#  1. run_cuda.sh test 256, W=4: 1 node x 4 GPUs and 2 virtual nodes x 2 against the host backend, two
#     tenants, rejoin, admission, the SIGKILLed client;
#  2. run_cuda.sh bench 1024, W=4: zpp-bench on 1 node x 4 GPUs against NCCL;
#  3. run_multi.sh 1024, LAYOUTS=2x2x4: two daemons, node 0 on GPUs 0,1 and node 1 on GPUs 2,3 (NCCL_HOSTID
#     split): correctness up to 64 MiB, zpp-bench up to 1 GiB with the goal pairs. No failure steps.
# Not run here: issue 14's training proof (runs b, e, f).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/x4-2026-11-28-s23/s23x4.sh" > $H
nvidia-smi topo -m >> $H 2>&1
echo "run_cuda test start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/t W=4 MPS=1 timeout 200 bash scripts/gpu/run_cuda.sh test 256) > $R/t.log 2>&1; echo "run_cuda test rc=$?" >> $H
echo "run_cuda bench start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/b W=4 MPS=1 timeout 120 bash scripts/gpu/run_cuda.sh bench 1024) > $R/b.log 2>&1; echo "run_cuda bench rc=$?" >> $H
echo "run_multi start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/m MPS=1 LAYOUTS=2x2x4 FAILURE=0 TEST_MIB=64 timeout 245 bash scripts/gpu/run_multi.sh 1024) > $R/m.log 2>&1; echo "multi rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H | grep -v '^GPU\|^\s' 
grep -E "^== .*exit|^PASS lines|^FAIL|^PASS (rejoin|admission|kill|concurrent)" $R/t/summary.txt | head -30
sed -n '/^goals/,$p' $R/b/bench-1x2-mps.log 2>/dev/null | head -30
grep -E "^== .*exit|^PASS lines|^FAIL" $R/m/summary.txt | head
sed -n '/^goals/,$p' $R/m/bench-2x2x4.log 2>/dev/null | head -40
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
