"""TF1's error classes (`tf.errors`). Every runtime error of a session run derives from OpError."""
from __future__ import annotations

__all__ = [
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError", "PermissionDeniedError",
    "ResourceExhaustedError", "FailedPreconditionError", "AbortedError", "OutOfRangeError",
    "UnimplementedError", "InternalError", "UnavailableError", "DataLossError",
    "UnauthenticatedError", "exception_type_from_error_code", "error_code_from_exception_type",
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
]


class OpError(Exception):
    """An error raised while running an op; `node_def`, `op` and `message` as in TF1."""

    def __init__(self, node_def=None, op=None, message: str = "", error_code: int = 2) -> None:
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message
        self.error_code = error_code

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return type(self), (None, None, self.message)


def _make(name: str, code: int):
    def __init__(self, node_def=None, op=None, message: str = "", *args) -> None:
        OpError.__init__(self, node_def, op, message, code)
    return type(name, (OpError,), {"__init__": __init__, "__doc__": f"TF1 error code {code}."})


CancelledError = _make("CancelledError", 1)
UnknownError = _make("UnknownError", 2)
InvalidArgumentError = _make("InvalidArgumentError", 3)
DeadlineExceededError = _make("DeadlineExceededError", 4)
NotFoundError = _make("NotFoundError", 5)
AlreadyExistsError = _make("AlreadyExistsError", 6)
PermissionDeniedError = _make("PermissionDeniedError", 7)
ResourceExhaustedError = _make("ResourceExhaustedError", 8)
FailedPreconditionError = _make("FailedPreconditionError", 9)
AbortedError = _make("AbortedError", 10)
OutOfRangeError = _make("OutOfRangeError", 11)
UnimplementedError = _make("UnimplementedError", 12)
InternalError = _make("InternalError", 13)
UnavailableError = _make("UnavailableError", 14)
DataLossError = _make("DataLossError", 15)
UnauthenticatedError = _make("UnauthenticatedError", 16)

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16

_BY_CODE = {c: cls for cls, c in (
    (CancelledError, 1), (UnknownError, 2), (InvalidArgumentError, 3),
    (DeadlineExceededError, 4), (NotFoundError, 5), (AlreadyExistsError, 6),
    (PermissionDeniedError, 7), (ResourceExhaustedError, 8), (FailedPreconditionError, 9),
    (AbortedError, 10), (OutOfRangeError, 11), (UnimplementedError, 12), (InternalError, 13),
    (UnavailableError, 14), (DataLossError, 15), (UnauthenticatedError, 16))}


def exception_type_from_error_code(error_code: int) -> type:
    """The OpError subclass for a TF1 error code."""
    return _BY_CODE[error_code]


def error_code_from_exception_type(cls: type) -> int:
    """The TF1 error code of an OpError subclass."""
    for code, c in _BY_CODE.items():
        if c is cls:
            return code
    return UNKNOWN


for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, OpError):
        _cls.__module__ = "jitflow.errors"
