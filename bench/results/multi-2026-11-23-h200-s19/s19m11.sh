#!/bin/bash
# session 19, call 12 (one H200): the Python binding's CPU tests, which need torch (absent on the build machine):
# client/python/tests against the carried zppd and libzpp (host backend), among them test_torch_cpu's
# save_checkpoint / resume, which now asks zpp_check before writing.
R=$OUT/r; mkdir -p $R
H=$R/head.txt
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (libzpp and zppd from .carry/cu); python $(python3 -c 'import sys,torch;print(sys.version.split()[0], "torch", torch.__version__)' 2>&1); command: bash bench/results/multi-2026-11-23-h200-s19/s19m11.sh" > $H
export LD_LIBRARY_PATH=$PWD/.carry/cu/lib ZPPD_BIN=$PWD/.carry/cu/bin/zppd ZPP_LIB=$PWD/.carry/cu/lib/libzpp.so PYTHONDONTWRITEBYTECODE=1
python3 -c "import pytest, numpy" >> $H 2>&1 && echo "pytest and numpy: yes" >> $H
timeout 400 python3 -m pytest -q -p no:cacheprovider client/python/tests -rs > $R/pytest.log 2>&1; echo "pytest rc=$?" >> $H
cat $H; tail -25 $R/pytest.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
