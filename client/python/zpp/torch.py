"""zpp.torch — ZeRO-3-style sharded training of a torch nn.Module through zppd
(qwZ, hpZ, qgZ), or through torch.distributed for a baseline.

    zp = zpp.torch.ZeroPP(model, "/run/zppd/zppd.sock", rank=r, world_size=W,
                          local_rank=lr, nodes=N, job_id="gpt", device="cuda")
    for x, y in batches:
        loss = loss_fn(zp(x), y)
        zp.backward(loss)          # (loss * loss scale).backward()
        zp.step()                  # AdamW on the rank's fp32 shard
    zp.save_checkpoint(dir); zp.load_checkpoint(dir)

What happens (docs/pytorch.md has the whole story):

* Units. The parameters are grouped in units (by default every module that
  owns parameters directly; ``units=`` takes module classes or modules: each
  instance becomes one unit with all its parameters, the rest go to a root
  unit). A unit's parameters are one flat vector of ``numel`` elements,
  padded inside to ``shard * W`` (shard = ceil(numel / W)): rank r owns
  elements ``[r*shard, (r+1)*shard)``. No divisibility condition on the user.
* State per rank and unit: the fp32 master shard and AdamW's exp_avg and
  exp_avg_sq (fp32, shard); from a unit's first gradient reduce after a
  step to the step, its fp32 gradient accumulator (shard). Nothing else
  per unit: the weight-decay mask is kept as index runs, and what the
  daemon reads or writes is per slot (below). ``memory_report()`` sums it.
* Gather slots. Full parameters live only in a few "slots" of the largest
  unit's size (``slots=``, default 3), in memory the daemon writes, each
  with a staging piece of the largest shard for the all-gather input (the
  master shard cast to the compute dtype when the gather is issued). A
  forward pre-hook gathers the unit into a slot and points its parameters
  (``p.data``) at views of the slot; the forward post-hook points them back
  at a NaN placeholder of the right shape (the full parameters are gone
  between uses). The next unit's gather is prefetched asynchronously.
* Saved tensors. Autograd would keep views of a slot for backward, and the
  slot will hold another unit by then; a saved-tensors hook records
  (unit, offset, shape, stride) instead and, in backward, re-gathers the
  unit when needed and hands out views of wherever it now lives. Backward
  re-gathers with hpZ (the node-local slices the forward's qwZ kept under
  the key of the unit and the current parameter version) and prefetches the
  previous unit.
* Gradients. A post-accumulate-grad hook copies each parameter's gradient
  into a flat gradient slot (``grad_slots=``, default 2); when a unit's
  gradients are complete the slot is reduce-scattered (qgZ, or plain, MEAN
  over ranks) into the slot's fp32 output piece, which is added into the
  unit's accumulator (gradient accumulation: every backward reduces;
  step() divides by the number of backwards and drops the accumulators).
* step(): non-finite check agreed by all ranks (fp16 loss scaling skips the
  step and lowers the scale), optional global-norm clipping, AdamW on the
  fp32 shard, the accumulators dropped; the parameter version moves on,
  so no hpZ key of the old parameters can be read again, and every key of
  the job is invalidated (the store's memory comes back). Then it starts
  the gathers of the next forward's first 1 + prefetch units with the new
  parameters (``step_prefetch=False`` leaves them to the forward).
* hpZ keys: ``zpp/u<unit>/e<epoch>/g<version>``; the version counts
  optimizer steps, the epoch counts checkpoint loads. Forwards without
  grad (evaluation) store no key; a training forward re-gathers a unit that
  an evaluation left behind without a key. Every backward ends with an
  invalidate-all: keys never outlive the backward they were made for.
* share_frozen=True: a unit whose parameters are all frozen is published
  once as the node's shared replica under the SHA-256 of its bytes and read
  from it after (docs/pytorch.md, "Frozen units").
* Exactness: qwZ's dequantized output is deterministic, hpZ returns the
  stored bits, so hpZ on/off never changes the numbers; with qwZ off, hpZ
  on and off give the same bits as the plain all-gather.

Backends (chosen by ``device``/``comm``): CPU tensors in zpp SharedBuffers
against a host-backend zppd; CUDA tensors against a cuda-backend zppd
(zpp.cuda, stream-ordered: no CPU waits for the GPU); ``comm="torch"``
runs the same loop on torch.distributed (NCCL, or gloo on CPU) as the
baseline without zppd.

Limits: every rank runs the same modules in the same order (collectives
are matched by order); tied parameters must sit in one unit; autograd
functions that keep a parameter outside save_for_backward, activation
checkpointing and double backward are not supported.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from . import errors
from ._lib import DType, Op
from .client import BufRef, Connection, Result, content_key

__all__ = ["ZeroPP", "HostComm", "CudaComm", "TorchComm", "WaitClock"]

_ALIGN = 256  # bytes: every arena piece starts on this boundary
_BLOCK_MAX = 8192  # the daemon's largest quantization block (proto/frame.c BLOCK_MAX)
_ZDT = {torch.float32: DType.FP32, torch.float16: DType.FP16, torch.bfloat16: DType.BF16}


_STALE_BACKWARD = ("zpp.torch: the last backward raised before its end, and the gradients it reduced "
                   "are partial: call zero_grad() (it drops them and every gradient accumulated since "
                   "the last step), then go on")  # fmt: skip


def _graph_task() -> Optional[int]:
    """The id of the backward (autograd graph task) running on this thread,
    -1 outside any; None where this PyTorch cannot tell."""
    f = getattr(torch._C, "_current_graph_task_id", None)
    return None if f is None else int(f())


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _decay_factor(lr: float, weight_decay: float) -> float:
    """What the fp32 tensor expression ``1 - lr * weight_decay * mask`` gives
    where the mask is 1 (exactly 1 where it is 0), as a float: multiplying
    by it is bit for bit multiplying by that expression's elements."""
    return float(1 - lr * weight_decay * torch.ones(1, dtype=torch.float32))


def _runs(mask: torch.Tensor) -> List[Tuple[int, int]]:
    """The [lo, hi) runs of nonzero entries of a 1-D CPU mask."""
    m = torch.zeros(mask.numel() + 2, dtype=torch.int8)
    m[1:-1] = mask != 0
    d = m[1:] - m[:-1]
    return list(zip(torch.nonzero(d == 1).flatten().tolist(), torch.nonzero(d == -1).flatten().tolist()))


# =============================================================================
# Communication backends: the same small interface for the three.
# =============================================================================


class _Done:
    """A completed call (a handle whose wait() returns at once)."""

    def __init__(self, res: Optional[Result] = None) -> None:
        self.res = res

    def wait(self) -> Optional[Result]:
        return self.res


class WaitClock:
    """How long a rank waited for its collectives, by kind of call: the
    host's time blocked in each wait (perf_counter) and, on CUDA, how long
    the compute stream stood still at it (an event recorded on the current
    stream before and after the wait: the stream passes the second only
    once the daemon's work is done, so their distance is the stall; where
    the stream was already idle it includes the host's wait).

    No device sync: events are read by take(), which the caller calls once
    the device is synchronized (train_gpt.py does so after every step).
    Events come from a pool reused from step to step. Off (ZeroPP.profile
    not called) nothing of this runs: the comm's ``clock`` is None.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self._free: List[Any] = []
        self._marks: List[Tuple[str, Any, Any]] = []
        self.host_s: Dict[str, float] = {}
        self.count: Dict[str, int] = {}

    def _event(self) -> Any:
        return self._free.pop() if self._free else torch.cuda.Event(enable_timing=True)

    def around(self, kind: str, fn: Callable[[], Any]) -> Any:
        """fn() (a wait), timed under kind."""
        import time

        if self.cuda:
            stream = torch.cuda.current_stream(self.device)
            e0 = self._event()
            e0.record(stream)
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.host_s[kind] = self.host_s.get(kind, 0.0) + time.perf_counter() - t0
            self.count[kind] = self.count.get(kind, 0) + 1
            if self.cuda:
                e1 = self._event()
                e1.record(stream)
                self._marks.append((kind, e0, e1))

    def take(self) -> Dict[str, Dict[str, float]]:
        """What was measured since the last take(), then a fresh start:
        {"host_ms": {kind: ms}, "stream_ms": {kind: ms} (CUDA; {} on CPU),
        "waits": {kind: n}}. On CUDA, call it after the device is
        synchronized (else it waits for the events)."""
        stream_ms: Dict[str, float] = {}
        for kind, e0, e1 in self._marks:
            e1.synchronize()
            stream_ms[kind] = stream_ms.get(kind, 0.0) + e0.elapsed_time(e1)
            self._free += [e0, e1]
        out = {"host_ms": {k: v * 1e3 for k, v in self.host_s.items()}, "stream_ms": stream_ms,
               "waits": dict(self.count)}  # fmt: skip
        self._marks, self.host_s, self.count = [], {}, {}
        return out


def _plain_gather_kw(key: Optional[str], publish: Optional[str], timeout_ms: int) -> Dict[str, Any]:
    """The optional fields of a plain all-gather: an hpZ key (keep the
    slices), or a content key to publish a shared replica under."""
    from .client import _publish_flags

    kw: Dict[str, Any] = {"timeout_ms": timeout_ms, "flags": _publish_flags(publish, bool(publish), key)}
    if key:
        kw["hpz_key"] = key
    if publish:
        kw["content_key"] = publish
    return kw


class _Comm:
    """alloc_many, allgather, hpz_gather, reduce_scatter, invalidate_all,
    gather_floats, barrier, close. Handles have wait() -> Result or None."""

    name = "?"
    supports_zeropp = False
    plain_hpz = False  # whether a plain all-gather can keep hpZ slices

    def __init__(self, world: int) -> None:
        self.world = world
        self._inflight: "List[Any]" = []
        self.max_inflight = 8
        self.clock: Optional["WaitClock"] = None  # ZeroPP.profile(True) sets it

    def wait(self, h: Any, kind: str) -> Any:
        """h.wait(), timed under kind when a WaitClock is set."""
        return h.wait() if self.clock is None else self.clock.around(kind, h.wait)

    def _track(self, h: Any) -> Any:
        self._inflight.append(h)
        if len(self._inflight) > self.max_inflight:
            self.wait(self._inflight.pop(0), "inflight-cap")
        return h

    def drain(self) -> None:
        while self._inflight:
            self._inflight.pop(0).wait()

    def check(self) -> None:
        """Raises if a call answered so far did not complete on a working
        device. The torch.distributed baseline has NCCL's own checks."""
        self.drain()


class _DaemonComm(_Comm):
    """What HostComm and CudaComm share: hpZ invalidation and the barrier
    go to the daemon over self.conn."""

    conn: Connection
    timeout_ms: int

    keep_shared = False  # ZeroPP(share_frozen=True): invalidate-all keeps the replicas attached

    def invalidate_all(self) -> None:
        self.drain()
        self.conn.hpz_invalidate(all=True, keep_shared=self.keep_shared, timeout_ms=self.timeout_ms)

    def invalidate(self, key: str) -> None:
        self.conn.hpz_invalidate(key, timeout_ms=self.timeout_ms)

    def detach_shared(self, content_key: str) -> None:
        """The job no longer reads the shared replica of content_key."""
        self.conn.hpz_invalidate(content_key=content_key, timeout_ms=self.timeout_ms)

    def barrier(self) -> None:
        self.drain()
        self.conn.barrier(timeout_ms=self.timeout_ms)

    def check(self) -> None:
        self.drain()
        self.conn.check()


class HostComm(_DaemonComm):
    """Host backend: CPU tensors carved out of zpp SharedBuffers."""

    name = "zppd-host"
    supports_zeropp = True

    def __init__(self, conn: Connection, timeout_ms: int = 0) -> None:
        super().__init__(int(conn.world_size or 0))
        self.conn = conn
        self.timeout_ms = timeout_ms
        self.device = torch.device("cpu")
        self._bufs: List[Any] = []
        self.max_inflight = max(2, min(8, (conn.info.max_pending if conn.info else 8) - 2))

    def alloc_many(self, plan: Sequence[Tuple[int, torch.dtype]]) -> List[torch.Tensor]:
        from .shm import SharedBuffer

        offs, total = [], 0
        for n, dt in plan:
            offs.append(total)
            total += _ceil(max(n, 1) * torch.empty((), dtype=dt).element_size(), _ALIGN) * _ALIGN
        shm = SharedBuffer(max(total, _ALIGN))
        self._bufs.append(shm)
        out = [shm.torch(dt, max(n, 1), offset=o)[:n] for (n, dt), o in zip(plan, offs)]
        for t in out:
            t.zero_()
        return out

    def _submit(self, call_and_keep: Tuple[Any, Tuple[Any, ...]], async_op: bool) -> Any:
        call, keep = call_and_keep
        r = self.conn._go(call, keep + (getattr(call, "_key", None), getattr(call, "_ckey", None)), async_op)
        return self._track(r) if async_op else _Done(r)

    def allgather(self, inp: torch.Tensor, out: torch.Tensor, count: int, *, qwz: bool, bits: int,
                  block: int, key: Optional[str], async_op: bool,
                  publish: Optional[str] = None) -> Any:  # fmt: skip
        if qwz:
            r = self.conn.qwz_allgather(inp, out, count=count, bits=bits, block=block, hpz_key=key,
                                        timeout_ms=self.timeout_ms, async_op=async_op)  # fmt: skip
            return self._track(r) if async_op else _Done(r)
        # Plain all-gather; with a key it keeps the hpZ slices (a daemon that
        # supports it: see ZeroPP's probe); with publish (a content key) the
        # node keeps a shared replica. Client.allgather takes no hpz_key, so
        # the call is built with the same private helper it uses.
        return self._submit(self.conn._gather(Op.ALLGATHER, inp, out, count, None,
                                              **_plain_gather_kw(key, publish, self.timeout_ms)),
                            async_op)  # fmt: skip

    def hpz_gather(self, out: torch.Tensor, count: int, key: Optional[str], async_op: bool,
                   content_key: Optional[str] = None) -> Any:  # fmt: skip
        r = self.conn.hpz_gather(out, hpz_key=key, content_key=content_key, count=count,
                                 timeout_ms=self.timeout_ms, async_op=async_op)  # fmt: skip
        return self._track(r) if async_op else _Done(r)

    def reduce_scatter(self, inp: torch.Tensor, out: torch.Tensor, count: int, *, qgz: bool,
                       bits: int, block: int, stages: int, async_op: bool) -> Any:  # fmt: skip
        if qgz:
            r = self.conn.qgz_reduce_scatter(inp, out, count=count, reduce="mean", bits=bits,
                                             block=block, stages=stages,
                                             timeout_ms=self.timeout_ms, async_op=async_op)  # fmt: skip
        else:
            r = self.conn.reduce_scatter(inp, out, count=count, reduce="mean",
                                         timeout_ms=self.timeout_ms, async_op=async_op)  # fmt: skip
        return self._track(r) if async_op else _Done(r)

    def close(self) -> None:
        self.drain()
        for b in self._bufs:
            self.conn.release(b)
        self._bufs = []  # the SharedBuffers go with the last tensor view


class CudaComm(_DaemonComm):
    """cuda backend: persistent CUDA arenas registered once (zpp.cuda);
    every call is stream-ordered on the current stream."""

    name = "zppd-cuda"
    supports_zeropp = True

    def __init__(self, conn: Connection, device: torch.device, timeout_ms: int = 0) -> None:
        from . import cuda as zc

        if not zc.available():
            raise errors.error_from_code(zc.EUNSUPPORTED, "zpp.torch on CUDA needs a CUDA build of libzpp")
        super().__init__(int(conn.world_size or 0))
        self.zc = zc
        self.conn = conn
        self.device = device
        self.timeout_ms = timeout_ms
        self.reg = zc.Registry(conn)
        self._keep: List[torch.Tensor] = []
        self.max_inflight = 8

    def alloc_many(self, plan: Sequence[Tuple[int, torch.dtype]]) -> List[torch.Tensor]:
        # One allocation per piece: a registration covers at most 256 VMM
        # chunks (5 GiB with PyTorch's), so one huge arena could not be
        # registered whole; each piece is registered once, here: a failure
        # shows at construction, not inside a step or backward's thread.
        out = [torch.zeros(max(n, 1), dtype=dt, device=self.device)[:n] for n, dt in plan]
        self._keep += out
        for t in out:
            self._ref(t)
        return out

    def _ref(self, t: torch.Tensor) -> BufRef:
        # Register the whole piece (its base), then point at t inside it.
        base = t._base if t._base is not None else t
        r = self.reg.ref(base)
        return BufRef(r.buffer_id, r.offset + (t.data_ptr() - base.data_ptr()))

    def _go(self, call: Any, async_op: bool) -> Any:
        stream = torch.cuda.current_stream(self.device)
        while True:
            try:
                rid = self.zc.submit(self.conn, call, stream)
                break
            except errors.ZppError as e:
                if e.code != self.zc.EBUSY or not self._inflight:
                    raise
                self.wait(self._inflight.pop(0), "inflight-cap")  # free an event of the pool
        h = _CudaReq(self, rid)
        if not async_op:
            return _Done(h.wait())
        return self._track(h)

    def allgather(self, inp, out, count, *, qwz, bits, block, key, async_op, publish=None):  # type: ignore[no-untyped-def]
        kw: Dict[str, Any] = _plain_gather_kw(key, None if qwz else publish, self.timeout_ms)
        if qwz:
            kw.update(bits=bits, block=block)
        dt = _ZDT[inp.dtype]
        call, _ = self.conn._gather(Op.QWZ_ALLGATHER if qwz else Op.ALLGATHER, self._ref(inp),
                                    self._ref(out), count, dt, **kw)  # fmt: skip
        return self._go(call, async_op)

    def hpz_gather(self, out, count, key, async_op, content_key=None):  # type: ignore[no-untyped-def]
        from ._lib import LIB, CollC
        from .client import _apply

        import ctypes

        call = CollC()
        LIB.zpp_coll_init(ctypes.byref(call), Op.HPZ_GATHER, _ZDT[out.dtype], count)
        r = self._ref(out)
        call.output.buffer_id, call.output.offset = r.buffer_id, r.offset
        _apply(call, hpz_key=key, content_key=content_key, timeout_ms=self.timeout_ms)
        return self._go(call, async_op)

    def reduce_scatter(self, inp, out, count, *, qgz, bits, block, stages, async_op):  # type: ignore[no-untyped-def]
        kw: Dict[str, Any] = {"timeout_ms": self.timeout_ms}
        if qgz:
            kw.update(bits=bits, block=block, stages=stages)
        call, _ = self.conn._scatter(Op.QGZ_REDUCE_SCATTER if qgz else Op.REDUCE_SCATTER,
                                     self._ref(inp), self._ref(out), count, _ZDT[inp.dtype],
                                     _ZDT[out.dtype], "mean", **kw)  # fmt: skip
        return self._go(call, async_op)

    def close(self) -> None:
        self.drain()
        self.reg.clear()
        self._keep = []


class _CudaReq:
    def __init__(self, comm: CudaComm, rid: int) -> None:
        self.comm, self.rid, self.res = comm, rid, None
        self.done = False
        self.err: Optional[BaseException] = None

    def wait(self) -> Optional[Result]:
        """The Result; a failed call raises its error again on every later
        wait (as Request.wait): a handle waited first by the in-flight cap
        or a drain must not look completed to its gather or reduce."""
        if not self.done:
            self.done = True
            try:
                self.res = self.comm.zc.wait_stream(self.comm.conn, self.rid,
                                                    torch.cuda.current_stream(self.comm.device))  # fmt: skip
            except BaseException as e:
                self.err = e
                raise
        if self.err is not None:
            raise self.err
        return self.res


class TorchComm(_Comm):
    """The same sharded loop on torch.distributed (NCCL on CUDA, gloo on
    CPU): plain all-gather and reduce-scatter only (the baseline)."""

    name = "torch-dist"

    def __init__(self, group: Any = None, device: Optional[torch.device] = None) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        super().__init__(dist.get_world_size(group))
        self.rank = dist.get_rank(group)
        self.device = device or torch.device("cpu")
        self.gloo = dist.get_backend(group) == "gloo"

    def alloc_many(self, plan: Sequence[Tuple[int, torch.dtype]]) -> List[torch.Tensor]:
        return [torch.zeros(max(n, 1), dtype=dt, device=self.device)[:n] for n, dt in plan]

    def allgather(self, inp, out, count, *, qwz, bits, block, key, async_op):  # type: ignore[no-untyped-def]
        W, shard = self.world, _ceil(count, self.world)
        base = out._base if out._base is not None else out
        if out.numel() >= W * shard:
            dst = out[: W * shard]
        else:
            dst = torch.empty(W * shard, dtype=out.dtype, device=out.device)
        if self.gloo:
            parts = list(dst.view(W, shard).unbind(0))
            self.dist.all_gather(parts, inp[:shard].contiguous(), group=self.group)
        else:
            self.dist.all_gather_into_tensor(dst, inp[:shard], group=self.group)
        if dst.data_ptr() != out.data_ptr():
            out.copy_(dst[:count])
        del base
        return _Done()

    def reduce_scatter(self, inp, out, count, *, qgz, bits, block, stages, async_op):  # type: ignore[no-untyped-def]
        W, shard = self.world, _ceil(count, self.world)
        if count == W * shard:  # no padding: the input as it is (gloo reduces in place: a gradient slot)
            src = inp[:count]
        else:
            src = torch.zeros(W * shard, dtype=inp.dtype, device=inp.device)
            src[:count] = inp[:count]
        if self.gloo:
            self.dist.all_reduce(src, group=self.group)
            part = src[self.rank * shard : (self.rank + 1) * shard]
        else:
            part = torch.empty(shard, dtype=inp.dtype, device=inp.device)
            self.dist.reduce_scatter_tensor(part, src, group=self.group)
        out[:shard].copy_(part)
        out.div_(W)
        return _Done()

    def hpz_gather(self, out, count, key, async_op):  # type: ignore[no-untyped-def]
        raise errors.error_from_code(-14, "hpZ needs zppd")

    def invalidate_all(self) -> None:
        pass

    def invalidate(self, key: str) -> None:
        pass

    def barrier(self) -> None:
        self.dist.barrier(group=self.group)

    def close(self) -> None:
        pass


# =============================================================================
# The wrapper
# =============================================================================


class _Saved:
    """What the saved-tensors hook keeps instead of a view of a slot."""

    __slots__ = ("unit", "off", "size", "stride", "version")

    def __init__(self, unit: int, off: int, size: Tuple[int, ...], stride: Tuple[int, ...],
                 version: Tuple[int, int]) -> None:  # fmt: skip
        self.unit, self.off, self.size, self.stride, self.version = unit, off, size, stride, version


class _Unit:
    def __init__(self, idx: int, name: str, modules: List[nn.Module]) -> None:
        self.idx, self.name, self.modules = idx, name, modules
        self.params: List[Tuple[str, nn.Parameter, int, int, torch.Size]] = []  # name, p, off, n, shape
        # per module of `modules`: the indices into params it owns (its
        # forward hooks attach and detach those)
        self.member_params: List[List[int]] = [[] for _ in modules]
        self.numel = 0
        self.shard = 0
        self.trainable: List[int] = []  # indices into params that require grad
        # residency
        self.slot: Optional[int] = None
        self.tag: Optional[Tuple[int, int]] = None  # (epoch, version) of the slot's content
        self.keyed_tag: Optional[Tuple[int, int]] = None  # hpZ key stored in the daemon for this tag
        self.ckey: Optional[str] = None  # share_frozen: the content key of the frozen unit's bytes
        self.published = False  # its replica published (or attached to) by this job
        self.pending: Any = None  # in-flight gather handle
        self.pending_kind = ""  # what it is, for a profile: gather, hpz (+ "-miss": not prefetched)
        self.in_use = 0  # members inside their forward
        self.bwd_active = False
        self.attached: set = set()  # members whose parameters point at the slot
        self.last_use = 0
        # gradients
        self.gslot: Optional[int] = None
        self.got: set = set()
        # state (filled by ZeroPP)
        self.master: torch.Tensor
        self.exp_avg: torch.Tensor
        self.exp_avg_sq: torch.Tensor
        # fp32 gradient accumulator: allocated by the unit's first reduce
        # after a step, dropped by the step (None: all zeros)
        self.gacc: Optional[torch.Tensor] = None
        # [lo, hi) runs of the shard that weight decay applies to (None: all)
        self.decay: Optional[List[Tuple[int, int]]] = None


class ZeroPP(nn.Module):
    """ZeRO-3-style sharded training of ``model`` with ZeRO++ collectives.

    conn_or_socket: a Connection that has joined the job (hello; attached
    with zpp.cuda.attach before hello on CUDA), or a socket path (None:
    $ZPP_SOCKET) to connect and join with rank/world_size/local_rank/nodes/
    job_id/leader_addr. ``comm="torch"`` uses torch.distributed instead
    (must be initialised; conn_or_socket is ignored).
    """

    def __init__(
        self,
        model: nn.Module,
        conn_or_socket: Union[Connection, str, None] = None,
        *,
        rank: int,
        world_size: int,
        local_rank: Optional[int] = None,
        nodes: int = 1,
        job_id: str = "zpp-torch",
        leader_addr: Optional[str] = None,
        qwz: bool = True,
        hpz: bool = True,
        qgz: bool = True,
        bits_w: int = 8,
        bits_g: int = 4,
        block: int = 256,
        block_w: Optional[int] = None,
        block_g: Optional[int] = None,
        qgz_stages: int = 0,
        dtype: torch.dtype = torch.bfloat16,
        device: Union[str, torch.device, None] = None,
        units: Union[None, Sequence[type], Sequence[nn.Module]] = None,
        slots: int = 3,
        grad_slots: int = 2,
        small_slots: int = 0,
        prefetch: Union[bool, int] = True,
        step_prefetch: bool = True,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        no_decay: Optional[Callable[[str, nn.Parameter], bool]] = None,
        max_grad_norm: Optional[float] = None,
        init_scale: float = 2.0**16,
        scale_window: int = 1000,
        comm: Union[str, _Comm, None] = None,
        poison: bool = False,
        timeout_ms: int = 0,
        share_frozen: bool = False,
    ) -> None:
        super().__init__()
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError("dtype must be torch.bfloat16, torch.float16 or torch.float32")
        if world_size < 1 or not 0 <= rank < world_size or nodes < 1 or world_size % nodes:
            raise ValueError(f"bad topology: rank {rank} of {world_size} on {nodes} nodes")
        self.module = model
        self.rank, self.world, self.nodes = rank, world_size, nodes
        self.local_size = world_size // nodes
        self.local_rank = rank % self.local_size if local_rank is None else local_rank
        if device is None:
            p0 = next(model.parameters(), None)
            device = p0.device if p0 is not None else torch.device("cpu")
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = dtype
        self.bits_w, self.bits_g, self.block, self.qgz_stages = bits_w, bits_g, block, qgz_stages
        # qwZ's block (weights) and qgZ's (gradients), each block unless given
        self.block_w = block if block_w is None else block_w
        self.block_g = block if block_g is None else block_g
        # Every argument the daemon would refuse is checked here, before a
        # connection is made: not at the first forward, inside a hook.
        for name, b in (("block", block), ("block_w", self.block_w), ("block_g", self.block_g)):
            if not isinstance(b, int) or b < 32 or b % 32 or b > _BLOCK_MAX:
                raise ValueError(f"{name} must be a multiple of 32 in 32..{_BLOCK_MAX} (got {b})")
        for name, b, on in (("bits_w", bits_w, qwz), ("bits_g", bits_g, qgz)):
            if on and b not in (4, 8):
                raise ValueError(f"{name} must be 8 or 4 (got {b})")
        if not isinstance(qgz_stages, int) or not 0 <= qgz_stages <= 64:
            raise ValueError(f"qgz_stages must be in 0..64 (0: the daemon's default), got {qgz_stages!r}")
        if not isinstance(timeout_ms, int) or not 0 <= timeout_ms <= 0xFFFFFFFF:
            raise ValueError(f"timeout_ms must be an int in 0..2^32-1 (0: the daemon's), got {timeout_ms!r}")
        if slots < 1 or grad_slots < 1 or small_slots < 0 or prefetch < 0:
            raise ValueError("slots and grad_slots must be >= 1, small_slots and prefetch >= 0")
        self.prefetch = int(prefetch)  # units gathered ahead (True: 1)
        self.step_prefetch = bool(step_prefetch)  # step() starts the next forward's first gathers
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.max_grad_norm = max_grad_norm
        self.poison = poison
        self._own_conn: Optional[Connection] = None

        try:
            # ---- communication -------------------------------------------------
            if isinstance(comm, _Comm):
                self.comm = comm
            elif comm == "torch":
                self.comm = TorchComm(device=self.device)
            else:
                conn = conn_or_socket
                if not isinstance(conn, Connection):
                    conn = Connection(conn)
                    self._own_conn = conn
                    gpu = "host"
                    if self.device.type == "cuda":
                        from . import cuda as zc

                        torch.cuda.set_device(self.device)
                        torch.zeros(1, device=self.device)  # a current context
                        zc.attach(conn, 32)
                        gpu = zc.device_uuid()
                    conn.hello(job_id, rank, world_size, node_count=nodes, local_rank=self.local_rank,
                               gpu_uuid=gpu, leader_addr=leader_addr)  # fmt: skip
                if conn.world_size != world_size or conn.rank != rank:
                    raise ValueError("the Connection joined with another rank/world_size")
                self.comm = (CudaComm(conn, self.device, timeout_ms) if self.device.type == "cuda"
                             else HostComm(conn, timeout_ms))  # fmt: skip
            self.sync_mode = "host" if isinstance(self.comm, HostComm) else self.comm.name
            if isinstance(self.comm, CudaComm):
                from . import cuda as zc

                self.sync_mode = zc.sync_mode(self.comm.conn)  # "flags" or "events"
            zpp_ok = self.comm.supports_zeropp
            self.qwz, self.hpz, self.qgz = qwz and zpp_ok, hpz and zpp_ok, qgz and zpp_ok
            # Units whose parameters are all frozen: published once as the
            # node's shared replica (docs/hpz-sharing.md) and read from it after,
            # forward and backward: node-local, exact, and one copy per node for
            # every job of the tenant with the same bytes. The job's
            # invalidate-alls keep it attached (FLAG_KEEP_SHARED), so the replica
            # is not evicted under it.
            if share_frozen and not isinstance(self.comm, _DaemonComm):
                raise ValueError(f"share_frozen needs zppd ({self.comm.name} has no shared replicas)")
            self.share_frozen = bool(share_frozen)
            if self.share_frozen:
                self.comm.keep_shared = True
            if not zpp_ok and (qwz or hpz or qgz):
                warnings.warn(f"{self.comm.name}: qwZ/hpZ/qgZ need zppd; running plain collectives")

            # ---- units, flat layout, state -------------------------------------
            self.units = self._make_units(model, units)
            W = world_size
            for u in self.units:
                u.shard = _ceil(max(u.numel, 1), W)
            self.max_padded = max((u.shard * W for u in self.units), default=1)
            self.max_shard = max((u.shard for u in self.units), default=1)
            # Comm memory is per slot, not per unit: a gather slot has its
            # staging for the all-gather input (the unit's shard in the compute
            # dtype, cast from the master shard when the gather is issued), a
            # gradient slot its fp32 reduce-scatter output (added into the
            # unit's accumulator before the slot is reused). `slots` and
            # `grad_slots` are of the largest unit's padded size; `small_slots`
            # adds that many of each of the size of the largest unit at most
            # half as big (e.g. embeddings and head, which are in use for the
            # whole forward and, in backward, until the embeddings' gradients).
            small = max((u.shard * W for u in self.units if 2 * u.shard * W <= self.max_padded), default=0)
            self.slot_size = [self.max_padded] * slots + [small] * (small_slots if small else 0)
            self.gslot_size = [self.max_padded] * grad_slots + [small] * (small_slots if small else 0)
            plan: List[Tuple[int, torch.dtype]] = []
            plan += [(n, dtype) for n in self.slot_size] + [(n // W, dtype) for n in self.slot_size]
            plan += [(n, dtype) for n in self.gslot_size] + [(n // W, torch.float32) for n in self.gslot_size]
            plan += [(4, torch.float32), (4 * W, torch.float32)]  # gather_floats in/out
            pieces = self.comm.alloc_many(plan)
            it = iter(pieces)
            ns, ng = len(self.slot_size), len(self.gslot_size)
            self.slots = [next(it) for _ in range(ns)]
            self.gstage = [next(it) for _ in range(ns)]
            self.gslots = [next(it) for _ in range(ng)]
            self.rstage = [next(it) for _ in range(ng)]
            self._fin, self._fout = next(it), next(it)
            self.slot_unit: List[Optional[_Unit]] = [None] * ns
            self.gslot_unit: List[Optional[_Unit]] = [None] * ng
            self._fp32: Optional[List[torch.Tensor]] = None
            self._slot_ranges = [(s.data_ptr(), s.data_ptr() + n * s.element_size())
                                 for s, n in zip(self.slots, self.slot_size)]  # fmt: skip
            self._esize = torch.empty((), dtype=dtype).element_size()
            self._init_state(no_decay)

            # ---- counters -------------------------------------------------------
            self.step_count = 0  # optimizer steps taken (AdamW's t)
            self._version = 0  # parameter version: moves with every step
            self._epoch = 0  # moves with every checkpoint load
            self._micro = 0  # backwards since the last step
            self._nonfinite = 0
            self._clock = 0
            self._order: List[int] = []
            self._order_done = False
            self._armed = False
            self._armed_task: Optional[int] = None  # the graph task of the backward that armed
            self._reducing: List[Tuple[_Unit, Any]] = []
            self.scale = float(init_scale) if dtype == torch.float16 else 1.0
            self.scale_window = scale_window
            self._good_steps = 0
            self.skipped_steps = 0
            self.last_grad_norm: Optional[float] = None
            self.stats: Dict[str, int] = {"gathers": 0, "hpz_gathers": 0, "reduces": 0, "prefetches": 0,
                                          "publishes": 0, "shared_gathers": 0}  # fmt: skip

            # hpZ with qwZ off needs a daemon whose plain all-gather keeps slices.
            self.hpz_plain: Optional[bool] = None  # probed only where it matters
            if self.hpz and not self.qwz:
                self.hpz_plain = self._probe_plain_hpz()
                if not self.hpz_plain:
                    warnings.warn("this zppd keeps no hpZ slices on a plain all-gather: with qwZ off, "
                                  "backward re-gathers with the plain all-gather (same bits)")  # fmt: skip
            # Whether a training forward stores hpZ keys (hpZ on, and qwZ on or
            # a daemon whose plain all-gather keeps slices).
            self._can_key = self.hpz and (self.qwz or self.hpz_plain)
            self._hooks = self._install_hooks()
        except BaseException:
            # A connection this object made has joined the job as this rank:
            # left open (until the garbage collector finds it) it would keep
            # the rank taken, and a second try would get ZPP_EEXIST.
            if self._own_conn is not None:
                self._own_conn.close()
                self._own_conn = None
            raise

    # ------------------------------------------------------------------ setup
    def _make_units(self, model: nn.Module, spec: Any) -> List[_Unit]:
        # chosen: (module path, unit, index of the module among the unit's)
        chosen: List[Tuple[str, _Unit, int]] = []
        units: List[_Unit] = []
        if spec is None:
            for name, m in model.named_modules():
                if any(True for _ in m.parameters(recurse=False)):
                    units.append(_Unit(len(units), name or "<root>", [m]))
                    chosen.append((name, units[-1], 0))
            nested = True
        else:
            spec = list(spec)
            classes = tuple(s for s in spec if isinstance(s, type))
            mods = {id(s) for s in spec if isinstance(s, nn.Module)}
            group_of: Dict[int, int] = {}  # id(module) -> index of its group in spec
            for gi, s in enumerate(spec):
                if isinstance(s, (list, tuple)):
                    if not s or not all(isinstance(m, nn.Module) for m in s):
                        raise ValueError("units=: a group must be a non-empty list of modules")
                    for m in s:
                        if m is model or id(m) in group_of or id(m) in mods:
                            raise ValueError(f"units=: module {type(m).__name__} is the model or "
                                             "is named twice")  # fmt: skip
                        group_of[id(m)] = gi
                elif not isinstance(s, (type, nn.Module)):
                    raise ValueError(f"units=: {s!r} is not a module class, a module or a list of modules")
            group_unit: Dict[int, _Unit] = {}
            taken: List[str] = []
            for name, m in model.named_modules():
                if any(name == t or name.startswith(t + ".") for t in taken if t):
                    continue  # inside a chosen unit: the outermost wins
                if m is model:
                    continue
                if id(m) in group_of:
                    gi = group_of[id(m)]
                    u = group_unit.get(gi)
                    if u is None:
                        u = group_unit[gi] = _Unit(len(units), name, [])
                        units.append(u)
                    else:
                        u.name += "+" + name
                    u.modules.append(m)
                    u.member_params.append([])
                    chosen.append((name, u, len(u.modules) - 1))
                    taken.append(name)
                elif (classes and isinstance(m, classes)) or id(m) in mods:
                    units.append(_Unit(len(units), name, [m]))
                    chosen.append((name, units[-1], 0))
                    taken.append(name)
            nested = False
        owner: Dict[int, _Unit] = {}
        index: Dict[int, int] = {}  # id(parameter) -> its index in its unit's params
        root: Optional[_Unit] = None

        def cover(mod_path: str) -> Tuple[_Unit, int]:
            """The unit and member whose forward hooks surround the forward
            of the module at mod_path (the root unit when none does)."""
            nonlocal root
            best: Optional[Tuple[_Unit, int]] = None
            for pre, u, mi in chosen:
                if nested:
                    if mod_path == pre:
                        best = (u, mi)
                elif pre == "" or mod_path == pre or mod_path.startswith(pre + "."):
                    best = (u, mi)
            if best is None:
                if root is None:
                    root = _Unit(len(units), "<root>", [model])
                    units.append(root)
                best = (root, 0)
            return best

        for pname, p in model.named_parameters():
            mod_path = pname.rsplit(".", 1)[0] if "." in pname else ""
            bu, mi = cover(mod_path)
            owner[id(p)] = bu
            index[id(p)] = len(bu.params)
            bu.member_params[mi].append(len(bu.params))
            bu.params.append((pname, p, bu.numel, p.numel(), p.shape))
            bu.numel += p.numel()
        # A tied parameter (one Parameter owned by several modules, e.g. an
        # embedding and its head) appears once above, under its first name.
        # Every module that owns it must attach it in its forward: refused
        # when the modules are in different units (one gathered copy per
        # unit), and otherwise listed under each member that owns it.
        for mname, m in model.named_modules():
            for pn, p in m.named_parameters(recurse=False):
                bu, mi = cover(mname)
                if owner.get(id(p)) is not bu:
                    raise ValueError(f"parameter {mname + '.' + pn if mname else pn} is shared by units "
                                     f"{owner[id(p)].name} and {bu.name}: put the modules that share it "
                                     "in one unit")  # fmt: skip
                j = index[id(p)]
                if j not in bu.member_params[mi]:
                    bu.member_params[mi].append(j)
        units = [u for u in units if u.params]
        for i, u in enumerate(units):
            u.idx = i
            u.trainable = [j for j, (_, p, _, _, _) in enumerate(u.params) if p.requires_grad]
        self._owner = owner
        return units

    def _init_state(self, no_decay: Optional[Callable[[str, nn.Parameter], bool]]) -> None:
        W, r = self.world, self.rank
        self._placeholder = torch.full((), float("nan"), dtype=self.dtype, device=self.device)
        for u in self.units:
            flat = torch.zeros(u.shard * W, dtype=torch.float32)
            # (a frozen parameter is not decayed either: its gradient is
            # always zero, as torch.optim.AdamW leaves a parameter without one)
            frozen = len(u.trainable) < len(u.params)
            mask = torch.ones(u.shard * W, dtype=torch.float32) if no_decay or frozen else None
            for name, p, off, n, _ in u.params:
                flat[off : off + n] = p.detach().reshape(-1).to("cpu", torch.float32)
                if mask is not None and ((no_decay and no_decay(name, p)) or not p.requires_grad):
                    mask[off : off + n] = 0
            u.ckey, u.published = None, False
            if self.share_frozen and not u.trainable:
                # what the unit's plain all-gather writes: the master in the compute dtype
                u.ckey = content_key(flat[: u.numel].to(self.dtype))
            lo = r * u.shard
            u.master = flat[lo : lo + u.shard].clone().to(self.device)
            u.exp_avg = torch.zeros_like(u.master)
            u.exp_avg_sq = torch.zeros_like(u.master)
            u.gacc = None
            u.decay = _runs(mask[lo : lo + u.shard]) if mask is not None else None
            for _, p, _, _, shape in u.params:
                p.data = self._placeholder.expand(shape)
                p.grad = None
        for b_name, b in self.module.named_buffers():
            b.data = b.data.to(self.device)

    def _install_hooks(self) -> List[Any]:
        hs = []
        for u in self.units:
            for mi, mod in enumerate(u.modules):
                hs.append(mod.register_forward_pre_hook(lambda m, a, u=u, mi=mi: self._pre_forward(u, mi)))
                hs.append(mod.register_forward_hook(lambda m, a, o, u=u, mi=mi: self._post_forward(u, mi)))
            for j in u.trainable:
                p = u.params[j][1]
                hs.append(p.register_post_accumulate_grad_hook(
                    lambda p, u=u, j=j: self._on_grad(u, j, p)))  # fmt: skip
        return hs

    def _probe_plain_hpz(self) -> bool:
        n = self.world
        src, dst = self._fin[:1], self._fout[:n]
        key = f"zpp/probe/e{self._epoch}"
        src.fill_(float(self.rank + 1))
        self.comm.allgather(src, dst, n, qwz=False, bits=8, block=self.block, key=key, async_op=False)
        try:
            self.comm.hpz_gather(dst, n, key, async_op=False)
            ok = True
        except errors.ZppError as e:
            if e.code != -5:  # ZPP_ENOENT: the key was not kept
                raise
            ok = False
        self.comm.invalidate(key)
        return ok

    # --------------------------------------------------------------- residency
    def _tag(self) -> Tuple[int, int]:
        return (self._epoch, self._version)

    def _key(self, u: _Unit) -> str:
        return f"zpp/u{u.idx}/e{self._epoch}/g{self._version}"

    def _valid(self, u: _Unit, want_key: bool) -> bool:
        tag = self._tag()
        return (u.slot is not None and u.pending is None and u.tag == tag
                and (not want_key or u.keyed_tag == tag))  # fmt: skip

    def _attach(self, u: _Unit, mi: int) -> None:
        """Points the parameters of u's member mi at their views of u's slot."""
        if mi in u.attached:
            return
        s = self.slots[u.slot]  # type: ignore[index]
        for j in u.member_params[mi]:
            _, p, off, n, shape = u.params[j]
            p.data = s[off : off + n].view(shape)
        u.attached.add(mi)

    def _detach(self, u: _Unit, mi: Optional[int] = None) -> None:
        """Points member mi's parameters (None: every member's) back at the
        placeholder."""
        for m in ([mi] if mi is not None else list(u.attached)):
            if m in u.attached:
                u.attached.discard(m)
                # (a tied parameter stays while another member that owns it
                # is attached)
                still = {j for k in u.attached for j in u.member_params[k]}
                for j in u.member_params[m]:
                    if j not in still:
                        _, p, _, _, shape = u.params[j]
                        p.data = self._placeholder.expand(shape)

    def _evict(self, u: _Unit) -> None:
        self._detach(u)
        if u.slot is not None:
            if self.poison:
                self.slots[u.slot].fill_(float("nan"))
            self.slot_unit[u.slot] = None
        u.slot, u.tag = None, None

    def _free_slot(self, u: _Unit, keep: Iterable[_Unit] = (), block: bool = True) -> Optional[int]:
        """A gather slot big enough for u: the smallest free one, else the
        least recently used one whose unit may go (not in use, not waiting
        for its gradients, not in flight, not in keep). block: complete
        in-flight gathers to find one, and raise when there is none."""
        need = u.shard * self.world
        fits = [i for i in range(len(self.slots)) if self.slot_size[i] >= need]
        free = [i for i in fits if self.slot_unit[i] is None]
        if free:
            return min(free, key=lambda i: self.slot_size[i])
        keep_ids = {id(k) for k in keep}
        held = [self.slot_unit[i] for i in fits]
        cands = [v for v in held if v is not None and v.in_use == 0 and not v.bwd_active
                 and v.pending is None and id(v) not in keep_ids]  # fmt: skip
        if not cands and block:
            pend = [v for v in held if v is not None and v.pending is not None and id(v) not in keep_ids]
            for v in pend:
                self._complete(v)
            cands = [v for v in pend if v.in_use == 0 and not v.bwd_active]
        if not cands:
            if block:
                raise RuntimeError(f"zpp.torch: all {len(fits)} gather slots that fit unit {u.name} are in "
                                   f"use (units {[v.name for v in held if v]}); pass slots=")  # fmt: skip
            return None
        victim = min(cands, key=lambda v: v.last_use)
        slot = victim.slot
        self._evict(victim)
        return slot

    def _issue(self, u: _Unit, slot: int, backward: bool, want_key: bool, async_op: bool) -> Any:
        """Gathers u into slot: hpZ in backward when its key is stored, else
        qwZ (keeping the key when want_key) or the plain all-gather."""
        u.slot, self.slot_unit[slot] = slot, u
        out = self.slots[slot][: u.numel]
        tag = self._tag()
        if u.ckey is not None:
            return self._issue_shared(u, slot, out, tag, async_op)
        if backward and u.keyed_tag == tag:
            self.stats["hpz_gathers"] += 1
            u.pending_kind = "hpz"
            h = self.comm.hpz_gather(out, u.numel, self._key(u), async_op)
        else:
            u.pending_kind = "gather"
            key = self._key(u) if want_key else None
            self.stats["gathers"] += 1
            # The all-gather input: the master shard in the compute dtype, in
            # the slot's staging (free: the slot's last gather was waited).
            src = self.gstage[slot][: u.shard]
            src.copy_(u.master)
            h = self.comm.allgather(src, out, u.numel, qwz=self.qwz, bits=self.bits_w,
                                    block=self.block_w, key=key, async_op=async_op)  # fmt: skip
            if key is not None:
                u.keyed_tag = tag
        u.pending = h
        u.tag = tag
        return h

    def _issue_shared(self, u: _Unit, slot: int, out: torch.Tensor, tag: Tuple[int, int],
                      async_op: bool) -> Any:  # fmt: skip
        """A frozen unit under share_frozen: its first gather publishes it
        (a plain all-gather; the daemon checks the bytes against u.ckey, or
        attaches the job to the replica another job published); every later
        one, forward or backward, reads the node's replica."""
        if u.published:
            self.stats["shared_gathers"] += 1
            u.pending_kind = "hpz"
            h = self.comm.hpz_gather(out, u.numel, None, async_op, content_key=u.ckey)
        else:
            self.stats["publishes"] += 1
            u.pending_kind = "gather"
            src = self.gstage[slot][: u.shard]
            src.copy_(u.master)
            h = self.comm.allgather(src, out, u.numel, qwz=False, bits=self.bits_w, block=self.block_w,
                                    key=None, async_op=async_op, publish=u.ckey)  # fmt: skip
            u.published = True  # _complete takes it back if the publish fails
        u.pending, u.tag, u.keyed_tag = h, tag, tag
        return h

    def _complete(self, u: _Unit) -> None:
        if u.pending is not None:
            h, u.pending = u.pending, None
            try:
                self.comm.wait(h, u.pending_kind)
            except BaseException:
                # The slot holds no gathered copy (nor the daemon a key for
                # it): a caller that goes on after the error must gather again.
                u.tag = None
                u.keyed_tag = None
                if u.ckey is not None and u.pending_kind == "gather":
                    u.published = False
                raise

    def _ensure(self, u: _Unit, backward: bool, want_key: bool) -> None:
        self._clock += 1
        u.last_use = self._clock
        if u.pending is not None:
            self._complete(u)
        if self._valid(u, want_key):
            return
        if u.slot is not None:  # stale content (old version) or no key: reuse the slot
            slot = u.slot
            self._detach(u)
            self.slot_unit[slot] = None
            u.slot = None
        else:
            slot = self._free_slot(u, keep=(u,))
        # (async, then waited: the wait is where a profile times it)
        self._issue(u, slot, backward, want_key, async_op=True)  # type: ignore[arg-type]
        u.pending_kind += "-miss"  # needed now: not prefetched (or not in time)
        self._complete(u)

    def _prefetch(self, u: _Unit, backward: bool, want_key: bool, keep: Sequence[_Unit]) -> bool:
        """Starts u's gather into a free slot or one whose unit may go (not
        one of keep); False when there is none (a deeper prefetch stops)."""
        if u.pending is not None or self._valid(u, want_key) or u.slot is not None:
            return True
        slot = self._free_slot(u, keep=keep, block=False)
        if slot is None:
            return False
        self.stats["prefetches"] += 1
        self._issue(u, slot, backward, want_key, async_op=True)
        self._clock += 1
        u.last_use = self._clock
        return True

    # ---------------------------------------------------------------- forward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        for u in self.units:  # a forward that raised may have left units marked in use
            if u.in_use:
                u.in_use = 0
                self._detach(u)
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            out = self.module(*args, **kwargs)
        if not self._order_done and self._order:
            self._order_done = True
        return out

    def _pre_forward(self, u: _Unit, mi: int) -> None:
        want_key = torch.is_grad_enabled() and self._can_key
        if not self._order_done and u.idx not in self._order:
            self._order.append(u.idx)
        self._ensure(u, backward=False, want_key=want_key)
        u.in_use += 1
        self._attach(u, mi)
        if self._order_done:
            keep = [u]
            for d in range(1, self.prefetch + 1):
                nxt = self._next_in_order(u.idx, +d)
                if nxt is None or not self._prefetch(self.units[nxt], False, want_key, keep):
                    break
                keep.append(self.units[nxt])

    def _post_forward(self, u: _Unit, mi: int) -> None:
        # A unit of several modules stays in its slot between them (it is
        # evictable only while none is inside its forward); only this
        # member's parameters go back to the placeholder.
        u.in_use -= 1
        self._detach(u, mi)

    def _next_in_order(self, idx: int, d: int) -> Optional[int]:
        try:
            i = self._order.index(idx) + d
        except ValueError:
            return None
        return self._order[i] if 0 <= i < len(self._order) else None

    # --------------------------------------------------------- saved tensors
    def _pack(self, t: torch.Tensor) -> Any:
        if t.layout != torch.strided or t.dtype != self.dtype or t.device != self.device or t.numel() == 0:
            return t
        ptr = t.data_ptr()
        for i, (lo, hi) in enumerate(self._slot_ranges):
            if lo <= ptr < hi:
                u = self.slot_unit[i]
                if u is None:
                    return t
                return _Saved(u.idx, (ptr - lo) // self._esize, tuple(t.shape), tuple(t.stride()), self._tag())
        return t

    def _unpack(self, x: Any) -> Any:
        if not isinstance(x, _Saved):
            return x
        if x.version != self._tag():
            raise RuntimeError("zpp.torch: this graph's parameters changed (optimizer step or checkpoint "
                               "load) before its backward")  # fmt: skip
        self._arm()
        u = self.units[x.unit]
        self._ensure(u, backward=True, want_key=False)
        if u.trainable:
            u.bwd_active = True  # its slot stays until its gradients are reduced
        keep = [u]
        for d in range(1, self.prefetch + 1):
            prev = self._next_in_order(u.idx, -d)
            if prev is None or not self._prefetch(self.units[prev], True, False, keep):
                break
            keep.append(self.units[prev])
        s = self.slots[u.slot]  # type: ignore[index]
        return s.as_strided(x.size, x.stride, s.storage_offset() + x.off)

    # -------------------------------------------------------------- gradients
    def _arm(self) -> None:
        if self._armed:
            task = _graph_task()
            if task is None or task == self._armed_task:
                return
            # armed by a backward whose end never came: it raised, and its
            # queued callback went with it
            raise RuntimeError(_STALE_BACKWARD)
        self._armed = True
        self._armed_task = _graph_task()
        torch.autograd.Variable._execution_engine.queue_callback(self._post_backward)

    def _stale(self) -> bool:
        """Armed, outside any backward: the backward that armed raised
        before its end (PyTorch drops a failed backward's callbacks)."""
        return self._armed and _graph_task() == -1

    def _refuse_if_stale(self) -> None:
        if self._stale():
            raise RuntimeError(_STALE_BACKWARD)

    def _abandon_backward(self) -> None:
        """Undoes what a backward that raised left behind: its reduces in
        flight are waited for (their results dropped), its gradient slots
        freed, its gathers completed, its hpZ keys dropped. The gradients it
        reduced before it failed are in the units' sums: zero_grad, the
        only caller, drops those too. The first error of a wait is raised
        once the state is clean."""
        err: Optional[BaseException] = None
        while self._reducing:
            _, h = self._reducing.pop(0)
            try:
                self.comm.wait(h, "reduce-tail")
            except BaseException as e:  # noqa: BLE001 - raised below, once clean
                err = err or e
        for u in self.units:  # (the reduced units' slots included)
            u.got = set()
            if u.gslot is not None:
                self.gslot_unit[u.gslot] = None
                u.gslot = None
            u.bwd_active = False
            try:
                self._complete(u)
            except BaseException as e:  # noqa: BLE001
                err = err or e
        if self.hpz:
            try:
                self._invalidate_all()
            except BaseException as e:  # noqa: BLE001
                err = err or e
            for u in self.units:
                u.keyed_tag = None
        self._armed = False
        self._armed_task = None
        if err is not None:
            raise err

    def _gslot(self, u: _Unit) -> torch.Tensor:
        if u.gslot is None:
            need = u.shard * self.world
            fits = [i for i in range(len(self.gslots)) if self.gslot_size[i] >= need]
            free = [i for i in fits if self.gslot_unit[i] is None]
            while not free:
                if not self._reducing:
                    raise RuntimeError(f"zpp.torch: all {len(fits)} gradient slots that fit unit {u.name} "
                                       "hold units whose gradients are incomplete; pass grad_slots=")  # fmt: skip
                self._finish_reduce(0)  # the oldest reduce in flight
                free = [i for i in fits if self.gslot_unit[i] is None]
            u.gslot = min(free, key=lambda i: self.gslot_size[i])
            self.gslot_unit[u.gslot] = u
            self.gslots[u.gslot][: u.shard * self.world].zero_()
        return self.gslots[u.gslot]

    def _on_grad(self, u: _Unit, j: int, p: nn.Parameter) -> None:
        self._arm()
        g = p.grad
        p.grad = None
        if g is None:
            return
        _, _, off, n, _ = u.params[j]
        view = self._gslot(u)[off : off + n]
        if j in u.got:
            view.add_(g.reshape(-1))
        else:
            view.copy_(g.reshape(-1))
            u.got.add(j)
        if len(u.got) == len(u.trainable):
            self._reduce(u)

    def _reduce(self, u: _Unit) -> None:
        self.stats["reduces"] += 1
        src = self.gslots[u.gslot][: u.numel]  # type: ignore[index]
        red = self.rstage[u.gslot][: u.shard]  # type: ignore[index]
        h = self.comm.reduce_scatter(src, red, u.numel, qgz=self.qgz, bits=self.bits_g,
                                     block=self.block_g, stages=self.qgz_stages, async_op=True)  # fmt: skip
        self._reducing.append((u, h))
        u.got = set()
        u.bwd_active = False

    def _finish_reduce(self, i: int, kind: str = "reduce") -> None:
        """Waits for reduce i; kind names the wait in the profile: "reduce"
        for a gradient slot needed during the backward, "reduce-tail" for
        the drain at the backward's end."""
        u, h = self._reducing.pop(i)
        res = self.comm.wait(h, kind)
        if res is not None:
            self._nonfinite += int(res.nonfinite_blocks)
        if u.gacc is None:  # the unit's first gradient since the step: 0 + it, as ever
            u.gacc = torch.zeros(u.shard, dtype=torch.float32, device=self.device)
        u.gacc.add_(self.rstage[u.gslot][: u.shard])  # type: ignore[index]
        self.gslot_unit[u.gslot] = None  # type: ignore[index]
        u.gslot = None

    def _post_backward(self) -> None:
        for idx in reversed(self._order or range(len(self.units))):
            u = self.units[idx]
            if u.got:  # partly used: the missing gradients are zeros
                self._reduce(u)
        for u in self.units:  # units outside the recorded order
            if u.got:
                self._reduce(u)
        while self._reducing:
            self._finish_reduce(0, "reduce-tail")
        for u in self.units:
            self._complete(u)
            u.bwd_active = False
        if self.hpz:
            self._invalidate_all()
            for u in self.units:
                u.keyed_tag = None
        self._micro += 1
        self._armed = False
        self._armed_task = None

    def backward(self, loss: torch.Tensor) -> None:
        """(loss * scale).backward(): the loss scale of fp16 (1 otherwise)."""
        (loss * self.scale if self.scale != 1.0 else loss).backward()

    # -------------------------------------------------------------- optimizer
    def _gather_floats(self, vals: Sequence[Union[float, torch.Tensor]]) -> torch.Tensor:
        """Every rank's vals (at most 4; floats or 0-d tensors on the
        device): a (W, 4) CPU tensor. One all-gather, one device sync."""
        k = len(vals)
        self._fin.zero_()
        for i, v in enumerate(vals[:4]):
            self._fin[i] = v
        h = self.comm.allgather(self._fin, self._fout, 4 * self.world, qwz=False, bits=8, block=self.block,
                                key=None, async_op=True)  # fmt: skip
        self.comm.wait(h, "floats")
        del k
        return self._fout.view(self.world, 4).to("cpu")

    @torch.no_grad()
    def any_rank(self, flag: bool) -> bool:
        """True when flag is True on any rank. Collective (every rank calls
        it at the same point, outside a backward): e.g. for all ranks to
        stop at the same step when one of them runs out of time."""
        self._refuse_if_stale()
        if self._armed:
            raise RuntimeError("any_rank() during backward")
        return bool(float(self._gather_floats([1.0 if flag else 0.0])[:, 0].sum()) > 0)

    @torch.no_grad()
    def step(self, lr: Optional[float] = None) -> bool:
        """AdamW on the shard with the accumulated gradients (their mean over
        the backwards since the last step). Returns False when the step was
        skipped (non-finite gradients; fp16 lowers the loss scale)."""
        self._refuse_if_stale()
        if self._armed:
            raise RuntimeError("step() during backward")
        if self._micro == 0:
            raise RuntimeError("step() without a backward since the last step")
        if lr is not None:
            self.lr = lr
        inv = 1.0 / (self._micro * self.scale)
        # Computed on the device: the all-gather below is the step's one sync.
        zero = torch.zeros((), dtype=torch.float32, device=self.device)
        bad: Union[float, torch.Tensor] = float(self._nonfinite > 0)
        # (a unit without gradients since the last step has gacc None: zeros,
        # whose terms are the same 0-d values as an all-zero accumulator's)
        # Every dtype: a bf16 or fp32 gradient can overflow too, and the
        # plain reduce-scatter reports nothing (only qgZ counts blocks).
        if self.units:
            no = torch.zeros((), dtype=torch.bool, device=self.device)
            bad = bad + torch.stack([no if u.gacc is None else (~torch.isfinite(u.gacc)).any()
                                     for u in self.units]).any().float()  # fmt: skip
        sq: Union[float, torch.Tensor] = 0.0
        if self.max_grad_norm is not None and self.units:
            sq = torch.stack([zero if u.gacc is None else u.gacc.pow(2).sum()
                              for u in self.units]).sum() * (inv * inv)  # fmt: skip
            if self.dtype != torch.float16:  # a non-finite norm skips the step too
                bad = bad + (~torch.isfinite(sq)).float()
        agreed = self._gather_floats([zero + bad, zero + sq])
        self._nonfinite = 0
        if float(agreed[:, 0].sum()) > 0:
            self.skipped_steps += 1
            if self.dtype == torch.float16:
                self.scale = max(self.scale / 2.0, 1.0)
                self._good_steps = 0
            self._zero_grads()
            return False
        coef = inv
        if self.max_grad_norm is not None:
            norm = math.sqrt(float(agreed[:, 1].double().sum()))
            self.last_grad_norm = norm
            if norm > self.max_grad_norm:
                coef *= self.max_grad_norm / (norm + 1e-6)
        self.step_count += 1
        t = self.step_count
        b1, b2 = self.betas
        bc1, bc2 = 1 - b1**t, 1 - b2**t
        # The decay factor where the mask is 1, computed as the fp32 tensor
        # expression 1 - lr*wd*mask computes it (elsewhere it is exactly 1).
        fac = _decay_factor(self.lr, self.weight_decay)
        for u in self.units:
            if not u.trainable:
                continue
            if u.gacc is None:  # no gradient since the last step: zeros
                u.gacc = torch.zeros(u.shard, dtype=torch.float32, device=self.device)
            g = u.gacc.mul_(coef)
            u.exp_avg.mul_(b1).add_(g, alpha=1 - b1)
            u.exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
            if self.weight_decay:
                if u.decay is None:
                    u.master.mul_(1 - self.lr * self.weight_decay)
                else:
                    for lo, hi in u.decay:
                        u.master[lo:hi].mul_(fac)
            denom = (u.exp_avg_sq.sqrt() / math.sqrt(bc2)).add_(self.eps)
            u.master.addcdiv_(u.exp_avg, denom, value=-self.lr / bc1)
        if self.dtype == torch.float16:
            self._good_steps += 1
            if self._good_steps >= self.scale_window:
                self.scale *= 2.0
                self._good_steps = 0
        self._zero_grads()
        self._new_version()
        if self.step_prefetch:
            self._prefetch_first()
        return True

    def _prefetch_first(self) -> None:
        """Starts the gathers of the first 1 + prefetch units of the recorded
        forward order with the new parameters, as the forward's first
        pre-hook would: they cross the nodes while the host finishes the
        step and fetches the next batch, and the first unit is no longer a
        miss. A forward that comes with other parameters (a checkpoint
        load) finds them stale by their version and gathers again."""
        if not self._order_done or not self._order:
            return
        keep: List[_Unit] = []
        for idx in self._order[: 1 + self.prefetch]:
            u = self.units[idx]
            if not self._prefetch(u, False, self._can_key, keep):
                break
            keep.append(u)

    def _zero_grads(self) -> None:
        for u in self.units:
            u.gacc = None  # its memory goes back until the next backward reduces
        self._micro = 0
        self._nonfinite = 0  # (the dropped reduces' non-finite blocks go with them)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops the accumulated gradients (step() does it itself). After a
        backward that raised, also what it left half done: call it before
        the next backward (which refuses to start until then)."""
        if self._stale():
            try:
                self._abandon_backward()
            finally:
                self._zero_grads()
            return
        self._zero_grads()

    def _new_version(self) -> None:
        """The parameters changed: no slot content and no hpZ key of the old
        ones may be used again."""
        self._version += 1
        for u in self.units:
            self._complete(u)
            if u.in_use == 0:
                self._evict(u)
            u.keyed_tag = None
        if self.hpz:
            self._invalidate_all()

    def _invalidate_all(self) -> None:
        c = self.comm.clock
        if c is None:
            self.comm.invalidate_all()
        else:
            c.around("invalidate", self.comm.invalidate_all)

    # -------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str, extra: Optional[Dict[str, Any]] = None) -> None:
        """Writes rank-<r>.pt (this rank's shards and AdamW state) into the
        directory path, and manifest.json (rank 0). Collective."""
        self._refuse_if_stale()
        if self._armed or self._micro:
            raise RuntimeError("save_checkpoint between a backward and its step()")
        os.makedirs(path, exist_ok=True)
        state = {
            "format": 1,
            "rank": self.rank,
            "world_size": self.world,
            "step": self.step_count,
            "version": self._version,
            "scale": self.scale,
            "good_steps": self._good_steps,
            "skipped_steps": self.skipped_steps,
            "units": [{"name": u.name, "numel": u.numel, "master": u.master.cpu(),
                       "exp_avg": u.exp_avg.cpu(), "exp_avg_sq": u.exp_avg_sq.cpu()}
                      for u in self.units],  # fmt: skip
            "extra": extra or {},
        }
        # The copies above waited for every result this rank used; a
        # checkpoint must not keep results of calls the device never ran
        # (zpp_check: raises when the daemon's GPU failed or it is gone).
        self.comm.check()
        tmp = os.path.join(path, f".rank-{self.rank:05d}.pt.tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(path, f"rank-{self.rank:05d}.pt"))
        # The manifest goes last, once every rank's file is in place: a save
        # cut short leaves the old manifest, and load_checkpoint refuses a
        # rank file whose step is not the manifest's.
        self.comm.barrier()
        if self.rank == 0:
            manifest = {
                "format": 1,
                "world_size": self.world,
                "nodes": self.nodes,
                "dtype": str(self.dtype).replace("torch.", ""),
                "step": self.step_count,
                "collectives": {"qwz": self.qwz, "hpz": self.hpz, "qgz": self.qgz,
                                "bits_w": self.bits_w, "bits_g": self.bits_g, "block": self.block,
                                "block_w": self.block_w, "block_g": self.block_g},  # fmt: skip
                "files": [f"rank-{r:05d}.pt" for r in range(self.world)],
                "units": [{"name": u.name, "numel": u.numel, "shard": u.shard,
                           "params": [{"name": n, "shape": list(s), "offset": o}
                                      for n, _, o, _, s in u.params]}
                          for u in self.units],  # fmt: skip
            }
            with open(os.path.join(path, "manifest.json.tmp"), "w") as f:
                json.dump(manifest, f, indent=1)
            os.replace(os.path.join(path, "manifest.json.tmp"), os.path.join(path, "manifest.json"))
        self.comm.barrier()

    @torch.no_grad()
    def load_checkpoint(self, path: str) -> Dict[str, Any]:
        """Loads what save_checkpoint wrote (same world size and units);
        returns its ``extra``. Collective. Every hpZ key and gathered copy
        of the old parameters is dropped: the next step starts clean."""
        with open(os.path.join(path, "manifest.json")) as f:
            manifest = json.load(f)
        if manifest["world_size"] != self.world:
            raise ValueError(f"checkpoint of {manifest['world_size']} ranks; this job has {self.world}")
        names = [(u.name, u.numel) for u in self.units]
        if [(m["name"], m["numel"]) for m in manifest["units"]] != names:
            raise ValueError("checkpoint units differ from this model's")
        fname = f"rank-{self.rank:05d}.pt"
        state = torch.load(os.path.join(path, fname), map_location="cpu")
        if (state.get("rank"), state.get("world_size"), state.get("step")) != (self.rank, self.world, manifest["step"]):
            raise ValueError(
                f"{os.path.join(path, fname)} is rank {state.get('rank')} of {state.get('world_size')} at step "
                f"{state.get('step')}; the manifest says rank {self.rank} of {self.world} at step {manifest['step']}: "
                "a save into this directory was cut short (or files were mixed)"
            )
        for u, s in zip(self.units, state["units"]):
            u.master.copy_(s["master"])
            u.exp_avg.copy_(s["exp_avg"])
            u.exp_avg_sq.copy_(s["exp_avg_sq"])
        self.step_count = int(state["step"])
        self.scale = float(state["scale"])
        self._good_steps = int(state["good_steps"])
        self.skipped_steps = int(state["skipped_steps"])
        self._zero_grads()
        self._epoch += 1  # keys of this epoch cannot collide with any before the load
        self._version = int(state["version"])
        self._new_version()
        self._rekey_shared()
        self.comm.barrier()
        return state.get("extra", {})

    @torch.no_grad()
    def _rekey_shared(self) -> None:
        """After a load: the content key of every shared frozen unit, from
        its new master (an exact gather, as full_state_dict's); a unit whose
        bytes changed leaves the old replica and publishes again."""
        for u in self.units:
            if u.ckey is None:
                continue
            key = content_key(self._gather_master(u)[: u.numel].to("cpu", self.dtype))
            if key != u.ckey:
                if u.published:
                    self.comm.detach_shared(u.ckey)
                u.ckey, u.published = key, False

    @torch.no_grad()
    def full_state_dict(self) -> "OrderedDict[str, torch.Tensor]":
        """The full fp32 parameters by name, on every rank (CPU tensors).
        Collective: an exact fp32 all-gather of each unit's master shard."""
        out: "OrderedDict[str, torch.Tensor]" = OrderedDict()
        for u in self.units:
            full = self._gather_master(u).to("cpu", copy=True)
            for name, _, off, k, shape in u.params:
                out[name] = full[off : off + k].view(shape).clone()
        return out

    def _gather_master(self, u: _Unit) -> torch.Tensor:
        """u's whole fp32 master (padded, on the device), by an exact
        all-gather into scratch that the next call reuses. Collective."""
        if self._fp32 is None:
            ms = max(v.shard for v in self.units)
            self._fp32 = self.comm.alloc_many([(ms, torch.float32), (ms * self.world, torch.float32)])
        src, dst = self._fp32
        src[: u.shard].copy_(u.master)
        n = u.shard * self.world
        self.comm.allgather(src[: u.shard], dst[:n], n, qwz=False, bits=8, block=self.block,
                            key=None, async_op=False)  # fmt: skip
        return dst[:n]

    # ------------------------------------------------------------------ misc
    def memory_report(self) -> "OrderedDict[str, int]":
        """Bytes of every tensor this object holds right now, by what holds
        it (the attribute: ``unit.<name>`` summed over the units; comm
        pieces by their list's name), each tensor counted once by its own
        extent (numel x element size; an expanded placeholder counts its
        one element). The module's buffers are counted under
        ``module.buffers``; parameters are views of slots or of the
        placeholder. On CUDA this is what torch's allocator holds for
        ZeroPP (the daemon's memory is not in it); docs/pytorch.md has
        the figures for examples/train_gpt.py."""
        seen: set = set()
        out: "OrderedDict[str, int]" = OrderedDict()

        def size(t: torch.Tensor) -> int:
            if any(s == 0 for s in t.stride()) and t.dim():  # an expanded placeholder
                return t.element_size()
            return t.numel() * t.element_size()

        def add(kind: str, v: Any) -> None:
            if isinstance(v, torch.Tensor):
                k = (v.device, v.data_ptr(), v.dtype, v.numel())
                if k in seen:
                    return
                seen.add(k)
                out[kind] = out.get(kind, 0) + size(v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    add(kind, x)

        for name, v in vars(self).items():
            add(name, v)  # (submodules are in _modules, a dict: not walked)
        for u in self.units:
            for name, v in vars(u).items():
                if name != "params":  # views of a slot or of the placeholder
                    add("unit." + name, v)
        for b in self.module.buffers():
            add("module.buffers", b)
        return out

    def profile(self, on: bool = True) -> None:
        """Starts (on) or stops timing this rank's waits for collectives
        (WaitClock: host time blocked, and on CUDA the compute stream's
        stall, by kind: gather, hpz (+"-miss" when not prefetched),
        reduce, floats (step()'s agreement), invalidate, inflight-cap).
        Off by default: then no event is recorded and nothing is timed."""
        self.comm.clock = WaitClock(self.device) if on else None
        self._stats_mark = dict(self.stats)

    def take_profile(self) -> Optional[Dict[str, Dict[str, float]]]:
        """What profile() measured since the last take_profile() (None when
        off): WaitClock.take()'s host_ms, stream_ms and waits by kind, and
        "calls": the counters' increase (gathers, hpz_gathers, reduces,
        prefetches). On CUDA, call it once the device is synchronized."""
        c = self.comm.clock
        if c is None:
            return None
        out: Dict[str, Dict[str, float]] = c.take()
        mark = getattr(self, "_stats_mark", {})
        out["calls"] = {k: v - mark.get(k, 0) for k, v in self.stats.items()}
        self._stats_mark = dict(self.stats)
        return out

    def named_units(self) -> List[Tuple[str, int]]:
        return [(u.name, u.numel) for u in self.units]

    def close(self) -> None:
        """Removes the hooks, drops the keys and registrations; closes the
        connection if this object made it. Idempotent: a second close sends
        nothing (its invalidate-all would be a collective the other ranks
        never call, or fail on the connection closed by the first)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for h in getattr(self, "_hooks", []):
            h.remove()
        self._hooks = []
        try:
            for u in self.units:
                self._complete(u)
            if self.hpz:
                self.comm.invalidate_all()
            self.comm.close()
        finally:
            if self._own_conn is not None:
                self._own_conn.close()
                self._own_conn = None
