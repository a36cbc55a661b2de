"""The Pythonic client: Connection, Request, Result.

A Connection owns one ``zpp_conn`` (zpp_connect ... zpp_close) and, for the
host backend, a cache of registrations: each SharedBuffer it has seen is
registered once, whole, and its buffer id reused for every array that lies
in it. The cache entry goes when the buffer closes, when ``release`` is
called, or when the connection closes (close deregisters what it cached,
then frees the C connection; the daemon drops whatever the session still
held).

Collectives take NumPy arrays, CPU torch tensors or memoryviews that lie in
a SharedBuffer (the binding finds the buffer and the byte offset), or raw
``BufRef(buffer_id, offset)`` for buffers registered by hand. Sizes, dtypes
and contiguity are checked here before C is called; the daemon checks again.
Every collective blocks by default; with ``async_op=True`` it returns a
Request (wait()/test()), which keeps its arrays alive until it completes.

Shared hpZ replicas (docs/hpz-sharing.md): ``allgather``/``qwz_allgather``
with ``publish=True, content_key=...`` keep one read-only copy per node
under the tensor's content key (``content_key(x)``: "sha256:" + the hex
SHA-256 of its bytes); ``hpz_gather(content_key=...)`` reads it from any job
of the tenant, ``hpz_invalidate(content_key=...)`` detaches the job.

Failures raise the ZppError subclass of the code, carrying the daemon's
message (see errors.py). Thread: a Connection is used by one thread at a
time, like the C handle.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from . import errors
from ._lib import (
    FLAG_FORCE_QUANT,
    FLAG_INVALIDATE_ALL,
    FLAG_KEEP_SHARED,
    FLAG_PUBLISH,
    LIB,
    BufRefC,
    CollC,
    DType,
    HelloInfo as _HelloInfoC,
    JobDesc,
    Op,
    Reduce,
    ResultC,
    conn_p,
    text,
)
from .shm import SharedBuffer, address_of, locate

__all__ = [
    "Connection", "Request", "Result", "HelloInfo", "BufRef", "connect", "content_key", "dtype_of",
]  # fmt: skip

CONTENT_KEY_PREFIX = "sha256:"
_CONTENT_KEY_RE = re.compile(r"sha256:[0-9a-f]{64}")
_LITTLE = sys.byteorder == "little"

DTypeLike = Union[DType, int, str, None]


class BufRef(NamedTuple):
    """A registered buffer id and a byte offset (zpp_bufref). Used as is:
    no size check in Python (the daemon checks)."""

    buffer_id: int
    offset: int = 0


@dataclass(frozen=True)
class HelloInfo:
    """What the daemon said on joining (zpp_hello_info)."""

    session_id: int
    daemon_version: str
    backend: str
    max_frame: int
    max_buffers: int
    max_pending: int
    nodes: int
    local_size: int


@dataclass(frozen=True)
class Result:
    """A completed collective (zpp_result); ``algo`` is zpp_algo_name's text."""

    algo: str
    seq: int
    logical_bytes: int
    bytes_intra: int
    bytes_inter: int
    bytes_zero3_inter: int
    nonfinite_blocks: int
    elapsed_us: int

    @classmethod
    def _from_c(cls, r: ResultC) -> "Result":
        return cls(
            algo=text(LIB.zpp_algo_name(r.algo)),
            seq=r.seq,
            logical_bytes=r.logical_bytes,
            bytes_intra=r.bytes_intra,
            bytes_inter=r.bytes_inter,
            bytes_zero3_inter=r.bytes_zero3_inter,
            nonfinite_blocks=r.nonfinite_blocks,
            elapsed_us=r.elapsed_us,
        )


# ---- dtypes ----------------------------------------------------------------------

_DTYPE_NAMES = {
    "fp32": DType.FP32, "float32": DType.FP32, "float": DType.FP32,
    "fp16": DType.FP16, "float16": DType.FP16, "half": DType.FP16,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
}  # fmt: skip


def _as_dtype(d: DTypeLike) -> Optional[DType]:
    if d is None:
        return None
    if isinstance(d, str):
        key = d.lower().replace("torch.", "")
        if key not in _DTYPE_NAMES:
            raise errors.invalid(f"unknown dtype {d!r} (fp32, fp16 or bf16)")
        return _DTYPE_NAMES[key]
    try:
        return DType(int(d))
    except (ValueError, TypeError):
        raise errors.invalid(f"unknown dtype {d!r} (fp32, fp16 or bf16)") from None


def dtype_of(obj: Any) -> Tuple[Optional[DType], int]:
    """(zpp dtype or None when it cannot be told, element size in bytes) of
    an array, tensor or memoryview. NumPy float32/float16, ml_dtypes
    bfloat16 and torch float32/float16/bfloat16 are recognised; uint16
    (raw bf16) and bytes need an explicit dtype."""
    if hasattr(obj, "element_size") and hasattr(obj, "dtype"):  # torch
        name = str(obj.dtype).replace("torch.", "")
        return _DTYPE_NAMES.get(name), int(obj.element_size())
    dt = getattr(obj, "dtype", None)
    if dt is not None and hasattr(dt, "itemsize"):  # numpy (and ml_dtypes)
        if dt.kind == "f" or dt.name == "bfloat16":
            return _DTYPE_NAMES.get(dt.name), int(dt.itemsize)
        return None, int(dt.itemsize)
    if isinstance(obj, memoryview):
        return {"f": DType.FP32, "e": DType.FP16}.get(obj.format), obj.itemsize
    return None, 0


def _reduce(r: Union[str, int, Reduce]) -> Reduce:
    if isinstance(r, str):
        try:
            return Reduce[r.upper()]
        except KeyError:
            raise errors.invalid(f"unknown reduction {r!r} (sum or mean)") from None
    return Reduce(int(r))


# ---- requests ------------------------------------------------------------------


class Request:
    """An async collective in flight (from ``async_op=True``).

    Holds the arrays of the call until it completes, so their memory
    outlives the daemon's use of it. wait() blocks for the result (raising
    the call's error); test() polls. Every request should be waited for or
    its connection closed (closing abandons it: wait() then raises
    ZppClosedError).
    """

    def __init__(self, conn: "Connection", req_id: int, keep: Tuple[Any, ...]) -> None:
        self._conn: Optional[Connection] = conn
        self.req_id = req_id
        self._keep: Optional[Tuple[Any, ...]] = keep
        self._result: Optional[Result] = None
        self._error: Optional[errors.ZppError] = None

    @property
    def done(self) -> bool:
        return self._conn is None

    def _finish(self, rc: int, res: ResultC) -> None:
        conn = self._conn
        assert conn is not None
        conn._pending.pop(self.req_id, None)
        self._conn = None
        self._keep = None
        if rc < 0:
            self._error = conn._error(rc, f"request {self.req_id} failed")
        else:
            self._result = Result._from_c(res)

    def _abandon(self) -> None:
        self._conn = None
        self._keep = None
        self._error = errors.error_from_code(-11, "the connection was closed before this request completed")

    def _outcome(self) -> Result:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def wait(self) -> Result:
        """Blocks until the reply; returns the Result or raises its error
        (again on every later call)."""
        if self._conn is not None:
            res = ResultC()
            rc = LIB.zpp_wait(self._conn._handle(), self.req_id, ctypes.byref(res))
            self._finish(rc, res)
        return self._outcome()

    def test(self) -> bool:
        """True once complete (then wait() returns at once); raises the
        call's error when it failed."""
        if self._conn is not None:
            res = ResultC()
            rc = LIB.zpp_test(self._conn._handle(), self.req_id, ctypes.byref(res))
            if rc == -19:  # ZPP_EBUSY: not yet
                return False
            self._finish(rc, res)
        self._outcome()
        return True

    def __repr__(self) -> str:
        state = "pending" if self._conn else ("failed" if self._error else "done")
        return f"<zpp.Request {self.req_id} {state}>"


# ---- the connection ----------------------------------------------------------------


class Connection:
    """One connection to the node's zppd (a ``zpp_conn``).

    ``Connection(path)`` connects (None: $ZPP_SOCKET, else the default
    socket); hello() joins a job; then collectives. Use as a context
    manager or call close(). Owns the C handle, the registration cache and
    its outstanding Requests.
    """

    def __init__(self, socket_path: Optional[str] = None) -> None:
        h = conn_p()
        path = os.fspath(socket_path) if socket_path is not None else None
        rc = LIB.zpp_connect(_cstr(path, "socket path"), ctypes.byref(h))
        if rc < 0:
            where = path or os.environ.get("ZPP_SOCKET") or "the default socket"
            raise errors.error_from_code(
                rc, f"cannot connect to {where}: {os.strerror(ctypes.get_errno())}"
            )
        self._c: Optional[int] = h.value
        self.socket_path = path
        self.rank: Optional[int] = None
        self.world_size: Optional[int] = None
        self.info: Optional[HelloInfo] = None
        self._cache: Dict[int, Tuple[SharedBuffer, int]] = {}  # id(buf) -> (buf, buffer id)
        self._pending: Dict[int, Request] = {}
        # buffer ids whose SharedBuffer closed: deregistered by the next call
        self._stale: List[int] = []

    # ---- plumbing -----------------------------------------------------------
    def _handle(self) -> int:
        if self._c is None:
            raise errors.error_from_code(-11, "connection is closed")
        if self._stale:  # also with requests in flight: zppd keeps what they use
            self._drop_stale()
        return self._c

    def _drop_stale(self) -> None:
        """Deregisters the ids of SharedBuffers closed since the last call
        (best effort: the memory is gone already, and a failure here leaves
        the real call to report the connection's state)."""
        while self._stale:
            LIB.zpp_deregister(self._c, self._stale.pop())

    def _error(self, rc: int, what: str) -> errors.ZppError:
        msg = text(LIB.zpp_last_error(self._c)) if self._c is not None else ""
        return errors.error_from_code(rc, msg or what)

    def _check(self, rc: int, what: str) -> None:
        if rc < 0:
            raise self._error(rc, what)

    @property
    def closed(self) -> bool:
        return self._c is None

    @property
    def fd(self) -> int:
        """The socket descriptor, for poll (owned by the connection)."""
        return int(LIB.zpp_fd(self._handle()))

    @property
    def last_error(self) -> str:
        return text(LIB.zpp_last_error(self._c)) if self._c is not None else ""

    # ---- session ------------------------------------------------------------
    def hello(
        self,
        job_id: str,
        rank: int,
        world_size: int,
        *,
        node_count: int = 1,
        local_rank: Optional[int] = None,
        gpu_uuid: Optional[str] = "host",
        leader_addr: Optional[str] = None,
        tenant_label: Optional[str] = None,
    ) -> HelloInfo:
        """Joins job_id as rank of world_size (node_count nodes of equal
        size; local_rank defaults to rank % (world_size // node_count))."""
        for name, v in (("rank", rank), ("world_size", world_size), ("node_count", node_count)):
            if not isinstance(v, int) or v < 0 or v > 0xFFFFFFFF:
                raise errors.invalid(f"{name} must be an int in 0..2^32-1, got {v!r}")
        if local_rank is None:
            local_rank = rank % (world_size // node_count) if node_count and world_size >= node_count else rank
        if not isinstance(local_rank, int) or local_rank < 0 or local_rank > 0xFFFFFFFF:
            raise errors.invalid(f"local_rank must be an int in 0..2^32-1, got {local_rank!r}")
        desc = JobDesc(
            job_id=_cstr(job_id, "job_id"), rank=rank, world_size=world_size, local_rank=local_rank,
            node_count=node_count, gpu_uuid=_cstr(gpu_uuid, "gpu_uuid"),
            leader_addr=_cstr(leader_addr, "leader_addr"), tenant_label=_cstr(tenant_label, "tenant_label"),
        )  # fmt: skip
        out = _HelloInfoC()
        self._check(LIB.zpp_hello(self._handle(), ctypes.byref(desc), ctypes.byref(out)), "hello")
        self.rank, self.world_size = rank, world_size
        self.info = HelloInfo(
            session_id=out.session_id, daemon_version=text(out.daemon_version),
            backend=text(out.backend), max_frame=out.max_frame, max_buffers=out.max_buffers,
            max_pending=out.max_pending, nodes=out.nodes, local_size=out.local_size,
        )  # fmt: skip
        return self.info

    # ---- buffers --------------------------------------------------------------
    def register(self, buf: SharedBuffer) -> int:
        """The buffer id of the whole of buf, registering it on first use
        (cached until buf or this connection closes, or release(buf))."""
        hit = self._cache.get(id(buf))
        if hit is not None and hit[0] is buf:
            return hit[1]
        bid = self.register_range(buf, 0, buf.nbytes)
        self._cache[id(buf)] = (buf, bid)
        buf._add_listener(id(self), self._on_buffer_close)
        return bid

    def register_range(self, buf: SharedBuffer, offset: int, length: int) -> int:
        """Registers [offset, offset+length) of buf, uncached: the caller
        deregisters the returned id."""
        if offset < 0 or length <= 0 or offset + length > buf.nbytes:
            raise errors.error_from_code(
                -18, f"register: [{offset}, +{length}) is outside the {buf.nbytes}-byte buffer"
            )
        bid = ctypes.c_uint64()
        rc = LIB.zpp_register_shm(self._handle(), buf.handle, offset, length, ctypes.byref(bid))
        self._check(rc, "register")
        return int(bid.value)

    def deregister(self, buffer_id: int) -> None:
        """Drops a registration (also from the cache if it is there)."""
        buffer_id = _u64(buffer_id, "buffer_id")
        self._check(LIB.zpp_deregister(self._handle(), buffer_id), "deregister")
        for k, (b, bid) in list(self._cache.items()):
            if bid == buffer_id:
                del self._cache[k]
                b._remove_listener(id(self))

    def release(self, buf: SharedBuffer) -> None:
        """Deregisters buf if this connection cached it."""
        hit = self._cache.get(id(buf))
        if hit is not None:
            self.deregister(hit[1])

    @property
    def registered(self) -> Dict[int, int]:
        """id(SharedBuffer) -> buffer id of the cache (a copy)."""
        return {k: v[1] for k, v in self._cache.items()}

    def _on_buffer_close(self, buf: SharedBuffer) -> None:
        # Runs on the thread that closes buf, which need not be the one using
        # this connection (used by one thread at a time): the deregistration
        # waits for this connection's next call, on its own thread, instead
        # of sending a frame in the middle of that thread's call.
        hit = self._cache.pop(id(buf), None)
        if hit is not None and self._c is not None:
            self._stale.append(hit[1])  # list.append is atomic

    # ---- argument plumbing ----------------------------------------------------
    def _ref(self, obj: Any, need: int, role: str) -> BufRefC:
        if isinstance(obj, BufRef):
            return BufRefC(
                _u64(obj.buffer_id, f"{role} buffer_id"), _u64(obj.offset, f"{role} offset")
            )
        buf, off, nbytes = locate(obj)
        if nbytes < need:
            raise errors.invalid(f"{role} holds {nbytes} bytes; this call needs {need}")
        return BufRefC(self.register(buf), off)

    def _world(self) -> int:
        if self.world_size is None:
            raise errors.error_from_code(-16, "call hello() before collectives")
        return self.world_size

    @staticmethod
    def _elem(obj: Any, dtype: DTypeLike, role: str) -> Tuple[Optional[DType], int]:
        """(dtype, element count) of obj, checking an explicit dtype against it."""
        d = _as_dtype(dtype)
        if isinstance(obj, BufRef):
            return d, -1
        found, isz = dtype_of(obj)
        _, nbytes = address_of(obj)
        if d is None:
            if found is None:
                raise errors.invalid(
                    f"cannot tell the dtype of {role}; pass dtype= (fp32, fp16 or bf16)"
                )
            d = found
        elif found is not None and found != d:
            raise errors.invalid(f"{role} is {found.name} but dtype={d.name} was given")
        elif isz and isz != d.itemsize and not (found is None and isz == 1):
            # (untyped bytes -- a SharedBuffer.view(), a uint8 array -- take
            # the explicit dtype, as dtype_of says: their count is nbytes /
            # the dtype's size)
            raise errors.invalid(f"{role} has {isz}-byte elements; {d.name} has {d.itemsize}")
        return d, nbytes // d.itemsize

    def _go(self, call: CollC, keep: Tuple[Any, ...], async_op: bool) -> Union[Result, Request]:
        h = self._handle()
        if not async_op:
            res = ResultC()
            self._check(LIB.zpp_collective(h, ctypes.byref(call), ctypes.byref(res)), "collective")
            return Result._from_c(res)
        rid = ctypes.c_uint64()
        self._check(LIB.zpp_submit(h, ctypes.byref(call), ctypes.byref(rid)), "submit")
        req = Request(self, int(rid.value), keep)
        self._pending[req.req_id] = req
        return req

    def _gather(self, op: Op, inp: Any, out: Any, count: Optional[int], dtype: DTypeLike,
                **kw: Any) -> Tuple[CollC, Tuple[Any, ...]]:  # fmt: skip
        W = self._world()
        d_in, n_in = self._elem(inp, dtype, "input")
        d_out, n_out = self._elem(out, dtype if dtype is not None else d_in, "output")
        d = d_in or d_out
        if d is None:
            raise errors.invalid("pass dtype= with BufRef arguments")
        if count is None:
            if n_out < 0:
                raise errors.invalid("pass count= with a BufRef output")
            count = n_out
        _check_count(count)
        shard = -(-count // W)
        call = CollC()
        LIB.zpp_coll_init(ctypes.byref(call), op, d, count)
        call.input = self._ref(inp, shard * d.itemsize, "input")
        call.output = self._ref(out, count * d.itemsize, "output")
        return _apply(call, **kw), (inp, out)

    def _scatter(self, op: Op, inp: Any, out: Any, count: Optional[int], dtype: DTypeLike,
                 out_dtype: DTypeLike, reduce: Any, **kw: Any) -> Tuple[CollC, Tuple[Any, ...]]:  # fmt: skip
        W = self._world()
        d, n_in = self._elem(inp, dtype, "input")
        od, _ = self._elem(out, out_dtype, "output") if not isinstance(out, BufRef) or out_dtype else (None, 0)
        if d is None:
            raise errors.invalid("pass dtype= with BufRef arguments")
        od = od or d
        if count is None:
            if n_in < 0:
                raise errors.invalid("pass count= with a BufRef input")
            count = n_in
        _check_count(count)
        shard = -(-count // W)
        call = CollC()
        LIB.zpp_coll_init(ctypes.byref(call), op, d, count)
        call.out_dtype = od
        call.reduce = _reduce(reduce)
        call.input = self._ref(inp, count * d.itemsize, "input")
        call.output = self._ref(out, shard * od.itemsize, "output")
        return _apply(call, **kw), (inp, out)

    # ---- collectives ------------------------------------------------------------
    def allgather(self, input: Any, output: Any, *, count: Optional[int] = None,
                  dtype: DTypeLike = None, content_key: Optional[str] = None,
                  publish: bool = False, timeout_ms: int = 0,
                  async_op: bool = False) -> Union[Result, Request]:  # fmt: skip
        """Plain all-gather: input is this rank's shard of ceil(count/W)
        elements, output receives count elements (count: output's size).
        With publish=True the node also keeps the gathered tensor as a
        shared hpZ replica under content_key (``content_key(full_tensor)``);
        the daemon checks the hash and refuses a wrong key."""
        flags = _publish_flags(content_key, publish, None)
        call, keep = self._gather(Op.ALLGATHER, input, output, count, dtype, flags=flags,
                                  content_key=content_key, timeout_ms=timeout_ms)  # fmt: skip
        return self._go(call, keep + (call._ckey,), async_op)

    def qwz_allgather(self, input: Any, output: Any, *, count: Optional[int] = None,
                      dtype: DTypeLike = None, bits: int = 8, block: int = 0,
                      hpz_key: Optional[str] = None, content_key: Optional[str] = None,
                      publish: bool = False, timeout_ms: int = 0,
                      async_op: bool = False) -> Union[Result, Request]:  # fmt: skip
        """qwZ: quantized (bits 8 or 4, block a multiple of 32; 0 = daemon
        default) all-gather; with hpz_key the node keeps the hpZ slice.
        With publish=True it keeps a shared replica under content_key
        instead: the key of the *dequantized* output (docs/hpz-sharing.md)."""
        flags = _publish_flags(content_key, publish, hpz_key)
        call, keep = self._gather(Op.QWZ_ALLGATHER, input, output, count, dtype, bits=bits,
                                  block=block, hpz_key=hpz_key, content_key=content_key,
                                  flags=flags, timeout_ms=timeout_ms)  # fmt: skip
        return self._go(call, keep + (call._key, call._ckey), async_op)

    def hpz_gather(self, output: Any, *, hpz_key: Optional[str] = None,
                   content_key: Optional[str] = None, count: Optional[int] = None,
                   dtype: DTypeLike = None, timeout_ms: int = 0,
                   async_op: bool = False) -> Union[Result, Request]:  # fmt: skip
        """hpZ: node-local gather of what qwz_allgather kept under hpz_key,
        or of the shared replica published under content_key (by any job
        the tenant may read from); count and dtype must match that call."""
        if bool(hpz_key) == bool(content_key):
            raise errors.invalid("hpz_gather needs an hpz_key or a content_key (one of them)")
        d, n = self._elem(output, dtype, "output")
        if d is None:
            raise errors.invalid("pass dtype= with a BufRef output")
        if count is None:
            if n < 0:
                raise errors.invalid("pass count= with a BufRef output")
            count = n
        _check_count(count)
        self._world()
        call = CollC()
        LIB.zpp_coll_init(ctypes.byref(call), Op.HPZ_GATHER, d, count)
        call.output = self._ref(output, count * d.itemsize, "output")
        _apply(call, hpz_key=hpz_key, content_key=content_key, timeout_ms=timeout_ms)
        return self._go(call, (output, call._key, call._ckey), async_op)

    def hpz_invalidate(self, hpz_key: Optional[str] = None, *, content_key: Optional[str] = None,
                       all: bool = False, keep_shared: bool = False, timeout_ms: int = 0,
                       async_op: bool = False) -> Union[Result, Request]:  # fmt: skip
        """Drops hpz_key's slices, or detaches the job from the shared
        replica of content_key (the replica stays for other jobs), or with
        all=True both for every key of the job; all=True, keep_shared=True
        drops the job's own keys and stays attached to its replicas."""
        if hpz_key and content_key:
            raise errors.invalid("hpz_invalidate takes an hpz_key or a content_key, not both")
        if not hpz_key and not content_key and not all:
            raise errors.invalid("hpz_invalidate needs a key, a content_key or all=True")
        if keep_shared and not all:
            raise errors.invalid("keep_shared applies to all=True")
        self._world()
        call = CollC()
        LIB.zpp_coll_init(ctypes.byref(call), Op.HPZ_INVALIDATE, DType.FP32, 0)
        _apply(call, hpz_key=hpz_key, content_key=content_key, timeout_ms=timeout_ms,
               flags=(FLAG_INVALIDATE_ALL if all else 0) | (FLAG_KEEP_SHARED if keep_shared else 0))  # fmt: skip
        return self._go(call, (call._key, call._ckey), async_op)

    def reduce_scatter(self, input: Any, output: Any, *, count: Optional[int] = None,
                       dtype: DTypeLike = None, out_dtype: DTypeLike = None,
                       reduce: Union[str, Reduce] = "sum", timeout_ms: int = 0,
                       async_op: bool = False) -> Union[Result, Request]:  # fmt: skip
        """Plain (exact) reduce-scatter: input holds count elements (count:
        input's size), output receives this rank's ceil(count/W) elements
        in out_dtype (default: output's dtype, else dtype)."""
        call, keep = self._scatter(Op.REDUCE_SCATTER, input, output, count, dtype, out_dtype,
                                   reduce, timeout_ms=timeout_ms)  # fmt: skip
        return self._go(call, keep, async_op)

    def qgz_reduce_scatter(self, input: Any, output: Any, *, count: Optional[int] = None,
                           dtype: DTypeLike = None, out_dtype: DTypeLike = None,
                           reduce: Union[str, Reduce] = "sum", bits: int = 8, block: int = 0,
                           stages: int = 0, force_quant: bool = False, timeout_ms: int = 0,
                           async_op: bool = False) -> Union[Result, Request]:  # fmt: skip
        """qgZ: quantized hierarchical reduce-scatter (exact on one node
        unless force_quant)."""
        call, keep = self._scatter(Op.QGZ_REDUCE_SCATTER, input, output, count, dtype, out_dtype,
                                   reduce, bits=bits, block=block, stages=stages,
                                   flags=FLAG_FORCE_QUANT if force_quant else 0,
                                   timeout_ms=timeout_ms)  # fmt: skip
        return self._go(call, keep, async_op)

    def barrier(self, *, timeout_ms: int = 0, async_op: bool = False) -> Union[Result, Request]:
        """Completes when every rank of the job has called it."""
        self._world()
        call = CollC()
        LIB.zpp_coll_init(ctypes.byref(call), Op.BARRIER, DType.FP32, 0)
        _apply(call, timeout_ms=timeout_ms)
        return self._go(call, (), async_op)

    def check(self, *, wait_s: float = 10.0) -> None:
        """zpp_check: every call answered so far also completed, on a device
        that still works. Call it after the stream has waited for the last
        call's results (before an optimizer step or a checkpoint). Asks
        again while the work still runs (for at most wait_s); raises ZppError
        when the device failed or the daemon is gone."""
        deadline = time.monotonic() + wait_s
        while True:
            rc = LIB.zpp_check(self._handle())
            if rc == -19 and time.monotonic() < deadline:  # ZPP_EBUSY: still running
                time.sleep(0.001)
                continue
            self._check(rc, "check")
            return

    # ---- admin --------------------------------------------------------------------
    def _admin(self, fn: Any) -> Dict[str, Any]:
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            rc = fn(self._handle(), buf, size)
            if rc == -18 and size < (1 << 26):  # ZPP_ERANGE: grow
                size *= 4
                continue
            self._check(rc, "admin query")
            return json.loads(buf.value.decode())

    def status(self) -> Dict[str, Any]:
        """The daemon's status (zpp_admin_status_json) as a dict."""
        return self._admin(LIB.zpp_admin_status_json)

    def jobs(self) -> Dict[str, Any]:
        """The caller's jobs (zpp_admin_jobs_json) as a dict."""
        return self._admin(LIB.zpp_admin_jobs_json)

    # ---- lifetime -------------------------------------------------------------------
    def close(self) -> None:
        """Deregisters the cached buffers (unless requests are in flight:
        the daemon drops them with the session), abandons pending Requests
        and frees the C connection. Idempotent."""
        if self._c is None:
            return
        quiet = not self._pending
        for buf, bid in list(self._cache.values()):
            buf._remove_listener(id(self))
            if quiet:
                LIB.zpp_deregister(self._c, bid)  # errors here change nothing
        self._cache.clear()
        if quiet:
            self._drop_stale()
        self._stale.clear()
        for req in list(self._pending.values()):
            req._abandon()
        self._pending.clear()
        LIB.zpp_close(self._c)
        self._c = None

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._c is None:
            return "<zpp.Connection closed>"
        who = f" rank {self.rank}/{self.world_size}" if self.world_size else ""
        return f"<zpp.Connection {self.socket_path or 'default'}{who}>"


def connect(socket_path: Optional[str] = None) -> Connection:
    """Connection(socket_path)."""
    return Connection(socket_path)


def _cstr(s: Optional[str], what: str) -> Optional[bytes]:
    """s as a C string (None for None or ""); C would cut it at a NUL byte,
    so one is refused."""
    if not s:
        return None
    b = s.encode()
    if b"\0" in b:
        raise errors.invalid(f"{what} contains a NUL byte: {s!r}")
    return b


def _u64(v: Any, what: str) -> int:
    """v checked to fit a uint64_t: ctypes would keep only its low 64 bits
    (-1 becomes 2^64 - 1, 2^64 + 5 becomes 5: another buffer)."""
    if not isinstance(v, int) or not 0 <= v < 1 << 64:
        raise errors.invalid(f"{what} must be an int in 0..2^64-1, got {v!r}")
    return v


def _check_count(count: int) -> None:
    if not isinstance(count, int) or count < 1 or count >= 1 << 62:
        raise errors.invalid(f"count must be a positive int, got {count!r}")


def content_key(obj: Any) -> str:
    """The content key of a tensor: "sha256:" + the 64 lowercase hex digits
    of the SHA-256 of its bytes (docs/hpz-sharing.md). obj: bytes-like, a
    NumPy array or a CPU torch tensor; arrays are hashed as their elements
    in C order, little-endian, with no padding — what an all-gather of them
    writes. For a publish, pass the full gathered tensor (for qwZ: the
    dequantized output), not this rank's shard."""
    if hasattr(obj, "detach") and hasattr(obj, "element_size"):  # torch.Tensor
        import torch  # only when given one

        t = obj.detach()
        if t.device.type != "cpu":
            raise errors.invalid("content_key: copy the tensor to the CPU first")
        obj = t.contiguous().reshape(-1).view(torch.uint8).numpy()
    dt = getattr(obj, "dtype", None)
    if dt is not None and hasattr(obj, "tobytes"):  # NumPy (and alike)
        if getattr(dt, "byteorder", "=") == ">" or (dt.byteorder == "=" and not _LITTLE):
            obj = obj.astype(dt.newbyteorder("<"))
        data = obj.tobytes(order="C")
    else:
        try:
            data = memoryview(obj).tobytes()
        except TypeError:
            raise errors.invalid(f"content_key: cannot hash a {type(obj).__name__}") from None
    return CONTENT_KEY_PREFIX + hashlib.sha256(data).hexdigest()


def _check_content_key(key: str) -> bytes:
    if not isinstance(key, str) or not _CONTENT_KEY_RE.fullmatch(key):
        raise errors.invalid(
            f"content_key must be \"sha256:\" and 64 lowercase hex digits, got {key!r} "
            "(zpp.content_key(tensor) computes it)"
        )
    return key.encode()


def _publish_flags(content_key: Optional[str], publish: bool, hpz_key: Optional[str]) -> int:
    """FLAG_PUBLISH for an all-gather, after checking the combination the
    daemon would refuse anyway (coll.c), so the error names the argument."""
    if publish and not content_key:
        raise errors.invalid("publish=True needs a content_key (zpp.content_key(full_tensor))")
    if content_key and not publish:
        raise errors.invalid("an all-gather takes content_key only with publish=True")
    if publish and hpz_key:
        raise errors.invalid("a publish takes content_key, not hpz_key")
    return FLAG_PUBLISH if publish else 0


def _apply(call: CollC, *, bits: Optional[int] = None, block: int = 0, stages: int = 0,
           hpz_key: Optional[str] = None, content_key: Optional[str] = None, flags: int = 0,
           timeout_ms: int = 0) -> CollC:  # fmt: skip
    """Sets the optional fields of call after checking them; keeps the keys'
    bytes on call._key and call._ckey (the C struct only borrows them)."""
    if bits is not None:
        if bits not in (4, 8):
            raise errors.invalid(f"bits must be 8 or 4, got {bits!r}")
        call.bits = bits
    if block and (block % 32 or not 32 <= block <= 8192):
        raise errors.invalid(f"block must be a multiple of 32 in 32..8192 (0: default), got {block}")
    if not 0 <= stages <= 64:
        raise errors.invalid(f"stages must be in 0..64, got {stages}")
    if not 0 <= timeout_ms <= 0xFFFFFFFF:
        raise errors.invalid(f"timeout_ms out of range: {timeout_ms}")
    key = _cstr(hpz_key, "hpz_key")
    if key is not None and len(key) > 255:
        raise errors.invalid("hpz_key is longer than 255 bytes")
    call._key = key  # type: ignore[attr-defined]
    call.hpz_key = key
    ckey = _check_content_key(content_key) if content_key else None
    call._ckey = ckey  # type: ignore[attr-defined]
    call.content_key = ckey
    call.block, call.stages, call.flags, call.timeout_ms = block, stages, flags, timeout_ms
    return call
