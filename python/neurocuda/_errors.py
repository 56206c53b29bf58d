"""neurocuda.Error and its subclasses, one per status of the library."""


class Error(Exception):
    """A failure reported by libneurocuda; str() is the library's message."""
    status = "error"

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class FileError(Error):
    """A file could not be opened, read or written."""
    status = "io"


class FormatError(Error):
    """A file is damaged or not what it claims to be."""
    status = "format"


class UnsupportedError(Error):
    """Valid input that the library cannot handle (e.g. an unsupported layer)."""
    status = "unsupported"


class ShapeError(Error):
    """Shapes that do not fit together (data against the model's input)."""
    status = "shape"


class OutOfMemoryError(Error):
    """Out of memory, or over the library's memory budget."""
    status = "memory"


class ArgumentError(Error, ValueError):
    """A bad parameter, option or data batch."""
    status = "argument"


class CancelledError(Error):
    """The job was cancelled by a progress callback."""
    status = "cancelled"


class DeviceError(Error):
    """The GPU or another engine failed or is absent."""
    status = "device"


class InternalError(Error):
    """A bug in the library."""
    status = "internal"


# indexed by neurocuda_status (lib/neurocuda.h)
BY_STATUS = [None, FileError, FormatError, UnsupportedError, ShapeError, OutOfMemoryError, ArgumentError,
             CancelledError, DeviceError, InternalError]


def error_for(code, message):
    cls = BY_STATUS[code] if 0 < code < len(BY_STATUS) else Error
    return cls(message, code)


def status_of(e):
    """The library's status number of an Error (0 for other exceptions)."""
    return BY_STATUS.index(type(e)) if type(e) in BY_STATUS else 0
