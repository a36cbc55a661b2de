#!/bin/bash
# session 20, call 6 (one H200): the mixed-steps checkpoint test once more, now symmetric (every rank's file
# is of step 1 beside a manifest of step 3, so every rank refuses before any collective). Call 5 showed why
# the asymmetric versions waited: the refusing rank said Hello first and left before the others joined, so its
# job ended and the others formed a new one that waits for it until call_timeout_ms (hang.log there).
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (libzpp and zppd from .carry/cu); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-24-h200-s20/s20r3.sh" > $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
timeout 200 python3 -m pytest -q -p no:cacheprovider client/python/tests/test_torch_cpu.py -k "mixed_steps or failed_gather or resume" -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
cat $H; tail -15 $R/pytest.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
