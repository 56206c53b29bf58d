"""neurocuda.convert: a trained network (torch module, ONNX file or
onnx.ModelProto) and its training data into an SNN, through the library's
pipeline runner (the job `neurocuda convert` runs)."""
import ctypes
import os
import tempfile

from ._call import Job
from ._data import Stream, split_batch, to_numpy
from ._errors import ArgumentError
from ._lib import lib
from ._model import SNN, Results, open_model
from ._options import Options


def _export_torch(model, example_input, folder):
    """A torch.nn.Module as an ONNX file: the TorchScript exporter (torch
    1.13, opset 13, weights inline), or the dynamo exporter where torch 2.x
    has it and the TorchScript one is gone.  The module's train/eval mode is
    restored afterwards."""
    import torch
    name = type(model).__name__ or "model"
    path = os.path.join(folder, name + ".onnx")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            try:
                torch.onnx.export(model, (example_input,), path, opset_version=13, input_names=["input"],
                                  output_names=["output"], dynamic_axes={"input": {0: "batch"},
                                                                          "output": {0: "batch"}},
                                  do_constant_folding=True)
            except TypeError:  # torch ≥ 2.9: dynamo only
                torch.onnx.export(model, (example_input,), path, dynamo=True, external_data=False)
    finally:
        model.train(was_training)
    return path


def _model_file(model, example_input, folder):
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if hasattr(model, "SerializeToString") and hasattr(model, "graph"):  # onnx.ModelProto
        path = os.path.join(folder, (model.graph.name or "model") + ".onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return path
    if hasattr(model, "state_dict") and callable(model):  # torch.nn.Module
        return _export_torch(model, example_input, folder)
    raise ArgumentError("model must be a torch.nn.Module, an ONNX file path or an onnx.ModelProto, not %s"
                        % type(model).__name__)


def _example_from(loader):
    """One input of the loader's first batch, for the exporter."""
    import torch
    x, _ = split_batch(next(iter(loader)))
    x = x[:1]
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(to_numpy(x), dtype=torch.float32)


def convert(model, train_loader, timesteps=8, *, example_input=None, threshold="p99.9", per_channel=None,
            qcfs_epochs=0, bptt_epochs=0, engine="auto", progress=True, test_loader=None, calib_images=None,
            mean=None, std=None, output=None, target_T=None, **options):
    """Converts a trained ANN into a spiking network of IF neurons.

    model         torch.nn.Module (exported to ONNX here), ONNX path, or onnx.ModelProto
    train_loader  iterable of (inputs, labels) batches (torch or NumPy), streamed to the
                  library; calibration reads the first calib_images images, each
                  fine-tuning epoch a whole pass.  Or a dataset name/path (as --data).
    timesteps     T: the QCFS levels L, the BPTT steps, and the steps measured
    threshold     max | p99 | p99.9 | p99.99 | mmse; per_channel: one per channel
    qcfs_epochs, bptt_epochs   fine-tuning epochs of each stage (0: none)
    engine        cpu | gpu | loihi | auto (the GPU when there is one)
    test_loader   measured after each stage (accuracy by step); None: nothing measured
                  (a dataset name given as train_loader measures its test split)
    mean, std     preprocessing of a dataset named by path (a loader is already
                  preprocessed); output: also write the project file there
    target_T      the low-latency recipe for this many steps (`convert --target-T`): it
                  chooses thresholds, L, bias calibration, QCFS and BPTT with distillation,
                  and keeps the best stage on held-out images; timesteps is set to it;
                  time_budget= (minutes) bounds it
    options       any other `neurocuda convert` option (lr=, optimizer=, batch=, L=, distill=
                  (0.5, 2), calibrate_bias=T, ...)
    Returns an SNN; its .results holds the stage table."""
    T = int(target_T if target_T is not None else timesteps)
    if engine == "auto":
        from ._model import engines
        engine = "gpu" if engines().get("gpu", (False,))[0] else "cpu"
    values = {"threshold": threshold, "per-channel": per_channel, "finetune-qcfs": qcfs_epochs,
              "finetune-bptt": bptt_epochs, "engine": engine, "calib-images": calib_images, "mean": mean,
              "std": std, "output": os.fspath(output) if output is not None else None, "L": T, "train-T": T,
              "eval-T": T if test_loader is not None or isinstance(train_loader, (str, os.PathLike)) else None}
    if not isinstance(train_loader, (str, os.PathLike)) and "val_images" not in options:
        # the last images of a pass are held out only when given: a loader
        # that shuffles would put other images there every epoch
        values["val-images"] = 0
    if target_T is not None:
        values["target-T"] = T
    values.update(options)
    opts = Options(values)
    # the exported file lives until the job ends: the project fingerprints it
    with tempfile.TemporaryDirectory(prefix="neurocuda-") as folder:
        if example_input is None and not isinstance(model, (str, os.PathLike)) and hasattr(model, "state_dict"):
            example_input = _example_from(train_loader)
        ann = SNN(open_model(_model_file(model, example_input, folder)), T=T)
        return _run(ann, opts, train_loader, test_loader, progress, T,
                    os.fspath(model) if isinstance(model, (str, os.PathLike)) else None)


def _run(ann, opts, train_loader, test_loader, progress, T, source):
    streams = []
    if isinstance(train_loader, (str, os.PathLike)):
        opts.set("data", os.fspath(train_loader))
        train = None
    else:
        train = Stream(train_loader, ann.input_shape, ann.classes, "the training loader")
        streams.append(train)
        opts.set("data", "")
    test = None
    if test_loader is not None:
        test = Stream(test_loader, ann.input_shape, ann.classes, "the test loader")
        streams.append(test)
    job = Job(progress, "convert")
    job.streams = streams
    handle, results = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        job.run(lib.neurocuda_convert, ann._handle, opts.handle, train.handle if train else None,
                test.handle if test else None, job.c_progress, None, ctypes.byref(handle), ctypes.byref(results))
    finally:
        for s in streams:
            s.close()
    return SNN(handle, T=T, results=Results(results), source=source)
