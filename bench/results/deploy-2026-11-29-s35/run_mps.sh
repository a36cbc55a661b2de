#!/bin/bash
# device: NVIDIA H200 (nvidia-h200, one GPU), driver 580.159.04: calls 5 and 6 of README.txt (line added afterwards)
# Scratch check for deploy/: the MPS control daemon and zppd as
# zppd-mps.service + zppd.service would run them (mode unitmps / unit) and
# as the k8s-mps pod's sidecar and zppd (mode pod). Kept here as the record of the
# calls that ran it (README.txt); not part of zppd.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
S=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
P=/opt/sbx; rm -rf $P; mkdir -p $P; cp -r "$S"/* $P/; chmod -R a+rX $P
export LD_LIBRARY_PATH=$P/lib
L=/var/tmp/sbxlog; rm -rf $L; mkdir -p $L; chmod 1777 $L
getent passwd 995 >/dev/null || useradd --system --uid 995 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin zppd 2>&1
MPSC=$(command -v nvidia-cuda-mps-control); echo "mps control: $MPSC" > $O/summary.txt
W=$(nvidia-smi -L | wc -l)
for h in 1 2; do
  $P/sandbox user 995 995 -- $P/bin/zppd -s $L/host$h.sock -b host -o virtual_nodes=$h -o host_threads=8 \
    -o peer_listen=127.0.0.1:0 -o store_budget=16G -o store_budget_per_tenant=16G > $L/host$h.log 2>&1 &
  hp="${hp:-} $!"
done
sleep 2
for pair in ${PAIRS:-unitmps2:unit}; do
  mm=${pair%:*}; zm=${pair#*:}
  log() { echo "[$mm/$zm] $*" | tee -a $O/summary.txt; }
  rm -rf /run/zppd /run/zppd-mps /var/log/zppd-mps; mkdir -p /run/zppd /run/zppd-mps /var/log/zppd-mps
  chown 995:995 /run/zppd /run/zppd-mps /var/log/zppd-mps; chmod 0750 /run/zppd /run/zppd-mps
  export CUDA_MPS_PIPE_DIRECTORY=/run/zppd-mps CUDA_MPS_LOG_DIRECTORY=/var/log/zppd-mps
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent CUDA_MPS_PIPE_DIRECTORY=/run/zppd-mps CUDA_MPS_LOG_DIRECTORY=/var/log/zppd-mps \
    LD_PRELOAD=$P/opentrace.so OPENTRACE_LOG=$L/ot-mps-$mm.log \
    $P/sandbox $mm 995 995 /run/zppd-mps /var/log/zppd-mps $L -- $MPSC -f > $L/mpsc-$mm.log 2>&1 &
  mpid=$!
  for _ in $(seq 100); do [ -S /run/zppd-mps/control ] && break; sleep 0.1; done
  [ -S /run/zppd-mps/control ] && log "mps control socket up" || log "mps control: no socket"
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LD_LIBRARY_PATH=$P/lib NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0 \
    CUDA_MPS_PIPE_DIRECTORY=/run/zppd-mps \
    $P/sandbox $zm 995 995 /run/zppd /run/zppd-mps $L -- $P/bin/zppd -s /run/zppd/zppd.sock -b cuda -l info \
      -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64 \
      -o peer_listen=127.0.0.1:17399 -o metrics_listen=127.0.0.1:19464 > $L/zppd-$zm.log 2>&1 &
  pid=$!
  for _ in $(seq 600); do [ -S /run/zppd/zppd.sock ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  [ -S /run/zppd/zppd.sock ] && log "zppd socket up" || { log "zppd did not start"; tail -20 $L/zppd-$zm.log | tee -a $O/summary.txt; }
  $P/sandbox user 995 995 -- $P/bin/zppctl -s /run/zppd/zppd.sock status 2>&1 | grep -iE "mps|GPU|H200" | head -6 | sed "s/^/[$mm\/$zm] status: /" | tee -a $O/summary.txt
  for n in 1 2; do
    [ $n = 2 ] && [ $W -lt 2 ] && continue
    timeout 150 $P/sandbox user 995 995 -- $P/bin/zpp-cuda-test -s /run/zppd/zppd.sock -H $L/host$n.sock -w $W -n $n -m 64 >> $L/client-$zm.log 2>&1
    log "zpp-cuda-test -w $W -n $n exit $? ; PASS so far $(grep -c ^PASS $L/client-$zm.log) FAIL $(grep -c FAIL $L/client-$zm.log)"
  done
  kill -TERM $pid; wait $pid; log "zppd exit $? after SIGTERM"
  # ExecStop / preStop: quit, in the same sandbox
  timeout 30 env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CUDA_MPS_PIPE_DIRECTORY=/run/zppd-mps \
    $P/sandbox $mm 995 995 /run/zppd-mps /var/log/zppd-mps -- /bin/sh -c "echo quit | $MPSC"; log "quit exit $?"
  for _ in $(seq 100); do kill -0 $mpid 2>/dev/null || break; sleep 0.1; done
  kill -0 $mpid 2>/dev/null && { log "mps control still running: killed"; kill -9 $mpid; }
  wait $mpid; log "mps control exit $?"
  cp /var/log/zppd-mps/control.log $L/mps-control-$mm.log 2>/dev/null; cp /var/log/zppd-mps/server.log $L/mps-server-$mm.log 2>/dev/null
  grep -iE "error|fail|denied|not permitted" /var/log/zppd-mps/*.log | head -10 | sed "s/^/[$mm\/$zm] mps log: /" | tee -a $O/summary.txt
  grep -iE "level=(warn|error)" $L/zppd-$zm.log | head -8 | sed "s/^/[$mm\/$zm] zppd: /" | tee -a $O/summary.txt
done
kill $hp 2>/dev/null; wait
cd $L && tar czf $O/logs.tgz * 2>/dev/null
