"""zpp.torch on the host backend: the whole sharded training loop on CPU
tensors in shared memory, 4 ranks as 2 virtual nodes x 2 (one process per
rank), a tiny transformer-like model whose layer sizes divide by nothing.

Checked: training lowers the loss; the sharded loop with plain collectives
in fp32 follows single-process AdamW on the whole batch; hpZ on and off give
the same losses bit for bit (qwZ off, and qwZ on) across evaluation under
no_grad, gradient accumulation and a checkpoint load; resuming from a
checkpoint gives the losses of the run that went on; fp16 loss scaling skips
non-finite steps; what ZeroPP holds (memory_report) is per slot, not per
unit, and the gradient accumulators live from a backward to its step; the
decay runs multiply exactly as the fp32 mask did. Skipped without torch.
"""

from __future__ import annotations

import functools
import math
import re
import os
import shutil
import tempfile

import pytest

torch = pytest.importorskip("torch")

import zpp  # noqa: E402
import zpp.torch  # noqa: E402,F401
from ranks import Job, run  # noqa: E402

VOCAB, D, T, B = 61, 37, 9, 3  # odd sizes: every unit is padded


def make_model(seed: int = 0):
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.fc1 = nn.Linear(D, 3 * D + 1)
            self.fc2 = nn.Linear(3 * D + 1, D)

        def forward(self, x):
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(VOCAB, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.ln_f = nn.LayerNorm(D)
            self.head = nn.Linear(D, VOCAB, bias=False)

        def forward(self, idx):
            x = self.emb(idx)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    torch.manual_seed(seed)
    return Tiny(), Block


def batch(rank: int, step: int, micro: int = 0):
    g = torch.Generator().manual_seed(1000 + rank * 7 + micro)  # a fixed batch per rank: memorised
    x = torch.randint(0, VOCAB, (B, T + 1), generator=g)
    return x[:, :-1], x[:, 1:]


def loss_of(logits, y):
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))


class _HostZc:
    """What CudaComm needs of zpp.cuda (submit, wait_stream, EBUSY), carried
    by the host daemon: zpp_submit / zpp_wait, with a pool of `pool` calls in
    flight like the CUDA event pool (a full pool raises ZPP_EBUSY)."""

    EBUSY = -19
    EUNSUPPORTED = -14

    def __init__(self, pool: int) -> None:
        self.pool, self.inflight, self.busy = pool, set(), 0

    def submit(self, conn, call, stream):
        import ctypes

        from zpp._lib import LIB

        assert stream is None  # torch.cuda.current_stream is patched to None
        if len(self.inflight) >= self.pool:
            self.busy += 1
            raise zpp.error_from_code(self.EBUSY, "every event of the pool is in flight")
        rid = ctypes.c_uint64()
        conn._check(LIB.zpp_submit(conn._handle(), ctypes.byref(call), ctypes.byref(rid)), "submit")
        self.inflight.add(rid.value)
        return rid.value

    def wait_stream(self, conn, rid, stream):
        import ctypes

        from zpp._lib import LIB, ResultC

        res = ResultC()
        rc = LIB.zpp_wait(conn._handle(), rid, ctypes.byref(res))
        self.inflight.discard(rid)
        conn._check(rc, f"wait {rid}")
        return zpp.Result._from_c(res)


class _ShmRegistry:
    """zpp.cuda.Registry's ref() for shared memory: the BufRef of the
    SharedBuffer a tensor lies in."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def ref(self, t):
        buf, off, _ = zpp.locate(t)
        return zpp.BufRef(self.conn.register(buf), off)

    def clear(self) -> None:
        pass


def host_cuda_comm(conn):
    """A zpp.torch.CudaComm whose calls go to the host daemon: everything
    of CudaComm but the CUDA transport (BufRef arguments at offsets inside
    registered pieces, the hand-built hpZ gather call, the request handles,
    the retry on a full event pool) runs."""
    torch.cuda.current_stream = lambda device=None: None  # this rank process only

    class HostCudaComm(zpp.torch.CudaComm):
        def __init__(self) -> None:
            zpp.torch._Comm.__init__(self, conn.world_size)
            self.zc, self.conn, self.device, self.timeout_ms = _HostZc(1), conn, torch.device("cpu"), 0
            self.reg, self._keep, self.max_inflight = _ShmRegistry(conn), [], 8
            self._host = zpp.torch.HostComm(conn)

        def alloc_many(self, plan):
            out = self._host.alloc_many(plan)
            for t in out:  # as CudaComm.alloc_many: every piece registered up front
                self._ref(t)
            return out

        def close(self) -> None:
            super().close()
            self._host.close()

    return HostCudaComm()


def wrap(rank: int, job: Job, conn, cfg: dict):
    model, Block = make_model(cfg.get("seed", 0))
    for name, p in model.named_parameters():  # e.g. a LoRA job's frozen base
        if any(name.startswith(f + ".") for f in cfg.get("freeze", ())):
            p.requires_grad_(False)
    units = (Block,) if cfg.get("block_units") else None
    if cfg.get("groups") == "far":  # a unit of two modules far apart in forward, one per block
        units = [[model.emb, model.head], [model.blocks[0]], [model.blocks[1]]]
    elif cfg.get("groups"):  # the same, and one unit of the two consecutive blocks
        units = [[model.emb, model.head], list(model.blocks)]
    return zpp.torch.ZeroPP(
        model, conn, rank=rank, world_size=job.world, nodes=job.nodes, job_id=job.job_id,
        comm=host_cuda_comm(conn) if cfg.get("cuda_calls") else None,
        qwz=cfg.get("qwz", True), hpz=cfg.get("hpz", True), qgz=cfg.get("qgz", True),
        dtype=getattr(torch, cfg.get("dtype", "bfloat16")), lr=cfg.get("lr", 3e-3),
        units=units, slots=cfg.get("slots", 3), small_slots=cfg.get("small_slots", 0),
        grad_slots=cfg.get("grad_slots", 2), prefetch=cfg.get("prefetch", 1), poison=True, init_scale=cfg.get("init_scale", 2.0**16),
        step_prefetch=cfg.get("step_prefetch", True),
        max_grad_norm=cfg.get("clip"), weight_decay=cfg.get("wd", 0.0),
        no_decay=(lambda name, p: p.dim() < 2) if cfg.get("no_decay") else None,
        block=cfg.get("block", 256), block_w=cfg.get("block_w"), block_g=cfg.get("block_g"),
        share_frozen=cfg.get("share_frozen", False),
    )  # fmt: skip


def record_blocks(zp, seen: dict) -> None:
    """Wraps zp.comm's all-gather and reduce-scatter to note the block of
    every quantized call (qwZ / qgZ) in seen."""
    ag, rs = zp.comm.allgather, zp.comm.reduce_scatter

    def allgather(*a, **kw):
        if kw.get("qwz"):
            seen.setdefault("qwz", set()).add(kw["block"])
        return ag(*a, **kw)

    def reduce_scatter(*a, **kw):
        if kw.get("qgz"):
            seen.setdefault("qgz", set()).add(kw["block"])
        return rs(*a, **kw)

    zp.comm.allgather, zp.comm.reduce_scatter = allgather, reduce_scatter


def body_train(rank: int, job: Job, cfg: dict):
    """Steps of training; optionally evaluation, accumulation, save/load.
    Returns the losses (floats, exact) and the counters."""
    torch.set_num_threads(1)
    out = {"loss": [], "eval": [], "hpz_plain": None, "mem": []}
    with job.connect(rank) as c:
        zp = wrap(rank, job, c, cfg)
        if cfg.get("record_blocks"):
            out["blocks"] = {}
            record_blocks(zp, out["blocks"])
        out["hpz_plain"] = zp.hpz_plain
        out["units"] = [u.name for u in zp.units]
        out["slot_size"] = list(zp.slot_size)
        if cfg.get("profile"):
            zp.profile(True)
        if cfg.get("mem"):
            out["mem"].append(("setup", dict(zp.memory_report())))
            out["geom"] = {"slots": len(zp.slots), "grad_slots": len(zp.gslots), "max_padded": zp.max_padded,
                           "max_shard": zp.max_shard, "shards": [u.shard for u in zp.units],
                           "trainable": [bool(u.trainable) for u in zp.units]}  # fmt: skip
        if cfg.get("load"):
            zp.load_checkpoint(cfg["load"])
        for step in range(cfg.get("steps", 6)):
            if cfg.get("skip_step") == step:
                continue
            if cfg.get("raise_step") == step:
                out["stale"] = stale_backward(zp, rank, step)
                continue
            for m in range(cfg.get("accum", 1)):
                x, y = batch(rank, step, m)
                loss = loss_of(zp(x), y)
                zp.backward(loss * float("inf") if cfg.get("poison_step") == step else loss)
                out["loss"].append(loss.item())
                if cfg.get("mem"):
                    out["mem"].append(("backward", dict(zp.memory_report())))
            if cfg.get("eval"):
                with torch.no_grad():
                    x, y = batch(rank, 99, 5)
                    out["eval"].append(loss_of(zp(x), y).item())
            zp.step()
            if cfg.get("mem"):
                out["mem"].append(("step", dict(zp.memory_report())))
            if cfg.get("save_at") == step:
                zp.save_checkpoint(cfg["ckpt"])
            if cfg.get("load_at") == step:
                zp.load_checkpoint(cfg["ckpt"])
        out["stats"] = dict(zp.stats)
        out["shared_units"] = [u.name for u in zp.units if u.ckey is not None]
        out["profile"] = zp.take_profile()
        out["ebusy"] = zp.comm.zc.busy if cfg.get("cuda_calls") else 0
        out["scale"] = zp.scale
        out["skipped"] = zp.skipped_steps
        out["final"] = {k: v.tolist() for k, v in zp.full_state_dict().items()} if cfg.get("full") else None
        zp.close()
        c.barrier()
        # after close: the job's own hpZ keys are dropped (a prefetch may
        # have stored some after the last step), the shared replicas stay
        out["store_bytes"] = int(c.status()["store_bytes"])
    return out


class _Raise(torch.autograd.Function):
    """Identity forward; its backward raises (a backward that fails half
    way, after the units behind it reduced)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("injected: the backward failed")


def stale_backward(zp, rank: int, step: int) -> dict:
    """A backward that raises between the two blocks, after head, ln_f and
    blocks.1 reduced (some reduces still in flight): step() and the next
    backward refuse until zero_grad(), which waits for and drops what it
    left. Returns what it left, as seen before zero_grad."""
    h = zp.module.blocks[0].register_forward_hook(lambda m, i, o: _Raise.apply(o))
    x, y = batch(rank, step, 0)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            zp.backward(loss_of(zp(x), y))
    finally:
        h.remove()
    seen = {"armed": zp._armed, "reduced": zp.stats["reduces"],
            "held": sum(u is not None for u in zp.gslot_unit) + len(zp._reducing)}  # fmt: skip
    with pytest.raises(RuntimeError, match="raised before its end"):
        zp.step()
    with pytest.raises(RuntimeError, match="raised before its end"):
        zp.backward(loss_of(zp(x), y))
    zp.zero_grad()
    seen["clean"] = (not zp._armed and not zp._reducing and all(u is None for u in zp.gslot_unit)
                     and not any(u.got for u in zp.units) and zp._micro == 0)  # fmt: skip
    return seen


def train(daemon, job_id: str, **cfg):
    job_id = re.sub(r"[^A-Za-z0-9._:@/+=-]", "-", job_id)
    job = Job(socket=daemon.socket, job_id=job_id, world=4, nodes=2)
    return run(functools.partial(body_train, cfg=cfg), job)


@pytest.mark.parametrize("block_units", [False, True], ids=["module-units", "block-units"])
def test_loss_decreases_with_all_three(daemon, job, block_units):
    """Units per parameter-owning module (the default), or one per Block
    with the rest in a root unit that stays gathered for the forward."""
    # 2 slots for 3 block units: the forward evicts, so backward needs hpZ
    res = train(daemon, job, steps=8, block_units=block_units, slots=2 if block_units else 3)
    for r in res:
        assert all(math.isfinite(v) for v in r["loss"])
        assert r["loss"][-1] < r["loss"][0] - 0.3, r["loss"]
        assert r["stats"]["hpz_gathers"] > 0 and r["stats"]["reduces"] > 0
    assert res[0]["stats"] == res[3]["stats"]


@pytest.mark.parametrize("groups", [False, True], ids=["module-units", "grouped-units"])
def test_plain_fp32_matches_single_process_adamw(daemon, job, groups):
    """Plain collectives, fp32: the sharded loop is AdamW on the mean loss
    of the 4 ranks' batches (reduce MEAN), within float rounding; also with
    units of several modules (embedding + head, the two blocks) and a small
    slot for the root and the embedding/head unit."""
    kw = dict(groups=True, slots=2, small_slots=1, grad_slots=1) if groups else {}
    res = train(daemon, job, steps=4, qwz=False, hpz=False, qgz=False, dtype="float32",
                clip=1.0, wd=0.01, full=True, **kw)  # fmt: skip
    if groups:
        assert res[0]["units"] == ["emb+head", "blocks.0+blocks.1", "<root>"], res[0]["units"]
        assert res[0]["slot_size"][-1] < res[0]["slot_size"][0], res[0]["slot_size"]
    torch.manual_seed(0)
    model, _ = make_model(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    for step in range(4):
        opt.zero_grad()
        losses = []
        for r in range(4):
            x, y = batch(r, step)
            li = loss_of(model(x), y)
            (li / 4).backward()
            losses.append(li.item())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        for r in range(4):
            assert abs(res[r]["loss"][step] - losses[r]) < 1e-4, (step, r)
    ref = dict(model.named_parameters())
    for name, t in res[0]["final"].items():
        assert torch.allclose(torch.tensor(t), ref[name].detach(), atol=1e-5), name


def test_plain_fp32_no_decay_matches_adamw_groups(daemon, job):
    """Weight decay only where no_decay says no (the 1-D parameters), as
    torch.optim.AdamW with two parameter groups."""
    res = train(daemon, job, steps=4, qwz=False, hpz=False, qgz=False, dtype="float32",
                wd=0.3, no_decay=True, full=True)  # fmt: skip
    torch.manual_seed(0)
    model, _ = make_model(0)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.3}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-3)  # fmt: skip
    for step in range(4):
        opt.zero_grad()
        for r in range(4):
            x, y = batch(r, step)
            (loss_of(model(x), y) / 4).backward()
        opt.step()
    ref = dict(model.named_parameters())
    for name, t in res[0]["final"].items():
        assert torch.allclose(torch.tensor(t), ref[name].detach(), atol=1e-5), name


def test_decay_runs_are_the_mask_bit_for_bit():
    """step() multiplies the runs where the decay mask is 1 by
    _decay_factor and leaves the rest: the bits of master * (1 - lr*wd*mask)."""
    g = torch.Generator().manual_seed(3)
    mask = (torch.rand(5000, generator=g) > 0.3).float()
    mask[:7], mask[-5:] = 1, 0
    x = torch.randn(5000, generator=g) * torch.logspace(-30, 30, 5000)
    x[10], x[11] = 0.0, -0.0
    for lr, wd in [(6e-4, 0.1), (3e-3, 0.01), (1e-2, 0.3), (0.7, 1.1)]:
        ref = x * (1 - lr * wd * mask)
        got = x.clone()
        runs = zpp.torch._runs(mask)
        assert sum(hi - lo for lo, hi in runs) == int(mask.sum())
        for lo, hi in runs:
            got[lo:hi].mul_(zpp.torch._decay_factor(lr, wd))
        assert torch.equal(got.view(torch.int32), ref.view(torch.int32)), (lr, wd)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_memory_report(daemon, job, dtype):
    """What ZeroPP holds: per unit only the fp32 master shard and AdamW's
    moments; comm memory per slot (gather slots with their all-gather
    staging, gradient slots with their reduce-scatter output), not per unit;
    the fp32 gradient accumulators from a backward to its step only (2
    backwards per step: they accumulate in the same buffers)."""
    res = train(daemon, job, steps=2, accum=2, mem=True, block_units=True, slots=2, wd=0.1, no_decay=True,
                dtype=dtype)  # fmt: skip
    esz = 2 if dtype == "bfloat16" else 4
    for r in res:
        geo = r["geom"]
        shard_bytes = 4 * sum(geo["shards"])
        gacc_bytes = 4 * sum(s for s, t in zip(geo["shards"], geo["trainable"]) if t)
        kinds = [k for k, _ in r["mem"]]
        assert kinds == ["setup", "backward", "backward", "step", "backward", "backward", "step"]
        for when, rep in r["mem"]:
            assert rep["slots"] == geo["slots"] * geo["max_padded"] * esz
            assert rep["gstage"] == geo["slots"] * geo["max_shard"] * esz
            assert rep["gslots"] == geo["grad_slots"] * geo["max_padded"] * esz
            assert rep["rstage"] == geo["grad_slots"] * geo["max_shard"] * 4
            for k in ("unit.master", "unit.exp_avg", "unit.exp_avg_sq"):
                assert rep[k] == shard_bytes, (when, k)
            assert rep.get("unit.gacc", 0) == (gacc_bytes if when == "backward" else 0), when
            per_unit = {k for k in rep if k.startswith("unit.")}
            assert per_unit <= {"unit.master", "unit.exp_avg", "unit.exp_avg_sq", "unit.gacc"}, per_unit
            other = {k: v for k, v in rep.items()
                     if not k.startswith("unit.") and k not in ("slots", "gstage", "gslots", "rstage")}
            assert sum(other.values()) < 1024, other  # gather_floats' buffers, the placeholder
    assert res[0]["loss"] != res[1]["loss"] and all(math.isfinite(v) for r in res for v in r["loss"])


@pytest.mark.parametrize("qwz", [False, True], ids=["qwz-off", "qwz-on"])
def test_hpz_is_exact(daemon, job, qwz):
    """hpZ on vs off: the same losses bit for bit, with evaluation under
    no_grad between steps, 2 backwards per step and a checkpoint reload."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        kw = dict(steps=5, qwz=qwz, qgz=False, eval=True, accum=2, ckpt=d, save_at=1, load_at=2)
        on = train(daemon, job + "-on", hpz=True, **kw)
        off = train(daemon, job + "-off", hpz=False, **kw)
    for a, b in zip(on, off):
        assert a["loss"] == b["loss"]
        assert a["eval"] == b["eval"]
        assert b["stats"]["hpz_gathers"] == 0
    # with qwZ off, hpZ keeps the slices of the plain all-gather (coll.c)
    assert qwz or on[0]["hpz_plain"] is True
    assert on[0]["stats"]["hpz_gathers"] > 0


def test_step_prefetch_changes_no_bit(daemon, job):
    """step() starting the next forward's first gathers: the same losses
    and evaluations bit for bit as without, also when a checkpoint load
    right after a step makes the prefetched gathers stale; and step() did
    start gathers (more prefetches than without)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        kw = dict(steps=5, eval=True, accum=2, ckpt=d, save_at=1, load_at=2, block_units=True)
        on = train(daemon, job + "-on", step_prefetch=True, **kw)
        off = train(daemon, job + "-off", step_prefetch=False, **kw)
    for a, b in zip(on, off):
        assert a["loss"] == b["loss"]
        assert a["eval"] == b["eval"]
        assert a["stats"]["prefetches"] > b["stats"]["prefetches"], (a["stats"], b["stats"])


@pytest.mark.parametrize("flags", [(True, True, True), (False, True, False)], ids=["zeropp", "hpz-plain"])
def test_cuda_comm_calls_match_host(daemon, job, flags):
    """zpp.torch.CudaComm's calls, carried by the host daemon instead of
    CUDA (host_cuda_comm), give the losses, evaluations and counters of
    HostComm bit for bit, with a 1-call pool that fills (ZPP_EBUSY retried),
    evaluation, 2 backwards per step and backward re-gathers by hpZ."""
    qwz, hpz, qgz = flags
    kw = dict(steps=3, qwz=qwz, hpz=hpz, qgz=qgz, eval=True, accum=2, block_units=True, slots=2)
    ref = train(daemon, job + "-host", **kw)
    got = train(daemon, job + "-cuda", cuda_calls=True, **kw)
    for a, b in zip(ref, got):
        assert a["loss"] == b["loss"]
        assert a["eval"] == b["eval"]
        assert a["stats"] == b["stats"]
    assert got[0]["stats"]["hpz_gathers"] > 0
    assert sum(r["ebusy"] for r in got) > 0


@pytest.mark.parametrize("qwz", [False, True], ids=["qwz-off", "qwz-on"])
def test_grouped_units_hpz_exact_and_profiled(daemon, job, qwz):
    """A unit of two modules far apart in forward (emb + head: evicted
    between them, in use for the whole backward), a small slot, prefetch
    2: hpZ on vs off the same bits (evaluation, 2 backwards per step,
    checkpoint reload), backward re-gathers by hpZ, and the profile counts
    what was waited for."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        kw = dict(steps=4, qwz=qwz, qgz=qwz, eval=True, accum=2, ckpt=d, save_at=1, load_at=2, groups="far",
                  slots=2, small_slots=1, grad_slots=2, prefetch=2, profile=True)  # fmt: skip
        on = train(daemon, job + "-on", hpz=True, **kw)
        off = train(daemon, job + "-off", hpz=False, **kw)
    for a, b in zip(on, off):
        assert a["loss"] == b["loss"]
        assert a["eval"] == b["eval"]
    assert on[0]["stats"]["hpz_gathers"] > 0 and off[0]["stats"]["hpz_gathers"] == 0
    p = on[0]["profile"]
    assert p["stream_ms"] == {}  # CPU: no stream
    # every backward ends by draining the reduces still in flight
    assert p["waits"].get("reduce-tail", 0) > 0 and p["calls"]["reduces"] > 0
    assert set(p["host_ms"]) <= {"gather", "gather-miss", "hpz", "hpz-miss", "reduce", "reduce-tail", "floats",
                                 "invalidate", "inflight-cap"}, p["host_ms"]  # fmt: skip


def test_block_w_and_block_g_reach_their_calls(daemon, job):
    """block_w is qwZ's block (weights), block_g qgZ's (gradients), each
    block unless given; training with a coarser weight block still learns."""
    res = train(daemon, job, steps=6, block=96, block_w=2048, record_blocks=True)
    for r in res:
        assert r["blocks"] == {"qwz": {2048}, "qgz": {96}}, r["blocks"]
        assert r["loss"][-1] < r["loss"][0] - 0.2, r["loss"]
    res = train(daemon, job + "-g", steps=1, block=128, block_g=64, record_blocks=True)
    assert all(r["blocks"] == {"qwz": {128}, "qgz": {64}} for r in res)


def test_share_frozen_units_read_the_node_replica(daemon, job):
    """share_frozen: the frozen units (blocks.0) are published once and
    read from the node's replica after, forward and backward: the same
    bits as gathering them (qwZ off: both exact), one copy per node that a
    second job with the same weights attaches to instead of storing its own."""
    cfg = dict(steps=4, qwz=False, freeze=("blocks.0",))
    plain = train(daemon, job + "-plain", **cfg)
    shared = train(daemon, job + "-a", share_frozen=True, **cfg)
    for p, s in zip(plain, shared):
        assert s["loss"] == p["loss"], (s["loss"], p["loss"])  # bit for bit
        assert s["shared_units"] == ["blocks.0.ln", "blocks.0.fc1", "blocks.0.fc2"], s["shared_units"]
        assert s["stats"]["publishes"] == 3, s["stats"]
        # forward and backward of 4 steps, less what stayed in a slot
        assert s["stats"]["shared_gathers"] >= 3 * 4, s["stats"]
        assert p["stats"]["publishes"] == p["stats"]["shared_gathers"] == 0
    kept = shared[0]["store_bytes"]
    assert kept > 0
    again = train(daemon, job + "-b", share_frozen=True, **cfg)  # the same frozen bytes
    assert [r["loss"] for r in again] == [r["loss"] for r in shared]
    assert again[0]["store_bytes"] == kept, (again[0]["store_bytes"], kept)  # no second copy
    # CudaComm's calls (its publish and its hpZ gather by key), carried by the host daemon
    cuda = train(daemon, job + "-c", share_frozen=True, cuda_calls=True, **cfg)
    for c, s in zip(cuda, shared):
        assert c["loss"] == s["loss"] and c["stats"] == s["stats"], (c["stats"], s["stats"])
    # a checkpoint reload hashes the frozen units again: the same bytes keep
    # their key (no second publish), and the losses stay those of gathering
    tmp = tempfile.mkdtemp()
    try:
        for name, share in (("-lp", False), ("-ls", True)):
            kw = dict(cfg, save_at=1, load_at=2, ckpt=os.path.join(tmp, name))
            res = train(daemon, job + name, share_frozen=share, **kw)
            if share:
                for r, p in zip(res, loaded):
                    assert r["loss"] == p["loss"] and r["stats"]["publishes"] == 3, r["stats"]
            loaded = res
    finally:
        shutil.rmtree(tmp)
    # with qwZ on for the trained units, it still learns
    res = train(daemon, job + "-q", share_frozen=True, steps=6, freeze=("blocks.0",))
    for r in res:
        assert r["loss"][-1] < r["loss"][0] - 0.2, r["loss"]


def test_share_frozen_needs_zppd():
    model, _ = make_model(0)
    with pytest.raises(ValueError, match="share_frozen needs zppd"):
        zpp.torch.ZeroPP(model, rank=0, world_size=1, comm=_NoComm(), device="cpu", share_frozen=True)


def test_bad_block_refused():
    """A block that is not a multiple of 32 (or under 32) is refused
    before anything connects, naming the argument."""
    model, _ = make_model(0)
    for name, b in (("block", 100), ("block_w", 16), ("block_g", 48)):
        with pytest.raises(ValueError, match=f"^{name} must"):
            zpp.torch.ZeroPP(model, rank=0, world_size=1, comm=_NoComm(), device="cpu", **{name: b})


def test_units_spec_errors():
    """units=: a module named twice, or the model itself in a group, is
    refused before anything connects."""
    model, _ = make_model(0)
    for spec in ([[model.blocks[0]], [model.blocks[0]]], [[model]], [[]], ["blocks"]):
        with pytest.raises(ValueError):
            zpp.torch.ZeroPP(model, rank=0, world_size=1, comm=_NoComm(), device="cpu", units=spec)


class _NoComm(zpp.torch._Comm):
    """A comm that only allocates (no daemon)."""

    name, supports_zeropp = "none", False

    def __init__(self) -> None:
        super().__init__(1)

    def alloc_many(self, plan):
        return [torch.zeros(max(n, 1), dtype=dt)[:n] for n, dt in plan]


def test_zero_grad_drops_the_nonfinite_count():
    """zero_grad() drops the accumulated gradients and with them the
    non-finite blocks their reduces reported: the next step is not skipped
    for gradients it never sees."""
    model, _ = make_model(0)
    zp = zpp.torch.ZeroPP(model, rank=0, world_size=1, comm=_NoComm(), device="cpu", qwz=False, hpz=False,
                          qgz=False)  # fmt: skip
    zp._nonfinite = 3  # as _finish_reduce counts a qgZ reply's nonfinite_blocks
    zp.zero_grad()
    assert zp._nonfinite == 0 and zp._micro == 0


def test_cuda_request_failure_raises_on_every_wait(monkeypatch):
    """A CudaComm call whose wait failed (e.g. first waited by the in-flight
    cap or a drain) raises again when its gather or reduce waits for it,
    as zpp.Request does; it never returns as if completed."""
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    calls = []

    class Zc:
        def wait_stream(self, conn, rid, stream):
            calls.append(rid)
            raise RuntimeError("injected: the call failed")

    class Comm:
        zc, conn, device = Zc(), None, torch.device("cpu")

    req = zpp.torch._CudaReq(Comm(), 7)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="injected"):
            req.wait()
    assert calls == [7]


def test_resume_equals_continuing(daemon, job):
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        full = train(daemon, job + "-a", steps=5, ckpt=d, save_at=2)
        assert sorted(os.listdir(d)) == ["manifest.json"] + [f"rank-{r:05d}.pt" for r in range(4)]
        resumed = train(daemon, job + "-b", steps=2, load=d)
    for a, b in zip(full, resumed):
        assert a["loss"][3:] == b["loss"], (a["loss"], b["loss"])


def test_load_refuses_a_checkpoint_of_mixed_steps(daemon, job):
    """A save cut short leaves rank files of one step beside a manifest of
    another: the load refuses them, naming the file, rather than resume a
    model no rank ever had. (Every rank's file is off here, so that every
    rank refuses before any collective.)"""
    with tempfile.TemporaryDirectory(dir="/tmp") as d, tempfile.TemporaryDirectory(dir="/tmp") as e:
        train(daemon, job + "-a", steps=1, ckpt=d, save_at=0)
        train(daemon, job + "-b", steps=3, ckpt=e, save_at=2)
        shutil.copy(os.path.join(e, "manifest.json"), os.path.join(d, "manifest.json"))
        job_id = re.sub(r"[^A-Za-z0-9._:@/+=-]", "-", job + "-c")
        res = run(functools.partial(body_train, cfg={"steps": 1, "load": d}),
                  Job(socket=daemon.socket, job_id=job_id, world=4, nodes=2), raise_errors=False)  # fmt: skip
    for r in range(4):
        assert isinstance(res[r], ValueError), res[r]
        assert f"rank-{r:05d}.pt is rank {r} of 4 at step 1; the manifest says rank {r} of 4 at step 3" in str(res[r])


def body_wait_fails(rank: int, job: Job):
    """Every rank is told its first gather failed (the call itself ran):
    the unit it was for must not look gathered afterwards."""
    torch.set_num_threads(1)
    with job.connect(rank) as c:
        zp = wrap(rank, job, c, {})
        real, told = zp.comm.wait, []

        def flaky(h, kind):
            r = real(h, kind)
            if not told and kind.startswith("gather"):
                told.append(kind)
                raise RuntimeError("injected: the gather failed")
            return r

        zp.comm.wait = flaky
        x, _ = batch(rank, 0, 0)
        with pytest.raises(RuntimeError, match="injected"):
            zp(x)
        tag = zp._tag()
        looks_gathered = [u.name for u in zp.units if u.slot is not None and u.pending is None and u.tag == tag]
        forgotten = [u.name for u in zp.units if u.slot is not None and u.pending is None and u.tag is None]
        zp.comm.wait = real
        c.barrier()
    return {"told": told, "gathered": looks_gathered, "forgotten": forgotten}


def test_failed_gather_wait_leaves_no_valid_slot(daemon, job):
    job_id = re.sub(r"[^A-Za-z0-9._:@/+=-]", "-", job)
    res = run(body_wait_fails, Job(socket=daemon.socket, job_id=job_id, world=4, nodes=2))
    for r in res:
        assert r["told"], r
        assert len(r["forgotten"]) == 1, r


@pytest.mark.parametrize("hpz", [True, False], ids=["hpz", "no-hpz"])
def test_backward_that_raised_is_dropped_by_zero_grad(daemon, job, hpz):
    """A backward that raises half way (every rank, after some units
    reduced) leaves zpp.torch armed: step() and the next backward refuse,
    naming zero_grad(); zero_grad() waits for and drops everything it left,
    and training goes on exactly as a run that never saw that batch."""
    if not hasattr(torch._C, "_current_graph_task_id"):
        pytest.skip("this PyTorch cannot tell a running backward from one that raised")
    failed = train(daemon, job + "-a", steps=4, raise_step=1, hpz=hpz)
    skipped = train(daemon, job + "-b", steps=4, skip_step=1, hpz=hpz)
    for a, b in zip(failed, skipped):
        s = a["stale"]
        assert s["armed"] and s["reduced"] > 0 and s["held"] > 0 and s["clean"], s
        assert a["loss"] == b["loss"], (a["loss"], b["loss"])


def test_bf16_step_with_nonfinite_gradients_is_skipped(daemon, job):
    """bf16, plain reduce-scatter, no clipping: a backward whose gradients
    are Inf/NaN (the loss times Inf at step 1) is skipped on every rank, and
    training goes on with finite losses instead of NaN weights."""
    res = train(daemon, job, steps=4, qgz=False, poison_step=1)
    for r in res:
        assert r["skipped"] == 1, (r["skipped"], r["loss"])
        assert all(math.isfinite(v) for v in r["loss"]), r["loss"]


def test_fp16_loss_scale_skips_nonfinite(daemon, job):
    res = train(daemon, job, steps=8, dtype="float16", qgz=False, init_scale=2.0**20)
    for r in res:
        assert r["skipped"] >= 1 and r["scale"] < 2.0**20, (r["skipped"], r["scale"], r["loss"])
        assert all(math.isfinite(v) for v in r["loss"])
        assert r["loss"][-1] < r["loss"][0]
