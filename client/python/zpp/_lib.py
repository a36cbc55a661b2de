"""Low-level binding of libzpp: the C structs and functions of zpp.h, 1:1.

What lives here: locating and loading libzpp.so, the ctypes mirrors of the
public structs, the enum values of zpp.h, and ``SIGNATURES`` -- the one table
that declares ``restype`` and ``argtypes`` of every function this package
calls. A function missing from that table is not reachable through ``LIB``
(``LIB.name`` raises AttributeError): an undeclared ctypes call would
truncate 64-bit pointers to int, the bug of bindings that skip the table.

Ownership mirrors C: a ``zpp_conn *`` belongs to whoever called
``zpp_connect`` and is freed by ``zpp_close``; a ``zpp_shm *`` by
``zpp_shm_destroy``; strings returned by ``zpp_strerror``/``zpp_err_name``/
``zpp_algo_name`` are static and ``zpp_last_error``'s lives in the connection
until its next call. Nothing here raises ZppError; errors.py and client.py
turn return codes into exceptions.

Library lookup order: ``$ZPP_LIB`` (a path), a ``libzpp.so``/``libzpp.so.0``
installed next to this file (``pip install`` copies one found in the source
tree), then ``ctypes.util.find_library("zpp")``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

c_int = ctypes.c_int
c_uint32 = ctypes.c_uint32
c_uint64 = ctypes.c_uint64
c_size_t = ctypes.c_size_t
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p

# ---- enum values of zpp.h (the wire enums of proto/zpp.proto) ------------------
# zpp.h exposes these as C enums, which have no symbol to read at run time;
# they equal the protobuf values, which never change (proto/zpp.proto).
ZPP_ERRNO_MAX = -19  # checked against the library by tests/test_errors.py


class DType(enum.IntEnum):
    """zpp_dtype_t."""

    FP32 = 1
    FP16 = 2
    BF16 = 3

    @property
    def itemsize(self) -> int:
        return 4 if self is DType.FP32 else 2


class Reduce(enum.IntEnum):
    """zpp_reduce_t."""

    SUM = 0
    MEAN = 1


class Op(enum.IntEnum):
    """zpp_op_t."""

    QWZ_ALLGATHER = 1
    HPZ_GATHER = 2
    HPZ_INVALIDATE = 3
    QGZ_REDUCE_SCATTER = 4
    ALLGATHER = 5
    REDUCE_SCATTER = 6
    BARRIER = 7


FLAG_FORCE_QUANT = 1
FLAG_INVALIDATE_ALL = 2
FLAG_PUBLISH = 4  # ZPP_FLAG_PUBLISH: all-gather publishes a shared hpZ replica
FLAG_KEEP_SHARED = 8  # ZPP_FLAG_KEEP_SHARED: an invalidate-all keeps the shared replicas attached


# ---- structs ------------------------------------------------------------------
class JobDesc(ctypes.Structure):
    """zpp_job_desc. Strings are borrowed for the duration of zpp_hello."""

    _fields_ = [
        ("job_id", c_char_p),
        ("rank", c_uint32),
        ("world_size", c_uint32),
        ("local_rank", c_uint32),
        ("node_count", c_uint32),
        ("gpu_uuid", c_char_p),
        ("leader_addr", c_char_p),
        ("tenant_label", c_char_p),
    ]


class HelloInfo(ctypes.Structure):
    """zpp_hello_info (filled by zpp_hello)."""

    _fields_ = [
        ("session_id", c_uint64),
        ("daemon_version", ctypes.c_char * 32),
        ("backend", ctypes.c_char * 16),
        ("max_frame", c_uint64),
        ("max_buffers", c_uint32),
        ("max_pending", c_uint32),
        ("nodes", c_uint32),
        ("local_size", c_uint32),
    ]


class BufRefC(ctypes.Structure):
    """zpp_bufref: a registered buffer id and a byte offset into it."""

    _fields_ = [("buffer_id", c_uint64), ("offset", c_uint64)]


class CollC(ctypes.Structure):
    """zpp_coll; fill with zpp_coll_init. hpz_key and content_key are
    borrowed until submit returns (the C library copies them into the
    request it sends)."""

    _fields_ = [
        ("op", c_int),
        ("dtype", c_int),
        ("out_dtype", c_int),
        ("count", c_uint64),
        ("bits", c_uint32),
        ("block", c_uint32),
        ("stages", c_uint32),
        ("reduce", c_int),
        ("hpz_key", c_char_p),
        ("input", BufRefC),
        ("output", BufRefC),
        ("flags", c_uint32),
        ("timeout_ms", c_uint32),
        ("seq", c_uint64),
        ("content_key", c_char_p),  # appended in zpp.h: keep the layout equal
    ]


class ResultC(ctypes.Structure):
    """zpp_result (filled by zpp_collective / zpp_wait / zpp_test)."""

    _fields_ = [
        ("algo", c_int),
        ("seq", c_uint64),
        ("logical_bytes", c_uint64),
        ("bytes_intra", c_uint64),
        ("bytes_inter", c_uint64),
        ("bytes_zero3_inter", c_uint64),
        ("nonfinite_blocks", c_uint64),
        ("elapsed_us", c_uint64),
    ]


conn_p = c_void_p  # zpp_conn * (opaque)
shm_p = c_void_p  # zpp_shm * (opaque)
P = ctypes.POINTER

# ---- the one signature table ----------------------------------------------------
# name: (restype, argtypes). Every C function this package calls is here.
SIGNATURES: Dict[str, Tuple[Any, Sequence[Any]]] = {
    "zpp_strerror": (c_char_p, [c_int]),
    "zpp_err_name": (c_char_p, [c_int]),
    "zpp_algo_name": (c_char_p, [c_int]),
    "zpp_connect": (c_int, [c_char_p, P(conn_p)]),
    "zpp_close": (None, [conn_p]),
    "zpp_last_error": (c_char_p, [conn_p]),
    "zpp_fd": (c_int, [conn_p]),
    "zpp_hello": (c_int, [conn_p, P(JobDesc), P(HelloInfo)]),
    "zpp_shm_create": (c_int, [c_size_t, P(shm_p)]),
    "zpp_shm_ptr": (c_void_p, [shm_p]),
    "zpp_shm_size": (c_size_t, [shm_p]),
    "zpp_shm_fd": (c_int, [shm_p]),
    "zpp_shm_destroy": (None, [shm_p]),
    "zpp_register_shm": (c_int, [conn_p, shm_p, c_uint64, c_uint64, P(c_uint64)]),
    "zpp_register_fd": (c_int, [conn_p, c_int, c_uint64, c_uint64, P(c_uint64)]),
    "zpp_deregister": (c_int, [conn_p, c_uint64]),
    "zpp_coll_init": (None, [P(CollC), c_int, c_int, c_uint64]),
    "zpp_collective": (c_int, [conn_p, P(CollC), P(ResultC)]),
    "zpp_submit": (c_int, [conn_p, P(CollC), P(c_uint64)]),
    "zpp_wait": (c_int, [conn_p, c_uint64, P(ResultC)]),
    "zpp_test": (c_int, [conn_p, c_uint64, P(ResultC)]),
    "zpp_barrier": (c_int, [conn_p, P(ResultC)]),
    "zpp_check": (c_int, [conn_p]),
    "zpp_admin_status_json": (c_int, [conn_p, c_char_p, c_size_t]),
    "zpp_admin_jobs_json": (c_int, [conn_p, c_char_p, c_size_t]),
    # ---- zpp_cuda.h (CUDA builds of libzpp only: OPTIONAL below) ---------------
    # CUstream is a pointer; a torch stream's .cuda_stream (an int) is passed.
    "zpp_cuda_device_uuid": (c_int, [c_char_p]),
    "zpp_cuda_attach": (c_int, [conn_p, c_int]),
    "zpp_cuda_sync_mode": (c_char_p, [conn_p]),
    "zpp_register_cuda": (c_int, [conn_p, c_void_p, c_size_t, P(c_uint64), P(c_uint64)]),
    "zpp_collective_async": (c_int, [conn_p, P(CollC), c_void_p, P(c_uint64)]),
    "zpp_wait_stream": (c_int, [conn_p, c_uint64, c_void_p, P(ResultC)]),
    "zpp_collective_stream": (c_int, [conn_p, P(CollC), c_void_p, P(c_uint64)]),
    # ---- end zpp_cuda.h ----------------------------------------------------------
}

# Functions a library may lack (a host-only build has no zpp_cuda.h symbols):
# for a missing one _Lib installs a stub with the declared restype/argtypes
# that raises NotImplementedError when called; ``LIB.has(name)`` says
# whether the library really has it.
OPTIONAL = frozenset(
    ["zpp_cuda_device_uuid", "zpp_cuda_attach", "zpp_cuda_sync_mode", "zpp_register_cuda",
     "zpp_collective_async", "zpp_wait_stream", "zpp_collective_stream"]
)  # fmt: skip

_BUNDLED = ("libzpp.so", "libzpp.so.0")


def candidate_paths() -> List[str]:
    """Where load() looks, in order (for error messages and tests)."""
    out: List[str] = []
    env = os.environ.get("ZPP_LIB")
    if env:
        out.append(env)
    here = Path(__file__).resolve().parent
    out += [str(here / n) for n in _BUNDLED if (here / n).exists()]
    found = ctypes.util.find_library("zpp")
    if found:
        out.append(found)
    return out


class _Lib:
    """The loaded library with only the functions of SIGNATURES declared."""

    def __init__(self, cdll: ctypes.CDLL, path: str) -> None:
        self.path = path
        self._cdll = cdll
        for name, (restype, argtypes) in SIGNATURES.items():
            if name in OPTIONAL and not hasattr(cdll, name):
                setattr(self, name, _Missing(name, restype, argtypes))
                continue
            fn = getattr(cdll, name)
            fn.restype = restype
            fn.argtypes = list(argtypes)
            setattr(self, name, fn)

    def has(self, name: str) -> bool:
        """Whether the library exports (and this table declares) name."""
        fn = self.__dict__.get(name)
        return fn is not None and not isinstance(fn, _Missing)


class _Missing:
    """An OPTIONAL function this library lacks: declared (restype and
    argtypes as in SIGNATURES) but raising NotImplementedError when called."""

    def __init__(self, name: str, restype: Any, argtypes: Sequence[Any]) -> None:
        self.__name__, self.restype, self.argtypes = name, restype, list(argtypes)

    def __call__(self, *args: Any) -> Any:
        raise NotImplementedError(f"{self.__name__}: not in this libzpp (a CUDA build has it)")


def load(path: Optional[str] = None) -> _Lib:
    """Loads libzpp (path, else the lookup order above). Raises OSError with
    every place tried when none loads."""
    tried = [path] if path else candidate_paths()
    errors = []
    for p in tried:
        try:
            return _Lib(ctypes.CDLL(p, use_errno=True), p)
        except (OSError, AttributeError) as e:
            errors.append(f"{p}: {e}")
    raise OSError(
        "libzpp not found: set ZPP_LIB to build/client/libzpp.so, or install it "
        "where the dynamic loader finds it"
        + ("; tried " + "; ".join(errors) if errors else "")
    )


LIB = load()


def text(b: Optional[bytes]) -> str:
    """A C string from the library as str ('' for NULL)."""
    return b.decode("utf-8", "replace") if b else ""
