"""Audit 21c: 64-bit values ctypes would truncate silently, a daemon that
answers a collective with ZPP_EBUSY (test()'s "not yet"), and the registry
of live SharedBuffers after one is collected while views remain."""

from __future__ import annotations

import gc
import os
import shutil
import socket
import struct
import tempfile
import threading
import time

import numpy as np
import pytest

import zpp
from zpp import shm as zshm


def test_shared_buffer_sizes_past_64_bits_are_refused() -> None:
    # ctypes passes 2^64 + 4096 to size_t as 4096: a buffer of another size
    # than asked for, without a word.
    for bad in (1 << 64, (1 << 64) + 4096, 1 << 63):
        with pytest.raises(zpp.ZppInvalidArgumentError):
            zpp.SharedBuffer(bad)


def test_buffer_ids_and_offsets_must_fit_64_bits(daemon, job) -> None:
    with zpp.Connection(daemon.socket) as c, zpp.SharedBuffer(4096) as shm:
        c.hello(job, 0, 1)
        a = shm.numpy(np.float32, 16)
        c.allgather(a, a)
        bid = c.registered[id(shm)]
        # bid + 2^64 would reach C as bid, -1 as 2^64 - 1.
        for ref in (zpp.BufRef(bid + (1 << 64), 0), zpp.BufRef(-1, 0), zpp.BufRef(bid, -64),
                    zpp.BufRef(bid, 1 << 64)):  # fmt: skip
            with pytest.raises(zpp.ZppInvalidArgumentError):
                c.allgather(ref, ref, count=16, dtype="fp32")
            with pytest.raises(zpp.ZppInvalidArgumentError):
                c.hpz_gather(ref, hpz_key="k", count=16, dtype="fp32")
        with pytest.raises(zpp.ZppInvalidArgumentError):
            c.deregister(bid + (1 << 64))  # would drop bid
        with pytest.raises(zpp.ZppInvalidArgumentError):
            c.deregister(-1)
        assert c.registered[id(shm)] == bid
        c.allgather(zpp.BufRef(bid, 0), zpp.BufRef(bid, 0), count=16, dtype="fp32")  # still there
        del a


def test_a_collected_buffer_leaves_the_live_registry() -> None:
    shm = zpp.SharedBuffer(4096)
    key = id(shm)
    a = shm.numpy(np.int32, 4)
    del shm
    gc.collect()
    assert key not in zshm._live or zshm._live[key]() is not None
    del a


# ---- a fake daemon speaking just enough protobuf -------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(b: bytes, i: int):
    shift = n = 0
    while True:
        x = b[i]
        i += 1
        n |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return n, i


def _req_id(body: bytes) -> int:
    i = 0
    while i < len(body):
        tag, i = _read_varint(body, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            v, i = _read_varint(body, i)
            if field == 2:
                return v
        elif wire == 2:
            n, i = _read_varint(body, i)
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
    return 0


def _reply(req_id: int, code: int = 0, message: bytes = b"", hello: bool = False) -> bytes:
    body = b"\x08" + _varint(req_id)
    if code:
        body += b"\x10" + _varint(((code << 1) ^ (code >> 31)) & 0xFFFFFFFF)
    if message:
        body += b"\x1a" + _varint(len(message)) + message
    if hello:
        body += b"\x52\x00"  # an empty HelloReply
    return struct.pack(">I", len(body)) + body


def _recv_frame(s: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            got = s.recv(n - len(buf))
            if not got:
                raise EOFError
            buf += got
        return buf

    (n,) = struct.unpack(">I", exact(4))
    return exact(n)


def test_a_collective_answered_with_ebusy_is_an_error_not_not_yet() -> None:
    d = tempfile.mkdtemp(prefix="zpp-a21c-", dir="/tmp")
    path = os.path.join(d, "s")
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(path)
    ls.listen(1)

    def fake() -> None:
        s, _ = ls.accept()
        with s:
            s.sendall(_reply(_req_id(_recv_frame(s)), hello=True))
            rid = _req_id(_recv_frame(s))
            s.sendall(_reply(rid, -19, b"daemon says busy"))
            try:
                while s.recv(1):
                    pass
            except OSError:
                pass

    t = threading.Thread(target=fake, daemon=True)
    t.start()
    try:
        with zpp.Connection(path) as c:
            c.hello("j", 0, 1)
            req = c.barrier(async_op=True)
            deadline = time.monotonic() + 10
            with pytest.raises(zpp.ZppError) as ei:
                while not req.test():  # before: False once, then ZppNotFoundError
                    assert time.monotonic() < deadline
                    time.sleep(0.001)
            assert isinstance(ei.value, zpp.ZppProtocolError), ei.value
            assert "daemon says busy" in ei.value.message
            with pytest.raises(zpp.ZppProtocolError):
                req.wait()  # the same error again
    finally:
        ls.close()
        t.join(5)
        shutil.rmtree(d, ignore_errors=True)
