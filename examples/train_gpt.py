#!/usr/bin/env python3
"""train_gpt.py — a small GPT trained ZeRO-3-style through zppd (zpp.torch),
or with the baselines a PyTorch user would pick, for issue 12's proof.

Launched by torchrun, one process per rank (RANK, WORLD_SIZE, LOCAL_RANK):

  torchrun --nproc-per-node 4 examples/train_gpt.py --nodes 2 \
      --socket /tmp/zppd-{node}.sock --leader 127.0.0.1:7399 \
      --mode zppd-zeropp --tokens-per-rank 1024 --steps 300 --out runs/b-1k

Ranks: node = rank // G, local = rank % G (G = WORLD_SIZE / nodes); the GPU
is local % (visible GPUs), so the 2 x 2-on-2-GPUs layout puts one rank of
each node on each GPU; with --gpu-map rank it is rank % (visible GPUs): on
four GPUs every rank has its own, node 0 on GPUs 0-1 and node 1 on 2-3.
With --nodes > 1, NCCL_HOSTID is set to
"zpp-node<node>" (--nccl-hostid) before torch.distributed starts, so that
NCCL (torch-sharded, fsdp2, hsdp) sees the simulated nodes as hosts.

Modes:
  zppd-plain    zpp.torch, plain all-gather / reduce-scatter through zppd
  zppd-zeropp   qwZ + hpZ + qgZ
  zppd-qwz | zppd-hpz | zppd-qgz   one of the three alone
  torch-sharded the same zpp.torch loop on torch.distributed (NCCL)
  fsdp2         fully_shard per block and root, bf16 params and reduction
  hsdp          FSDP2 on a 2-D mesh (replicate across nodes, shard inside)

Data: byte-level tokens (vocab 256) of the Python standard library's own
*.py files (sysconfig.get_paths()['stdlib'], sorted, concatenated): offline
everywhere, identical on every machine with the same Python. The last 2%
is held out for the evaluation loss. Batches are a deterministic function
of (seed, step, rank), so every mode sees the same tokens.

--grad-accum N: N micro-batches (backwards) of --tokens-per-rank each per
optimizer step.

Output under --out: rank<r>.csv (a "#" line naming the device, then step,
loss, lr, step_ms, eval_loss; the losses exactly, for bit-for-bit
comparisons) and rank<r>.json (config,
median step time after --warmup steps, peak GPU memory allocated/reserved,
final losses, whether a time limit cut the run, the command and the date).
Also in rank<r>.json for zpp.torch modes: zpp_memory_mib, what ZeroPP holds
after setup by kind (ZeroPP.memory_report()).

--account [--world W] prints, without daemon or GPU, the per-rank memory
accounting of ZeroPP for this model (what it holds between steps, and
with every unit's fp32 gradient accumulator, as at the end of a backward)
next to what FSDP2 and HSDP must hold (fp32 parameter shard, fp32
gradient shard, AdamW's two moments), for docs/pytorch.md.

--ckpt-dir/--ckpt-every save checkpoints; --resume continues from the
latest one there (same mode and world size). --max-seconds, --deadline
and --stop-after stop every rank at the same step (a checkpoint first
when --ckpt-dir is given). scripts/plot_train.py tabulates and plots runs.
"""

from __future__ import annotations

import time

T_PROCESS = time.time()  # before torch's import: setup_s counts it

import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys
import sysconfig
from pathlib import Path
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

MODES = ["zppd-plain", "zppd-zeropp", "zppd-qwz", "zppd-hpz", "zppd-qgz", "torch-sharded", "fsdp2", "hsdp"]
ZPP_FLAGS = {  # mode -> (qwz, hpz, qgz)
    "zppd-plain": (False, False, False),
    "zppd-zeropp": (True, True, True),
    "zppd-qwz": (True, False, False),
    "zppd-hpz": (False, True, False),
    "zppd-qgz": (False, False, True),
}


# ---- model ------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, d: int, layers: int, heads: int, seq: int, vocab: int = 256) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)  # untied: zpp.torch units may not share
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def no_decay(name: str, p: torch.Tensor) -> bool:
    return p.dim() < 2


# ---- data ---------------------------------------------------------------------------


def corpus() -> torch.Tensor:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    data = b"".join(p.read_bytes() for p in files)
    if len(data) < 1 << 20:
        raise SystemExit(f"the corpus ({root}, {len(files)} *.py files) holds only {len(data)} bytes: "
                         "this Python's standard library is installed without its sources")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


class Batches:
    def __init__(self, data: torch.Tensor, seq: int, batch: int, seed: int) -> None:
        n = len(data)
        self.train, self.held = data[: int(n * 0.98)], data[int(n * 0.98) :]
        self.seq, self.batch, self.seed = seq, batch, seed

    def _take(self, src: torch.Tensor, g: torch.Generator, b: int):
        starts = torch.randint(0, len(src) - self.seq - 1, (b,), generator=g)
        x = torch.stack([src[s : s + self.seq + 1].long() for s in starts.tolist()])
        return x[:, :-1], x[:, 1:]

    def get(self, step: int, rank: int, micro: int = 0):
        """Micro-batch `micro` of `step` on `rank` (micro 0: the batch of a
        run without gradient accumulation)."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step * 4099 + rank + micro * 7_919_009)
        return self._take(self.train, g, self.batch)

    def held_out(self, i: int):
        g = torch.Generator().manual_seed(self.seed + 7 + i)
        return self._take(self.held, g, self.batch)


def lr_at(step: int, args: argparse.Namespace) -> float:
    if step < args.lr_warmup:
        return args.lr * (step + 1) / args.lr_warmup
    t = (step - args.lr_warmup) / max(1, args.steps - args.lr_warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


# ---- modes --------------------------------------------------------------------------


class Runner:
    """forward/backward/step/save/load for one mode."""

    def __init__(self, args: argparse.Namespace, model: GPT, rank: int, world: int, node: int,
                 local: int, device: torch.device) -> None:  # fmt: skip
        self.args, self.rank, self.world, self.device = args, rank, world, device
        self.mode = args.mode
        self.zp = None
        if self.mode.startswith("zppd-") or self.mode == "torch-sharded":
            import zpp.torch

            sock = None
            if self.mode != "torch-sharded":
                if not args.socket:
                    raise SystemExit("--socket (or $ZPP_SOCKET) is needed")
                sock = args.socket.format(node=node)
            self.zp = zpp.torch.ZeroPP(
                model, sock, rank=rank, world_size=world, local_rank=local, nodes=args.nodes,
                job_id=args.job_id or f"gpt-{self.mode}", leader_addr=args.leader, device=device,
                comm="torch" if self.mode == "torch-sharded" else None, **zpp_kwargs(args, self.mode, model),
            )  # fmt: skip
            if args.profile:
                self.zp.profile(True)
            self.model = self.zp
        else:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

            model.to(device)
            G = world // args.nodes
            if self.mode == "hsdp":
                mesh = init_device_mesh(device.type, (args.nodes, G), mesh_dim_names=("replicate", "shard"))
            else:
                mesh = init_device_mesh(device.type, (world,))
            dt = DTYPES[args.dtype]
            mp = MixedPrecisionPolicy(param_dtype=dt, reduce_dtype=dt)
            for b in model.blocks:
                fully_shard(b, mesh=mesh, mp_policy=mp)
            fully_shard(model, mesh=mesh, mp_policy=mp)
            decay = [p for n, p in model.named_parameters() if not no_decay(n, p)]
            rest = [p for n, p in model.named_parameters() if no_decay(n, p)]
            self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                                          {"params": rest, "weight_decay": 0.0}],
                                         lr=args.lr, betas=(0.9, 0.95))  # fmt: skip
            self.model = model

    def train_step(self, micro: list, lr: float, ph: "Optional[Phases]" = None,
                   mem: Optional[dict] = None) -> float:  # fmt: skip
        """One optimizer step over the micro-batches [(x, y), ...]; returns
        their mean loss (one device sync). ph: marks the end of each
        forward, backward and the optimizer step (Phases, --profile);
        mem: filled with memory figures along the step (first step only)."""
        k = len(micro)
        tot = None
        for x, y in micro:
            loss = F.cross_entropy(self.model(x).float().view(-1, 256), y.reshape(-1))
            if ph is not None:
                ph.mark("fwd")
            if mem is not None and "after_forward_mib" not in mem and self.device.type == "cuda":
                mem["after_forward_mib"] = torch.cuda.memory_allocated(self.device) / 2**20
            if self.zp is not None:
                self.zp.backward(loss)  # step() divides by the number of backwards
            else:
                (loss / k if k > 1 else loss).backward()
            if ph is not None:
                ph.mark("bwd")
            if mem is not None and "zpp_after_backward_mib" not in mem and self.zp is not None:
                mem["zpp_after_backward_mib"] = {n: v / 2**20 for n, v in self.zp.memory_report().items()}
            tot = loss.detach() if tot is None else tot + loss.detach()
        if self.zp is not None:
            self.zp.step(lr=lr)
        else:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
            for g in self.opt.param_groups:
                g["lr"] = lr
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        if ph is not None:
            ph.mark("opt")
        return float(tot / k if k > 1 else tot)

    @torch.no_grad()
    def eval_loss(self, batches: Batches, n: int) -> float:
        tot = 0.0
        for i in range(n):
            x, y = (t.to(self.device) for t in batches.held_out(i))
            tot += float(F.cross_entropy(self.model(x).float().view(-1, 256), y.reshape(-1)))
        return tot / n

    def save(self, d: str, step: int) -> None:
        if self.zp is not None:
            self.zp.save_checkpoint(d, extra={"step": step})
            return
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.model, self.opt)
        dcp.save({"model": msd, "optim": osd, "step": torch.tensor(step)}, checkpoint_id=d)

    def load(self, d: str) -> int:
        if self.zp is not None:
            return int(self.zp.load_checkpoint(d)["step"])
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        msd, osd = get_state_dict(self.model, self.opt)
        st = {"model": msd, "optim": osd, "step": torch.tensor(0)}
        dcp.load(st, checkpoint_id=d)
        set_state_dict(self.model, self.opt, model_state_dict=st["model"], optim_state_dict=st["optim"])
        return int(st["step"])


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Phases:
    """--profile: where a step's time goes, per step. mark(phase) ends the
    interval since the previous mark (or begin()) and books it to phase;
    on CUDA the marks are events on the current stream (no sync: read by
    take() after the loop has synchronized), on CPU perf_counter."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def _now(self):  # type: ignore[no-untyped-def]
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def begin(self) -> None:
        self.marks = [("", self._now())]

    def mark(self, phase: str) -> None:
        self.marks.append((phase, self._now()))

    def take(self) -> dict:
        """{phase: ms} summed over the step's intervals."""
        out: dict = {}
        for (_, a), (ph, b) in zip(self.marks, self.marks[1:]):
            ms = a.elapsed_time(b) if self.cuda else (b - a) * 1e3
            out[ph] = out.get(ph, 0.0) + ms
        self.marks = []
        return out


def unit_groups(model: GPT, k: int) -> list:
    """ZeroPP's units=: the blocks in ceil(layers / k) groups of
    consecutive ones, as equal as can be (14 blocks, k 4: 4, 4, 3, 3: the
    slots are sized by the largest group, so no group is much smaller);
    embeddings, final norm and head form the root unit."""
    b = list(model.blocks)
    n = -(-len(b) // max(1, k))
    sizes = [len(b) // n + (1 if i < len(b) % n else 0) for i in range(n)]
    out, i = [], 0
    for sz in sizes:
        out.append(b[i : i + sz])
        i += sz
    return out


def zpp_kwargs(args: argparse.Namespace, mode: str, model: GPT) -> dict:
    """ZeroPP's keyword arguments for a mode (but the connection's)."""
    qwz, hpz, qgz = ZPP_FLAGS.get(mode, (False, False, False))
    return dict(qwz=qwz, hpz=hpz, qgz=qgz, bits_w=args.bits_w, bits_g=args.bits_g,
                block_w=args.block_w, block_g=args.block_g,
                dtype=DTYPES[args.dtype], units=unit_groups(model, args.blocks_per_unit), slots=args.slots,
                small_slots=args.small_slots, grad_slots=args.grad_slots, prefetch=args.prefetch,
                step_prefetch=not args.no_step_prefetch, lr=args.lr, betas=(0.9, 0.95), weight_decay=args.wd, no_decay=no_decay,
                max_grad_norm=args.clip,
                share_frozen=args.share_frozen and mode != "torch-sharded")  # fmt: skip


def account(args: argparse.Namespace) -> int:
    """Per-rank memory accounting (MiB) of ZeroPP for this model on world
    --world / --nodes, against FSDP2's and HSDP's sharded training state.
    No daemon, no collective: ZeroPP on CPU with a comm that only
    allocates (one tensor per piece, as on CUDA)."""
    import zpp.torch

    class AllocOnly(zpp.torch._Comm):
        name, supports_zeropp = "alloc-only", True

        def __init__(self, world: int) -> None:
            super().__init__(world)
            self.device = torch.device("cpu")

        def alloc_many(self, plan):  # type: ignore[no-untyped-def]
            return [torch.zeros(max(n, 1), dtype=dt)[:n] for n, dt in plan]

        def invalidate_all(self) -> None:
            pass

        def close(self) -> None:
            pass

    W, N = args.world, args.nodes
    if W % N:
        raise SystemExit(f"--world {W} is not a multiple of --nodes {N}")
    MiB = 2**20
    model = GPT(args.d_model, args.layers, args.heads, args.seq)
    shapes = [tuple(p.shape) for p in model.parameters()]

    def fsdp_shard_bytes(S: int) -> int:  # fully_shard: dim 0 padded to a multiple of S, fp32
        return sum(math.ceil(s[0] / S) * math.prod(s[1:]) * 4 for s in shapes)

    kw = zpp_kwargs(args, "zppd-zeropp" if args.mode.startswith("zppd-") else "zppd-plain", model)
    zp = zpp.torch.ZeroPP(model, rank=0, world_size=W, nodes=N, comm=AllocOnly(W), device="cpu", **kw)
    rep = zp.memory_report()
    gacc = sum(u.shard * 4 for u in zp.units if u.trainable)
    held = sum(rep.values())
    print(f"GPT d{args.d_model} x{args.layers}, {sum(math.prod(s) for s in shapes):,} parameters, "
          f"{args.dtype}; world {W} on {N} nodes; per rank, MiB")  # fmt: skip
    print(f"ZeroPP ({len(zp.units)} units, largest {max(u.numel for u in zp.units):,} elements; "
          f"--blocks-per-unit {args.blocks_per_unit} --slots {args.slots} --small-slots {args.small_slots} "
          f"--grad-slots {args.grad_slots}):")  # fmt: skip
    for k, v in rep.items():
        if v >= 0.005 * MiB:
            print(f"  {k:24s} {v / MiB:9.2f}")
    print(f"  {'(other, < 0.01 each)':24s} {sum(v for v in rep.values() if v < 0.005 * MiB) / MiB:9.2f}")
    print(f"  {'held between steps':24s} {held / MiB:9.2f}")
    print(f"  {'+ unit.gacc, all units':24s} {gacc / MiB:9.2f}  (allocated by each unit's first reduce, "
          "dropped by step())")  # fmt: skip
    print(f"  {'= at a backward end':24s} {(held + gacc) / MiB:9.2f}")
    for name, S in (("FSDP2", W), ("HSDP", W // N)):
        sh = fsdp_shard_bytes(S)
        print(f"{name} (shard over {S}): fp32 params {sh / MiB:.2f}, AdamW moments {2 * sh / MiB:.2f} "
              f"(between steps {3 * sh / MiB:.2f}); fp32 grads {sh / MiB:.2f} "
              f"(at a backward end {4 * sh / MiB:.2f})")  # fmt: skip
    zp.close()
    # The same for other --blocks-per-unit (these slot settings): what grows
    # with K is the comm memory (gather and gradient slots, their staging).
    comm_kinds = ("slots", "gstage", "gslots", "rstage")
    print(f"by --blocks-per-unit K (--slots {args.slots} --small-slots {args.small_slots} "
          f"--grad-slots {args.grad_slots}), MiB: K, units, comm pieces (slots+staging), between steps, "
          "at a backward end")  # fmt: skip
    for k in sorted({1, 2, 3, 4, 7, args.blocks_per_unit}):
        m = GPT(args.d_model, args.layers, args.heads, args.seq)
        a = argparse.Namespace(**{**vars(args), "blocks_per_unit": k})
        z = zpp.torch.ZeroPP(m, rank=0, world_size=W, nodes=N, comm=AllocOnly(W), device="cpu",
                             **zpp_kwargs(a, kw_mode(args), m))  # fmt: skip
        r = z.memory_report()
        held_k = sum(r.values())
        g_k = sum(u.shard * 4 for u in z.units if u.trainable)
        print(f"  K={k:<2d} {len(z.units):3d} {sum(r.get(c, 0) for c in comm_kinds) / MiB:9.2f} "
              f"{held_k / MiB:9.2f} {(held_k + g_k) / MiB:9.2f}")  # fmt: skip
        z.close()
    return 0


def kw_mode(args: argparse.Namespace) -> str:
    return "zppd-zeropp" if args.mode.startswith("zppd-") else "zppd-plain"


def profile_summary(rows: list) -> dict:
    """Medians over the timed steps of --profile's per-step figures: the
    phases (fwd/bwd/opt ms), the zppd waits in total and by kind (stream:
    the compute stream's stall, CUDA only; host: time blocked in the
    wait), waits and calls per step by kind."""
    med = statistics.median

    def col(get):  # type: ignore[no-untyped-def]
        v = [x for x in (get(r) for r in rows) if x is not None]
        return round(med(v), 3) if v else None

    out: dict = {"steps": len(rows)}
    for k in ("fwd_ms", "bwd_ms", "opt_ms", "zpp_wait_ms", "zpp_wait_host_ms"):
        out[k] = col(lambda r, k=k: r.get(k))
    z = [r["zpp"] for r in rows if "zpp" in r]
    if z:
        for part in ("stream_ms", "host_ms", "waits", "calls"):
            kinds = sorted({k for r in z for k in r[part]})
            out[part] = {k: col(lambda r, k=k, part=part: r["zpp"][part].get(k, 0) if "zpp" in r else None)
                         for k in kinds}  # fmt: skip
    return out


def agree_any(run: Runner, flag: bool, needs_dist: bool) -> bool:
    """True when flag is True on any rank (collective: every rank calls it
    at the same step), so that all ranks stop at the same step."""
    if run.zp is not None:
        return run.zp.any_rank(flag)
    if needs_dist:
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0], device=run.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)
    return flag


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=MODES, default=None, help="required but with --account")
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--gpu-map", choices=("local", "rank"), default="local",
                    help="a rank's GPU: local index (default) or rank, modulo the visible GPUs")
    ap.add_argument("--socket", default=os.environ.get("ZPP_SOCKET"),
                    help="zppd socket of this rank's node; {node} is replaced by the node index")
    ap.add_argument("--leader", default=None, help="peer address of node 0's zppd (host:port)")
    ap.add_argument("--job-id", default=None)
    ap.add_argument("--nccl-hostid", default="zpp-node{node}",
                    help="NCCL_HOSTID of this rank when --nodes > 1 ({node}: its node), set before "
                         "torch.distributed starts; '' keeps the environment's")
    ap.add_argument("--tokens-per-rank", type=int, default=1024, help="per micro-batch (batch x seq)")
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches (backwards) per optimizer step")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--layers", type=int, default=14)  # 14 x 12 d^2 + embeddings: about 100M
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10, help="steps left out of the step-time median")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--lr-warmup", type=int, default=30)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    ap.add_argument("--bits-w", type=int, default=8)
    ap.add_argument("--bits-g", type=int, default=4)
    ap.add_argument("--block-w", type=int, default=256,
                    help="qwZ's quantization block (weights; docs/pytorch.md on choosing it)")
    ap.add_argument("--block-g", type=int, default=256, help="qgZ's quantization block (gradients)")
    # Defaults: the fastest setting measured on 2 H200s that stays below
    # HSDP's memory (bench/results/train-2026-11-22-h200x2-b: 40.5 ms/step,
    # 995 MiB peak per rank).
    ap.add_argument("--freeze-blocks", type=int, default=0,
                    help="freeze the first K blocks in every mode (a frozen base, as a LoRA job's)")
    ap.add_argument("--share-frozen", action="store_true",
                    help="zppd modes: read the frozen units from the node's shared replica "
                         "(ZeroPP share_frozen; use K a multiple of --blocks-per-unit)")  # fmt: skip
    ap.add_argument("--blocks-per-unit", type=int, default=3,
                    help="zpp.torch: consecutive transformer blocks per unit (one gather, one reduce)")
    ap.add_argument("--slots", type=int, default=3,
                    help="zpp.torch: gather slots of the largest unit's size (current + prefetched)")
    ap.add_argument("--small-slots", type=int, default=1,
                    help="zpp.torch: gather and gradient slots of the root unit's size (embeddings, head)")
    ap.add_argument("--grad-slots", type=int, default=2,
                    help="zpp.torch: gradient slots of the largest unit's size (reduces in flight + 1)")
    ap.add_argument("--prefetch", type=int, default=2,
                    help="zpp.torch: units gathered ahead in forward and backward (needs slots > prefetch)")
    ap.add_argument("--no-step-prefetch", action="store_true",
                    help="zpp.torch: leave the next forward's first gathers to the forward, not step()")
    ap.add_argument("--profile", action="store_true",
                    help="per step: forward, backward, optimizer ms (CUDA events) and the time spent "
                         "waiting for zppd (ZeroPP.profile); in the CSV and the JSON's 'profile'")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--deterministic", action="store_true",
                    help="torch.use_deterministic_algorithms (warn only), CUBLAS_WORKSPACE_CONFIG and "
                         "the math attention kernels: for bit-for-bit comparisons between runs on a GPU")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--ckpt-dir", default=None)
    ap.add_argument("--ckpt-every", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="stop (after a checkpoint, all ranks at the same step) once the training loop "
                         "has run this long")
    ap.add_argument("--deadline", type=float, default=0,
                    help="unix time: stop (as --max-seconds) before a step that would end past it")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop (after a checkpoint) after this many steps in this process (tests --resume)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="runs/gpt")
    ap.add_argument("--account", action="store_true",
                    help="print the per-rank memory accounting of ZeroPP (this model, --world, --nodes; "
                         "--mode zppd-plain/torch-sharded for plain collectives) against FSDP2 and HSDP, "
                         "and exit (no daemon, no GPU)")  # fmt: skip
    ap.add_argument("--world", type=int, default=4, help="world size for --account")
    args = ap.parse_args()
    if args.account:
        args.mode = args.mode or "zppd-zeropp"
        return account(args)
    if args.mode is None:
        ap.error("--mode is required")

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world % args.nodes:
        raise SystemExit(f"WORLD_SIZE {world} is not a multiple of --nodes {args.nodes}")
    if args.grad_accum < 1:
        raise SystemExit("--grad-accum must be >= 1")
    G = world // args.nodes
    node, local = rank // G, rank % G
    # Before anything starts NCCL (torch.distributed below; zppd modes use
    # no NCCL in this process): the simulated nodes must look like hosts.
    if args.nodes > 1 and args.nccl_hostid:
        os.environ["NCCL_HOSTID"] = args.nccl_hostid.format(node=node)
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        # warn_only lets scaled_dot_product_attention pick cuDNN's backward,
        # which is not deterministic (seen on H200s: runs differed from step
        # 1 on); the math kernels are.
        if args.device == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(False)
            torch.backends.cuda.enable_flash_sdp(False)
            torch.backends.cuda.enable_mem_efficient_sdp(False)
            torch.backends.cuda.enable_math_sdp(True)
    if args.device == "cuda":
        device = torch.device("cuda", (rank if args.gpu_map == "rank" else local) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    needs_dist = args.mode in ("torch-sharded", "fsdp2", "hsdp")
    if needs_dist:
        import torch.distributed as dist

        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                device_id=device if device.type == "cuda" else None)  # fmt: skip
    if args.tokens_per_rank % args.seq and args.tokens_per_rank >= args.seq:
        raise SystemExit("--tokens-per-rank must be a multiple of --seq (or smaller than it)")
    seq = min(args.seq, args.tokens_per_rank)
    batch = args.tokens_per_rank // seq

    torch.manual_seed(args.seed)
    model = GPT(args.d_model, args.layers, args.heads, args.seq)
    for b in model.blocks[: args.freeze_blocks]:  # a frozen base, as a LoRA job's (every mode)
        b.requires_grad_(False)
    nparams = sum(p.numel() for p in model.parameters())
    batches = Batches(corpus(), seq, batch, args.seed)
    run = Runner(args, model, rank, world, node, local, device)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = 0
    if args.resume and args.ckpt_dir:
        done = sorted(glob.glob(os.path.join(args.ckpt_dir, "step-*")))
        done = [d for d in done if os.path.exists(os.path.join(d, "manifest.json"))
                or os.path.exists(os.path.join(d, ".metadata"))]  # zpp.torch / DCP, complete
        if done:
            start = run.load(done[-1]) + 1
    csv_path = out / f"rank{rank}.csv"
    header = ["step", "loss", "lr", "step_ms", "eval_loss", "fwd_ms", "bwd_ms", "opt_ms", "zpp_wait_ms",
              "zpp_wait_host_ms"]  # fmt: skip
    kept = []
    if start and csv_path.exists():  # rows a cut run wrote past its checkpoint go
        with open(csv_path, newline="") as f:
            kept = [r for r in csv.reader(f) if r and r[0].isdigit() and int(r[0]) < start]
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    fcsv = open(csv_path, "w", newline="")
    # Which device the rows come from, for a reader of this file alone.
    fcsv.write(f"# {args.mode}: rank {rank} of {world}, node {node}, "
               f"device {gpu_name}{'' if device.index is None else f' (GPU {device.index})'}, "
               f"torch {torch.__version__}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    w = csv.writer(fcsv)
    w.writerow(header)
    w.writerows(kept)
    times, last_loss, last_eval = [], float("nan"), float("nan")
    limited = bool(args.max_seconds or args.deadline)
    stopped_early = False
    setup_s = time.time() - T_PROCESS
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        mem_setup = torch.cuda.memory_allocated(device) / 2**20
        torch.cuda.reset_peak_memory_stats(device)
    zpp_mem = ({k: v / 2**20 for k, v in run.zp.memory_report().items()} if run.zp is not None
               else None)  # fmt: skip
    ph = Phases(device) if args.profile else None
    prof_rows: list = []  # per timed step: phases and zppd waits
    mem_marks: dict = {}
    t_begin = time.time()
    step, last_s = start - 1, 0.0
    for step in range(start, args.steps):
        micro = [tuple(t.to(device, non_blocking=True) for t in batches.get(step, rank, m))
                 for m in range(args.grad_accum)]  # fmt: skip
        lr = lr_at(step, args)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if run.zp is not None:
            run.zp.take_profile()  # drops what the evaluation's forwards waited
        t0 = time.perf_counter()
        if ph is not None:
            ph.begin()
        last_loss = run.train_step(micro, lr, ph, mem_marks if step == start else None)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        ms = (time.perf_counter() - t0) * 1e3
        prof = {}
        if ph is not None:
            prof = {f"{k}_ms": v for k, v in ph.take().items()}
            zw = run.zp.take_profile() if run.zp is not None else None
            if zw is not None:
                prof["zpp_wait_ms"] = sum(zw["stream_ms"].values()) if zw["stream_ms"] else None
                prof["zpp_wait_host_ms"] = sum(zw["host_ms"].values())
                prof["zpp"] = zw
        if step - start >= args.warmup:
            times.append(ms)
            if prof:
                prof_rows.append(prof)
        stop = bool(args.stop_after and step + 1 - start >= args.stop_after and step + 1 < args.steps)
        if limited and step + 1 < args.steps:
            now = time.time()
            # the next step, an evaluation and a checkpoint must still fit
            late = (args.max_seconds and now - t_begin > args.max_seconds) or (
                args.deadline and now + 3 * (now - last_s if last_s else ms / 1e3) > args.deadline)
            stop = agree_any(run, bool(late), needs_dist) or stop
            last_s = now
        ev = ""
        if args.eval_every and ((step + 1) % args.eval_every == 0 or step + 1 == args.steps or stop):
            last_eval = ev = run.eval_loss(batches, args.eval_batches)
        w.writerow([step, repr(last_loss), f"{lr:.6e}", f"{ms:.3f}", ev if ev == "" else repr(ev)]
                   + [f"{prof[k]:.3f}" if prof.get(k) is not None else ""
                      for k in ("fwd_ms", "bwd_ms", "opt_ms", "zpp_wait_ms", "zpp_wait_host_ms")])  # fmt: skip
        fcsv.flush()
        if rank == 0 and (step % 10 == 0 or step + 1 == args.steps or stop):
            print(f"[{args.mode}] step {step} loss {last_loss:.4f} {ms:.1f} ms", flush=True)
        if args.ckpt_dir and ((args.ckpt_every and (step + 1) % args.ckpt_every == 0) or stop
                              or step + 1 == args.steps):  # fmt: skip
            run.save(os.path.join(args.ckpt_dir, f"step-{step:06d}"), step)
        if stop:
            stopped_early = True
            break
    fcsv.close()
    summary = {
        "mode": args.mode, "rank": rank, "world_size": world, "nodes": args.nodes, "node": node,
        "params": nparams, "tokens_per_rank": args.tokens_per_rank, "grad_accum": args.grad_accum,
        "seq": seq, "batch": batch, "dtype": args.dtype, "steps": args.steps,
        "steps_done": step + 1, "start_step": start, "stopped_early": stopped_early,
        "final_loss": last_loss, "final_eval_loss": last_eval,
        "median_step_ms": statistics.median(times) if times else None,
        "mean_step_ms": statistics.fmean(times) if times else None,
        "timed_steps": len(times), "setup_s": round(setup_s, 2),
        "train_s": round(time.time() - t_begin, 2),
        "tokens_per_s_per_rank": (args.tokens_per_rank * args.grad_accum * 1e3 / statistics.median(times)
                                  if times else None),
        "mem_allocated_after_setup_mib": mem_setup if device.type == "cuda" else None,
        "peak_mem_allocated_mib": (torch.cuda.max_memory_allocated(device) / 2**20
                                   if device.type == "cuda" else None),
        "peak_mem_reserved_mib": (torch.cuda.max_memory_reserved(device) / 2**20
                                  if device.type == "cuda" else None),
        "device": gpu_name,
        "gpu": device.index if device.type == "cuda" else None,
        "nccl_hostid": os.environ.get("NCCL_HOSTID"),
        "deterministic": args.deterministic, "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([sys.executable] + sys.argv),
        "zpp_stats": dict(run.zp.stats) if run.zp is not None else None,
        "hpz_plain": run.zp.hpz_plain if run.zp is not None else None,
        "sync_mode": run.zp.sync_mode if run.zp is not None else None,
        "zpp_memory_mib": zpp_mem,
        "zpp_memory_after_backward_mib": mem_marks.get("zpp_after_backward_mib"),
        "mem_allocated_after_forward_mib": mem_marks.get("after_forward_mib"),
        "zpp_config": ({"units": len(run.zp.units), "blocks_per_unit": args.blocks_per_unit,
                        "slots": args.slots, "small_slots": args.small_slots, "grad_slots": args.grad_slots,
                        "prefetch": args.prefetch, "step_prefetch": not args.no_step_prefetch, "largest_unit": max(u.numel for u in run.zp.units)}
                       if run.zp is not None else None),
        "profile": profile_summary(prof_rows) if prof_rows else None,
    }  # fmt: skip
    (out / f"rank{rank}.json").write_text(json.dumps(summary, indent=1))
    if run.zp is not None:
        run.zp.close()
    if needs_dist:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
