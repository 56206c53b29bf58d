"""What the tests' h5py readers (h5py_read_*.py) share: h5py and numpy, or
exit status 77 when they are missing (the calling test then skips), and a
check that stops the script with exit status 1 and the reason on stderr."""
import sys

try:
    import h5py  # noqa: F401  (re-exported to the readers)
    import numpy as np  # noqa: F401
except ImportError as e:  # the test skips with this reason
    print(f"h5py/numpy not importable: {e}", file=sys.stderr)
    sys.exit(77)


def checker(label):
    """need(cond, what): exits 1 with "<label> failed: <what>" unless cond."""

    def need(cond, what):
        if not cond:
            print(f"{label} failed: {what}", file=sys.stderr)
            sys.exit(1)

    return need
