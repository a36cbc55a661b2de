"""Exceptions of the zpp package, built at import from libzpp's error list.

libzpp's codes come from one X-macro table (ZPP_ERRNO_MAP in zpp.h); this
module walks that table through the library itself (zpp_err_name and
zpp_strerror for -1, -2, ... until the library says UNKNOWN) and makes one
subclass of ZppError per code. So a code added in C shows up here without a
change: it gets a generated class name (``ZppFooError`` for EFOO) unless
``_PYTHON_NAMES`` gives it a friendlier one and a builtin base.

Every exception carries ``code`` (the negative ZPP_E* value, as the daemon
sent it), ``name`` ("EMISMATCH") and ``message`` (the daemon's or the
library's text for this failure). Subclasses also derive from the builtin
type a Python caller would catch (ValueError, TimeoutError, ...). They
pickle by (code, message), so they cross multiprocessing intact.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Type

from ._lib import LIB, text

__all__ = ["ZppError", "error_class", "error_from_code", "codes"]


class ZppError(Exception):
    """Base of every error from libzpp or zppd.

    ``code``: negative ZPP_E* value; ``name``: its C name without the
    ``ZPP_`` prefix; ``message``: what went wrong this time (the daemon's
    message when the daemon refused the call).
    """

    code: int = 0
    name: str = "UNKNOWN"
    description: str = "unknown error"

    def __init__(self, code: int, message: Optional[str] = None) -> None:
        self.code = int(code)
        self.name = text(LIB.zpp_err_name(self.code))
        self.description = text(LIB.zpp_strerror(self.code))
        self.message = message or self.description
        super().__init__(f"{self.name}: {self.message}")

    def __reduce__(self):  # type: ignore[override]
        return (type(self), (self.code, self.message))


# C name -> (Python class name, builtin bases). Codes not listed still get a
# class (named from the C name, with no builtin base).
_PYTHON_NAMES: Dict[str, Tuple[str, Tuple[type, ...]]] = {
    "EINVAL": ("ZppInvalidArgumentError", (ValueError,)),
    "EPROTO": ("ZppProtocolError", ()),
    "ENOMEM": ("ZppMemoryError", (MemoryError,)),
    "ELIMIT": ("ZppLimitError", ()),
    "ENOENT": ("ZppNotFoundError", (LookupError,)),
    "EPERM": ("ZppPermissionError", (PermissionError,)),
    "EMISMATCH": ("ZppMismatchError", ()),
    "EABORTED": ("ZppAbortedError", ()),
    "ETIMEDOUT": ("ZppTimeoutError", (TimeoutError,)),
    "EIO": ("ZppIOError", (OSError,)),
    "ECLOSED": ("ZppClosedError", (ConnectionError,)),
    "EVERSION": ("ZppVersionError", ()),
    "EBACKEND": ("ZppBackendError", ()),
    "EUNSUPPORTED": ("ZppUnsupportedError", (NotImplementedError,)),
    "EDRAINING": ("ZppDrainingError", ()),
    "ESTATE": ("ZppStateError", ()),
    "EEXIST": ("ZppExistsError", ()),
    "ERANGE": ("ZppRangeError", (ValueError,)),
    "EBUSY": ("ZppBusyError", ()),
}

_MAX_CODES = 1000  # a guard against a library that never says UNKNOWN

_BY_CODE: Dict[int, Type[ZppError]] = {}


def _build() -> List[str]:
    made: List[str] = []
    for i in range(1, _MAX_CODES):
        code = -i
        cname = text(LIB.zpp_err_name(code))
        if cname == "UNKNOWN":
            break
        pyname, bases = _PYTHON_NAMES.get(cname, ("Zpp" + cname[1:].capitalize() + "Error", ()))
        desc = text(LIB.zpp_strerror(code))
        cls = type(
            pyname,
            (ZppError,) + bases,
            {
                "__doc__": f"ZPP_{cname} ({code}): {desc}.",
                "__module__": __name__,
                "code": code,
                "name": cname,
                "description": desc,
            },
        )
        _BY_CODE[code] = cls
        globals()[pyname] = cls
        made.append(pyname)
    return made


__all__ += _build()


def codes() -> Dict[int, Type[ZppError]]:
    """Code -> exception class, for every code the library knows."""
    return dict(_BY_CODE)


def error_class(code: int) -> Type[ZppError]:
    """The exception class of a ZPP_E* code (ZppError for unknown codes)."""
    return _BY_CODE.get(int(code), ZppError)


def error_from_code(code: int, message: Optional[str] = None) -> ZppError:
    """An exception instance for code with message (default: strerror)."""
    return error_class(code)(code, message)


def invalid(message: str) -> ZppError:
    """A ZppInvalidArgumentError raised by Python-side checks (also a ValueError)."""
    return error_from_code(-1, message)
