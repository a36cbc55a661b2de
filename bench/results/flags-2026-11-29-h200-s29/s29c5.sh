#!/bin/bash
# session 29, call 5 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu): sessions on the client's flags with no interprocess event (6125f61).
#  1. across Unix users, MPS off (as session 20's s20r5.sh): zppd (cuda and host) as uid 995,
#     sockets 0660 995:995; zpp-cuda-test -w 1 -n 1 -m 1 against the host zppd (VMM buffers, and
#     -L legacy IPC) as uid 1000 in group 995; as uid 1000 with ZPP_DONE_FLAGS=0 (the events:
#     session 20 saw CUDA_ERROR_MAP_FAILED); as uid 1000 with a /dev/shm of its own;
#  2. MPS off, as root: zpp-cuda-test -X twice, the 1x1 test against a host zppd up to 64 MiB,
#     two tenants' concurrent jobs (10000 calls each), and run_multi.sh's 2x1 on this GPU (the
#     correctness test up to 64 MiB and the failure steps zppd and client).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/flags-2026-11-29-h200-s29/s29c5.sh"
echo "$DEV" > $H
# ---- 1. across users
C=/tmp/zcu; rm -rf $C; cp -r $PWD/.carry/cu $C; chmod -R a+rX $C; B=$C/bin
T=$(mktemp -d /tmp/zpp-uid.XXXXXX); chmod 0777 $T
Z="setpriv --reuid 995 --regid 995 --clear-groups env LD_LIBRARY_PATH=$C/lib"
$Z $B/zppd -s $T/cuda.sock -l info -o peer_listen= -b cuda -o allow_legacy_ipc=true > $R/zppd-uid995-cuda.log 2>&1 & PC=$!
$Z $B/zppd -s $T/host.sock -l info -o peer_listen= -b host > $R/zppd-uid995-host.log 2>&1 & PH=$!
for i in $(seq 100); do LD_LIBRARY_PATH=$C/lib $B/zppctl -s $T/cuda.sock status > /dev/null 2>&1 && LD_LIBRARY_PATH=$C/lib $B/zppctl -s $T/host.sock status > /dev/null 2>&1 && break; sleep 0.2; done
echo "sockets: $(ls -l $T | tail -n +2 | awk '{print $1, $3, $4, $NF}' | tr '\n' ';')" >> $H
echo "$DEV" > $R/uid.log
run() { # name, wrapper...
  local name=$1; shift
  for L in "" "-L"; do
    echo "#### $name ${L:-(VMM)}" >> $R/uid.log
    timeout 90 "$@" $B/zpp-cuda-test -s $T/cuda.sock -H $T/host.sock -w 1 -n 1 -m 1 $L > $R/o.txt 2>&1; r=$?
    cat $R/o.txt >> $R/uid.log
    echo "   $name ${L:-(VMM)}: exit $r, $(grep -c '^PASS' $R/o.txt) PASS, $(grep -c '^FAIL' $R/o.txt) FAIL; $(grep -E 'failed|error|refused' $R/o.txt | head -2 | cut -c1-250)" >> $H
  done
}
U="setpriv --reuid 1000 --regid 1000 --groups 995 env LD_LIBRARY_PATH=$C/lib"
echo "== uid start $(date -u '+%F %T UTC')" >> $H
run uid1000-flags $U
run uid1000-events $U ZPP_DONE_FLAGS=0
run uid1000-own-shm unshare --mount --propagation private sh -c "mount -t tmpfs tmpfs /dev/shm && exec \"\$0\" \"\$@\"" $U
kill $PC $PH; wait $PC $PH 2>/dev/null
sed -i "1i $DEV" $R/zppd-uid995-cuda.log $R/zppd-uid995-host.log
rm -rf $C
# ---- 2. as root
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "$DEV" > $R/lost.log
lost() {
  local n=$1
  rm -f $T/z.sock $T/mark
  $C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -b cuda > $R/zppd-$n.log 2>&1 &
  local zp=$!
  for _ in $(seq 100); do [ -S $T/z.sock ] && break; sleep 0.1; done
  echo "#### $n" >> $R/lost.log
  timeout -k 5 60 $C/bin/zpp-cuda-test -s $T/z.sock -X $T/mark >> $R/lost.log 2>&1 &
  local tp=$!
  for _ in $(seq 300); do [ -e $T/mark ] && break; kill -0 $tp 2>/dev/null || break; sleep 0.1; done
  if [ -e $T/mark ]; then kill -9 $zp; else echo "   $n: no marker" >> $H; kill $zp; fi
  wait $zp 2>/dev/null
  wait $tp; echo "   $n: test rc=$?" >> $H
  sed -i "1i $DEV" $R/zppd-$n.log
}
echo "== lost start $(date -u '+%F %T UTC')" >> $H
lost lost-1
lost lost-2
echo "== 1x1 start $(date -u '+%F %T UTC')" >> $H
$C/bin/zppd -s $T/c.sock -l info -o peer_listen=127.0.0.1:0 -b cuda -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64 > $R/zppd-cuda.log 2>&1 &
cp=$!
$C/bin/zppd -s $T/h.sock -l info -o peer_listen=127.0.0.1:0 -b host -o host_threads=8 -o store_budget=16G -o store_budget_per_tenant=16G > $R/zppd-host.log 2>&1 &
hp=$!
for _ in $(seq 100); do [ -S $T/c.sock ] && [ -S $T/h.sock ] && break; sleep 0.1; done
echo "$DEV" > $R/test-1x1.log
timeout 100 $C/bin/zpp-cuda-test -s $T/c.sock -H $T/h.sock -w 1 -n 1 -m 64 -L >> $R/test-1x1.log 2>&1
echo "   1x1 rc=$? PASS $(grep -c ^PASS $R/test-1x1.log) FAIL $(grep -c ^FAIL $R/test-1x1.log)" >> $H
timeout 100 $C/bin/zpp-cuda-test -s $T/c.sock -w 1 -C 10000 >> $R/test-1x1.log 2>&1
echo "   concurrent rc=$?" >> $H
$C/bin/zppctl -s $T/c.sock status > $R/status-after.txt 2>&1; sed -i "1i $DEV" $R/status-after.txt
kill $cp $hp; wait $cp $hp 2>/dev/null
sed -i "1i $DEV" $R/zppd-cuda.log $R/zppd-host.log
echo "== multi start $(date -u '+%F %T UTC')" >> $H
GPU1=0 LAYOUTS=2x1 TEST_MIB=64 BENCH_TIMEOUT=1 FAILURES="zppd client" OUT=$R/multi timeout 300 \
  scripts/gpu/run_multi.sh 64 > $R/multi.out 2>&1; echo "   multi rc=$?" >> $H
for f in $R/multi.out $R/multi/summary.txt $R/multi/bench-2x1.log; do [ -f $f ] && sed -i "1i $DEV" $f; done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H
echo "== lost"; grep -E "^(####|PASS|FAIL|KNOWN)" $R/lost.log
echo "== 1x1"; grep -E "^FAIL|concurrent" $R/test-1x1.log | head
echo "== multi"; grep -E "PASS lines|FAIL|exit|^PASS death" $R/multi/summary.txt | head -20
echo "== zppd warnings"; grep -hE "level=(warn|error)" $R/zppd-*.log $R/multi/zppd.log | grep -vE "not running under CUDA MPS|job aborted|abort not delivered|a call failed across" | head -20
grep -E "DEFERRED|GPU-" $R/status-after.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
