"""errors.py: the exceptions of the client: TensordError with the wire status name
(include/tensord/tsd_errors.def) and the daemon's message, one subclass per status."""

from __future__ import annotations

from typing import Any


class TensordError(Exception):
    """A call that did not succeed: .status is the status name ("unknown_model"), .message the
    daemon's (or the client library's) message, .reply the reply header when the daemon answered."""

    status = "internal"

    def __init__(self, message: str, status: str | None = None, reply: dict[str, Any] | None = None):
        super().__init__(f"{status or self.status}: {message}")
        if status is not None:
            self.status = status
        self.message = message
        self.reply = reply


class LibraryNotFound(TensordError, OSError):
    """libtensord.so could not be loaded (see tensord._lib for where it is looked for)."""

    def __str__(self) -> str:
        return self.message


class BadRequest(TensordError):
    status = "bad_request"


class UnknownVerb(TensordError):
    status = "unknown_verb"


class UnknownModel(TensordError):
    status = "unknown_model"


class ShapeMismatch(TensordError):
    status = "shape_mismatch"


class TooLarge(TensordError):
    status = "too_large"


class Busy(TensordError):
    status = "busy"


class Timeout(TensordError, TimeoutError):
    status = "timeout"


class Cancelled(TensordError):
    status = "cancelled"


class Superseded(TensordError):
    status = "superseded"


class CompileFailed(TensordError):
    status = "compile_failed"


class DeviceError(TensordError):
    status = "device_error"


class OutOfMemory(TensordError):
    status = "out_of_memory"


class Unauthorised(TensordError):
    status = "unauthorised"


class ShuttingDown(TensordError):
    status = "shutting_down"


class VersionMismatch(TensordError):
    status = "version_mismatch"


class Internal(TensordError):
    status = "internal"


class SequenceEnded(TensordError):
    status = "sequence_ended"


class Unavailable(TensordError):
    status = "unavailable"


# Every status but "ok", by wire name (tests check this against tsd_errors.def).
ERRORS: dict[str, type[TensordError]] = {
    cls.status: cls
    for cls in (BadRequest, UnknownVerb, UnknownModel, ShapeMismatch, TooLarge, Busy, Timeout,
                Cancelled, Superseded, CompileFailed, DeviceError, OutOfMemory, Unauthorised,
                ShuttingDown, VersionMismatch, Internal, SequenceEnded, Unavailable)
}


def error_for(status: str, message: str, reply: dict[str, Any] | None = None) -> TensordError:
    """The exception for a status name: its subclass, or TensordError for a name this client does
    not know (a newer daemon's)."""
    cls = ERRORS.get(status)
    return cls(message, reply=reply) if cls else TensordError(message, status, reply)
