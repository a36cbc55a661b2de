#!/usr/bin/env python3
"""Per-region warp instructions of frv_kernel<4, 4, 8, 1> (session 18, call 1).

Device: the input it was written for came from one NVIDIA H200 (nvidia-h200,
SM 1980 MHz max, driver 580.159.04), session 18's call 1 (s18k1.sh, 2026-11-23);
the script itself runs on any machine with python3 (it reads ncu's CSV).

  python3 sass_regions.py listing SOURCE.csv WARPS > LISTING
      turns ncu's source page (`ncu -i R.ncu-rep --page source --print-source sass --csv`,
      as s18k1.sh writes it) into the listing of call1-frv-int4-executed-sass.txt:
      address from the kernel's start, executed warp instructions per warp (WARPS warps
      ran, 65536 in call 1), stall samples, instruction
  python3 sass_regions.py regions LISTING
      sums that listing over the regions below, the figures docs/performance.md
      ("Session 18") and docs/kernels.md quote

The region boundaries are addresses in that build's SASS (tree 113ce26, CUDA 13.0,
sm_90), read off the listing: where the loads, the prefetch loop, the decode and
the quantization begin. Another build moves them.
"""
import csv
import sys

REGIONS = [
    (0x0000, 0x0550, "prologue"),
    (0x0550, 0x0780, "batch head (loads, addressing)"),
    (0x0780, 0x0D50, "next batch's L2 prefetch"),
    (0x0D50, 0x4320, "decode and FMA"),
    (0x4320, 0x43E0, "batch tail"),
    (0x43E0, 0x4EE0, "after the loop (tail check)"),
    (0x4EE0, 0x5320, "absmax and divisions"),
    (0x5320, 0x6110, "encode, pack, store"),
    (0x6110, 0x6460, "scale store"),
    (0x6460, 0x10000, "epilogue"),
]


def listing(path, warps):
    rows = list(csv.reader(open(path)))
    hdr = rows[1]
    ia, isrc = hdr.index("Address"), hdr.index("Source")
    ie = hdr.index("Instructions Executed")
    ist = hdr.index("Warp Stall Sampling (All Samples)")
    base = None
    for r in rows[2:]:
        if len(r) < len(hdr):
            continue
        a = int(r[ia], 16)
        base = a if base is None else base
        n = int(r[ie].replace(",", "") or 0)
        print(f"{a - base:05x} {n / warps:8.3f} {r[ist]:>6} {r[isrc].strip()}")


def regions(path):
    sums = [0.0] * len(REGIONS)
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split(None, 3)
        a, n = int(f[0], 16), float(f[1])
        for i, (lo, hi, _) in enumerate(REGIONS):
            if lo <= a < hi:
                sums[i] += n
    for (_, _, name), v in zip(REGIONS, sums):
        print(f"{name:32s} {v:7.1f}")
    print(f"{'all':32s} {sum(sums):7.1f}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "listing":
        listing(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "regions":
        regions(sys.argv[2])
    else:
        sys.exit(__doc__)
