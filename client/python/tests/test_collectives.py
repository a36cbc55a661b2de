"""Every collective on the host backend, 2 virtual nodes x 2 ranks, one
process per rank, NumPy arrays in shared memory; results against the exact
answer (bit for bit where the op is exact, within the quantization bound
where it is not)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import zpp
from ranks import Job, run

COUNT = 1001  # not a multiple of W = 4: the last shard is padded
BLOCK = 256
ALIGN = 64


class Arena:
    """Carves aligned NumPy arrays out of one SharedBuffer."""

    def __init__(self, nbytes: int = 1 << 20) -> None:
        self.shm = zpp.SharedBuffer(nbytes)
        self.off = 0

    def take(self, dtype, n: int) -> np.ndarray:
        dt = np.dtype(dtype)
        a = self.shm.numpy(dt, n, offset=self.off)
        self.off += -(-n * dt.itemsize // ALIGN) * ALIGN
        return a


def full_tensor(seed: int, count: int = COUNT) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(count).astype(np.float32)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bit patterns (truncation; exactness is what matters here)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def shard_of(x: np.ndarray, rank: int, world: int, pad) -> np.ndarray:
    shard = -(-len(x) // world)
    s = np.full(shard, pad, dtype=x.dtype)
    part = x[rank * shard : (rank + 1) * shard]
    s[: len(part)] = part
    return s


def job_of(daemon, job: str, **kw) -> Job:
    return Job(socket=daemon.socket, job_id=job, **kw)


# ---- rank bodies (module level: spawned processes import them) -----------------


def body_hello(rank: int, job: Job):
    with job.connect(rank) as c:
        c.barrier()
        i = c.info
        return i.nodes, i.local_size, i.backend


def body_allgather(rank: int, job: Job):
    ar = Arena()
    full32 = full_tensor(job.seed)
    cases = [
        (full32, None),
        (full32.astype(np.float16), None),
        (to_bf16_bits(full32), "bf16"),  # raw bf16 in uint16 needs the dtype
    ]
    algos = []
    with job.connect(rank) as c:
        for full, dtype in cases:
            inp = ar.take(full.dtype, -(-COUNT // job.world))
            inp[:] = shard_of(full, rank, job.world, pad=7)  # padding is ignored
            out = ar.take(full.dtype, COUNT)
            res = c.allgather(inp, out, dtype=dtype)
            assert np.array_equal(out.view(np.uint8), full.view(np.uint8)), (full.dtype, dtype)
            assert res.logical_bytes == full.nbytes
            algos.append((res.algo, res.bytes_inter > 0))
        c.barrier()
        c.check()  # every answered call completed on a working device
    return algos


def rank_input(seed: int, rank: int, count: int = COUNT) -> np.ndarray:
    """Small integers: every sum order gives the same float."""
    return np.random.default_rng([seed, rank]).integers(-8, 9, count).astype(np.float32)


def body_reduce_scatter(rank: int, job: Job):
    ar = Arena()
    total = sum(rank_input(job.seed, r) for r in range(job.world))
    shard = -(-COUNT // job.world)
    with job.connect(rank) as c:
        for reduce, expect in (("sum", total), ("mean", total / job.world)):
            inp = ar.take(np.float32, COUNT)
            inp[:] = rank_input(job.seed, rank)
            out = ar.take(np.float32, shard)
            out[:] = np.nan
            res = c.reduce_scatter(inp, out, reduce=reduce)
            assert res.algo == "rs_exact"
            assert np.array_equal(out, shard_of(expect, rank, job.world, pad=0)), reduce
        # fp16 in, fp32 out: out_dtype comes from the output array
        inp16 = ar.take(np.float16, COUNT)
        inp16[:] = rank_input(job.seed, rank)
        out32 = ar.take(np.float32, shard)
        c.reduce_scatter(inp16, out32)
        assert np.array_equal(out32, shard_of(total, rank, job.world, pad=0))
        c.barrier()
    return True


def quant_bound(full: np.ndarray, world: int, bits: int, block: int) -> np.ndarray:
    """Per element: half a quantization step of its block (blocks run over
    each rank's shard), plus float rounding slack."""
    qmax = (1 << (bits - 1)) - 1
    shard = -(-len(full) // world)
    bound = np.empty(len(full), np.float64)
    for s0 in range(0, len(full), shard):
        for b0 in range(s0, min(s0 + shard, len(full)), block):
            b1 = min(b0 + block, s0 + shard, len(full))
            amax = float(np.abs(full[b0:b1]).max())
            bound[b0:b1] = amax / qmax * 0.5 * (1 + 1e-3) + 1e-7
    return bound


def body_qwz_hpz(rank: int, job: Job):
    ar = Arena()
    full = full_tensor(job.seed)
    shard = -(-COUNT // job.world)
    worst = {}
    with job.connect(rank) as c:
        for bits in (8, 4):
            inp = ar.take(np.float32, shard)
            inp[:] = shard_of(full, rank, job.world, pad=0)
            out = ar.take(np.float32, COUNT)
            key = f"layer0.w{bits}"
            res = c.qwz_allgather(inp, out, bits=bits, block=BLOCK, hpz_key=key)
            assert res.algo == "qwz" and res.bytes_inter < res.bytes_zero3_inter
            err = np.abs(out.astype(np.float64) - full)
            bound = quant_bound(full, job.world, bits, BLOCK)
            assert (err <= bound).all(), (bits, float((err / bound).max()))
            worst[bits] = float((err / bound).max())
            # hpZ: the node-local copy gives the same bytes, without crossing nodes
            hp = ar.take(np.float32, COUNT)
            res = c.hpz_gather(hp, hpz_key=key)
            assert res.algo == "hpz" and res.bytes_inter == 0
            assert np.array_equal(hp, out)
        c.hpz_invalidate("layer0.w8")
        hp = ar.take(np.float32, COUNT)
        with pytest.raises(zpp.ZppNotFoundError) as ei:
            c.hpz_gather(hp, hpz_key="layer0.w8")
        gone = (ei.value.code, ei.value.message)
        c.hpz_invalidate(all=True)
        with pytest.raises(zpp.ZppNotFoundError):
            c.hpz_gather(hp, hpz_key="layer0.w4")
        c.barrier()
    return worst, gone


def body_qgz(rank: int, job: Job):
    ar = Arena()
    rng = [np.random.default_rng([job.seed, r]) for r in range(job.world)]
    grads = [g.standard_normal(COUNT).astype(np.float32) for g in rng]
    exact = np.sum([g.astype(np.float64) for g in grads], axis=0)
    want = shard_of(exact, rank, job.world, pad=0)
    shard = len(want)
    errs = {}
    with job.connect(rank) as c:
        for bits, bound in ((8, 0.05), (4, 0.25)):
            inp = ar.take(np.float32, COUNT)
            inp[:] = grads[rank]
            out = ar.take(np.float32, shard)
            res = c.qgz_reduce_scatter(inp, out, bits=bits, block=BLOCK)
            assert res.algo == "qgz_hier", res.algo
            assert res.bytes_inter < res.bytes_zero3_inter
            valid = min(shard, COUNT - rank * shard)
            rel = float(np.linalg.norm(out[:valid] - want[:valid]) / np.linalg.norm(want[:valid]))
            assert rel <= bound, (bits, rel)
            assert (out[valid:] == 0).all()
            errs[bits] = rel
        c.barrier()
    return errs


def body_async(rank: int, job: Job):
    ar = Arena()
    full = full_tensor(job.seed)
    shard = -(-COUNT // job.world)
    total = sum(rank_input(job.seed, r) for r in range(job.world))
    with job.connect(rank) as c:
        ag_in = ar.take(np.float32, shard)
        ag_in[:] = shard_of(full, rank, job.world, pad=0)
        ag_out = ar.take(np.float32, COUNT)
        rs_in = ar.take(np.float32, COUNT)
        rs_in[:] = rank_input(job.seed, rank)
        rs_out = ar.take(np.float32, shard)
        r1 = c.allgather(ag_in, ag_out, async_op=True)
        r2 = c.reduce_scatter(rs_in, rs_out, async_op=True)
        r3 = c.barrier(async_op=True)
        assert isinstance(r1, zpp.Request) and not r1.done
        deadline = time.monotonic() + 30
        while not r3.test():  # polls without blocking
            assert time.monotonic() < deadline
            time.sleep(0.001)
        res2 = r2.wait()  # out of submission order
        res1 = r1.wait()
        assert r1.wait() is res1 and r1.test()
        assert (res1.seq, res2.seq) == (1, 2) and r3.wait().algo == "none"
        assert np.array_equal(ag_out, full)
        assert np.array_equal(rs_out, shard_of(total, rank, job.world, pad=0))
        c.barrier()
    return True


def body_mismatch(rank: int, job: Job):
    ar = Arena()
    shard = -(-COUNT // job.world)
    with job.connect(rank) as c:
        inp = ar.take(np.float32, shard)
        out = ar.take(np.float32, COUNT)
        count = COUNT - 1 if rank == 2 else COUNT
        try:
            c.allgather(inp, out, count=count)
        except zpp.ZppError as e:
            c.barrier()  # the job goes on after a refused call
            return type(e).__name__, e.code, e.message
        c.barrier()
        return None


def body_unknown_buffer(rank: int, job: Job):
    ar = Arena()
    shard = -(-COUNT // job.world)
    with job.connect(rank) as c:
        inp = ar.take(np.float32, shard)
        out = zpp.BufRef(987654321, 0) if rank == 1 else ar.take(np.float32, COUNT)
        try:
            c.allgather(inp, out, count=COUNT, dtype="fp32")
        except zpp.ZppError as e:
            c.barrier()
            return type(e).__name__, e.code, e.message
        c.barrier()
        return None


# ---- tests ----------------------------------------------------------------------


def test_hello_joins_two_virtual_nodes_of_two_ranks(daemon, job) -> None:
    assert run(body_hello, job_of(daemon, job)) == [(2, 2, "host")] * 4


def test_allgather_fp32_fp16_bf16_is_exact(daemon, job) -> None:
    for algos in run(body_allgather, job_of(daemon, job, seed=1)):
        assert algos == [("ag_exact", True)] * 3


def test_reduce_scatter_sum_mean_and_widening_is_exact(daemon, job) -> None:
    assert run(body_reduce_scatter, job_of(daemon, job, seed=2)) == [True] * 4


def test_qwz_within_half_a_step_and_hpz_gives_the_same_bytes(daemon, job) -> None:
    out = run(body_qwz_hpz, job_of(daemon, job, seed=3))
    for worst, (code, msg) in out:
        assert set(worst) == {8, 4}
        assert code == zpp.ZppNotFoundError.code and msg


def test_qgz_reduce_scatter_within_bounds(daemon, job) -> None:
    for errs in run(body_qgz, job_of(daemon, job, seed=4)):
        assert 0 < errs[8] < errs[4]


def test_async_submit_test_and_wait_out_of_order(daemon, job) -> None:
    assert run(body_async, job_of(daemon, job, seed=5)) == [True] * 4


def test_mismatch_across_ranks_raises_with_the_daemons_message(daemon, job) -> None:
    out = run(body_mismatch, job_of(daemon, job))
    assert all(o is not None for o in out), out
    for name, code, msg in out:
        assert name == "ZppMismatchError" and code == -7
        assert "differs across ranks" in msg and "count" in msg, msg


def test_unknown_buffer_id_raises_not_found(daemon, job) -> None:
    out = run(body_unknown_buffer, job_of(daemon, job))
    assert all(o is not None for o in out), out
    for name, code, msg in out:
        assert name == "ZppNotFoundError" and code == -5, (name, code, msg)
        assert "rank 1" in msg, msg
