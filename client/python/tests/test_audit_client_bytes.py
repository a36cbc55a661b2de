"""Audit of the Python client: untyped byte views (a SharedBuffer.view(), a
uint8 array) take an explicit dtype, as dtype_of's contract says, instead
of being refused for their 1-byte elements."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import zpp


def test_byte_views_take_an_explicit_dtype(daemon, job) -> None:
    with zpp.Connection(daemon.socket) as c, zpp.SharedBuffer(4096) as shm:
        c.hello(job, 0, 1)
        src = shm.numpy(np.float32, 16)
        src[:] = np.arange(16, dtype=np.float32) * 1.5
        # memoryviews of bytes, as SharedBuffer.view() gives them
        res = c.allgather(shm.view(0, 64), shm.view(64, 64), dtype="fp32")
        assert res.logical_bytes == 64
        assert np.array_equal(shm.numpy(np.float32, 16, offset=64), src)
        # uint8 arrays
        c.allgather(shm.numpy(np.uint8, 64), shm.numpy(np.uint8, 64, offset=128), dtype=zpp.DType.FP32)
        assert np.array_equal(shm.numpy(np.float32, 16, offset=128), src)
        # without a dtype they are still refused, and so are typed arrays of
        # another size than the dtype
        with pytest.raises(zpp.ZppInvalidArgumentError, match="dtype"):
            c.allgather(shm.view(0, 64), shm.view(64, 64))
        with pytest.raises(zpp.ZppInvalidArgumentError, match="2-byte elements"):
            c.allgather(shm.numpy(np.uint16, 32), shm.numpy(np.uint16, 32, offset=64), dtype="fp32")
        del src
        gc.collect()
