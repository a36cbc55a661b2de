"""Host shared memory the daemon can read and write: SharedBuffer.

A SharedBuffer owns one ``zpp_shm`` (a sealed memfd made by zpp_shm_create;
freed by close()). Python code sees it through a second mapping of the same
memfd made with the ``mmap`` module: both mappings are MAP_SHARED views of
one file, so what the daemon writes is what NumPy reads. Going through
``mmap`` buys its export tracking: close() raises BufferError while a
memoryview, NumPy array or torch tensor made here (or any view derived from
them) is still alive, instead of unmapping memory under it.

Views: ``view()`` (memoryview of bytes), ``numpy(dtype, shape, offset)``
(when NumPy is installed) and ``torch(dtype, shape, offset)`` (a CPU tensor
via torch.frombuffer, when torch is installed). Collectives find the buffer
and offset of such an array themselves (``locate``), and a Connection
registers each SharedBuffer once and caches the id until either closes.

Thread: one SharedBuffer may be read from several threads; close() from
one.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import errors
from ._lib import LIB, shm_p

__all__ = ["SharedBuffer", "locate", "address_of"]

_MAX_BYTES = (1 << 63) - 1  # zpp_shm_create's limit (INT64_MAX)

_live_lock = threading.Lock()
_live: "Dict[int, weakref.ReferenceType[SharedBuffer]]" = {}  # id(buf) -> buf


class SharedBuffer:
    """``nbytes`` of zero-filled shared memory for the host backend.

    Owns the C ``zpp_shm`` and the Python mapping; both go in close() (also
    on ``with`` exit and, as a last resort, when collected). Connections
    that registered it are told on close so they drop the registration.
    """

    def __init__(self, nbytes: int) -> None:
        # ctypes would pass a size past 64 bits to size_t cut to its low
        # bits; zpp_shm_create refuses more than INT64_MAX.
        if not isinstance(nbytes, int) or nbytes <= 0 or nbytes > _MAX_BYTES:
            raise errors.invalid(f"SharedBuffer size must be an int in 1..2^63-1, got {nbytes!r}")
        h = shm_p()
        rc = LIB.zpp_shm_create(nbytes, ctypes.byref(h))
        if rc < 0:
            raise errors.error_from_code(rc, f"zpp_shm_create({nbytes}) failed")
        self._shm: Optional[int] = h.value
        self.nbytes = int(LIB.zpp_shm_size(h))
        try:
            self._mm: Optional[mmap.mmap] = mmap.mmap(LIB.zpp_shm_fd(h), self.nbytes)
        except BaseException:
            LIB.zpp_shm_destroy(h)
            self._shm = None
            raise
        probe = ctypes.c_char.from_buffer(self._mm)  # a short-lived export
        self.address = ctypes.addressof(probe)
        del probe
        self._listeners: "Dict[int, Callable[[SharedBuffer], None]]" = {}
        with _live_lock:
            _live[id(self)] = weakref.ref(self)

    # ---- C handles (for the low-level layer) --------------------------------
    @property
    def handle(self) -> int:
        """The ``zpp_shm *`` (owned by this object)."""
        if self._shm is None:
            raise errors.error_from_code(-16, "shared buffer is closed")
        return self._shm

    @property
    def closed(self) -> bool:
        return self._shm is None

    # ---- views ---------------------------------------------------------------
    def _range(self, offset: int, nbytes: Optional[int]) -> Tuple[int, int]:
        if self._mm is None:
            raise errors.error_from_code(-16, "shared buffer is closed")
        if nbytes is None:
            nbytes = self.nbytes - offset
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise errors.error_from_code(
                -18, f"[{offset}, +{nbytes}) is outside the {self.nbytes}-byte buffer"
            )
        return offset, nbytes

    def view(self, offset: int = 0, nbytes: Optional[int] = None) -> memoryview:
        """A writable memoryview of bytes [offset, offset+nbytes)."""
        offset, nbytes = self._range(offset, nbytes)
        assert self._mm is not None
        return memoryview(self._mm)[offset : offset + nbytes]

    def numpy(self, dtype: Any, shape: Union[int, Sequence[int], None] = None, offset: int = 0):
        """A NumPy array of dtype at byte offset (shape: all that fits, 1-D).
        Needs NumPy. bf16: ``ml_dtypes.bfloat16`` if installed, else use
        ``numpy.uint16`` and pass ``dtype=DType.BF16`` to the collective."""
        import numpy as np

        dt = np.dtype(dtype)
        if shape is None:
            shape = ((self.nbytes - offset) // dt.itemsize,)
        elif isinstance(shape, int):
            shape = (shape,)
        n = 1
        for s in shape:
            n *= int(s)
        if offset % dt.itemsize:
            raise errors.invalid(f"offset {offset} is not a multiple of {dt} size {dt.itemsize}")
        mv = self.view(offset, n * dt.itemsize)
        return np.frombuffer(mv, dtype=dt).reshape(shape)

    def torch(self, dtype: Any, shape: Union[int, Sequence[int], None] = None, offset: int = 0):
        """A CPU torch tensor of dtype at byte offset. Needs torch. The tensor
        keeps a memoryview alive, so close() refuses while it lives."""
        import torch

        itemsize = torch.empty((), dtype=dtype).element_size()
        if shape is None:
            shape = ((self.nbytes - offset) // itemsize,)
        elif isinstance(shape, int):
            shape = (shape,)
        n = 1
        for s in shape:
            n *= int(s)
        if offset % itemsize:
            raise errors.invalid(f"offset {offset} is not a multiple of the element size {itemsize}")
        mv = self.view(offset, n * itemsize)
        # torch.frombuffer keeps a reference to mv (not a buffer export), and
        # mv holds the export on the mapping: close() sees the tensor.
        return torch.frombuffer(mv, dtype=dtype).reshape(shape)

    # ---- lifetime ------------------------------------------------------------
    def _add_listener(self, key: int, fn: "Callable[[SharedBuffer], None]") -> None:
        self._listeners[key] = fn

    def _remove_listener(self, key: int) -> None:
        self._listeners.pop(key, None)

    def close(self) -> None:
        """Unmaps and frees the memory. Raises BufferError (and changes
        nothing) while views are alive. Connections that registered this
        buffer drop it from their cache and deregister it with their next
        call (on the thread using them, not this one). Idempotent."""
        if self._shm is None:
            return
        assert self._mm is not None
        self._mm.close()  # BufferError while views exist: nothing changed yet
        self._mm = None
        for fn in list(self._listeners.values()):
            fn(self)
        self._listeners.clear()
        with _live_lock:
            _live.pop(id(self), None)
        LIB.zpp_shm_destroy(self._shm)
        self._shm = None

    def __enter__(self) -> "SharedBuffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Collected while views still hold the Python mapping: free the C
        # handle anyway (the mapping has its own dup of the memfd and lives
        # on with the views), so nothing leaks past them.
        try:
            self.close()
        except BufferError:
            self._mm = None
            with _live_lock:
                _live.pop(id(self), None)
            for fn in list(self._listeners.values()):
                fn(self)
            self._listeners.clear()
            if self._shm is not None:
                LIB.zpp_shm_destroy(self._shm)
                self._shm = None
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"at 0x{self.address:x}"
        return f"<SharedBuffer {self.nbytes} bytes {state}>"


def address_of(obj: Any) -> Tuple[int, int]:
    """(address, nbytes) of a C-contiguous NumPy array, CPU torch tensor or
    memoryview. Raises ZppInvalidArgumentError for anything else."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # torch
        if obj.device.type != "cpu":
            raise errors.invalid("a CUDA tensor needs the cuda backend (zpp.torch)")
        if not obj.is_contiguous():
            raise errors.invalid("tensor is not contiguous")
        return int(obj.data_ptr()), int(obj.numel() * obj.element_size())
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        if not obj.flags["C_CONTIGUOUS"]:
            raise errors.invalid("array is not C-contiguous")
        if ai["data"][1]:
            raise errors.invalid("array is read-only")
        return int(ai["data"][0]), int(obj.nbytes)
    if isinstance(obj, memoryview):
        if not obj.c_contiguous:
            raise errors.invalid("memoryview is not contiguous")
        if obj.readonly:
            raise errors.invalid("memoryview is read-only")
        if obj.nbytes == 0:
            raise errors.invalid("empty memoryview")
        probe = (ctypes.c_char * obj.nbytes).from_buffer(obj)
        addr = ctypes.addressof(probe)
        del probe
        return addr, obj.nbytes
    raise errors.invalid(
        f"cannot pass {type(obj).__name__}: use a NumPy array, CPU tensor or memoryview "
        "from a SharedBuffer, or a BufRef"
    )


def locate(obj: Any) -> Tuple[SharedBuffer, int, int]:
    """(buffer, byte offset, nbytes) of an array that lies inside a live
    SharedBuffer; ZppInvalidArgumentError if it lies in none."""
    addr, nbytes = address_of(obj)
    with _live_lock:
        bufs: List[SharedBuffer] = [b for b in (r() for r in _live.values()) if b is not None]
    for b in bufs:
        if not b.closed and b.address <= addr and addr + nbytes <= b.address + b.nbytes:
            return b, addr - b.address, nbytes
    raise errors.invalid(
        "this array is not in a zpp.SharedBuffer: the host backend reads and writes "
        "shared memory only (make it with SharedBuffer(n).numpy(...))"
    )
