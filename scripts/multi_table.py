#!/usr/bin/env python3
"""multi_table.py — the across-daemons goals of issue 11 from zpp-bench logs.

    scripts/multi_table.py DIR

DIR holds one directory per run (named as the run), each with the
bench-<layout>.log files zpp-bench wrote across two daemons
(scripts/gpu/run_multi.sh). For each layout, a row per run at 256 MiB,
512 MiB and 1 GiB: zppd's qgZ and qwZ ms with their speedup over NCCL's
bf16 collective of the same run, and the wire's own speedups (zpp-bench's
wire_* rows). Then, per layout, the counts the docs quote: sizes at or
above the goals (qgZ 3x, qwZ 1.9x) per group of runs, and qwZ's share of
the wire's all-gather speedup. Runs are grouped by the name after the
last '-' with its digits dropped (on1, on2 -> on)."""
import os
import re
import statistics
import sys

SIZES = [256 << 20, 512 << 20, 1 << 30]


def rows(path):
    """(bytes, collective) -> (ms, speedup) from a zpp-bench log."""
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 9 and p[0].isdigit() and not p[1][0].isdigit():
                try:
                    out[(int(p[0]), p[1])] = (float(p[2]), float(p[4]))
                except ValueError:
                    pass
    return out


def main(d):
    runs = sorted(r for r in os.listdir(d) if os.path.isdir(os.path.join(d, r)))
    for lay in ("2x1", "2x2"):
        print(f"layout {lay}: ms (x NCCL) at 256 MiB / 512 MiB / 1 GiB")
        print(f"{'run':10s} | {'qgZ int4 (x RS)':42s} | {'wire A2A 1/4 x':18s} | "
              f"{'qwZ int8 (x AG)':42s} | wire AG 1/2 x")
        groups, share = {}, []
        for r in runs:
            p = os.path.join(d, r, f"bench-{lay}.log")
            if not os.path.exists(p):
                continue
            b = rows(p)
            try:
                q = [b[(s, "zppd_qgz_default")] for s in SIZES]
                w = [b[(s, "zppd_qwz_int8")] for s in SIZES]
                qa = [b[(s, "wire_alltoall_quarter")][1] for s in SIZES]
                wa = [b[(s, "wire_allgather_half")][1] for s in SIZES]
            except KeyError as e:
                print(f"{r}: {p} lacks {e}", file=sys.stderr)
                continue
            fmt = " / ".join
            print(f"{r:10s} | {fmt(f'{m:.1f} ({x:.2f})' for m, x in q):42s} | "
                  f"{fmt(f'{x:.2f}' for x in qa):18s} | {fmt(f'{m:.1f} ({x:.2f})' for m, x in w):42s} | "
                  f"{fmt(f'{x:.2f}' for x in wa)}")
            g = re.sub(r"\d+$", "", r.rsplit("-", 1)[-1])
            groups.setdefault(g, []).append((q, w))
            share += [x[1] / a for x, a in zip(w, wa)]
        for g, v in sorted(groups.items()):
            qx = [x for q, _ in v for _, x in q]
            wx = [x for _, w in v for _, x in w]
            print(f"  {g}: {len(v)} runs; qgZ >= 3x at {sum(x >= 3 for x in qx)} of {len(qx)} sizes "
                  f"({min(qx):.2f}-{max(qx):.2f}x); qwZ >= 1.9x at {sum(x >= 1.9 for x in wx)} of "
                  f"{len(wx)} ({min(wx):.2f}-{max(wx):.2f}x, mean {statistics.mean(wx):.2f}x)")
        if share:
            print(f"  qwZ's speedup / the wire all-gather's, all runs: {min(share):.0%}-{max(share):.0%}, "
                  f"mean {statistics.mean(share):.0%}")
        print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
