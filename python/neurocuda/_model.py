"""The SNN object and the calls on models: load, compile, forward passes,
evaluation, save, NIR and Lava export, the workbench."""
import ctypes
import math
import os
import shutil
import subprocess
import tempfile

import numpy as np

from ._call import Job, call
from ._data import Stream, check_images, to_numpy
from ._errors import ArgumentError, DeviceError, Error
from ._lib import LayerStruct, lib
from ._options import Options


class Results:
    """What a job measured: one row per stage (as `neurocuda convert`
    prints), and per-layer statistics when a record was kept.

    rows: list of dicts {"stage", "ann", "qcfs", "images", "snn"} where snn
      is the accuracy after each step (list, index t-1 for step t);
    accuracy: the last row's SNN accuracy by step (or [ann accuracy]);
    layers: list of dicts {"name", "neurons", "firing_rate", "spikes", "sops",
      "calib_error"} (firing rate = spikes / (neurons × images × steps),
      sops = spikes × fan-out, calib_error = relative L2 error of the rates
      against the ANN's activations);
    table: the text of the stage table."""

    def __init__(self, handle):
        r = handle
        self.rows = []
        for k in range(lib.neurocuda_results_rows(r)):
            T = lib.neurocuda_results_T(r, k)
            self.rows.append({
                "stage": lib.neurocuda_results_row_name(r, k).decode(),
                "ann": _nan_to_none(lib.neurocuda_results_ann(r, k)),
                "qcfs": _nan_to_none(lib.neurocuda_results_qcfs(r, k)),
                "images": lib.neurocuda_results_images(r, k),
                "snn": [lib.neurocuda_results_snn(r, k, t) for t in range(1, T + 1)],
            })
        self.layers = []
        layer = LayerStruct()
        for i in range(lib.neurocuda_results_layers(r)):
            lib.neurocuda_results_layer(r, i, ctypes.byref(layer))
            self.layers.append({"name": layer.name.decode(), "neurons": layer.neurons,
                                "firing_rate": layer.firing_rate, "spikes": layer.spikes, "sops": layer.sops,
                                "calib_error": _nan_to_none(layer.calib_error)})
        size = lib.neurocuda_results_table(r, None, 0) + 1
        buf = ctypes.create_string_buffer(size)
        lib.neurocuda_results_table(r, buf, size)
        self.table = buf.value.decode()
        lib.neurocuda_results_free(r)

    @property
    def accuracy(self):
        if not self.rows:
            return []
        last = self.rows[-1]
        return last["snn"] if last["snn"] else [last["ann"]]

    def __repr__(self):
        return self.table


def _nan_to_none(v):
    return None if math.isnan(v) else v


class SNN:
    """A spiking network (or an ANN opened from ONNX) held by the library.

    snn(x, T=...)           logits after every step, [T, n, classes]
    snn.evaluate(loader)    Results: accuracy by step, per-layer rates, errors, synaptic ops
    snn.save(path)          the project file (.ncsnn)
    snn.report()            text: nodes, thresholds, stored accuracies
    snn.results             the stage table of the conversion that made it (or None)
    snn.T                   the steps a call runs by default"""

    def __init__(self, handle, T=8, results=None, source=None):
        self._handle = handle
        self.T = T
        self.results = results
        self.source = source
        dims = (ctypes.c_int64 * 4)()
        ndim = lib.neurocuda_model_input_shape(handle, dims)
        self.input_shape = tuple(dims[i] for i in range(ndim))
        self.classes = lib.neurocuda_model_classes(handle)

    @property
    def spiking(self):
        return bool(lib.neurocuda_model_is_spiking(self._handle))

    @property
    def engine(self):
        return lib.neurocuda_model_engine(self._handle).decode()

    def __call__(self, x, T=None):
        """Runs a batch: NumPy in → NumPy out, torch in → torch out.  A
        spiking network gives [T, n, classes], the output after each step
        (its argmax after step t is the prediction at t); an ANN [n, classes]."""
        T = int(T or self.T)
        is_torch = hasattr(x, "detach")
        arr = check_images(x, self.input_shape, "snn(x)")
        n = arr.shape[0]
        out = np.empty((T, n, self.classes) if self.spiking else (n, self.classes), dtype=np.float32)
        call(lib.neurocuda_model_forward, self._handle, arr.ctypes.data, n, T, out.ctypes.data)
        if is_torch:
            import torch
            return torch.from_numpy(out)
        return out

    def evaluate(self, loader, T=None, *, progress=True, **options):
        """Accuracy after every step up to T on `loader` (batches of (inputs,
        labels)), with firing rates, calibration error and synaptic operations
        per layer.  `loader` may also be a dataset name or path (test split)."""
        T = int(T or self.T)
        opts = Options(options)
        opts.set("eval-T", T)
        stream = None
        if isinstance(loader, (str, os.PathLike)):
            opts.set("data", os.fspath(loader))
        else:
            opts.set("data", "")
            stream = Stream(loader, self.input_shape, self.classes, "the evaluation loader")
        job = Job(progress, "evaluate")
        if stream:
            job.streams.append(stream)
        results = ctypes.c_void_p()
        try:
            job.run(lib.neurocuda_evaluate, self._handle, opts.handle, stream.handle if stream else None,
                    job.c_progress, None, ctypes.byref(results))
        finally:
            if stream:
                stream.close()
        return Results(results)

    def save(self, path):
        """Writes the project file (.ncsnn), atomically."""
        call(lib.neurocuda_model_save, self._handle, os.fspath(path).encode())

    def report(self):
        size = lib.neurocuda_model_report(self._handle, None, 0) + 1
        buf = ctypes.create_string_buffer(size)
        lib.neurocuda_model_report(self._handle, buf, size)
        return buf.value.decode()

    def __repr__(self):
        return "<neurocuda.SNN %s input %s, %d classes, engine %s>" % (
            "spiking" if self.spiking else "ANN", list(self.input_shape), self.classes, self.engine)

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.neurocuda_model_free(self._handle)
            self._handle = None


def open_model(path):
    handle = ctypes.c_void_p()
    call(lib.neurocuda_model_open, os.fspath(path).encode(), ctypes.byref(handle))
    return handle


def load(path, T=8):
    """An SNN from a project file (.ncsnn) or a NIR graph (.nir)."""
    return SNN(open_model(path), T=T, source=os.fspath(path))


def from_nir(path, T=8):
    """An SNN from a NIR graph."""
    return load(path, T=T)


def engines():
    """{name: (available, description or the reason it is not)} of this build."""
    out = {}
    for i in range(lib.neurocuda_engine_count()):
        name = lib.neurocuda_engine_name(i)
        why = ctypes.create_string_buffer(512)
        ok = bool(lib.neurocuda_engine_available(name, why, 512))
        out[name.decode()] = (ok, lib.neurocuda_engine_description(i).decode() if ok else why.value.decode())
    return out


def compile(snn, target="auto", precision=None, **engine_options):
    """Binds `snn` to an engine: "gpu", "cpu", "loihi", or "auto" (the GPU
    when there is one, else the CPU).  A named target that cannot run here
    raises DeviceError saying why; nothing falls back unless asked with
    "auto".  precision (GPU: e.g. "fp32", "tf32", "bf16") and other engine
    options are the engine's own (`neurocuda engines` lists them)."""
    if not isinstance(target, str):
        raise ArgumentError("target must be 'gpu', 'cpu', 'loihi' or 'auto', not %r" % (target,))
    if target == "auto":
        target = "gpu" if engines().get("gpu", (False,))[0] else "cpu"
    opts = Options({})
    if precision is not None:
        engine_options["precision"] = precision
    for key, value in engine_options.items():
        opts.set("engine-opt", "%s=%s" % (key, value))
    call(lib.neurocuda_model_compile, snn._handle, target.encode(), opts.handle)
    return snn


def to_nir(snn, path, approx=False):
    """Writes `snn` as a NIR graph (HDF5).  approx=True writes a MaxPool as an
    average pool (NIR has no MaxPool), which other tools then run differently."""
    call(lib.neurocuda_model_export_nir, snn._handle, os.fspath(path).encode(), int(bool(approx)))


def to_lava(snn, path):
    """Writes the Loihi quantisation of `snn` as a lava-dl netx file (HDF5)."""
    call(lib.neurocuda_model_export_lava, snn._handle, os.fspath(path).encode())


def workbench(snn_or_path, wait=False, options=(), **popen):
    """Opens the GTK workbench on an SNN or a model file; returns the process
    (a subprocess.Popen).  `options` are further command-line options of
    neurocuda-workbench (e.g. ["--print-loaded"]: print what the window
    loaded and quit); `popen` goes to subprocess.Popen (env, stdout, ...)."""
    program = shutil.which("neurocuda-workbench")
    if program is None:
        here = os.path.dirname(os.path.abspath(lib.path))
        candidate = os.path.join(os.path.dirname(here), "app", "neurocuda-workbench")
        program = candidate if os.path.exists(candidate) else None
    if program is None:
        raise Error("neurocuda-workbench is not installed (build with GTK 4 and libadwaita)")
    path = snn_or_path
    if isinstance(snn_or_path, SNN):
        folder = tempfile.mkdtemp(prefix="neurocuda-")
        path = os.path.join(folder, "model.ncsnn")
        snn_or_path.save(path)
    process = subprocess.Popen([program, *options, os.fspath(path)], **popen)
    if wait:
        process.wait()
    return process
