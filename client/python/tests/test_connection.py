"""One process, one or two connections: argument checks in Python before C,
the registration cache and its release, timeouts, closed connections."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import zpp


def calls(conn: zpp.Connection) -> int:
    s = conn.status()
    return s["calls_ok"] + s["calls_failed"]


@pytest.fixture
def solo(daemon, job):
    """A connection that joined a one-rank job, and a SharedBuffer."""
    with zpp.Connection(daemon.socket) as c, zpp.SharedBuffer(1 << 16) as shm:
        c.hello(job, 0, 1)
        yield c, shm
        gc.collect()  # views of the test go before shm closes


def test_sizes_and_dtypes_are_checked_before_the_daemon_sees_the_call(solo) -> None:
    c, shm = solo
    a = shm.numpy(np.float32, 100)
    small = shm.numpy(np.float32, 50, offset=1024)
    raw = shm.numpy(np.uint16, 100, offset=2048)
    before = calls(c)
    with pytest.raises(zpp.ZppInvalidArgumentError, match="needs 400"):
        c.allgather(a, small, count=100)
    with pytest.raises(ValueError, match="float32|FP32"):
        c.allgather(a, a, dtype="fp16")
    with pytest.raises(ValueError, match="dtype"):
        c.allgather(raw, raw)
    with pytest.raises(ValueError, match="SharedBuffer"):
        c.allgather(a, np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="bits"):
        c.qwz_allgather(a, a, bits=5)
    with pytest.raises(ValueError, match="block"):
        c.qgz_reduce_scatter(a, a, block=100)
    with pytest.raises(ValueError, match="key"):
        c.hpz_invalidate()
    assert calls(c) == before
    c.allgather(raw, raw, dtype=zpp.DType.BF16)  # and a good call goes through
    assert calls(c) == before + 1
    del a, small, raw


def test_collectives_before_hello_are_refused(daemon) -> None:
    with zpp.Connection(daemon.socket) as c:
        with pytest.raises(zpp.ZppStateError):
            c.barrier()


def test_hello_errors_carry_the_daemons_message(daemon, job) -> None:
    with zpp.Connection(daemon.socket) as a, zpp.Connection(daemon.socket) as b:
        with pytest.raises(zpp.ZppInvalidArgumentError) as ei:
            a.hello(job, 0, 3, node_count=2)  # refused by libzpp itself
        assert ei.value.code == -1 and "node_count" in ei.value.message
        a.hello(job, 0, 2)
        with pytest.raises(zpp.ZppExistsError) as ei:
            b.hello(job, 0, 2)  # refused by the daemon
        assert ei.value.code == -17 and "rank 0 of job" in ei.value.message
        assert "already joined" in ei.value.message


def test_one_registration_per_buffer_released_on_close(daemon, job) -> None:
    shm = zpp.SharedBuffer(1 << 16)
    c = zpp.Connection(daemon.socket)
    c.hello(job, 0, 1)
    sessions = c.status()["sessions"]
    a = shm.numpy(np.float32, 64)
    b = shm.numpy(np.float32, 64, offset=4096)
    a[:] = 3
    c.allgather(a, b)
    c.reduce_scatter(b, a)
    assert list(c.registered) == [id(shm)]  # both arrays: one registration
    assert (a == 3).all() and (b == 3).all()
    assert shm._listeners
    c.close()
    assert c.closed and c.registered == {} and not shm._listeners
    with zpp.Connection(daemon.socket) as probe:
        assert probe.status()["sessions"] == sessions  # the probe replaces c
    with pytest.raises(zpp.ZppClosedError):
        c.barrier()
    del a, b
    shm.close()


def test_released_buffer_id_is_unknown_to_the_daemon(solo) -> None:
    c, shm = solo
    a = shm.numpy(np.float32, 64)
    c.allgather(a, a)
    bid = c.registered[id(shm)]
    c.release(shm)
    assert c.registered == {} and not shm._listeners
    with pytest.raises(zpp.ZppNotFoundError) as ei:
        c.allgather(zpp.BufRef(bid, 0), zpp.BufRef(bid, 0), count=64, dtype="fp32")
    assert "not registered" in ei.value.message
    c.allgather(a, a)  # registers again
    assert c.registered[id(shm)] != bid
    del a


def test_closing_a_buffer_drops_its_registration(solo) -> None:
    c, _ = solo
    shm = zpp.SharedBuffer(4096)
    a = shm.numpy(np.float32, 16)
    c.allgather(a, a)
    assert id(shm) in c.registered
    del a
    shm.close()
    assert id(shm) not in c.registered



def test_a_buffer_closed_on_another_thread_is_deregistered_by_the_connections_thread(
    solo, monkeypatch
) -> None:
    # A connection is used by one thread at a time: the thread that closes a
    # SharedBuffer must not send a Deregister frame on it (it would land in
    # the middle of the other thread's call); the next call does it.
    import zpp.client as zc

    c, _ = solo
    shm = zpp.SharedBuffer(4096)
    a = shm.numpy(np.float32, 16)
    c.allgather(a, a)
    bid = c.registered[id(shm)]
    del a
    sent = []
    real = zc.LIB.zpp_deregister

    def spy(h, b):
        sent.append((threading.get_ident(), b))
        return real(h, b)

    monkeypatch.setattr(zc.LIB, "zpp_deregister", spy)
    t = threading.Thread(target=shm.close)
    t.start()
    t.join()
    assert shm.closed and id(shm) not in c.registered
    assert sent == []  # the closing thread sent nothing
    c.barrier()
    assert sent == [(threading.get_ident(), bid)]
    with pytest.raises(zpp.ZppNotFoundError, match="not registered"):
        c.allgather(zpp.BufRef(bid, 0), zpp.BufRef(bid, 0), count=16, dtype="fp32")


def test_a_buffer_closed_with_requests_in_flight_is_deregistered_by_the_next_call(
    daemon, job, monkeypatch
) -> None:
    # Before session 22 a SharedBuffer closed while any request of its
    # connection was in flight was dropped from the cache without a
    # Deregister: zppd kept the registration and its mapping of the memory
    # for the connection's life. A pipelining loop is never without one.
    import zpp.client as zc

    sent = []
    real = zc.LIB.zpp_deregister

    def spy(h, b):
        sent.append(b)
        return real(h, b)

    monkeypatch.setattr(zc.LIB, "zpp_deregister", spy)
    with zpp.Connection(daemon.socket) as r0, zpp.Connection(daemon.socket) as r1:
        r0.hello(job, 0, 2)
        r1.hello(job, 1, 2)
        buf = zpp.SharedBuffer(1 << 16)
        bid = r0.register(buf)
        first = r0.barrier(async_op=True)  # in flight: rank 1 has not called it
        buf.close()
        second = r0.barrier(async_op=True)  # the next call, still with one in flight
        assert sent == [bid]
        r1.barrier()
        r1.barrier()
        first.wait()
        second.wait()
        with pytest.raises(zpp.ZppNotFoundError, match="not registered"):
            r0.deregister(bid)


def test_a_submit_past_max_pending_is_refused_before_it_takes_a_number(daemon, job) -> None:
    # The daemon refuses a call past max_pending without recording it; were
    # the number used, this rank's retry would go out as the next call and
    # the job would wait for the refused one until its timeout.
    with zpp.Connection(daemon.socket) as r0, zpp.Connection(daemon.socket) as r1:
        info = r0.hello(job, 0, 2)
        r1.hello(job, 1, 2)
        n = info.max_pending
        reqs = [r0.barrier(async_op=True) for _ in range(n)]
        with pytest.raises(zpp.ZppLimitError, match="not used"):
            r0.barrier(async_op=True)
        for _ in range(n):
            r1.barrier()
        for r in reqs:
            r.wait()
        # the retry is call n + 1 on both ranks
        last = r0.barrier(async_op=True)
        r1.barrier(timeout_ms=5000)
        last.wait()

def test_a_call_past_its_timeout_raises_a_TimeoutError(daemon, job) -> None:
    # zppd aborts the job and tells the waiting calls ZPP_ETIMEDOUT.
    with zpp.Connection(daemon.socket) as r0, zpp.Connection(daemon.socket) as r1:
        r0.hello(job, 0, 2)
        r1.hello(job, 1, 2)  # joins, never calls
        with pytest.raises(zpp.ZppTimeoutError) as ei:
            r0.barrier(timeout_ms=200)
        assert isinstance(ei.value, TimeoutError) and ei.value.code == -9
        assert "timed out after 200 ms waiting for ranks 1" in ei.value.message


def test_close_abandons_pending_requests(daemon, job) -> None:
    with zpp.Connection(daemon.socket) as r0, zpp.Connection(daemon.socket) as r1:
        r0.hello(job, 0, 2)
        r1.hello(job, 1, 2)
        req = r0.barrier(async_op=True)
        assert not req.test()
        r0.close()
        with pytest.raises(zpp.ZppClosedError):
            req.wait()


def test_two_connections_in_one_process_complete_async_calls(daemon, job) -> None:
    with zpp.Connection(daemon.socket) as r0, zpp.Connection(daemon.socket) as r1, zpp.SharedBuffer(
        1 << 14
    ) as shm:
        r0.hello(job, 0, 2)
        r1.hello(job, 1, 2)
        full = np.arange(10, dtype=np.float32)
        ins = [shm.numpy(np.float32, 5, offset=o) for o in (0, 64)]
        outs = [shm.numpy(np.float32, 10, offset=o) for o in (128, 192)]
        for r in (0, 1):
            ins[r][:] = full[5 * r : 5 * r + 5]
        q0 = r0.allgather(ins[0], outs[0], async_op=True)
        q1 = r1.allgather(ins[1], outs[1], async_op=True)
        assert q1.wait().algo == q0.wait().algo == "ag_exact"
        assert np.array_equal(outs[0], full) and np.array_equal(outs[1], full)
        del ins, outs


def test_hello_refuses_a_local_rank_that_does_not_fit_32_bits(daemon, job) -> None:
    # ctypes would store 2^32 in the uint32 field as 0: a wrong local rank
    # the daemon cannot tell from a right one.
    with zpp.Connection(daemon.socket) as c:
        for bad in (1 << 32, -1):
            with pytest.raises(zpp.ZppInvalidArgumentError, match="local_rank"):
                c.hello(job, 0, 1, local_rank=bad)
        assert c.world_size is None
        c.hello(job, 0, 1, local_rank=0)


def test_strings_with_a_NUL_byte_are_refused_not_cut(daemon, job) -> None:
    # C reads a string up to its first NUL: "job\0a" would join "job", and
    # two hpZ keys that differ after a NUL would name the same slices.
    with pytest.raises(zpp.ZppInvalidArgumentError, match="NUL"):
        zpp.Connection(daemon.socket + "\0.other")
    with zpp.Connection(daemon.socket) as c, zpp.SharedBuffer(4096) as shm:
        with pytest.raises(zpp.ZppInvalidArgumentError, match="NUL"):
            c.hello(job + "\0a", 0, 1)
        with pytest.raises(zpp.ZppInvalidArgumentError, match="NUL"):
            c.hello(job, 0, 1, tenant_label="t\0x")
        with zpp.Connection(daemon.socket) as probe:
            assert job not in [j["job_id"] for j in probe.jobs()["jobs"]]
        c.hello(job, 0, 1)
        a = shm.numpy(np.float32, 64)
        before = calls(c)
        with pytest.raises(zpp.ZppInvalidArgumentError, match="NUL"):
            c.qwz_allgather(a, a, hpz_key="k\0a")
        with pytest.raises(zpp.ZppInvalidArgumentError, match="NUL"):
            c.hpz_invalidate("k\0a")
        assert calls(c) == before
        del a


def test_submit_stream_needs_a_connection_attached_to_a_gpu(solo) -> None:
    """zpp_collective_stream on a host connection (no zpp_cuda_attach, so no
    done flags): refused before anything is sent, with the C function's
    message; a host-only libzpp refuses it by name."""
    import zpp.cuda as zc
    from zpp._lib import LIB, CollC

    c, shm = solo
    call = CollC()
    LIB.zpp_coll_init(call, zpp.Op.ALLGATHER, 1, 16)
    before = calls(c)
    with pytest.raises(zpp.ZppError) as e:
        zc.submit_stream(c, call)
    if LIB.has("zpp_collective_stream"):
        assert "zpp_cuda_attach" in str(e.value)
    else:
        assert "not a CUDA build" in str(e.value)
    assert calls(c) == before
