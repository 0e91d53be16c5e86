"""tensor.py: Tensor, a tensor without numpy (dtype, shape and the little-endian bytes of its
elements), built from nested lists, scalars, array.array or bytes, and turned back into lists."""

from __future__ import annotations

import array
import struct
import sys
from typing import Any, Iterable, Sequence

from .dtypes import DType, dtype as to_dtype, numpy_dtype

Buffer = bytes | bytearray | memoryview | array.array

# array.array type codes by (kind, item size) -> dtype name.
_ARRAY_DTYPES = {("f", 4): "float32", ("i", 1): "uint8", ("i", 4): "int32", ("i", 8): "int64"}


def _array_dtype(a: array.array) -> str | None:
    kind = "f" if a.typecode in "fd" else "i"
    if a.typecode in "bhH":  # no such dtype: signed bytes, 16-bit integers
        return None
    if a.typecode == "B":
        return "uint8"
    return _ARRAY_DTYPES.get((kind, a.itemsize))


def _shape_of(data: Any) -> list[int]:
    shape: list[int] = []
    while isinstance(data, (list, tuple)):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return shape


def _flatten(data: Any, shape: Sequence[int], depth: int, out: list[Any]) -> None:
    if depth == len(shape):
        if isinstance(data, (list, tuple)):
            raise ValueError("ragged nested list: more nesting than the first element's")
        out.append(data)
        return
    if not isinstance(data, (list, tuple)) or len(data) != shape[depth]:
        raise ValueError(f"ragged nested list: expected {shape[depth]} elements at depth {depth}")
    for item in data:
        _flatten(item, shape, depth + 1, out)


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class Tensor:
    """A dense row-major tensor without numpy.

    Tensor(data, dtype=None, shape=None):
      - data a nested list/tuple or a scalar: shape from the nesting; dtype defaults to bool when
        every element is a bool, else float32 (give "int32"/"int64" for integer tensors);
      - data an array.array: used as is when its type fits dtype (no copy); dtype defaults from
        the type code ('f' float32, 'B' uint8, 'i'/'l'/'q' int32 or int64 by item size);
      - data bytes-like: the raw little-endian elements, dtype required; shape defaults to 1-d.
    """

    __slots__ = ("dtype", "shape", "data")

    def __init__(self, data: Any, dtype: str | DType | None = None, shape: Sequence[int] | None = None):
        if isinstance(data, Tensor):
            data, dtype, shape = data.data, dtype or data.dtype, shape or data.shape
        if isinstance(data, array.array):
            self._from_array(data, dtype, shape)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            if dtype is None:
                raise TypeError("Tensor from bytes needs a dtype")
            self.dtype = to_dtype(dtype)
            self.data = data
            nbytes = memoryview(data).nbytes
            self.shape = tuple(shape) if shape is not None else (nbytes // self.dtype.size,)
            if _numel(self.shape) * self.dtype.size != nbytes:
                raise ValueError(f"{nbytes} bytes do not hold {self.dtype.name} {list(self.shape)}")
        else:
            self._from_nested(data, dtype, shape)

    def _from_array(self, a: array.array, dtype: str | DType | None, shape: Sequence[int] | None) -> None:
        own = _array_dtype(a)
        dt = to_dtype(dtype) if dtype is not None else to_dtype(own or "float32")
        if own == dt.name and sys.byteorder == "little":
            self.data: Buffer = a
        else:  # convert element by element
            self.data = _pack(dt, a.tolist())
        self.dtype = dt
        self.shape = tuple(shape) if shape is not None else (len(a),)
        if _numel(self.shape) != len(a):
            raise ValueError(f"{len(a)} elements do not fill shape {list(self.shape)}")

    def _from_nested(self, data: Any, dtype: str | DType | None, shape: Sequence[int] | None) -> None:
        nested = _shape_of(data)
        flat: list[Any] = []
        _flatten(data, nested, 0, flat)
        if dtype is None:
            dtype = "bool" if flat and all(isinstance(v, bool) for v in flat) else "float32"
        self.dtype = to_dtype(dtype)
        self.shape = tuple(shape) if shape is not None else tuple(nested)
        if _numel(self.shape) != len(flat):
            raise ValueError(f"{len(flat)} elements do not fill shape {list(self.shape)}")
        self.data = _pack(self.dtype, flat)

    @property
    def nbytes(self) -> int:
        return _numel(self.shape) * self.dtype.size

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def flat(self) -> list[Any]:
        """The elements in row-major order, as Python numbers (bools for bool)."""
        n = _numel(self.shape)
        return list(struct.unpack_from(f"<{n}{self.dtype.fmt}", memoryview(self.data).cast("B")))

    def tolist(self) -> Any:
        """Nested lists of the shape (a number for a 0-d tensor)."""
        flat = self.flat()
        if not self.shape:
            return flat[0]
        return _nest(flat, self.shape)

    def numpy(self) -> Any:
        """A numpy array copy (numpy must be installed)."""
        import numpy

        arr = numpy.frombuffer(memoryview(self.data).cast("B"), dtype=numpy_dtype(numpy, self.dtype))
        return arr.reshape(self.shape).copy()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        return (self.dtype, self.shape) == (other.dtype, other.shape) and \
            bytes(memoryview(self.data).cast("B")) == bytes(memoryview(other.data).cast("B"))

    def __repr__(self) -> str:
        return f"Tensor({self.tolist()!r}, dtype={self.dtype.name!r})"


def _pack(dt: DType, flat: list[Any]) -> bytearray:
    if dt.kind is float:
        values = [float(v) for v in flat]
    elif dt.kind is bool:
        values = [bool(v) for v in flat]
    else:
        values = [int(v) for v in flat]
    buf = bytearray(len(values) * dt.size)
    struct.pack_into(f"<{len(values)}{dt.fmt}", buf, 0, *values)
    return buf


def _nest(flat: list[Any], shape: Sequence[int]) -> list[Any]:
    if len(shape) == 1:
        return flat
    step = _numel(shape[1:])
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
