"""tensord: the Python client of the tensord inference daemon, over the C client library
(libtensord.so) through ctypes. Standard library only; numpy arrays in and out when numpy is
installed, Tensor objects (nested lists) otherwise.

    import tensord
    with tensord.Client() as c:
        print(c.hello()["daemon"])
        y = c.infer("mlp", {"x": [[0.5] * 16]})["p"]
"""

from .client import DEFAULT_TIMEOUT_MS, PROTOCOL_VERSION, Client, Reply
from .dtypes import DTYPES, DType, dtype
from .errors import (ERRORS, BadRequest, Busy, Cancelled, CompileFailed, DeviceError, Internal,
                     LibraryNotFound, OutOfMemory, SequenceEnded, ShapeMismatch, ShuttingDown, Superseded,
                     TensordError, Timeout, TooLarge, Unauthorised, Unavailable, UnknownModel, UnknownVerb,
                     VersionMismatch, error_for)
from .graph import OPS, Graph, Node
from .region import Region
from .tensor import Tensor

__all__ = [
    "Client", "Reply", "Region", "DEFAULT_TIMEOUT_MS", "PROTOCOL_VERSION", "Graph", "Node", "OPS", "Tensor",
    "DType", "DTYPES", "dtype", "TensordError", "LibraryNotFound", "ERRORS", "error_for",
    "BadRequest", "UnknownVerb", "UnknownModel", "ShapeMismatch", "TooLarge", "Busy", "Timeout",
    "Cancelled", "Superseded", "CompileFailed", "DeviceError", "OutOfMemory", "Unauthorised",
    "ShuttingDown", "VersionMismatch", "Internal", "SequenceEnded", "Unavailable",
]
