"""pytest fixtures: the libzpp and zppd under test, and a real daemon.

Paths come from ZPPD_BIN and ZPP_LIB (set by ctest, tests/scripts/); without
them the newest build*/ tree of the repository is used. ZPP_LIB is set in
the environment before zpp is imported, so rank processes (spawned) load the
same library. The `daemon` fixture owns one zppd (host backend) on a socket
in a fresh /tmp directory for the whole session; tests keep apart by job id.
"""

from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator, Optional

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


def _newest(pattern: str) -> Optional[str]:
    hits = [p for p in glob.glob(str(REPO / pattern)) if os.path.isfile(p)]
    return max(hits, key=os.path.getmtime) if hits else None


def _find(env: str, pattern: str) -> Optional[str]:
    return os.environ.get(env) or _newest(pattern)


ZPPD_BIN = _find("ZPPD_BIN", "build*/daemon/zppd")
ZPP_LIB = _find("ZPP_LIB", "build*/client/libzpp.so")
if ZPP_LIB:
    os.environ["ZPP_LIB"] = ZPP_LIB
if str(HERE.parent) not in sys.path:
    try:
        import zpp  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(HERE.parent))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        )


class Daemon:
    """A running zppd: its socket, directory, log and process."""

    def __init__(self, binary: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="zpp-py-", dir="/tmp")  # short: sun_path is 108 bytes
        self.socket = os.path.join(self.dir, "zppd.sock")
        self.log = os.path.join(self.dir, "zppd.log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, "-s", self.socket, "-b", "host", "-o", "peer_listen=127.0.0.1:0"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zppd exited with {self.proc.returncode}:\n{self.read_log()}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket)
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"zppd did not listen in {START_TIMEOUT_S}s:\n{self.read_log()}")
                time.sleep(0.02)

    def read_log(self) -> str:
        try:
            return Path(self.log).read_text(errors="replace")
        except OSError:
            return "(no log)"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for name in ("zppd.sock", "zppd.log"):
            try:
                os.unlink(os.path.join(self.dir, name))
            except OSError:
                pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass
        return self.proc.returncode


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    if not ZPPD_BIN:
        pytest.fail("zppd not found: set ZPPD_BIN (ctest does) or build it (cmake --build ... --target zppd)")
    d = Daemon(ZPPD_BIN)
    try:
        yield d
    finally:
        alive = d.proc.poll() is None
        log = d.read_log()
        rc = d.stop()
        if not alive or rc != 0:
            sys.stderr.write(f"zppd ended badly (rc {rc}); its log:\n{log}\n")


@pytest.fixture
def job(request: pytest.FixtureRequest) -> str:
    """A job id of its own for each test."""
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
