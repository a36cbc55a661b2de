#!/bin/bash
# session 21 (one GPU machine; PyTorch there, none here): the Python suite against the host backend of the
# carried zppd, with the new test of a backward that raises half way (zpp.torch's stale arm and zero_grad).
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (zppd and libzpp from .carry/cu; Python files of the working tree); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-24-s21/s21p1.sh" > $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
echo "pytest start $(date -u '+%F %T UTC')" >> $H
timeout 300 python3 -m pytest -q -p no:cacheprovider client/python/tests -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; grep -E "passed|failed|error" $R/pytest.log | tail -3; grep -B2 -A30 "^____" $R/pytest.log | head -120
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
