#!/usr/bin/env python3
"""plot_train.py — loss curves and the step-time / memory table of
examples/train_gpt.py runs (issue 12's proof).

    scripts/plot_train.py RESULTS... [--png curves.png] [--same RUN_A RUN_B]...

RESULTS: tarballs (.tar.gz, as scripts/gpu/run_train.sh leaves them) or
directories; every directory under them that holds rank0.csv is one run
(its rank<r>.csv and rank<r>.json, train_gpt.py's output, and the
gpumem.csv run_train.sh adds). Prints a markdown table: mode, tokens per
rank, steps, final loss (mean over ranks at the last step), the mean over
the last 20 steps and ranks (and its difference to that of the fsdp2 run
of equal tokens, planned and done steps, in percent), the last evaluation loss, the median step
time, peak memory allocated by torch per rank (max over ranks; the daemon's
own memory is not in it: see the GPU column), and the speed against the
fsdp2 and hsdp runs of the same tokens per rank (their step time / this
run's). With matplotlib, writes a PNG of train loss (mean over ranks,
smoothed) against step, one panel per tokens per rank, evaluation loss as
dots. --same A B (run directory names) checks that two runs gave the same
losses bit for bit on every rank (exit status 1 if not). Standard library
only, apart from matplotlib for the PNG.

Two more tables where the runs have the figures: "where the step goes"
(train_gpt.py --profile: forward, backward and optimizer ms, the time the
compute stream waited for zppd, by kind of call, and the host's time
blocked in those waits, calls per step; each a median over the timed
steps, then the mean over ranks) and "memory" (zpp.torch's settings, peak
and phase allocations by torch, ZeroPP's own accounting after setup and at
the end of the first backward; MiB per rank, max over ranks).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import sys
import tarfile
import tempfile
from typing import Dict, List, Optional, Tuple

TAIL = 20  # steps in the "last-20 mean" column
ORDER = ["zppd-zeropp", "zppd-qwz", "zppd-hpz", "zppd-qgz", "zppd-plain", "torch-sharded", "fsdp2", "hsdp"]


class Run:
    """One run directory: per-rank rows and summaries."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = os.path.basename(os.path.normpath(path))
        self.rows: Dict[int, List[dict]] = {}
        self.js: Dict[int, dict] = {}
        r = 0
        while os.path.exists(os.path.join(path, f"rank{r}.csv")):
            with open(os.path.join(path, f"rank{r}.csv"), newline="") as f:
                lines = (ln for ln in f if not ln.startswith("#"))  # the device line
                self.rows[r] = [row for row in csv.DictReader(lines) if row.get("step", "").isdigit()]
            jp = os.path.join(path, f"rank{r}.json")
            if os.path.exists(jp):
                with open(jp) as f:
                    self.js[r] = json.load(f)
            r += 1
        j0 = self.js.get(0, {})
        self.mode = j0.get("mode") or self.name.rsplit("-", 1)[0]
        self.tpr = int(j0.get("tokens_per_rank") or 0)
        self.accum = int(j0.get("grad_accum") or 1)
        self.planned = int(j0.get("steps") or 0)
        self.gpumem = self._gpumem()

    def _gpumem(self) -> Optional[List[float]]:
        """Peak memory.used per GPU above the idle baseline (MiB), from the
        gpumem.csv run_train.sh writes; None without one."""
        p = os.path.join(self.path, "gpumem.csv")
        if not os.path.exists(p):
            return None
        with open(p, newline="") as f:
            rows = list(csv.reader(f))
        try:
            return [float(x) for x in rows[-1]]
        except (ValueError, IndexError):
            return None

    def steps(self) -> int:
        return min((len(v) for v in self.rows.values()), default=0)

    def losses(self, r: int) -> List[Tuple[int, float]]:
        return [(int(x["step"]), float(x["loss"])) for x in self.rows[r]]

    def mean_curve(self) -> List[Tuple[int, float]]:
        n = self.steps()
        out = []
        for i in range(n):
            vals = [float(self.rows[r][i]["loss"]) for r in self.rows]
            out.append((int(self.rows[0][i]["step"]), sum(vals) / len(vals)))
        return out

    def eval_points(self) -> List[Tuple[int, float]]:
        pts = []
        for x in self.rows.get(0, []):
            if x.get("eval_loss"):
                pts.append((int(x["step"]), float(x["eval_loss"])))
        return pts

    def final_loss(self) -> float:
        c = self.mean_curve()
        return c[-1][1] if c else math.nan

    def tail_loss(self) -> float:
        c = self.mean_curve()[-TAIL:]
        return sum(v for _, v in c) / len(c) if c else math.nan

    def last_eval(self) -> float:
        e = self.eval_points()
        return e[-1][1] if e else math.nan

    def step_ms(self) -> float:
        """Mean over ranks of each rank's median step time (train_gpt.py's,
        after its warm-up steps); from the CSV when no JSON has it."""
        meds = [j["median_step_ms"] for j in self.js.values() if j.get("median_step_ms")]
        if meds:
            return sum(meds) / len(meds)
        per = [statistics.median([float(x["step_ms"]) for x in rows[10:]]) for rows in self.rows.values()
               if len(rows) > 10]  # fmt: skip
        return sum(per) / len(per) if per else math.nan

    def peak_mib(self) -> Optional[float]:
        v = [j["peak_mem_allocated_mib"] for j in self.js.values() if j.get("peak_mem_allocated_mib")]
        return max(v) if v else None

    def prof(self) -> List[dict]:
        return [j["profile"] for j in self.js.values() if j.get("profile")]

    def prof_mean(self, *path: str) -> Optional[float]:
        """Mean over ranks of a --profile median (path into the JSON's
        "profile"); None where no rank has it."""
        vals = []
        for p in self.prof():
            v: object = p
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            if isinstance(v, (int, float)):
                vals.append(float(v))
        return sum(vals) / len(vals) if vals else None

    def jmax(self, key: str, total: bool = False) -> Optional[float]:
        """Max over ranks of a JSON figure (total: of the sum of a dict)."""
        vals = []
        for j in self.js.values():
            v = j.get(key)
            if total and isinstance(v, dict):
                v = sum(v.values())
            if isinstance(v, (int, float)):
                vals.append(float(v))
        return max(vals) if vals else None

    def cut(self) -> bool:
        return any(j.get("stopped_early") for j in self.js.values()) or any(
            j.get("steps_done", 0) < j.get("steps", 0) for j in self.js.values())


def find_runs(paths: List[str], tmp: str) -> List[Run]:
    runs = []
    for i, p in enumerate(paths):
        root = p
        if os.path.isfile(p) and (p.endswith((".tar.gz", ".tgz", ".tar"))):
            root = os.path.join(tmp, f"{i}")
            os.makedirs(root)
            with tarfile.open(p) as t:
                members = [m for m in t.getmembers() if (m.isfile() or m.isdir())
                           and not m.name.startswith("/") and ".." not in m.name.split("/")]  # fmt: skip
                kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                t.extractall(root, members=members, **kw)
        for d, _, files in sorted(os.walk(root)):
            if "rank0.csv" in files:
                r = Run(d)
                if r.steps():
                    runs.append(r)
                else:
                    print(f"{d}: no steps recorded, left out", file=sys.stderr)
    return runs


def fmt(v: Optional[float], spec: str) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def table(runs: List[Run]) -> str:
    base: Dict[Tuple[str, int, int], float] = {}
    base_loss: Dict[Tuple[int, int, int], Tuple[int, float]] = {}  # (tpr, accum, planned) -> (done, loss)
    for r in runs:
        if r.mode in ("fsdp2", "hsdp"):
            base[(r.mode, r.tpr, r.accum)] = r.step_ms()
        if r.mode == "fsdp2":
            base_loss[(r.tpr, r.accum, r.planned)] = (r.steps(), r.tail_loss())
    has_smi = any(r.gpumem for r in runs)
    head = ["run", "mode", "tokens/rank", "steps", "final loss", f"last-{TAIL} mean",
            f"last-{TAIL} vs fsdp2", "eval loss", "median step ms", "peak alloc MiB/rank",
            "× vs fsdp2", "× vs hsdp"]  # fmt: skip
    if has_smi:
        head.append("GPU MiB used/GPU (smi)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    key = {m: i for i, m in enumerate(ORDER)}
    for r in sorted(runs, key=lambda r: (r.tpr, r.accum, key.get(r.mode, 99), r.name)):
        ms = r.step_ms()
        vs = []
        for b in ("fsdp2", "hsdp"):
            bm = base.get((b, r.tpr, r.accum))
            vs.append(fmt(bm / ms, ".2f") if bm and ms and not math.isnan(ms) else "—")
        tok = str(r.tpr) + (f"×{r.accum}" if r.accum > 1 else "")
        steps = str(r.steps()) + (" (cut)" if r.cut() else "")
        bl = base_loss.get((r.tpr, r.accum, r.planned))  # same schedule, as many steps done
        dl = fmt(100 * (r.tail_loss() / bl[1] - 1), "+.2f") + " %" if bl and bl[0] == r.steps() else "—"
        row = [r.name, r.mode, tok, steps, fmt(r.final_loss(), ".4f"), fmt(r.tail_loss(), ".4f"), dl,
               fmt(r.last_eval(), ".4f"), fmt(ms, ".1f"), fmt(r.peak_mib(), ".0f")] + vs  # fmt: skip
        if has_smi:
            row.append(" / ".join(f"{v:.0f}" for v in r.gpumem) if r.gpumem else "—")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


WAIT_KINDS = ["gather", "gather-miss", "hpz", "hpz-miss", "reduce", "reduce-tail", "floats", "invalidate",
              "inflight-cap"]


def sorted_runs(runs: List[Run]) -> List[Run]:
    key = {m: i for i, m in enumerate(ORDER)}
    return sorted(runs, key=lambda r: (r.tpr, r.accum, key.get(r.mode, 99), r.name))


def profile_table(runs: List[Run]) -> Optional[str]:
    """Where the step goes (train_gpt.py --profile); None without figures."""
    runs = [r for r in runs if r.prof()]
    if not runs:
        return None
    kinds = [k for k in WAIT_KINDS if any(r.prof_mean("stream_ms", k) or r.prof_mean("host_ms", k) for r in runs)]
    head = (["run", "step ms", "fwd", "bwd", "opt", "zppd wait (stream)", "zppd wait (host)"]
            + [f"{k} s/h" for k in kinds] + ["gathers/hpz/reduces per step"])  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted_runs(runs):
        row = [r.name, fmt(r.step_ms(), ".1f")] + [fmt(r.prof_mean(k), ".1f") for k in
                                                    ("fwd_ms", "bwd_ms", "opt_ms", "zpp_wait_ms", "zpp_wait_host_ms")]
        for k in kinds:
            row.append(f"{fmt(r.prof_mean('stream_ms', k), '.1f')} / {fmt(r.prof_mean('host_ms', k), '.1f')}")
        calls = [r.prof_mean("calls", k) for k in ("gathers", "hpz_gathers", "reduces")]
        row.append(" / ".join(fmt(c, ".0f") for c in calls) if any(c is not None for c in calls) else "—")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def memory_table(runs: List[Run]) -> str:
    head = ["run", "zpp.torch units (K, slots+small, grad slots, prefetch)", "peak alloc", "after setup",
            "after 1st forward", "ZeroPP after setup", "ZeroPP after 1st backward"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted_runs(runs):
        c = r.js.get(0, {}).get("zpp_config")
        cfg = (f"{c['units']} (K {c['blocks_per_unit']}, {c['slots']}+{c['small_slots']}, {c['grad_slots']}, "
               f"{c['prefetch']})" if c else "—")  # fmt: skip
        row = [r.name, cfg, fmt(r.peak_mib(), ".0f"), fmt(r.jmax("mem_allocated_after_setup_mib"), ".0f"),
               fmt(r.jmax("mem_allocated_after_forward_mib"), ".0f"),
               fmt(r.jmax("zpp_memory_mib", total=True), ".1f"),
               fmt(r.jmax("zpp_memory_after_backward_mib", total=True), ".1f")]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def same(a: Run, b: Run) -> Tuple[bool, str]:
    """Whether a and b have equal losses on every rank at every common step,
    and equal evaluation losses where both evaluated."""
    if set(a.rows) != set(b.rows):
        return False, f"ranks differ: {sorted(a.rows)} vs {sorted(b.rows)}"
    n = ne = 0
    for r in a.rows:
        ea = {int(x["step"]): x["eval_loss"] for x in a.rows[r] if x.get("eval_loss")}
        eb = {int(x["step"]): x["eval_loss"] for x in b.rows[r] if x.get("eval_loss")}
        la, lb = dict(a.losses(r)), dict(b.losses(r))
        for s in sorted(set(la) & set(lb)):
            n += 1
            if la[s] != lb[s]:
                return False, f"rank {r} step {s}: loss {la[s]!r} vs {lb[s]!r}"
        for s in sorted(set(ea) & set(eb)):
            ne += 1
            if float(ea[s]) != float(eb[s]):
                return False, f"rank {r} step {s}: eval loss {ea[s]} vs {eb[s]}"
    if not n:
        return False, "no common steps"
    return True, f"{n} rank-steps and {ne} evaluations equal bit for bit"


def plot(runs: List[Run], png: str, smooth: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r.tpr, r.accum) for r in runs})
    fig, axes = plt.subplots(1, len(groups), figsize=(7 * len(groups), 5), squeeze=False)
    key = {m: i for i, m in enumerate(ORDER)}
    for ax, g in zip(axes[0], groups):
        for r in sorted((r for r in runs if (r.tpr, r.accum) == g), key=lambda r: (key.get(r.mode, 99), r.name)):
            c = r.mean_curve()
            if not c:
                continue
            xs, ys = [s for s, _ in c], [v for _, v in c]
            if smooth > 1:  # trailing mean
                acc, out = 0.0, []
                for i, v in enumerate(ys):
                    acc += v - (ys[i - smooth] if i >= smooth else 0.0)
                    out.append(acc / min(i + 1, smooth))
                ys = out
            (line,) = ax.plot(xs, ys, lw=1.2, label=f"{r.mode} ({r.name})" if r.name != r.mode else r.mode)
            ev = r.eval_points()
            if ev:
                ax.plot([s for s, _ in ev], [v for _, v in ev], "o", ms=3, color=line.get_color())
        ax.set_title(f"{g[0]} tokens per rank per step" + (f" × {g[1]} micro-batches" if g[1] > 1 else ""))
        ax.set_xlabel("step")
        ax.set_ylabel(f"train loss (mean over ranks{f', {smooth}-step mean' if smooth > 1 else ''}); dots: eval")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    where = provenance(runs)
    fig.suptitle(where, fontsize=9)
    fig.tight_layout()
    # The provenance also goes into the PNG's own text chunks, so that the
    # file says where it ran to a reader that does not look at the picture.
    fig.savefig(png, dpi=120, metadata={"Title": "training loss curves", "Description": where,
                                        "Source": "scripts/plot_train.py"})


def provenance(runs: List[Run]) -> str:
    """Where and when the runs ran, from their rank JSONs: the devices (with
    the ranks and nodes), the dates, and the torch version."""
    devs, dates, torches, shapes, gpus = set(), set(), set(), set(), set()
    for r in runs:
        for j in r.js.values():
            devs.add(str(j.get("device") or ("CPU" if j.get("gpu") is None else "?")))
            if j.get("gpu") is not None:
                gpus.add(j["gpu"])
            if j.get("date"):
                dates.add(str(j["date"])[:10])
            if j.get("torch"):
                torches.add(str(j["torch"]))
            if j.get("world_size"):
                shapes.add(f"{j['world_size']} ranks on {j.get('nodes', 1)} nodes")
    ngpu = f" x {len(gpus)}" if gpus else ""
    return (f"device: {', '.join(sorted(devs)) or 'unknown'}{ngpu}; {', '.join(sorted(shapes))}; "
            f"{', '.join(sorted(dates)) or 'undated'}; torch {', '.join(sorted(torches)) or '?'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="tarballs or directories")
    ap.add_argument("--png", default=None, help="write the loss curves here (needs matplotlib)")
    ap.add_argument("--smooth", type=int, default=10, help="trailing mean over this many steps in the PNG")
    ap.add_argument("--same", nargs=2, action="append", default=[], metavar=("RUN_A", "RUN_B"),
                    help="check two runs (directory names) for equal losses bit for bit")
    args = ap.parse_args()
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        runs = find_runs(args.results, tmp)
        if not runs:
            print("no run directories (with rank0.csv) found", file=sys.stderr)
            return 1
        print(table(runs))
        pt = profile_table(runs)
        if pt:
            print("\nWhere the step goes (--profile; ms per step, medians over the timed steps, mean over ranks;"
                  " s/h: the compute stream's stall / the host's time blocked, by kind of zppd call):\n")
            print(pt)
        print("\nMemory (MiB per rank, max over ranks; torch's allocations, not the daemons'):\n")
        print(memory_table(runs))
        print()
        by_name = {r.name: r for r in runs}
        for a, b in args.same:
            if a not in by_name or b not in by_name:
                print(f"same {a} {b}: no such run (have {sorted(by_name)})")
                rc = 1
                continue
            ok, why = same(by_name[a], by_name[b])
            print(f"same {a} {b}: {'yes' if ok else 'NO'}: {why}")
            rc |= 0 if ok else 1
        if args.png:
            try:
                plot(runs, args.png, args.smooth)
                print(f"wrote {args.png}")
            except ImportError:
                print("matplotlib is not installed: no PNG (the table above stands)", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
