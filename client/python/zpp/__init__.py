"""zpp — Python client of zppd, the per-node ZeRO++ collectives daemon.

Layers (who owns what is said in each module):
  zpp._lib    ctypes binding 1:1 with client/include/zpp.h (one signature table)
  zpp.errors  ZppError and one subclass per ZPP_E* code, built from libzpp
  zpp.shm     SharedBuffer: host shared memory with NumPy / torch views
  zpp.client  Connection, Request, Result: the Pythonic calls

    import zpp
    with zpp.Connection("/run/zppd/zppd.sock") as c, zpp.SharedBuffer(1 << 20) as shm:
        c.hello("job", rank, world_size, node_count=2)
        shard, full = shm.numpy("float32", n // W), shm.numpy("float32", n, offset=...)
        c.allgather(shard, full)
"""

from . import errors
from ._lib import LIB, ZPP_ERRNO_MAX, DType, Op, Reduce
from .client import BufRef, Connection, HelloInfo, Request, Result, connect, content_key, dtype_of
from .errors import *  # noqa: F401,F403  (the generated exception classes)
from .errors import ZppError, error_class, error_from_code
from .shm import SharedBuffer, locate

__version__ = "0.1.0"
library_path: str = LIB.path

__all__ = [
    "BufRef", "Connection", "DType", "HelloInfo", "Op", "Reduce", "Request", "Result",
    "SharedBuffer", "ZppError", "ZPP_ERRNO_MAX", "connect", "content_key", "dtype_of", "error_class",
    "error_from_code", "errors", "library_path", "locate",
] + [n for n in errors.__all__ if n.startswith("Zpp") and n != "ZppError"]  # fmt: skip
