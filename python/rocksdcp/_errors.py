"""rocksdcp's exceptions: one class per status code of the C++ library.

Every call that fails raises the class of its code, whose message is the
library's (it names the checkpoint, the item and what is wrong). Each class
also derives from the built-in exception a Python caller would catch for
the same failure: ``NotFound`` is a ``KeyError``, ``InvalidArgument`` a
``ValueError``, ``IOError`` an ``OSError``, ``NotSupported`` a
``NotImplementedError``. All derive from ``rocksdcp.Error``.
"""


class Error(Exception):
    """Base of every rocksdcp error. ``code`` names the status code."""

    code = "Unknown"

    def __str__(self):
        # KeyError's own __str__ quotes its message; the message is prose.
        return str(self.args[0]) if self.args else ""


class NotFound(Error, KeyError):
    """The named checkpoint, item (fqn) or store does not exist."""

    code = "NotFound"


class Corruption(Error):
    """Stored bytes failed verification: checksum, FlatBuffers verifier, size."""

    code = "Corruption"


class InvalidArgument(Error, ValueError):
    """The request is malformed: bad id, wrong dtype or shape, bad plan."""

    code = "InvalidArgument"


class IOError(Error, OSError):  # noqa: A001 - the library's name for it
    """The operating system or RocksDB failed to read or write."""

    code = "IOError"


class AlreadyExists(Error, FileExistsError):
    """The checkpoint id is committed already (save without overwrite)."""

    code = "AlreadyExists"


class Busy(Error):
    """The store is locked by another process, or the id is being saved."""

    code = "Busy"


class FailedPrecondition(Error):
    """A call out of order, or on an object in the wrong state."""

    code = "FailedPrecondition"


class NotSupported(Error, NotImplementedError):
    """Valid, but this build or backend does not support it."""

    code = "NotSupported"


class Aborted(Error):
    """A step of a checkpoint failed on one or more ranks."""

    code = "Aborted"


class InternalError(Error):
    """A bug in rocksdcp. Please report it."""

    code = "Internal"


class ResourceExhausted(Error, MemoryError):
    """Memory ran out; the operation stopped and nothing committed changed."""

    code = "ResourceExhausted"


_BY_CODE = {
    cls.code: cls
    for cls in (NotFound, Corruption, InvalidArgument, IOError, AlreadyExists,
                Busy, FailedPrecondition, NotSupported, Aborted, InternalError,
                ResourceExhausted)
}


def error_class(code):
    """The exception class of a status code name ("NotFound", ...)."""
    return _BY_CODE.get(code, Error)
