#!/usr/bin/env python3
"""publish_stall.py — what a shared-replica publish costs a cuda zppd's other
jobs (a benchmark; docs/hpz-sharing.md, "Verification cost").

Two processes on GPU 0, each its own one-rank job on a running cuda zppd:
  busy  runs plain all-gathers of 4 KiB back to back, stream-ordered
        (zpp_collective_async + zpp_wait_stream + a stream sync), and time
        stamps each call;
  pub   publishes a bf16 tensor of MIB MiB (plain all-gather, publish, its
        content key) and times the call, while busy runs; then reads it
        back by its key, publishes the same bytes again (a dedup: the
        daemon hashes the call's own output) and tries a wrong key;
  reader a third one-rank job, started once the replica is published
        (while pub's job holds it): gathers the replica by its key alone
        (hpZ gather, the node's copy another job stored) and hashes what
        it got, which must be the key.
The daemon checks the key on the gathered bytes (copied back and hashed)
before it answers: on the loop thread until session 27, which stalled every
other job's calls for the length of the check; on a worker thread since.

Checks (exit 1 when one fails; timings are only printed): the publish
succeeds; the replica read back by its key (hpZ gather) equals the tensor
on the GPU; the other job's read gets the same bytes (their SHA-256 is the
key); the dedup succeeds; a publish under a wrong key is refused
(ZPP_EMISMATCH); every busy call succeeds and gathers its own bytes.

Prints the publish's wall time, and busy's calls inside the publish window
and outside it: count, median and maximum latency, and the longest gap
between two answers.

usage: python3 bench/publish_stall.py SOCKET [MIB]   (ZPP_LIB names libzpp)
Memory: PyTorch's default allocator gives each tensor one cudaMalloc'd
segment, which zppd imports only with allow_legacy_ipc = true (s27p1.sh
starts it so). With expandable_segments:True the tensors are VMM memory,
and a registration covers at most 256 of PyTorch's 20 MiB chunks (16 before
session 28): use MIB below 5120 then.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import statistics
import sys
import time


def _conn(sock: str, job: str):  # type: ignore[no-untyped-def]
    import torch
    import zpp
    import zpp.cuda as zc

    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    c = zpp.Connection(sock)
    zc.attach(c, 8)
    c.hello(job, 0, 1, node_count=1, gpu_uuid=zc.device_uuid())
    return c, zc.Registry(c)


def _call(c, zc, op, inp, out, count, dtype, stream, **kw):  # type: ignore[no-untyped-def]
    from zpp._lib import LIB, CollC
    from zpp.client import _apply
    import ctypes

    call = CollC()
    LIB.zpp_coll_init(ctypes.byref(call), op, dtype, count)
    if inp is not None:
        call.input.buffer_id, call.input.offset = inp.buffer_id, inp.offset
    call.output.buffer_id, call.output.offset = out.buffer_id, out.offset
    _apply(call, **kw)
    rid = zc.submit(c, call, stream)
    return zc.wait_stream(c, rid, stream)


def busy(sock: str, ready, stop, q) -> None:  # type: ignore[no-untyped-def]
    import torch
    import zpp.cuda as zc
    from zpp._lib import DType, Op

    c, reg = _conn(sock, "busy")
    n = 2048  # 4 KiB of bf16
    src = torch.arange(n, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    out = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    rin, rout = reg.ref(src), reg.ref(out)
    s = torch.cuda.current_stream()
    stamps, bad = [], 0
    for i in range(200):  # warm
        _call(c, zc, Op.ALLGATHER, rin, rout, n, DType.BF16, s)
    s.synchronize()
    ready.set()
    while not stop.is_set():
        out.fill_(0)
        t0 = time.monotonic()
        _call(c, zc, Op.ALLGATHER, rin, rout, n, DType.BF16, s)
        s.synchronize()
        t1 = time.monotonic()
        stamps.append((t0, t1))
        if len(stamps) % 64 == 0 and not torch.equal(out, src):
            bad += 1
    reg.clear()
    c.close()
    q.put(("busy", stamps, bad))


def reader(sock: str, mib: int, key: str, q) -> None:  # type: ignore[no-untyped-def]
    import torch
    import zpp.cuda as zc
    from zpp._lib import DType, Op

    c, reg = _conn(sock, "reader")
    got = torch.zeros(mib << 19, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.current_stream()
    _call(c, zc, Op.HPZ_GATHER, None, reg.ref(got), got.numel(), DType.BF16, s, content_key=key)
    s.synchronize()
    h = "sha256:" + hashlib.sha256(got.view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    reg.clear()
    c.close()
    q.put(("reader", h == key))


def pub(sock: str, mib: int, q, read_done) -> None:  # type: ignore[no-untyped-def]
    import torch
    import zpp.cuda as zc
    from zpp._lib import FLAG_PUBLISH, DType, Op
    from zpp.errors import ZppError

    c, reg = _conn(sock, "pub")
    n = mib << 19  # bf16 elements
    g = torch.Generator(device="cuda").manual_seed(27)
    x = torch.randn(n, device="cuda", dtype=torch.float32, generator=g).to(torch.bfloat16)
    out = torch.empty_like(x)
    back = torch.empty_like(x)
    key = "sha256:" + hashlib.sha256(x.view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    wrong = key[:7] + ("1" if key[7] == "0" else "0") + key[8:]
    s = torch.cuda.current_stream()
    rx, rout, rback = reg.ref(x), reg.ref(out), reg.ref(back)
    fails = []
    s.synchronize()
    t0 = time.monotonic()
    _call(c, zc, Op.ALLGATHER, rx, rout, n, DType.BF16, s, content_key=key, flags=FLAG_PUBLISH)
    s.synchronize()
    t1 = time.monotonic()
    _call(c, zc, Op.HPZ_GATHER, None, rback, n, DType.BF16, s, content_key=key)
    s.synchronize()
    if not torch.equal(back.view(torch.int16), x.view(torch.int16)):
        fails.append("the replica read back by its key differs from the tensor")
    q.put(("published", key))  # another job reads it while this one holds it
    if not read_done.wait(120):
        fails.append("the other job's read did not end in 120 s")
    # the same bytes again: the replica is there, so the daemon hashes this
    # call's own output (a dedup) and attaches; no second copy
    t2 = time.monotonic()
    _call(c, zc, Op.ALLGATHER, rx, rout, n, DType.BF16, s, content_key=key, flags=FLAG_PUBLISH)
    s.synchronize()
    t3 = time.monotonic()
    try:
        _call(c, zc, Op.ALLGATHER, rx, rout, n, DType.BF16, s, content_key=wrong,
              flags=FLAG_PUBLISH)  # fmt: skip
        fails.append("a publish under a wrong key was accepted")
    except ZppError as e:
        if e.name != "EMISMATCH":
            fails.append(f"a wrong key: {e.name}: {e}")
    reg.clear()
    c.close()
    q.put(("pub", (t0, t1, t3 - t2), fails))


def _lat(stamps, skip=None):  # type: ignore[no-untyped-def]
    """skip: (t0, t1), a window whose calls are not in stamps: the gap from
    the last answer before it to the first after is not counted."""
    lat = [(b - a) * 1e6 for a, b in stamps]
    gaps = [(stamps[i][1] - stamps[i - 1][1]) * 1e6 for i in range(1, len(stamps))
            if not (skip and stamps[i - 1][1] <= skip[0] and stamps[i][0] >= skip[1])]  # fmt: skip
    if not lat:
        return "no calls"
    return (f"{len(lat)} calls, median {statistics.median(lat):.0f} us, max {max(lat):.0f} us, "
            f"longest gap between answers {max(gaps) if gaps else 0:.0f} us")  # fmt: skip


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    sock = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    import torch  # the parent only names the device; the children use it

    print(f"# device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
          f"command: {' '.join(sys.argv)}", flush=True)  # fmt: skip
    ctx = mp.get_context("spawn")
    ready, stop, read_done, q = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue()
    b = ctx.Process(target=busy, args=(sock, ready, stop, q), daemon=True)
    b.start()
    while not ready.wait(0.5):
        if not b.is_alive():  # (its error is above)
            print("busy did not start")
            return 1
    time.sleep(0.5)
    p = ctx.Process(target=pub, args=(sock, mib, q, read_done), daemon=True)
    p.start()
    got = {}
    r = None
    while "pub" not in got:
        try:
            k, *v = q.get(timeout=0.5)
            got[k] = v
            if k == "published":
                r = ctx.Process(target=reader, args=(sock, mib, v[0], q), daemon=True)
                r.start()
            elif k == "reader":
                read_done.set()
        except Exception:  # queue.Empty
            if r is not None and not r.is_alive() and "reader" not in got:
                read_done.set()  # it died: pub goes on, the check fails below
            if not p.is_alive() and q.empty():
                print("pub ended without a result")
                b.terminate()
                return 1
    time.sleep(0.5)
    stop.set()
    k, *v = q.get(timeout=120)
    got[k] = v
    res = got
    p.join(30)
    b.join(30)
    if r is not None:
        r.join(30)
    (t0, t1, dedup_s), fails = res["pub"]
    if res.get("reader") == [True]:
        print("another job's hpZ gather by the key alone: the published bytes (SHA-256 = key)")
    else:
        fails.append("another job's hpZ gather by the key did not get the published bytes "
                     f"({res.get('reader', 'no result')})")
    stamps, bad = res["busy"]
    inside = [st for st in stamps if st[1] > t0 and st[0] < t1]
    outside = [st for st in stamps if st[1] <= t0 or st[0] >= t1]
    print(f"publish of {mib} MiB bf16: {(t1 - t0) * 1e3:.1f} ms (call, key check included); "
          f"the same bytes again (dedup): {dedup_s * 1e3:.1f} ms")  # fmt: skip
    print(f"busy inside the publish:  {_lat(inside)}")
    print(f"busy outside the publish: {_lat(outside, (t0, t1))}")
    if bad:
        fails.append(f"{bad} busy all-gathers gathered wrong bytes")
    for f in fails:
        print("FAIL:", f)
    print("publish_stall:", "FAIL" if fails else "PASS")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
