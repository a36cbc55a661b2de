"""The exception classes come from libzpp's error table, carry code and
message, inherit the natural builtin types and survive pickling."""

from __future__ import annotations

import ctypes
import os
import pickle

import pytest

import zpp
from zpp import _lib, errors


def test_one_class_per_code_of_the_c_table() -> None:
    lib = _lib.LIB
    seen = set()
    for code in range(-1, zpp.ZPP_ERRNO_MAX - 1, -1):
        cls = zpp.error_class(code)
        assert cls is not zpp.ZppError, code
        assert issubclass(cls, zpp.ZppError)
        assert cls.code == code
        assert cls.name == lib.zpp_err_name(code).decode()
        assert cls.description == lib.zpp_strerror(code).decode()
        seen.add(cls)
    assert len(seen) == -zpp.ZPP_ERRNO_MAX
    # The table ends where the library's does: ZPP_ERRNO_MAX matches zpp.h.
    assert lib.zpp_err_name(zpp.ZPP_ERRNO_MAX - 1) == b"UNKNOWN"
    assert set(errors.codes()) == set(range(zpp.ZPP_ERRNO_MAX, 0))


@pytest.mark.parametrize(
    "name, builtin",
    [
        ("ZppTimeoutError", TimeoutError),
        ("ZppPermissionError", PermissionError),
        ("ZppNotFoundError", LookupError),
        ("ZppInvalidArgumentError", ValueError),
        ("ZppRangeError", ValueError),
        ("ZppClosedError", ConnectionError),
        ("ZppMemoryError", MemoryError),
        ("ZppUnsupportedError", NotImplementedError),
    ],
)
def test_classes_also_inherit_builtin_types(name: str, builtin: type) -> None:
    cls = getattr(zpp, name)
    assert issubclass(cls, zpp.ZppError) and issubclass(cls, builtin)
    e = cls(cls.code, "why")
    with pytest.raises(builtin):
        raise e


def test_error_carries_code_name_and_message_and_pickles() -> None:
    e = zpp.error_from_code(-7, "call 3 differs across ranks: ...")
    assert type(e) is zpp.ZppMismatchError
    assert (e.code, e.name, e.message) == (-7, "EMISMATCH", "call 3 differs across ranks: ...")
    assert str(e) == "EMISMATCH: call 3 differs across ranks: ..."
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and (back.code, back.message) == (e.code, e.message)
    # default message: the library's
    assert zpp.error_from_code(-9).message == "timed out"


def test_unknown_code_gives_the_base_class() -> None:
    e = zpp.error_from_code(-4242, "from the future")
    assert type(e) is zpp.ZppError and e.name == "UNKNOWN" and e.code == -4242


def test_every_c_function_is_declared_in_the_one_table() -> None:
    for name, (restype, argtypes) in _lib.SIGNATURES.items():
        fn = getattr(_lib.LIB, name)
        assert fn.restype is restype and list(fn.argtypes) == list(argtypes), name
    # Pointer-returning functions are declared as such (no int truncation).
    assert _lib.SIGNATURES["zpp_shm_ptr"][0] is ctypes.c_void_p


def test_library_comes_from_ZPP_LIB() -> None:
    assert os.environ.get("ZPP_LIB")
    assert zpp.library_path == os.environ["ZPP_LIB"]
    assert _lib.candidate_paths()[0] == os.environ["ZPP_LIB"]


def test_connect_to_a_missing_socket_raises_not_found(tmp_path) -> None:
    with pytest.raises(zpp.ZppNotFoundError) as ei:
        zpp.Connection(str(tmp_path / "nothing.sock"))
    assert ei.value.code == -5 and "nothing.sock" in ei.value.message
