"""_lib.py: loading libtensord.so (the C client library) through ctypes and declaring the
functions of include/tensord/client.h and protocol.h that the Python client calls.

Where the library is looked for, first found wins:
  1. the environment variable TENSORD_LIB (a path to the .so): only there, an error if it fails;
  2. "libtensord.so.0" through the dynamic loader (installed, or on LD_LIBRARY_PATH);
  3. a source checkout around this package: <repo>/build/lib/libtensord.so.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

from .errors import LibraryNotFound, TensordError

MAX_DIMS = 8  # TSD_MAX_DIMS
SONAME = "libtensord.so.0"


class TsdTensor(ctypes.Structure):
    """struct tsd_tensor (include/tensord/protocol.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),  # tsd_dtype
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
    ]


_vp, _cp, _int, _sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
# name: (result type, argument types); every symbol the client uses.
_PROTOTYPES: dict[str, tuple[object, list[object]]] = {
    "tsd_client_open": (_vp, [_cp, _int, _cp, _sz]),
    "tsd_client_close": (None, [_vp]),
    "tsd_client_call_text": (_int, [_vp, _cp, ctypes.POINTER(TsdTensor), _int, ctypes.POINTER(_vp)]),
    "tsd_client_error": (_cp, [_vp]),
    "tsd_client_default_url": (ctypes.c_bool, [_cp, _cp, _cp, _sz]),
    "tsd_reply_free": (None, [_vp]),
    "tsd_reply_status": (_int, [_vp]),
    "tsd_reply_error": (_cp, [_vp]),
    "tsd_reply_text": (_vp, [_vp]),  # malloc'd: freed with tsd_free
    "tsd_free": (None, [_vp]),
    "tsd_reply_ntensors": (_int, [_vp]),
    "tsd_reply_tensor": (ctypes.POINTER(TsdTensor), [_vp, _int]),
    "tsd_status_name": (_cp, [_int]),
    "tsd_region_create": (_vp, [_vp, _cp, _sz, ctypes.c_bool]),
    "tsd_region_data": (_vp, [_vp]),
    "tsd_region_destroy": (None, [_vp]),
}


def _candidates() -> list[str]:
    repo = Path(__file__).resolve().parents[3]  # <repo>/clients/python/tensord/_lib.py
    return [SONAME, str(repo / "build" / "lib" / "libtensord.so")]


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as e:
            raise LibraryNotFound(f"{lib._name}: no symbol {name} (an older libtensord?)") from e
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded library with its prototypes declared (loaded once per process).
    Raises LibraryNotFound saying where it looked."""
    explicit = os.environ.get("TENSORD_LIB")
    if explicit:
        try:
            return _declare(ctypes.CDLL(explicit))
        except OSError as e:
            raise LibraryNotFound(f"TENSORD_LIB={explicit}: {e}") from e
    tried = []
    for path in _candidates():
        try:
            return _declare(ctypes.CDLL(path))
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise LibraryNotFound("libtensord not found; set TENSORD_LIB to the path of libtensord.so "
                          "(make BUILD=... BUILD/lib/libtensord.so builds it). Tried: "
                          + "; ".join(tried))


def status_name(code: int) -> str:
    """The wire name of a tsd_status value."""
    return library().tsd_status_name(code).decode()


def default_url() -> str:
    """tsd_client_default_url with this process's TENSORD_URL and XDG_RUNTIME_DIR."""
    buf = ctypes.create_string_buffer(4096)
    env = [os.environ.get(k) for k in ("TENSORD_URL", "XDG_RUNTIME_DIR")]
    args = [v.encode() if v is not None else None for v in env]
    if not library().tsd_client_default_url(args[0], args[1], buf, len(buf)):
        raise TensordError("the default daemon address does not fit (TENSORD_URL, XDG_RUNTIME_DIR)")
    return buf.value.decode()
