"""Job options: Python keywords into neurocuda_options (KEY = VALUE text
with the names of the `neurocuda convert` flags; lib/neurocuda.h)."""
from ._call import call
from ._lib import lib


class Options:
    def __init__(self, values):
        self.handle = lib.neurocuda_options_new()
        if not self.handle:
            raise MemoryError("out of memory for the options")
        for key, value in values.items():
            if value is not None:
                self.set(key.replace("_", "-"), value)  # calib_images → calib-images

    def set(self, key, value):
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        call(lib.neurocuda_options_set, self.handle, str(key).encode(), str(value).encode())

    def __del__(self):
        if getattr(self, "handle", None):
            lib.neurocuda_options_free(self.handle)
            self.handle = None
