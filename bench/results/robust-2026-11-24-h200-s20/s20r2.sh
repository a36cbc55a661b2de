#!/bin/bash
# session 20, call 5 (one H200): call 4's one pytest failure. Its first version of
# test_load_refuses_a_checkpoint_of_mixed_steps let rank 1 leave after the refusal, and ranks 2 and 3 did not
# report within 60 s. 1. The rewritten test (rank 1 makes the barrier its load did not reach) and the
# failed-wait test; 2. hang_repro.py: the first version's scenario with each rank's end and the daemon's log.
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (libzpp and zppd from .carry/cu); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-24-h200-s20/s20r2.sh" > $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
timeout 200 python3 -m pytest -q -p no:cacheprovider client/python/tests/test_torch_cpu.py -k "mixed_steps or failed_gather or resume" -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
timeout 150 python3 bench/results/robust-2026-11-24-h200-s20/hang_repro.py > $R/hang.log 2>&1; echo "hang_repro rc=$?" >> $H
cat $H; tail -5 $R/pytest.log; grep -E "^rank|^run:" $R/hang.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
