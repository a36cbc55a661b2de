"""ctypes side of client/include/zpp_cuda.h: GPU buffers and stream-ordered
calls against a zppd running the cuda backend.

These functions exist only in CUDA builds of libzpp (``available()`` says
whether the loaded one has them); every function here raises
ZppUnsupportedError (ZPP_EUNSUPPORTED) when the library lacks them instead of failing at import, so ``import zpp.cuda``
works everywhere.

Flow (docs/cuda.md, docs/pytorch.md):
    c = zpp.Connection(sock)
    zpp.cuda.attach(c, 32)                      # before hello, context current
    c.hello(job, rank, W, node_count=N, gpu_uuid=zpp.cuda.device_uuid())
    reg = zpp.cuda.Registry(c)
    ref = reg.ref(tensor)                       # BufRef (cached per exact range)
    req = zpp.cuda.submit(c, call, stream)      # CollC built by the caller
    res = zpp.cuda.wait_stream(c, req, stream)  # stream waits for the daemon

Ownership: a Registry owns the registrations it made and deregisters them in
close(); it caches by the exact (pointer, length) it was asked for, so it is
meant for long-lived buffers (zpp.torch registers a few persistent arenas
once). The caching allocator may unmap and remap memory at one address
(``empty_cache``, expandable segments shrinking): call ``Registry.clear()``
after that, or keep the registered tensors alive (zpp.torch does).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Tuple

from . import errors
from ._lib import LIB, CollC, ResultC
from .client import BufRef, Connection, Result

__all__ = ["available", "device_uuid", "attach", "sync_mode", "Registry", "submit", "wait_stream",
           "submit_stream", "wait_reply", "stream_handle"]  # fmt: skip

_NEEDED = ("zpp_cuda_device_uuid", "zpp_cuda_attach", "zpp_register_cuda",
           "zpp_collective_async", "zpp_wait_stream")  # fmt: skip
UUID_LEN = 48  # ZPP_CUDA_UUID_LEN
EBUSY = -19
EUNSUPPORTED = -14


def available() -> bool:
    """True when the loaded libzpp is a CUDA build with every zpp_cuda.h call."""
    return all(LIB.has(n) for n in _NEEDED)


def _need(name: str) -> Any:
    if not LIB.has(name):
        raise errors.error_from_code(
            EUNSUPPORTED, f"{name}: this libzpp ({LIB.path}) is not a CUDA build (-DZPP_CUDA=ON)"
        )
    return getattr(LIB, name)


def stream_handle(stream: Any) -> Optional[int]:
    """A CUstream for C: a torch.cuda.Stream (its .cuda_stream), an int, or
    None (the legacy default stream)."""
    if stream is None:
        return None
    h = getattr(stream, "cuda_stream", stream)
    return int(h) or None


def device_uuid() -> str:
    """The current context's GPU UUID ("GPU-..."), the Hello's gpu_uuid.
    A CUDA context must be current (torch.cuda.init() / any CUDA tensor)."""
    buf = ctypes.create_string_buffer(UUID_LEN)
    rc = _need("zpp_cuda_device_uuid")(buf)
    if rc < 0:
        raise errors.error_from_code(rc, "zpp_cuda_device_uuid failed (no current CUDA context?)")
    return buf.value.decode()


def attach(conn: Connection, n_events: int = 32) -> None:
    """Creates conn's n_events call slots (1..64: a flag array and a pool of
    interprocess events) on the current device. Call before conn.hello()."""
    if not 1 <= n_events <= 64:
        raise errors.invalid(f"n_events must be in 1..64, got {n_events}")
    rc = _need("zpp_cuda_attach")(conn._handle(), n_events)
    conn._check(rc, "zpp_cuda_attach")


def sync_mode(conn: Connection) -> str:
    """How conn orders the daemon's work against its streams after hello:
    what zpp_cuda_sync_mode says where the library has it; else "events"
    (interprocess events, the only way of today's libzpp) for a CUDA build
    and "none" for a host-only one."""
    if not LIB.has("zpp_cuda_sync_mode"):
        return "events" if available() else "none"
    r = LIB.zpp_cuda_sync_mode(conn._handle())
    return r.decode() if r else "none"


class Registry:
    """Registrations of device memory on one connection, cached by the exact
    (device pointer, byte length) asked for. ``ref(t)`` gives the BufRef of
    a contiguous CUDA tensor."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._by_range: Dict[Tuple[int, int], Tuple[int, int]] = {}  # (ptr, len) -> (id, offset)

    def register(self, ptr: int, nbytes: int) -> BufRef:
        key = (int(ptr), int(nbytes))
        hit = self._by_range.get(key)
        if hit is not None:
            return BufRef(hit[0], hit[1])
        bid, off = ctypes.c_uint64(), ctypes.c_uint64()
        rc = _need("zpp_register_cuda")(
            self.conn._handle(), ctypes.c_void_p(key[0]), key[1], ctypes.byref(bid), ctypes.byref(off)
        )
        self.conn._check(rc, f"zpp_register_cuda(0x{key[0]:x}, {key[1]})")
        self._by_range[key] = (int(bid.value), int(off.value))
        return BufRef(int(bid.value), int(off.value))

    def ref(self, t: Any) -> BufRef:
        """BufRef of a contiguous CUDA tensor (registers its allocation the
        first time this exact range is seen)."""
        if getattr(t, "device", None) is None or t.device.type != "cuda":
            raise errors.invalid("Registry.ref takes a CUDA tensor")
        if not t.is_contiguous():
            raise errors.invalid("tensor is not contiguous")
        return self.register(t.data_ptr(), t.numel() * t.element_size())

    def clear(self) -> None:
        """Deregisters everything this registry registered (best effort)."""
        ids = {bid for bid, _ in self._by_range.values()}
        self._by_range.clear()
        if self.conn.closed:
            return
        for bid in ids:
            try:
                self.conn.deregister(bid)
            except errors.ZppError:
                pass

    close = clear


def _submit(fn: str, conn: Connection, call: CollC, stream: Any) -> int:
    rid = ctypes.c_uint64()
    h = stream_handle(stream)
    rc = _need(fn)(conn._handle(), ctypes.byref(call), ctypes.c_void_p(h) if h else None,
                   ctypes.byref(rid))  # fmt: skip
    conn._check(rc, fn)
    return int(rid.value)


def submit(conn: Connection, call: CollC, stream: Any = None) -> int:
    """zpp_collective_async: call ordered after the work on stream; returns
    the request id for wait_stream. Raises ZppError (EBUSY: every event of
    the pool is in flight: wait for an earlier request first)."""
    return _submit("zpp_collective_async", conn, call, stream)


def submit_stream(conn: Connection, call: CollC, stream: Any = None) -> int:
    """zpp_collective_stream (done flags only: sync_mode(conn) == "flags"):
    the call ordered after the work on stream, and stream made to wait for
    the call's work, with no wait for the reply; returns the request id for
    wait_reply, to be read when it suits (before trusting the results).
    Raises ZppError (EUNSUPPORTED without done flags; EBUSY as submit)."""
    return _submit("zpp_collective_stream", conn, call, stream)


def wait_reply(conn: Connection, req_id: int) -> Result:
    """zpp_wait: the reply of a submit_stream request (its Result, or its
    error raised); the stream already waits for the call's work."""
    res = ResultC()
    rc = LIB.zpp_wait(conn._handle(), req_id, ctypes.byref(res))
    conn._check(rc, f"zpp_wait({req_id})")
    return Result._from_c(res)


def wait_stream(conn: Connection, req_id: int, stream: Any = None) -> Result:
    """zpp_wait_stream: blocks for the reply, then makes stream wait (on the
    GPU) for the daemon's work. Returns the Result."""
    res = ResultC()
    h = stream_handle(stream)
    rc = _need("zpp_wait_stream")(conn._handle(), req_id, ctypes.c_void_p(h) if h else None,
                                  ctypes.byref(res))  # fmt: skip
    conn._check(rc, f"zpp_wait_stream({req_id})")
    return Result._from_c(res)
