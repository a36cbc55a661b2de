"""Shared hpZ replicas from Python (docs/hpz-sharing.md): one job publishes
a tensor under its content key, another job of the same uid reads it by
that key, and the daemon keeps one copy. Host backend, one node of 2 ranks
per job, one process per rank."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import zpp
from ranks import Job, run

COUNT = 1001  # odd: the last rank's slice is padded
WORLD = 2
ALIGN = 64


def full_tensor(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(COUNT).astype(np.float32)


def take(shm: zpp.SharedBuffer, off: int, n: int) -> np.ndarray:
    return shm.numpy(np.float32, n, offset=off)


def shard_of(x: np.ndarray, rank: int) -> np.ndarray:
    shard = -(-len(x) // WORLD)
    s = np.zeros(shard, dtype=x.dtype)
    part = x[rank * shard : (rank + 1) * shard]
    s[: len(part)] = part
    return s


def store_bytes(socket: str) -> int:
    with zpp.Connection(socket) as c:
        return int(c.status()["store_bytes"])


# ---- rank bodies (module level: spawned processes import them) -----------------


def body_publish(rank: int, job: Job):
    full = full_tensor(job.seed)
    key = zpp.content_key(full)
    shard = -(-COUNT // WORLD)
    shm = zpp.SharedBuffer(1 << 16)  # lives as long as the rank (its views do)
    with job.connect(rank) as c:
        inp = take(shm, 0, shard)
        inp[:] = shard_of(full, rank)
        out = take(shm, -(-shard * 4 // ALIGN) * ALIGN, COUNT)
        res = c.allgather(inp, out, content_key=key, publish=True)
        c.barrier()
        return res.algo, bytes(out.tobytes()) == full.tobytes()


def body_read_then_publish_again(rank: int, job: Job):
    full = full_tensor(job.seed)
    key = zpp.content_key(full)
    shard = -(-COUNT // WORLD)
    shm = zpp.SharedBuffer(1 << 16)  # lives as long as the rank (its views do)
    with job.connect(rank) as c:
        out = take(shm, 0, COUNT)
        out[:] = 0
        res = c.hpz_gather(out, content_key=key)
        read_ok = out.tobytes() == full.tobytes()
        read = (res.algo, res.bytes_inter)
        # The same bytes published again by a second job: it attaches to the
        # replica already there instead of keeping a copy of its own.
        inp = take(shm, 2 * ALIGN * 64, shard)
        inp[:] = shard_of(full, rank)
        out2 = take(shm, 4 * ALIGN * 64, COUNT)
        c.allgather(inp, out2, content_key=key, publish=True)
        c.barrier()
        c.hpz_invalidate(all=True, keep_shared=True)  # the job's own keys go; still attached
        c.hpz_invalidate(content_key=key)  # detach: the replica stays
        c.barrier()
        return read, read_ok, out2.tobytes() == full.tobytes()


def body_wrong_key(rank: int, job: Job):
    full = full_tensor(job.seed)
    shard = -(-COUNT // WORLD)
    bogus = zpp.content_key(b"not this tensor")
    shm = zpp.SharedBuffer(1 << 16)  # lives as long as the rank (its views do)
    with job.connect(rank) as c:
        inp = take(shm, 0, shard)
        inp[:] = shard_of(full, rank)
        out = take(shm, 2 * ALIGN * 64, COUNT)
        try:
            c.allgather(inp, out, content_key=bogus, publish=True)
        except zpp.ZppError as e:
            c.barrier()
            return type(e).__name__, e.message
        return None


# ---- tests ----------------------------------------------------------------------


def test_content_key_is_sha256_of_the_tensor_bytes() -> None:
    x = full_tensor(11)
    want = "sha256:" + hashlib.sha256(x.tobytes()).hexdigest()
    assert zpp.content_key(x) == want
    assert zpp.content_key(x.tobytes()) == want
    assert zpp.content_key(memoryview(x.tobytes())) == want
    assert zpp.content_key(x.astype(">f4")) == want  # hashed little-endian
    assert zpp.content_key(x.reshape(7, 143)) == want
    assert zpp.content_key(x.reshape(143, 7).T.copy(order="F").T) == want  # any layout: C order
    assert zpp.content_key(b"") == "sha256:" + hashlib.sha256(b"").hexdigest()
    with pytest.raises(zpp.ZppInvalidArgumentError):
        zpp.content_key(12)


def refuse_bad_key_arguments(c: zpp.Connection, shm: zpp.SharedBuffer) -> None:
    a = shm.numpy(np.float32, 64)
    key = zpp.content_key(a)
    cases = [
        lambda: c.allgather(a, a, publish=True),  # no key
        lambda: c.allgather(a, a, content_key=key),  # key without publish
        lambda: c.allgather(a, a, content_key=key.upper(), publish=True),
        lambda: c.allgather(a, a, content_key="sha256:abc", publish=True),
        lambda: c.qwz_allgather(a, a, hpz_key="k", content_key=key, publish=True),
        lambda: c.hpz_gather(a),
        lambda: c.hpz_gather(a, hpz_key="k", content_key=key),
        lambda: c.hpz_invalidate("k", content_key=key),
        lambda: c.hpz_invalidate(content_key="sha256:" + "g" * 64),
        lambda: c.hpz_invalidate("k", keep_shared=True),  # keep_shared needs all=True
    ]
    for i, case in enumerate(cases):
        with pytest.raises(zpp.ZppInvalidArgumentError):
            case()
            pytest.fail(f"case {i} was not refused")


def test_content_key_arguments_are_checked_before_the_daemon(daemon, job) -> None:
    with zpp.SharedBuffer(1 << 12) as shm, zpp.Connection(daemon.socket) as c:
        c.hello(job, 0, 1)
        refuse_bad_key_arguments(c, shm)  # its views are gone when it returns


def test_publish_from_one_job_read_from_another_keeps_one_copy(daemon, job) -> None:
    before = store_bytes(daemon.socket)
    pub = run(body_publish, Job(daemon.socket, job + "-pub", world=WORLD, nodes=1, seed=21))
    assert pub == [("ag_exact", True)] * WORLD
    one_copy = store_bytes(daemon.socket) - before
    # One slice of ceil(count / G) fp32 elements per rank of the node.
    assert one_copy == WORLD * -(-COUNT // WORLD) * 4

    out = run(body_read_then_publish_again,
              Job(daemon.socket, job + "-read", world=WORLD, nodes=1, seed=21))  # fmt: skip
    for (algo, inter), read_ok, gathered_ok in out:
        assert algo == "hpz" and inter == 0
        assert read_ok and gathered_ok
    assert store_bytes(daemon.socket) - before == one_copy  # still one copy


def test_publish_with_a_wrong_key_names_the_real_hash(daemon, job) -> None:
    before = store_bytes(daemon.socket)
    out = run(body_wrong_key, Job(daemon.socket, job, world=WORLD, nodes=1, seed=22))
    real = zpp.content_key(full_tensor(22))
    for o in out:
        assert o is not None
        name, msg = o
        assert name == "ZppMismatchError", o
        assert real in msg, msg
    assert store_bytes(daemon.socket) == before
