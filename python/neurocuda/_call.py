"""Calling the library: errors into exceptions, progress and Ctrl-C.

While a long call runs in C (the GIL released), Ctrl-C must not raise in
the middle of a ctypes callback, where ctypes would print and drop it.  So
during the call SIGINT only sets a flag; the next progress or data callback
sees it and returns non-zero, the library cancels the job at that batch and
writes nothing, and the call then raises KeyboardInterrupt."""
import ctypes
import signal
import sys
import threading

from ._errors import error_for
from ._lib import ERR_P, PROGRESS_FN, ErrorStruct, lib


def check(status, err):
    """Raises the Error subclass of a failed status with the library's message."""
    if status != 0:
        raise error_for(status, err.message.decode("utf-8", "replace"))


def call(fn, *args):
    """fn(*args, &err) for a short call; raises on failure."""
    err = ErrorStruct()
    check(fn(*args, ctypes.byref(err)), err)


class Job:
    """One long call: its progress callback, its Ctrl-C flag, the data
    streams it reads (whose own failures it re-raises)."""

    def __init__(self, progress, what):
        self.interrupted = False
        self.streams = []
        self.user_callback = progress if callable(progress) else None
        self.bar = None
        self.what = what
        if progress is True:
            self.bar = _progress_bar(what)
        self.c_progress = PROGRESS_FN(self._on_progress)

    def _on_progress(self, user, p):
        if self.interrupted:
            return 1
        try:
            info = {"stage": p.contents.stage.decode() if p.contents.stage else "", "done": p.contents.done,
                    "total": p.contents.total, "value": p.contents.value, "epoch": p.contents.epoch,
                    "epochs": p.contents.epochs}
            if self.bar:
                self.bar(info)
            if self.user_callback and self.user_callback(info):
                return 1
        except KeyboardInterrupt:
            self.interrupted = True
            return 1
        except Exception as e:  # a broken callback stops the job with its reason
            self.callback_error = e
            return 1
        return 0

    def run(self, fn, *args):
        """fn(*args, progress, NULL user, ..., &err) with SIGINT caught; the
        caller passes the progress callback itself (self.c_progress)."""
        err = ErrorStruct()
        self.callback_error = None
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            status = fn(*args, ctypes.byref(err))
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            if self.bar:
                self.bar(None)
        if self.interrupted or any(s.interrupted for s in self.streams):
            raise KeyboardInterrupt
        if status != 0 and self.callback_error is not None:
            raise error_for(status, "the progress callback failed: %r" % (self.callback_error,)) \
                from self.callback_error
        for s in self.streams:
            if status != 0 and s.error is not None:
                raise error_for(status, err.message.decode("utf-8", "replace")) from s.error
        check(status, err)

    def _on_sigint(self, signum, frame):
        self.interrupted = True
        for s in self.streams:
            s.interrupted = True


def _progress_bar(what):
    """A tqdm bar per stage when tqdm is installed, else a line per stage on a
    terminal, else nothing."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    state = {"stage": None, "bar": None}

    def update(info):
        if info is None or info["stage"] != state["stage"]:
            if state["bar"] is not None and tqdm is not None:
                state["bar"].close()
            state["bar"] = None
        if info is None:
            return
        if info["stage"] != state["stage"]:
            state["stage"] = info["stage"]
            if tqdm is not None:
                state["bar"] = tqdm(total=info["total"] or None, desc="%s: %s" % (what, info["stage"]),
                                    leave=False)
            elif sys.stderr.isatty():
                sys.stderr.write("%s: %s...\n" % (what, info["stage"]))
        if state["bar"] is not None:
            state["bar"].n = info["done"]
            state["bar"].refresh()

    return update
