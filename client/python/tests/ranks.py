"""Runs one function per rank, each in its own process (multiprocessing,
spawn), and brings back what each returned or the exception it raised.

A rank body is a module-level function body(rank, job) -> picklable value.
`Job` says where and what to join; `Job.connect(rank)` joins it.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List

import zpp

RANK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Job:
    socket: str
    job_id: str
    world: int = 4
    nodes: int = 2
    seed: int = 0

    def connect(self, rank: int) -> zpp.Connection:
        c = zpp.Connection(self.socket)
        c.hello(self.job_id, rank, self.world, node_count=self.nodes)
        return c


def _entry(body: Callable[[int, Job], Any], rank: int, job: Job, q: Any) -> None:
    try:
        q.put((rank, "ok", body(rank, job), ""))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the test
        try:
            q.put((rank, "err", e, traceback.format_exc()))
        except Exception:
            q.put((rank, "err", RuntimeError(repr(e)), traceback.format_exc()))


class RankFailed(AssertionError):
    pass


def run(body: Callable[[int, Job], Any], job: Job, raise_errors: bool = True) -> List[Any]:
    """body on every rank of job; a list indexed by rank of the returned
    values (or, with raise_errors=False, of the exceptions raised)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_entry, args=(body, r, job, q), daemon=True) for r in range(job.world)]
    for p in procs:
        p.start()
    got: Dict[int, Any] = {}
    tbs: Dict[int, str] = {}
    try:
        for _ in procs:
            rank, kind, value, tb = q.get(timeout=RANK_TIMEOUT_S)
            got[rank] = value
            if kind == "err":
                tbs[rank] = tb
    except Exception as e:  # queue.Empty: a rank hung or died
        missing = sorted(set(range(job.world)) - set(got))
        raise RankFailed(f"ranks {missing} did not report in {RANK_TIMEOUT_S}s ({e!r})") from None
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    if raise_errors and tbs:
        raise RankFailed("\n".join(f"--- rank {r}:\n{tbs[r]}" for r in sorted(tbs)))
    return [got[r] for r in range(job.world)]
