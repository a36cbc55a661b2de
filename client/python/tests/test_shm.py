"""SharedBuffer: views share the memory, close() refuses while views live,
arrays are located inside their buffer."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import zpp


def test_numpy_and_memoryview_share_the_mapping() -> None:
    with zpp.SharedBuffer(4096) as shm:
        a = shm.numpy(np.float32, 16, offset=64)
        a[:] = np.arange(16, dtype=np.float32)
        mv = shm.view(64, 64)
        assert bytes(mv) == a.tobytes()
        assert zpp.locate(a[4:8])[1:] == (64 + 16, 16)
        del a, mv


def test_close_refuses_while_a_view_is_alive() -> None:
    shm = zpp.SharedBuffer(4096)
    a = shm.numpy("float16")
    b = a[10:20]
    del a
    with pytest.raises(BufferError):
        shm.close()
    assert not shm.closed
    b[:] = 1  # still mapped
    del b
    gc.collect()
    shm.close()
    assert shm.closed
    shm.close()  # idempotent


def test_arrays_outside_shared_memory_are_refused() -> None:
    with pytest.raises(zpp.ZppInvalidArgumentError) as ei:
        zpp.locate(np.zeros(4, np.float32))
    assert isinstance(ei.value, ValueError) and "SharedBuffer" in ei.value.message
    with zpp.SharedBuffer(4096) as shm:
        a = shm.numpy(np.float32, (8, 8))
        with pytest.raises(ValueError, match="contiguous"):
            zpp.locate(a[:, ::2])
        del a


def test_bad_sizes_are_checked_in_python() -> None:
    with pytest.raises(zpp.ZppInvalidArgumentError):
        zpp.SharedBuffer(0)
    with zpp.SharedBuffer(4096) as shm:
        with pytest.raises(zpp.ZppRangeError):
            shm.view(4000, 100)


def test_torch_cpu_tensor_view() -> None:
    torch = pytest.importorskip("torch")
    with zpp.SharedBuffer(4096) as shm:
        t = shm.torch(torch.bfloat16, 32, offset=128)
        t[:] = 1.5
        raw = shm.numpy(np.uint16, 32, offset=128)
        assert (raw == 0x3FC0).all()  # 1.5 in bf16
        assert zpp.dtype_of(t) == (zpp.DType.BF16, 2)
        with pytest.raises(BufferError):
            shm.close()
        del t, raw


def test_views_outlive_a_collected_buffer() -> None:
    shm = zpp.SharedBuffer(4096)
    a = shm.numpy(np.int32, 4)
    a[:] = 5
    del shm
    gc.collect()
    a += 1  # the Python mapping lives on with the view
    assert (a == 6).all()
