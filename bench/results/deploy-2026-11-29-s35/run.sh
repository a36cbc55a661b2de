#!/bin/bash
# device: NVIDIA H200 x2 (nvidia-h200-x2), driver 580.159.04: call 4 of README.txt (line added afterwards)
# Scratch check for deploy/: zppd (cuda) run as the DaemonSet / the unit
# would run it, with every path it opens logged. Kept here as the record of the
# calls that ran it (README.txt); not part of zppd.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_RAS_ENABLE=0
S=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
P=/opt/sbx; rm -rf $P; mkdir -p $P; cp -r "$S"/* $P/; chmod -R a+rX $P
export LD_LIBRARY_PATH=$P/lib
L=/var/tmp/sbxlog; rm -rf $L; mkdir -p $L; chmod 1777 $L
getent passwd 995 >/dev/null || useradd --system --uid 995 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin zppd 2>&1
{ uname -r; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ls -l /dev/nvidia* /dev/shm | head -20; id 995; } > $O/summary.txt 2>&1
W=$(nvidia-smi -L | wc -l)
# references: host-backend daemons (uid 995, no sandbox)
for h in 1 2; do
  v=1; [ $h = 2 ] && v=2
  $P/sandbox user 995 995 -- $P/bin/zppd -s $L/host$h.sock -b host -o virtual_nodes=$v -o host_threads=8 \
    -o peer_listen=127.0.0.1:0 -o store_budget=16G -o store_budget_per_tenant=16G > $L/host$h.log 2>&1 &
  hp="${hp:-} $!"
done
sleep 2
for mode in ${MODES:-pod unit}; do
  log() { echo "[$mode] $*" | tee -a $O/summary.txt; }
  rm -rf /run/zppd; mkdir -p /run/zppd; chown 995:995 /run/zppd; chmod 0750 /run/zppd
  rm -f $L/ot-$mode.log
  # pod: HOME unset as in the image (/nonexistent); unit: systemd's environment is near empty
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LD_LIBRARY_PATH=$P/lib \
    NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0 LD_PRELOAD=$P/opentrace.so OPENTRACE_LOG=$L/ot-$mode.log \
    $P/sandbox $mode 995 995 /run/zppd $L -- $P/bin/zppd -s /run/zppd/zppd.sock -b cuda -l info \
      -o allow_legacy_ipc=true -o store_budget=16G -o store_budget_per_tenant=16G -o max_pending_per_session=64 \
      -o peer_listen=127.0.0.1:17399 -o metrics_listen=127.0.0.1:19464 > $L/zppd-$mode.log 2>&1 &
  pid=$!
  for _ in $(seq 600); do [ -S /run/zppd/zppd.sock ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  [ -S /run/zppd/zppd.sock ] && log "socket up" || { log "zppd did not start"; tail -30 $L/zppd-$mode.log | tee -a $O/summary.txt; continue; }
  python3 -c 'import urllib.request as u; r=u.urlopen("http://127.0.0.1:19464/healthz", timeout=3); print("healthz", r.status, r.read().decode().strip())' 2>&1 | sed "s/^/[$mode] /" | tee -a $O/summary.txt
  $P/sandbox $mode 995 995 /run/zppd $L -- $P/bin/zppctl -s /run/zppd/zppd.sock -t 3 health; log "zppctl health (sandboxed) exit $?"
  for n in 1 2; do
    [ $n = 2 ] && [ $W -lt 2 ] && continue
    timeout 150 $P/sandbox user 995 995 -- $P/bin/zpp-cuda-test -s /run/zppd/zppd.sock -H $L/host$n.sock -w $W -n $n -m 64 >> $L/client-$mode.log 2>&1
    log "zpp-cuda-test -w $W -n $n exit $? ; PASS lines so far $(grep -c ^PASS $L/client-$mode.log) FAIL lines $(grep -c FAIL $L/client-$mode.log)"
  done
  grep -E "FAIL|error" $L/client-$mode.log | head -5 | sed "s/^/[$mode] client: /" | tee -a $O/summary.txt
  { echo "## fds"; for f in /proc/$pid/fd/*; do readlink $f; done | sed 's/[0-9]\+\]$/N]/' | sort | uniq -c;
    echo "## mapped files"; awk '$6 ~ /^\// {print $6}' /proc/$pid/maps | sort -u; echo "## status"; grep -E "Cap|NoNewPrivs|Seccomp|Uid|Gid" /proc/$pid/status; } > $L/proc-$mode.txt 2>&1
  $P/bin/zppctl -s /run/zppd/zppd.sock status >> $L/proc-$mode.txt 2>&1
  kill -TERM $pid; wait $pid; log "zppd exit $? after SIGTERM"
  grep -iE "level=(warn|error)|not permitted|read-only|EPERM|EROFS" $L/zppd-$mode.log | head -15 | sed "s/^/[$mode] zppd: /" | tee -a $O/summary.txt
  awk '{ $1=""; print }' $L/ot-$mode.log | sed -E 's/[0-9]{3,}/N/g' | sort | uniq -c | sort -k2 > $L/opens-$mode.txt
  grep "err=" $L/opens-$mode.txt | grep -v "err=No such file" | head -40 | sed "s/^/[$mode] open: /" >> $O/summary.txt
done
kill $hp 2>/dev/null; wait
cd $L && tar czf $O/logs.tgz *.log *.txt 2>/dev/null
