#!/bin/bash
# session 29, call 8 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): the final tree (the host backend's flags and a guard in job.c came
# after call 7): the 1x1 test against a host zppd up to 64 MiB, whose host zppd now runs its
# reference sessions on flags too (zpp-cuda-test's host connections offer none: the host
# side of libzpp has no CUDA), zpp-cuda-test -X, and zppctl sessions during a -C run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/flags-2026-11-29-h200-s29/s29c8.sh"
echo "$DEV" > $H
T=$(mktemp -d)
$C/bin/zppd -s $T/c.sock -l info -o peer_listen=127.0.0.1:0 -b cuda -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64 > $R/zppd-cuda.log 2>&1 &
cp=$!
$C/bin/zppd -s $T/h.sock -l info -o peer_listen=127.0.0.1:0 -b host -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G > $R/zppd-host.log 2>&1 &
hp=$!
for _ in $(seq 100); do [ -S $T/c.sock ] && [ -S $T/h.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/test-1x1.log
timeout 100 $C/bin/zpp-cuda-test -s $T/c.sock -H $T/h.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
echo "$DEV" > $R/sessions.txt
timeout 90 $C/bin/zpp-cuda-test -s $T/c.sock -w 1 -C 100000 > $R/conc.log 2>&1 &
a=$!
sleep 2
$C/bin/zppctl -s $T/c.sock sessions >> $R/sessions.txt 2>&1
wait $a; echo "   concurrent rc=$? $(tail -1 $R/conc.log)" >> $H
sed -i "1i $DEV" $R/conc.log
kill $cp $hp; wait $cp $hp 2>/dev/null
sed -i "1i $DEV" $R/zppd-cuda.log $R/zppd-host.log
$C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-lost.log 2>&1 &
zp=$!
for _ in $(seq 100); do [ -S $T/z.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/lost.log
timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z.sock -X $T/mark >> $R/lost.log 2>&1 &
tp=$!
for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
[ -e $T/mark ] && kill -9 $zp
wait $zp 2>/dev/null; wait $tp; echo "   lost rc=$?" >> $H
sed -i "1i $DEV" $R/zppd-lost.log
cat $H; cat $R/sessions.txt
grep -E "^(PASS|FAIL|KNOWN)" $R/lost.log; grep -E "^FAIL" $R/test-1x1.log | head -3
grep -hE "level=(warn|error)" $R/zppd-*.log | grep -v "not running under CUDA MPS" | head
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
