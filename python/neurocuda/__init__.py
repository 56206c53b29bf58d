"""neurocuda: convert trained PyTorch/ONNX networks into spiking networks,
simulate them on the GPU, the CPU or a Loihi-style engine, export NIR.

    import neurocuda
    snn = neurocuda.convert(model, train_loader, timesteps=8)
    neurocuda.compile(snn, target="gpu")
    neurocuda.to_nir(snn, "model.nir")

A thin layer over libneurocuda (lib/neurocuda.h) through ctypes; the
library does the work with the GIL released.  docs/PYTHON.md is the guide."""
from ._errors import (ArgumentError, CancelledError, DeviceError, Error, FileError, FormatError, InternalError,
                      OutOfMemoryError, ShapeError, UnsupportedError)
from ._lib import lib as _library  # not "_lib": that is the submodule
from ._model import SNN, Results, compile, engines, from_nir, load, to_lava, to_nir, workbench
from ._convert import convert

__version__ = _library.neurocuda_version().decode()

__all__ = ["convert", "compile", "load", "to_nir", "from_nir", "to_lava", "workbench", "engines", "SNN", "Results",
           "Error", "FileError", "FormatError", "UnsupportedError", "ShapeError", "OutOfMemoryError",
           "ArgumentError", "CancelledError", "DeviceError", "InternalError"]
