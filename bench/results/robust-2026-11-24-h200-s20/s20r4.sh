#!/bin/bash
# session 20, calls 7 and 8 (one H200; call 8 added d-g): does a client in its own IPC and PID namespaces, with its own /dev/shm (what a
# training pod beside the zppd DaemonSet pod has), reach a cuda zppd? docs/kubernetes.md says no hostIPC or
# hostPID is needed (descriptors travel over the socket, a legacy IPC handle opens across namespaces); a
# review doubted it for the IPC *events* of zpp_cuda_attach / Hello. One cuda zppd (allow_legacy_ipc) and
# one host zppd in this machine's namespaces; zpp-cuda-test -w 1 -n 1 -m 1 (and -L: a cudaMalloc buffer via
# a legacy handle) run (a) in the same namespaces, (b) under unshare --ipc --mount with a fresh tmpfs on
# /dev/shm, (c) as (b) plus --pid --fork; then which part matters: (d) --ipc alone (the same /dev/shm),
# (e) --mount with a fresh /dev/shm alone (the same IPC namespace), (f) --ipc --mount with the machine's
# /dev/shm bound back in (a hostPath /dev/shm in both pods), (g) --pid --fork alone. Needs root
# (CAP_SYS_ADMIN) for unshare; says so when refused.
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu; B=$C/bin; export LD_LIBRARY_PATH=$C/lib
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree 2>/dev/null) (CMake Release build, sm_90, carried as .carry/cu); uid $(id -u); command: bash bench/results/robust-2026-11-24-h200-s20/s20r4.sh" > $H
T=$(mktemp -d /tmp/zpp-ns.XXXXXX)
$B/zppd -s $T/cuda.sock -l info -o peer_listen= -b cuda -o allow_legacy_ipc=true > $R/zppd-cuda.log 2>&1 & PC=$!
$B/zppd -s $T/host.sock -l info -o peer_listen= -b host > $R/zppd-host.log 2>&1 & PH=$!
for i in $(seq 100); do $B/zppctl -s $T/cuda.sock status > /dev/null 2>&1 && $B/zppctl -s $T/host.sock status > /dev/null 2>&1 && break; sleep 0.2; done
run() { # $1 name, $2.. wrapper
  local name=$1; shift
  for L in "" "-L"; do
    timeout 90 "$@" $B/zpp-cuda-test -s $T/cuda.sock -H $T/host.sock -w 1 -n 1 -m 1 $L > $R/$name$L.out 2>&1; r=$?
    echo "$name ${L:-(VMM)}: exit $r, $(grep -c '^PASS' $R/$name$L.out) PASS, $(grep -c '^FAIL' $R/$name$L.out) FAIL; $(grep -E '^FAIL|error|refused' $R/$name$L.out | head -2 | cut -c1-250)" >> $H
  done
}
run a-same-ns env
NS="mount -t tmpfs -o size=64m tmpfs /dev/shm && exec env LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "unshare probe: $(unshare --ipc --mount --propagation private true 2>&1 && echo ok)" >> $H
run b-own-ipc-shm unshare --ipc --mount --propagation private sh -c "$NS \"\$0\" \"\$@\""
run c-own-ipc-shm-pid unshare --ipc --mount --pid --fork --propagation private sh -c "$NS \"\$0\" \"\$@\""
run d-own-ipc unshare --ipc env
run e-own-shm unshare --mount --propagation private sh -c "$NS \"\$0\" \"\$@\""
BIND="mkdir -p /tmp/zpp-ns-shm && mount --bind /dev/shm /tmp/zpp-ns-shm && mount -t tmpfs tmpfs /dev/shm && mount --bind /tmp/zpp-ns-shm /dev/shm && exec env LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
run f-own-ipc-host-shm unshare --ipc --mount --propagation private sh -c "$BIND \"\$0\" \"\$@\""
run g-own-pid unshare --pid --fork env
kill $PC $PH; wait $PC $PH 2>/dev/null
echo "zppd cuda: $(grep -cE 'level=(warn|error)' $R/zppd-cuda.log) warn/error lines" >> $H
cat $H
grep -E 'level=(warn|error)' $R/zppd-cuda.log | head -8 | cut -c1-300
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
