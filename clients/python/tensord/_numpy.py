"""_numpy.py: numpy when it can be imported, else None; the client never needs it.
TENSORD_NO_NUMPY=1 in the environment makes the whole process go without it (for tests)."""

from __future__ import annotations

import os
from types import ModuleType


def _import() -> ModuleType | None:
    if os.environ.get("TENSORD_NO_NUMPY", "") not in ("", "0"):
        return None
    try:
        import numpy
    except ImportError:
        return None
    return numpy


np: ModuleType | None = _import()
