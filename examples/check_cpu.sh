#!/usr/bin/env bash
# check_cpu.sh — examples/train_gpt.py on a machine without a GPU: 4 ranks
# as 2 virtual nodes x 2 (torchrun) against one host-backend zppd, a tiny
# GPT (d 64, 4 layers, 128 tokens per rank, bf16), and the checks issue 12
# asks of the training loop:
#   - all eight modes run (torch-sharded, fsdp2, hsdp on gloo);
#   - zppd-hpz equals zppd-plain bit for bit at every step on every rank
#     (one block per unit and 2 slots: the tiny model's units are evicted
#     between forward and backward, so backward re-gathers them by hpZ),
#     evaluation losses (under no_grad) included, without and with
#     --grad-accum 2, and hpZ really re-gathered (hpz_gathers > 0);
#   - a run stopped after 7 steps and continued with --resume equals the
#     uninterrupted run bit for bit (zppd-hpz, zppd-zeropp, fsdp2);
#   - --deadline stops all ranks at the same step;
#   - with the first 2 blocks frozen, --share-frozen (the frozen units read
#     from the node's shared replica) equals zppd-plain bit for bit, and
#     zppd-zeropp with it and fsdp2 run;
#   - scripts/plot_train.py reads the runs (table, --same, PNG if it can).
#
#   examples/check_cpu.sh [BUILD_DIR]      (default build; needs zppd, libzpp)
# Environment: PYTHON (a Python with torch; default python3), OUT (default
# /tmp/zpp-check-cpu). Takes about 3 minutes on 2 cores. Exit status 0 when
# every check passed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/${1:-build}
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/zpp-check-cpu}
rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH=$ROOT/client/python ZPP_LIB=$B/client/libzpp.so OMP_NUM_THREADS=1
T=$(mktemp -d /tmp/zcc-XXXX)
"$B/daemon/zppd" -s "$T/z.sock" -b host -o peer_listen=127.0.0.1:0 > "$OUT/zppd.log" 2>&1 &
ZP=$!
trap 'kill $ZP 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/z.sock" ] && break; sleep 0.1; done
fail=0
check() { local what=$1; shift; if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; fail=1; fi; }

run() { # NAME MODE [ARGS...]
  local name=$1 m=$2; shift 2
  "$PY" -m torch.distributed.run --standalone --nproc-per-node 4 "$ROOT/examples/train_gpt.py" \
    --device cpu --mode "$m" --nodes 2 --socket "$T/z.sock" --d-model 64 --layers 4 --heads 4 \
    --seq 64 --tokens-per-rank 128 --warmup 3 --eval-every 5 --lr 3e-3 --lr-warmup 5 --steps 20 \
    --blocks-per-unit 1 --slots 2 --prefetch 1 \
    --out "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
  check "$name ($m $*) ran" test $? = 0 -a -f "$OUT/$name/rank3.json"
}
same() { "$PY" "$ROOT/scripts/plot_train.py" "$OUT" --same "$1" "$2" 2>/dev/null | grep "^same .*: yes:"; }
json() { # FILE KEY [SUBKEY]: a value of a run's JSON
  "$PY" -c "import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2:]: v = v[k]
print(v)" "$@"
}
steps_of() { for r in 0 1 2 3; do json "$OUT/$1/rank$r.json" steps_done; done | sort -u | wc -l; }

for m in zppd-plain zppd-hpz zppd-zeropp zppd-qwz zppd-qgz torch-sharded fsdp2 hsdp; do run "$m" "$m"; done
run plain-ga zppd-plain --grad-accum 2
run hpz-ga zppd-hpz --grad-accum 2
check "zppd-hpz = zppd-plain bit for bit" same zppd-hpz zppd-plain
check "with --grad-accum 2: zppd-hpz = zppd-plain bit for bit" same hpz-ga plain-ga
check "the daemon keeps hpZ slices of a plain all-gather" test "$(json "$OUT/hpz-ga/rank0.json" hpz_plain)" = True
check "zppd-hpz re-gathered by hpZ in backward" test "$(json "$OUT/hpz-ga/rank0.json" zpp_stats hpz_gathers)" -gt 0

for m in zppd-hpz zppd-zeropp fsdp2; do
  run "$m-full" "$m" --grad-accum 2
  run "$m-res" "$m" --grad-accum 2 --ckpt-dir "$T/ck-$m" --stop-after 7
  check "$m stopped after 7 steps" test "$(json "$OUT/$m-res/rank0.json" steps_done)" = 7
  run "$m-res" "$m" --grad-accum 2 --ckpt-dir "$T/ck-$m" --resume
  check "$m: stop + --resume = the uninterrupted run, bit for bit" same "$m-full" "$m-res"
done
check "the same run twice, bit for bit" same zppd-hpz-full hpz-ga

# A frozen base (the first 2 blocks, as a LoRA job's): read from the node's
# shared replica with --share-frozen, the same bits as gathering it (qwZ
# off); and with all three on, and under FSDP2, it runs.
run frozen zppd-plain --freeze-blocks 2
run frozen-shared zppd-plain --freeze-blocks 2 --share-frozen
check "--share-frozen: the frozen blocks from the replica, bit for bit" same frozen-shared frozen
check "--share-frozen published the frozen units and read them after" \
  test "$(json "$OUT/frozen-shared/rank0.json" zpp_stats publishes)" = 2 -a \
  "$(json "$OUT/frozen-shared/rank0.json" zpp_stats shared_gathers)" -gt 0
run frozen-zeropp zppd-zeropp --freeze-blocks 2 --share-frozen
run frozen-fsdp2 fsdp2 --freeze-blocks 2

run deadline zppd-zeropp --steps 100000 --deadline "$(( $(date +%s) + 15 ))"
check "--deadline: all ranks stopped at one step" test "$(steps_of deadline)" = 1
check "--deadline stopped the run" test "$(json "$OUT/deadline/rank0.json" stopped_early)" = True

"$PY" "$ROOT/scripts/plot_train.py" "$OUT" --png "$OUT/curves.png" | tee "$OUT/table.md"
check "plot_train.py" test "${PIPESTATUS[0]}" = 0
echo "outputs in $OUT; $([ $fail = 0 ] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')"
exit $fail
