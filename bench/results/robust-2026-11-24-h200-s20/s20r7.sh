#!/bin/bash
# session 20, call 11 (one H200): client/python/tests with torch after the zpp.torch review's fixes and the every-dtype non-finite check (a failed
# CUDA call raises on every wait, zero_grad drops the non-finite count, frozen parameters are not decayed),
# against the carried zppd and libzpp (host backend).
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) python files, zppd and libzpp from .carry/cu ($(cat .carry/tree)); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/robust-2026-11-24-h200-s20/s20r7.sh" > $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
timeout 300 python3 -m pytest -q -p no:cacheprovider client/python/tests -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
cat $H; tail -25 $R/pytest.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
