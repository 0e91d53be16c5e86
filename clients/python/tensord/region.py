"""region.py: shared-memory regions over unix:// (docs/PROTOCOL.md, "Shared memory"): a memfd the
C library makes, seals, maps and registers; numpy arrays over the mapping; the references infer
sends instead of tensor bytes."""

from __future__ import annotations

import ctypes
import math
from typing import Any, Sequence

from ._numpy import np as _np
from .dtypes import DType, dtype, numpy_dtype
from .errors import TensordError


class Region:
    """A region of size bytes shared with the daemon on one client's connection (Client.region).
    The client writes inputs before a call that names them and leaves them until it returns; the
    daemon writes outputs named in a writable region during the call. close() unregisters and
    unmaps it: no array over it may be used after."""

    def __init__(self, client: Any, handle: int, name: str, size: int, writable: bool):
        self._client, self._g = client, handle
        self.name, self.size, self.writable = name, size, writable
        addr = client._lib.tsd_region_data(handle)
        self.buffer = (ctypes.c_ubyte * size).from_address(addr)  # the mapping, read-write here

    def array(self, dt: str | DType, shape: Sequence[int], offset: int = 0) -> Any:
        """A numpy array of dtype and shape over the region's bytes from offset (no copy)."""
        if _np is None:
            raise TensordError("Region.array needs numpy; use Region.buffer", "bad_request")
        d = dtype(dt)
        n = math.prod(shape) * d.size
        if offset < 0 or offset % d.size or offset + n > self.size:
            raise ValueError(f"region {self.name}: [{offset}, {offset + n}) of {self.size} bytes, "
                             f"offset a multiple of {d.size}")
        return _np.frombuffer(self.buffer, dtype=numpy_dtype(_np, d), count=math.prod(shape),
                              offset=offset).reshape(tuple(shape))

    def offset_of(self, a: Any) -> int:
        """Where numpy array a (C-contiguous) starts in the region; ValueError when it is not in it."""
        base = ctypes.addressof(self.buffer)
        addr = a.__array_interface__["data"][0]
        if not a.flags["C_CONTIGUOUS"] or addr < base or addr + a.nbytes > base + self.size:
            raise ValueError(f"the array is not a contiguous view of region {self.name}")
        return addr - base

    def close(self) -> None:
        """Unregisters, unmaps and frees the region (idempotent)."""
        g, self._g = self._g, None
        if g:
            with self._client._lock:
                self._client._lib.tsd_region_destroy(g)

    def __enter__(self) -> Region:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def input_ref(name: str, value: Any, regions: Sequence[Region]) -> dict[str, Any]:
    """The "shm.inputs" entry of name: value is (region, offset, dtype, shape), or a numpy array
    that is a view of one of regions."""
    if isinstance(value, tuple):
        region, offset, dt, shape = value
        return {"name": name, "dtype": dtype(dt).name, "shape": list(shape), "region": region.name, "offset": offset}
    for region in regions:
        try:
            offset = region.offset_of(value)
        except ValueError:
            continue
        return {"name": name, "dtype": str(value.dtype.name), "shape": list(value.shape), "region": region.name,
                "offset": offset}
    raise ValueError(f"shm input {name}: not a view of a region of this client")


def outputs_from(header: dict[str, Any], regions: Sequence[Region]) -> dict[str, Any]:
    """The outputs the daemon wrote into regions (the reply's "shm_outputs"), as arrays over them."""
    out: dict[str, Any] = {}
    by_name = {r.name: r for r in regions}
    for e in header.get("shm_outputs", []):
        region = by_name.get(e["region"])
        if region is not None:
            out[e["name"]] = region.array(e["dtype"], e["shape"], e["offset"])
    return out
