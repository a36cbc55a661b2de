#!/bin/bash
# session 20, call 9 (one H200): calls 7-8 found that a client needs the daemon's /dev/shm (CUDA IPC events
# fail with CUDA_ERROR_MAP_FAILED on a /dev/shm of its own; another IPC namespace alone is fine). Does that
# also hold across Unix users, as in the systemd unit (zppd as its own user, clients in its group) and the
# Kubernetes manifests (uid 995 and 1000)? zppd (cuda, allow_legacy_ipc) and a host zppd run as uid 995
# gid 995; zpp-cuda-test -w 1 -n 1 -m 1 (and -L) runs (h) as uid 1000 with supplementary group 995, the same
# /dev/shm; (i) as root, for comparison; (j) as (h) under unshare --ipc (another IPC namespace).
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=/tmp/zcu; rm -rf $C; cp -r $PWD/.carry/cu $C; chmod -R a+rX $C; B=$C/bin; export LD_LIBRARY_PATH=$C/lib
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); uid $(id -u); /dev/nvidia0 $(stat -c %A /dev/nvidia0); command: bash bench/results/robust-2026-11-24-h200-s20/s20r5.sh" > $H
T=$(mktemp -d /tmp/zpp-uid.XXXXXX); chmod 0777 $T
Z="setpriv --reuid 995 --regid 995 --clear-groups env LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
$Z $B/zppd -s $T/cuda.sock -l info -o peer_listen= -b cuda -o allow_legacy_ipc=true > $R/zppd-cuda.log 2>&1 & PC=$!
$Z $B/zppd -s $T/host.sock -l info -o peer_listen= -b host > $R/zppd-host.log 2>&1 & PH=$!
for i in $(seq 100); do $B/zppctl -s $T/cuda.sock status > /dev/null 2>&1 && $B/zppctl -s $T/host.sock status > /dev/null 2>&1 && break; sleep 0.2; done
echo "sockets: $(ls -l $T | tail -n +2 | awk '{print $1, $3, $4, $NF}' | tr '\n' ';')" >> $H
run() { # $1 name, $2.. wrapper
  local name=$1; shift
  for L in "" "-L"; do
    timeout 90 "$@" $B/zpp-cuda-test -s $T/cuda.sock -H $T/host.sock -w 1 -n 1 -m 1 $L > $R/$name$L.out 2>&1; r=$?
    echo "$name ${L:-(VMM)}: exit $r, $(grep -c '^PASS' $R/$name$L.out) PASS, $(grep -c '^FAIL' $R/$name$L.out) FAIL; $(grep -E 'failed|error|refused' $R/$name$L.out | head -2 | cut -c1-250)" >> $H
  done
}
U="setpriv --reuid 1000 --regid 1000 --groups 995 env LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
run h-uid1000-grp995 $U
run i-root env
run j-uid1000-own-ipc unshare --ipc $U
echo "/dev/shm after: $(ls -la /dev/shm | tail -n +2 | awk '{print $1, $3, $NF}' | tr '\n' ';' | cut -c1-600)" >> $H
kill $PC $PH; wait $PC $PH 2>/dev/null
echo "zppd cuda: $(grep -cE 'level=(warn|error)' $R/zppd-cuda.log) warn/error lines" >> $H
cat $H
grep -E 'level=(warn|error)' $R/zppd-cuda.log | head -8 | cut -c1-300
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T $C
