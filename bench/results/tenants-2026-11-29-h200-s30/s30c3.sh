#!/bin/bash
# session 30, call 3 (nvidia-h200, one GPU; tree of .carry/tree, CMake Release build for sm_90
# carried as .carry/cu), MPS off; call 2's script with its wait fixed (it waited for the zppds
# too and ran past its limit after step 1's first half passed):
# 1. jobs of two Unix users at once on one zppd: zppd (cuda and host backends) as uid 995, the
#    one-rank test as uid 1000 and as uid 1001 at the same time (same job names: jobs are keyed
#    by uid), VMM then legacy IPC; zppctl sessions while they run;
# 2. zpp-cuda-test -K -w 1: a client SIGKILLed with 4 calls answered and queued behind its own
#    held stream; zppd must drain, free the job and give its device memory back; with the done
#    flags (default) and with ZPP_DONE_FLAGS=0 (events).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
DEV="# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); $(nproc) CPUs; tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/tenants-2026-11-29-h200-s30/s30c3.sh"
echo "$DEV" > $H
T=$(mktemp -d /tmp/zpp-uid.XXXXXX); chmod 0777 $T
# stop PIDs: SIGTERM, up to 10 s, then SIGKILL (so that no step can hang the call)
stop() { kill "$@" 2>/dev/null; for _ in $(seq 100); do kill -0 "$@" 2>/dev/null || break; sleep 0.1; done; kill -9 "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
C=/tmp/zcu; rm -rf $C; cp -r $PWD/.carry/cu $C; chmod -R a+rX $C; B=$C/bin
Z="setpriv --reuid 995 --regid 995 --clear-groups env LD_LIBRARY_PATH=$C/lib"
$Z $B/zppd -s $T/ucuda.sock -l info -o peer_listen= -b cuda -o allow_legacy_ipc=true > $R/zppd-uid995-cuda.log 2>&1 & PC=$!
$Z $B/zppd -s $T/uhost.sock -l info -o peer_listen= -b host > $R/zppd-uid995-host.log 2>&1 & PH=$!
for i in $(seq 100); do [ -S $T/ucuda.sock ] && [ -S $T/uhost.sock ] && break; sleep 0.1; done
for L in "" "-L"; do
  W=""
  for u in 1000 1001; do
    echo "$DEV" > $R/uid$u${L}.log
    ( timeout 120 setpriv --reuid $u --regid $u --groups 995 env LD_LIBRARY_PATH=$C/lib \
        $B/zpp-cuda-test -s $T/ucuda.sock -H $T/uhost.sock -w 1 -n 1 -m 64 $L >> $R/uid$u${L}.log 2>&1
      echo "rc=$?" >> $R/uid$u${L}.log ) &
    W="$W $!"
  done
  sleep 3
  { echo "$DEV"; echo "## zppctl sessions, uid 995, ${L:-VMM} run"; $Z $B/zppctl -s $T/ucuda.sock sessions; } >> $R/sessions.txt 2>&1
  wait $W  # the tests only: a plain wait would wait for the zppds too (call 2 did)
  for u in 1000 1001; do
    echo "   uid $u ${L:-(VMM)}: $(tail -1 $R/uid$u${L}.log) PASS $(grep -c ^PASS $R/uid$u${L}.log) FAIL $(grep -c ^FAIL $R/uid$u${L}.log)" >> $H
  done
done
{ echo "$DEV"; $Z $B/zppctl -s $T/ucuda.sock status; } > $R/status-after-uids.txt 2>&1
stop $PC $PH
sed -i "1i $DEV" $R/zppd-uid995-cuda.log $R/zppd-uid995-host.log
rm -rf $C
# ---- the one-rank kill test, as root
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for mode in flags events; do
  $C/bin/zppd -s $T/k.sock -l info -o peer_listen= -b cuda > $R/zppd-kill-$mode.log 2>&1 & kp=$!
  for _ in $(seq 100); do [ -S $T/k.sock ] && break; sleep 0.1; done
  echo "$DEV" > $R/kill-$mode.log
  if [ $mode = events ]; then E="env ZPP_DONE_FLAGS=0"; else E=""; fi
  timeout -k 5 170 $E $C/bin/zpp-cuda-test -s $T/k.sock -w 1 -K >> $R/kill-$mode.log 2>&1
  echo "rc=$?" >> $R/kill-$mode.log
  echo "   kill -w 1 ($mode): $(tail -1 $R/kill-$mode.log); $(grep -E 'device memory|settled|kill-test: a new' $R/kill-$mode.log | tr '\n' ' ')" >> $H
  stop $kp
  sed -i "1i $DEV" $R/zppd-kill-$mode.log
  rm -f $T/k.sock
done
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; cat $R/sessions.txt
tar czf $OUT/r.tgz -C $R . ; rm -rf $R
