"""dtypes.py: the element types tensord knows (include/tensord/dtype.h's tsd_dtype, in its order),
their wire names, sizes, how Python packs them (struct, little-endian) and numpy's dtype of each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DType:
    """One element type: wire name, tsd_dtype value, bytes per element, struct format, kind."""

    name: str
    code: int
    size: int
    fmt: str
    kind: type


# The order is tsd_dtype's (the numbers cross the C boundary in tsd_tensor.dtype).
DTYPES: tuple[DType, ...] = (
    DType("bool", 0, 1, "?", bool),
    DType("uint8", 1, 1, "B", int),
    DType("int32", 2, 4, "i", int),
    DType("int64", 3, 8, "q", int),
    DType("float16", 4, 2, "e", float),
    DType("float32", 5, 4, "f", float),
)

# The short forms tsd_dtype_parse accepts besides the names.
_SHORT = {"b1": "bool", "u8": "uint8", "i32": "int32", "i64": "int64", "f16": "float16", "f32": "float32"}
_BY_NAME = {d.name: d for d in DTYPES}
_BY_NAME.update({short: _BY_NAME[full] for short, full in _SHORT.items()})


def dtype(spec: str | DType) -> DType:
    """The DType named spec ("float32", "f32", ...); ValueError when unknown."""
    if isinstance(spec, DType):
        return spec
    found = _BY_NAME.get(str(spec))
    if found is None:
        raise ValueError(f"unknown dtype {spec!r} (one of {', '.join(d.name for d in DTYPES)})")
    return found


def dtype_of_code(code: int) -> DType:
    """The DType of a tsd_dtype value; ValueError when out of range."""
    if not 0 <= code < len(DTYPES):
        raise ValueError(f"unknown dtype code {code}")
    return DTYPES[code]


def numpy_dtype(np: Any, dt: DType) -> Any:
    """The little-endian numpy dtype of a tensord dtype (np: the numpy module)."""
    return np.dtype(dt.name).newbyteorder("<")
