#!/bin/bash
# session 19, call 10 (one H100, nvidia-h100-x1): the same as call 9 on the other GPU kind: scripts/gpu/run_mps.sh with its step 4 (can a client that keeps running get a faulted GPU back by resetting the device?) and its asserted step 3 (a zppd already up and idle on the GPU
# while another MPS client is SIGKILLed mid-kernel, then while one faults), on the tree with cu_health (each GPU's context asked once a second), the wider sticky
# list and the MPS hint in the sticky-error message. zppd.old = call 2's build.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/multi-2026-11-23-h200-s19/s19m9.sh" > $H
echo "run_mps start $(date -u '+%F %T UTC')" >> $H
(OUT=$R/mps ZPP_OLD=$PWD/.carry/cu/bin/zppd.old timeout 400 bash scripts/gpu/run_mps.sh) > $R/mps.log 2>&1; echo "mps rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
cat $R/mps/summary.txt
grep -E "level=(error|warn)" $R/mps/zppd-mps.log | cut -c1-400 | head -20
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
