#!/usr/bin/env python3
"""ncu_mix.py — the instruction mix and stall reasons of a kernel, from the
per-instruction SASS counters that `ncu --page source --print-source sass
--csv` prints (gzipped or not; scripts/gpu/ncu_kernels.sh writes them).

Prints the warp instructions executed by opcode (a few opcodes keep their
first modifier: HADD2.F32, LOP3.LUT, ...), the share of each stall reason
in the kernel's warp-state samples, and the instructions holding the most
samples (an mbarrier wait loop shows there as one branch).

Usage: scripts/ncu_mix.py FILE.csv[.gz] ...
"""
import collections
import csv
import gzip
import sys

KEEP_MODIFIER = ("HADD2", "F2FP", "LDG", "STG", "PRMT", "SHF", "LOP3", "IMAD", "ISETP")


def number(text):
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return 0


def report(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        # (lines starting with "#" name the device: results files carry one)
        rows = list(csv.reader(line for line in f if not line.startswith("#")))
    header, data = rows[1], rows[2:]
    executed = header.index("Instructions Executed")
    source = header.index("Source")
    samples = header.index("Warp Stall Sampling (All Samples)")
    stalls = [i for i, h in enumerate(header) if h.startswith("stall_") and "Not Issued" not in h]
    mix, stall = collections.Counter(), collections.Counter()
    total = total_samples = 0
    hot = []  # (samples, executions, source) of each instruction
    for r in data:
        words = r[source].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") else words[0]
        base = op.split(".")[0]
        op = ".".join(op.split(".")[:2]) if base in KEEP_MODIFIER else base
        n = number(r[executed])
        mix[op] += n
        total += n
        for i in stalls:
            stall[header[i][len("stall_"):]] += number(r[i])
        total_samples += number(r[samples])
        hot.append((number(r[samples]), n, r[source].strip()))
    print(path, "warp instructions executed", total)
    for op, n in mix.most_common(30):
        print("  %-14s %10d %5.1f%%" % (op, n, 100.0 * n / max(total, 1)))
    print("  stalls:", ", ".join("%s %.1f%%" % (h, 100.0 * v / max(total_samples, 1))
                                 for h, v in stall.most_common(8)))
    # where the samples sit: a spin loop (an mbarrier wait) shows as one branch
    print("  hottest instructions (share of samples, times executed):")
    for n, runs, src in sorted(hot, reverse=True)[:6]:
        print("    %5.1f%% %10d  %s" % (100.0 * n / max(total_samples, 1), runs, src[:70]))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        report(p)
