#!/bin/bash
# session 29, call 9 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): the tree after the review (the flags' memfd mapped and checked by the
# job layer, cu_cflags, libzpp's one flag state): a client of uid 1000 against a zppd of uid
# 995 (VMM and legacy IPC), the 1x1 test against a host zppd up to 64 MiB, two tenants'
# concurrent jobs with zppctl sessions during them, and zpp-cuda-test -X; MPS off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/flags-2026-11-29-h200-s29/s29c9.sh"
echo "$DEV" > $H
T=$(mktemp -d /tmp/zpp-uid.XXXXXX); chmod 0777 $T
# ---- across users
C=/tmp/zcu; rm -rf $C; cp -r $PWD/.carry/cu $C; chmod -R a+rX $C; B=$C/bin
Z="setpriv --reuid 995 --regid 995 --clear-groups env LD_LIBRARY_PATH=$C/lib"
$Z $B/zppd -s $T/ucuda.sock -l info -o peer_listen= -b cuda -o allow_legacy_ipc=true > $R/zppd-uid995-cuda.log 2>&1 & PC=$!
$Z $B/zppd -s $T/uhost.sock -l info -o peer_listen= -b host > $R/zppd-uid995-host.log 2>&1 & PH=$!
for i in $(seq 100); do [ -S $T/ucuda.sock ] && [ -S $T/uhost.sock ] && break; sleep 0.1; done
U="setpriv --reuid 1000 --regid 1000 --groups 995 env LD_LIBRARY_PATH=$C/lib"
echo "$DEV" > $R/uid.log
for L in "" "-L"; do
  echo "#### uid 1000 ${L:-(VMM)}" >> $R/uid.log
  timeout 90 $U $B/zpp-cuda-test -s $T/ucuda.sock -H $T/uhost.sock -w 1 -n 1 -m 1 $L >> $R/uid.log 2>&1
  echo "   uid 1000 ${L:-(VMM)}: rc=$?" >> $H
done
kill $PC $PH; wait $PC $PH 2>/dev/null
sed -i "1i $DEV" $R/zppd-uid995-cuda.log $R/zppd-uid995-host.log
rm -rf $C
# ---- as root
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
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
$C/bin/zppctl -s $T/c.sock status > $R/status-after.txt 2>&1; sed -i "1i $DEV" $R/status-after.txt
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
grep -E "^PASS: |^FAIL" $R/uid.log | head; grep -E "^(PASS|FAIL|KNOWN)" $R/lost.log; grep -E "^FAIL" $R/test-1x1.log | head -3
grep -E "DEFERRED|GPU-" $R/status-after.txt
grep -hE "level=(warn|error)" $R/zppd-*.log | grep -v "not running under CUDA MPS" | head
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
