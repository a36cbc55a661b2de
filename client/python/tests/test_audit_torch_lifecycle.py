"""Audit of zpp.torch: tied parameters, arguments the daemon would refuse,
a construction that fails after it joined, and a second close(). One rank,
host daemon, CPU tensors. Skipped without torch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import zpp  # noqa: E402
import zpp.torch  # noqa: E402,F401
from torch import nn  # noqa: E402


class Tied(nn.Module):
    """An embedding and a head that share one weight, and a block between."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(13, 8)
        self.mid = nn.Linear(8, 8)
        self.head = nn.Linear(8, 13, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.mid(self.emb(idx))))


def _plain(model, daemon, job, **kw):
    return zpp.torch.ZeroPP(model, daemon.socket, rank=0, world_size=1, job_id=job, dtype=torch.float32,
                            device="cpu", qwz=False, qgz=False, hpz=False, **kw)  # fmt: skip


def test_tied_parameters_in_one_unit_train_as_unsharded(daemon, job) -> None:
    """units=[[emb, head]]: the head's forward sees the shared weight (not the
    NaN placeholder it saw once the embedding's forward had ended), and one
    step equals torch's AdamW on the unsharded model."""
    torch.manual_seed(0)
    ref = Tied()
    model = Tied()
    model.load_state_dict(ref.state_dict())
    idx = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 12]])
    y = torch.tensor([[2, 3, 4, 5], [6, 7, 8, 0]])
    zp = _plain(model, daemon, job, units=[[model.emb, model.head]], lr=1e-2)
    try:
        out = zp(idx)
        want = ref(idx)
        assert torch.isfinite(out).all()
        assert torch.allclose(out, want, atol=1e-6)
        zp.backward(nn.functional.cross_entropy(out.flatten(0, 1), y.flatten()))
        assert zp.step()
        opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.0)
        nn.functional.cross_entropy(want.flatten(0, 1), y.flatten()).backward()
        opt.step()
        got = zp.full_state_dict()
        for name, p in ref.named_parameters():
            assert torch.allclose(got[name], p.detach(), atol=1e-6), name
    finally:
        zp.close()


def test_tied_parameters_across_units_are_refused(daemon, job) -> None:
    """Default units (one per module): the embedding and the head are two
    units that would share one parameter; ZeroPP refuses, as documented,
    instead of running the head on the NaN placeholder."""
    with pytest.raises(ValueError, match="shared by units"):
        _plain(Tied(), daemon, job)


@pytest.mark.parametrize("kw", [{"block_w": 16384}, {"block": 8224}, {"block_g": 16384},
                                {"bits_w": 16}, {"bits_g": 2}, {"qgz_stages": 65},
                                {"timeout_ms": -1}])  # fmt: skip
def test_arguments_the_daemon_refuses_are_refused_at_construction(daemon, job, kw) -> None:
    """Refused before connecting, not at the first forward (or backward)
    inside a hook with the model's parameters already replaced."""
    model = Tied()
    with pytest.raises(ValueError):
        zp = zpp.torch.ZeroPP(model, daemon.socket, rank=0, world_size=1, job_id=job, device="cpu",
                              units=[[model.emb, model.head]], **kw)  # fmt: skip
        zp.close()  # (not reached once fixed)
    assert all(torch.isfinite(p).all() for p in model.parameters())  # untouched


def test_failed_construction_gives_the_rank_back(daemon, job) -> None:
    """A ZeroPP that connected and joined, then failed (a bad units= spec),
    closes its connection: a second try for the same rank of the same job
    works at once, even while the first failure's traceback (which holds the
    half-made object) is alive -- before, it got ZPP_EEXIST."""
    with pytest.raises(ValueError) as first:
        _plain(Tied(), daemon, job, units=["not a module"])
    assert first.value.__traceback__ is not None  # the failed frame is still referenced
    model = Tied()
    zp = _plain(model, daemon, job, units=[[model.emb, model.head]])
    zp.close()


def test_close_twice_is_a_no_op(daemon, job) -> None:
    model = Tied()
    zp = zpp.torch.ZeroPP(model, daemon.socket, rank=0, world_size=1, job_id=job, device="cpu",
                          dtype=torch.float32, units=[[model.emb, model.head]])  # fmt: skip
    zp(torch.tensor([[1, 2]])).sum()
    zp.close()
    zp.close()  # raised ZppClosedError (an invalidate-all on the closed connection)
