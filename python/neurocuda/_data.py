"""Streaming a Python loader into the library, batch by batch.

A loader is any iterable of (inputs, labels) batches, torch tensors or NumPy
arrays, re-iterable for each pass (a torch DataLoader is).  The library asks
for the next batch when it needs it (calibration reads the first batches,
evaluation and each fine-tuning epoch a whole pass) and keeps only the
batches in use; this side keeps only the current batch alive for C to copy.
"""
import ctypes

import numpy as np

from ._call import call
from ._errors import ArgumentError, Error, ShapeError, status_of
from ._lib import NEXT_FN, REWIND_FN, lib

FLOAT_P = ctypes.POINTER(ctypes.c_float)
INT32_P = ctypes.POINTER(ctypes.c_int32)


def to_numpy(value):
    """A torch tensor or array-like as a NumPy array (no copy when possible)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def split_batch(batch):
    if isinstance(batch, dict) and len(batch) == 2:
        batch = tuple(batch.values())
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ArgumentError("a data loader must yield (inputs, labels) pairs, got %s" % type(batch).__name__)
    return batch[0], batch[1]


def check_images(x, shape, where):
    """float32 C-order [n, *shape] from a batch's inputs, or ArgumentError/ShapeError."""
    x = to_numpy(x)
    if x.dtype.kind != "f":
        raise ArgumentError("%s: inputs must be floating point, preprocessed as the model was trained, not %s "
                            "(e.g. x.float() / 255, then normalise)" % (where, x.dtype))
    if x.ndim == len(shape) and len(shape) == 3 and shape[0] == 1 and x.shape[1:] == tuple(shape[1:]):
        x = x[:, None]  # [n, H, W] for one channel
    if x.ndim != len(shape) + 1 or tuple(x.shape[1:]) != tuple(shape):
        raise ShapeError("%s: inputs of shape %s do not fit the model, which takes [n, %s]"
                         % (where, list(x.shape), ", ".join(str(d) for d in shape)))
    return np.ascontiguousarray(x, dtype=np.float32)


def check_labels(y, n, where):
    y = to_numpy(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ShapeError("%s: %d inputs but labels of shape %s (one integer class per input)"
                         % (where, n, list(y.shape)))
    if y.dtype.kind not in "iu":
        raise ArgumentError("%s: labels must be integer classes, not %s" % (where, y.dtype))
    if n and (y.min() < -2**31 or y.max() >= 2**31):
        raise ArgumentError("%s: label %d is out of range" % (where, int(y.max())))
    return np.ascontiguousarray(y, dtype=np.int32)


def count_of(loader, name):
    """Images in one pass: from a DataLoader's sampler, else one counting
    pass (which streams too: nothing is kept)."""
    batch_size = getattr(loader, "batch_size", None)
    sampler = getattr(loader, "sampler", None)
    if batch_size and sampler is not None and hasattr(sampler, "__len__"):
        n = len(sampler)
        return (n // batch_size) * batch_size if getattr(loader, "drop_last", False) else n
    total, batches = 0, 0
    try:
        for batch in loader:
            batches += 1
            x, _ = split_batch(batch)
            total += len(x)
    except Error:
        raise
    except Exception as e:
        raise Error("%s failed in batch %d: %s: %s" % (name, batches + 1, type(e).__name__, e)) from e
    return total


class Stream:
    """A loader as a neurocuda_data stream (lib/neurocuda.h)."""

    def __init__(self, loader, shape, classes, name, count=None):
        self.handle = None
        self.loader, self.shape, self.name = loader, tuple(int(d) for d in shape), name
        self.iterator = None
        self.batches = 0
        self.keep = None           # the batch C reads until the next call
        self.error = None          # the Python exception that failed the stream
        self.interrupted = False
        self.count = count if count is not None else count_of(loader, name)
        if self.count < 1:
            raise ArgumentError("%s yielded no images" % name)
        self.c_next = NEXT_FN(self._next)
        self.c_rewind = REWIND_FN(self._rewind)
        handle = ctypes.c_void_p()
        call(lib.neurocuda_data_stream, self.count, self.shape[0], *self._hw(), int(classes), name.encode(),
             self.c_next, self.c_rewind, None, ctypes.byref(handle))
        self.handle = handle

    def _hw(self):
        if len(self.shape) == 3:
            return self.shape[1], self.shape[2]
        return 1, 1  # [F] inputs: F channels of 1 × 1

    def _fail(self, err, e, code):
        self.error = e
        err.contents.status = status_of(e) or code
        text = str(e) if isinstance(e, Error) else "%s failed in batch %d: %s: %s" % (
            self.name, self.batches, type(e).__name__, e)
        err.contents.message = text.encode("utf-8", "replace")[:1000]
        return -1

    def _guarded(self, err, step):
        """Runs step() for the C library, which cannot take an exception:
        Ctrl-C becomes status 7 (and stops the stream), any other error 6."""
        try:
            return step()
        except KeyboardInterrupt as e:
            self.interrupted = True
            return self._fail(err, e, 7)
        except Exception as e:
            return self._fail(err, e, 6)

    def _next(self, user, images, labels, n, err):
        if self.interrupted:
            return self._fail(err, KeyboardInterrupt(), 7)
        return self._guarded(err, lambda: self._read_batch(images, labels, n))

    def _read_batch(self, images, labels, n):
        if self.iterator is None:
            self.iterator = iter(self.loader)
        self.batches += 1  # the batch being read, for messages
        try:
            batch = next(self.iterator)
        except StopIteration:
            self.batches -= 1
            return 0
        where = "%s, batch %d" % (self.name, self.batches)
        x, y = split_batch(batch)
        x = check_images(x, self.shape, where)
        y = check_labels(y, x.shape[0], where)
        self.keep = (x, y)
        images[0] = x.ctypes.data_as(FLOAT_P)
        labels[0] = y.ctypes.data_as(INT32_P)
        n[0] = x.shape[0]
        return 1

    def _rewind(self, user, err):
        return self._guarded(err, self._restart)

    def _restart(self):
        self.iterator = iter(self.loader)
        self.batches = 0
        return 0

    def close(self):
        if self.handle:
            lib.neurocuda_data_free(self.handle)
            self.handle = None

    def __del__(self):
        self.close()
