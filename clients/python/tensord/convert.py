"""convert.py: values to and from struct tsd_tensor: numpy arrays by pointer (made C-contiguous,
little-endian and of a tensord dtype first, copied only when they are not), Tensor and plain
Python data through Tensor; replies copied out into numpy arrays or Tensor objects."""

from __future__ import annotations

import ctypes
from typing import Any

from ._lib import MAX_DIMS, TsdTensor
from ._numpy import np as _np
from .dtypes import DType, dtype as to_dtype, dtype_of_code, numpy_dtype
from .tensor import Tensor

# numpy types without a tensord dtype, and the one they are converted to.
_WIDEN = {"float64": "float32", "int8": "int32", "int16": "int32", "uint16": "int32",
          "uint32": "int64", "uint64": "int64"}
_EMPTY = ctypes.create_string_buffer(1)  # a valid pointer for empty tensors


def _is_numpy(value: Any) -> bool:
    return _np is not None and isinstance(value, (_np.ndarray, _np.generic))


class Wire:
    """One outgoing tensor: the tsd_tensor and the Python objects its pointers point into."""

    __slots__ = ("struct", "keep")

    def __init__(self, name: str, dt: DType, shape: tuple[int, ...], address: int, keep: list[Any]):
        if len(shape) > MAX_DIMS:
            raise ValueError(f"{name}: rank {len(shape)} is over {MAX_DIMS}")
        bname = name.encode()
        self.keep = keep + [bname]
        self.struct = TsdTensor(name=bname, dtype=dt.code, ndim=len(shape), data=address)
        for i, d in enumerate(shape):
            self.struct.shape[i] = d


def _numpy_wire(name: str, value: Any) -> Wire:
    arr = _np.asarray(value)
    kind = _WIDEN.get(arr.dtype.name, arr.dtype.name)
    try:
        dt = to_dtype(kind)
    except ValueError:
        raise TypeError(f"{name}: numpy dtype {arr.dtype} has no tensord dtype") from None
    arr = _np.ascontiguousarray(arr, dtype=numpy_dtype(_np, dt))  # no copy when it already is
    address = arr.ctypes.data if arr.nbytes else ctypes.addressof(_EMPTY)
    return Wire(name, dt, tuple(arr.shape), address, [arr])


def _buffer_address(data: Any) -> tuple[int, Any]:
    """The address of a buffer's bytes and the object to keep alive while it is used."""
    if isinstance(data, bytes):
        ref = ctypes.c_char_p(data)
        return ctypes.cast(ref, ctypes.c_void_p).value or 0, ref
    view = memoryview(data).cast("B")
    if view.nbytes == 0:
        return ctypes.addressof(_EMPTY), _EMPTY
    if view.readonly:
        copy = bytes(view)
        return _buffer_address(copy)
    ref = (ctypes.c_char * view.nbytes).from_buffer(view)
    return ctypes.addressof(ref), (ref, view)


def to_wire(name: str, value: Any) -> Wire:
    """value (numpy array, Tensor, array.array, nested list, scalar) as a tensor called name."""
    if _is_numpy(value):
        return _numpy_wire(name, value)
    t = value if isinstance(value, Tensor) else Tensor(value)
    address, keep = _buffer_address(t.data)
    return Wire(name, t.dtype, tuple(t.shape), address, [t, keep])


def from_wire(t: TsdTensor, use_numpy: bool) -> Any:
    """A copy of a reply tensor: a numpy array when use_numpy, else a Tensor."""
    dt = dtype_of_code(t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if use_numpy and _np is not None:
        arr = _np.empty(shape, dtype=numpy_dtype(_np, dt))
        if t.nbytes:
            ctypes.memmove(arr.ctypes.data, t.data, t.nbytes)
        return arr
    raw = ctypes.string_at(t.data, t.nbytes) if t.nbytes else b""
    return Tensor(raw, dt, shape)


def numpy_available() -> bool:
    return _np is not None


__all__ = ["Wire", "to_wire", "from_wire", "numpy_available"]
