#!/bin/bash
# session 28, call 2 (nvidia-h200, one GPU; tree of .carry/tree): the commands of deploy/k8s-mps's
# sidecar, run as its pod would run them (no Kubernetes here):
#  1. nvidia-cuda-mps-control -f in the foreground, pipe and log directory /tmp/zppd-mps (the pod's
#     /run/zppd-mps), and the startup probe's test: `test -p DIR/control`, polled each second;
#  2. zppd (cuda backend) with CUDA_MPS_PIPE_DIRECTORY set, as the patched zppd container: zppctl
#     status must say MPS on; a client job (bench/publish_stall.py 256, its processes with the
#     same variable) must run, and MPS must list a server;
#  3. zppd stopped (SIGTERM), then the preStop hook `echo quit | nvidia-cuda-mps-control`: the
#     foreground control daemon must exit, and how long it takes.
export NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0
R=$OUT/r; mkdir -p $R
H=$R/head.txt
C=$PWD/.carry/cu
export LD_LIBRARY_PATH=$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=$PWD/client/python
for f in libzpp.so.0 libzpp.so.0.1.0 libzpp.so; do [ -f "$C/lib/$f" ] && { export ZPP_LIB=$C/lib/$f; break; }; done
echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); tree $(cat .carry/tree) (CMake Release build, sm_90, carried as .carry/cu); command: bash bench/results/mps-sidecar-2026-11-29-h200-s28/s28c2.sh" > $H
P=/tmp/zppd-mps; rm -rf $P; mkdir -p $P
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P
t0=$(date +%s.%N)
nvidia-cuda-mps-control -f > $R/mps-control-f.out 2>&1 &
MP=$!
ready=no
for i in $(seq 30); do test -p $P/control && { ready=yes; break; }; sleep 1; done
echo "1. startup probe (test -p $P/control): $ready after $i poll(s); control daemon pid $MP alive: $(kill -0 $MP 2>/dev/null && echo yes || echo no)" >> $H
ls -la $P >> $H
T=$(mktemp -d)
$C/bin/zppd -s $T/z.sock -l info -o peer_listen=127.0.0.1:0 -o allow_legacy_ipc=true > $R/zppd.log 2>&1 &
ZP=$!
for _ in $(seq 200); do [ -S $T/z.sock ] && break; sleep 0.1; done
echo "2. zppctl status:" >> $H
timeout 10 $C/bin/zppctl -s $T/z.sock status >> $H 2>&1
grep -i "mps" $R/zppd.log | head -5 >> $H
timeout 120 python3 bench/publish_stall.py $T/z.sock 256 > $R/client.log 2>&1; echo "   client (publish_stall.py 256) rc=$?" >> $H
echo "   MPS servers: $(echo get_server_list | nvidia-cuda-mps-control 2>&1 | paste -sd' ')" >> $H
kill -TERM $ZP; for _ in $(seq 100); do kill -0 $ZP 2>/dev/null || break; sleep 0.1; done
echo "3. zppd after SIGTERM alive: $(kill -0 $ZP 2>/dev/null && echo yes || echo no)" >> $H
t1=$(date +%s.%N)
timeout 30 sh -c 'echo quit | nvidia-cuda-mps-control' >> $H 2>&1; echo "   preStop (echo quit | nvidia-cuda-mps-control) rc=$?" >> $H
for i in $(seq 300); do kill -0 $MP 2>/dev/null || break; sleep 0.1; done
wait $MP 2>/dev/null; mrc=$?
echo "   control daemon -f: $(kill -0 $MP 2>/dev/null && echo STILL RUNNING || echo "exited, status $mrc"), $(python3 -c "import time; print(round(time.time() - $t1, 2))") s after the quit" >> $H
pkill -9 -f nvidia-cuda-mps 2>/dev/null
sed -i "1i $(head -1 $H)" $R/zppd.log $R/mps-control-f.out
cp $P/control.log $R/mps-control.log 2>/dev/null && sed -i "1i $(head -1 $H)" $R/mps-control.log
echo "end $(date -u '+%F %T UTC')" >> $H
cat $H; echo "== client"; tail -6 $R/client.log
tar czf $OUT/r.tgz -C $R . ; rm -rf $R $T
