"""ctypes bindings of libneurocuda (lib/neurocuda.h): the library, found
once, and the signatures of its functions.

Where the library is looked for, in order:
  1. the file named by the environment variable NEUROCUDA_LIB;
  2. inside this package (pip install . puts libneurocuda.so there);
  3. the build tree of a source checkout (build*/lib/ beside python/);
  4. the system's library path (libneurocuda.so.1 from `meson install`).
"""
import ctypes
import glob
import os

SONAME = "libneurocuda.so.1"

c_int, c_int64, c_double, c_char_p, c_void_p, c_size_t = (
    ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)


class ErrorStruct(ctypes.Structure):
    _fields_ = [("status", c_int), ("message", ctypes.c_char * 1024)]


class ProgressStruct(ctypes.Structure):
    _fields_ = [("stage", c_char_p), ("done", c_int64), ("total", c_int64), ("value", c_double),
                ("epoch", c_int), ("epochs", c_int)]


class LayerStruct(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 128), ("neurons", c_int64), ("firing_rate", c_double),
                ("spikes", c_double), ("sops", c_double), ("calib_error", c_double)]


ERR_P = ctypes.POINTER(ErrorStruct)
PROGRESS_FN = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(ProgressStruct))
NEXT_FN = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
                           ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)), ctypes.POINTER(c_int64), ERR_P)
REWIND_FN = ctypes.CFUNCTYPE(c_int, c_void_p, ERR_P)

# name: (restype, argtypes)
_SIGNATURES = {
    "neurocuda_version": (c_char_p, []),
    "neurocuda_status_name": (c_char_p, [c_int]),
    "neurocuda_options_new": (c_void_p, []),
    "neurocuda_options_free": (None, [c_void_p]),
    "neurocuda_options_set": (c_int, [c_void_p, c_char_p, c_char_p, ERR_P]),
    "neurocuda_data_stream": (c_int, [c_int64, c_int, c_int, c_int, c_int, c_char_p, NEXT_FN, REWIND_FN, c_void_p,
                                      ctypes.POINTER(c_void_p), ERR_P]),
    "neurocuda_data_free": (None, [c_void_p]),
    "neurocuda_model_open": (c_int, [c_char_p, ctypes.POINTER(c_void_p), ERR_P]),
    "neurocuda_model_free": (None, [c_void_p]),
    "neurocuda_model_is_spiking": (c_int, [c_void_p]),
    "neurocuda_model_input_shape": (c_int, [c_void_p, ctypes.POINTER(c_int64)]),
    "neurocuda_model_classes": (c_int64, [c_void_p]),
    "neurocuda_model_report": (c_size_t, [c_void_p, c_char_p, c_size_t]),
    "neurocuda_model_save": (c_int, [c_void_p, c_char_p, ERR_P]),
    "neurocuda_model_export_nir": (c_int, [c_void_p, c_char_p, c_int, ERR_P]),
    "neurocuda_model_export_lava": (c_int, [c_void_p, c_char_p, ERR_P]),
    "neurocuda_model_compile": (c_int, [c_void_p, c_char_p, c_void_p, ERR_P]),
    "neurocuda_model_engine": (c_char_p, [c_void_p]),
    "neurocuda_model_forward": (c_int, [c_void_p, c_void_p, c_int64, c_int, c_void_p, ERR_P]),
    "neurocuda_results_free": (None, [c_void_p]),
    "neurocuda_results_rows": (c_int, [c_void_p]),
    "neurocuda_results_row_name": (c_char_p, [c_void_p, c_int]),
    "neurocuda_results_ann": (c_double, [c_void_p, c_int]),
    "neurocuda_results_qcfs": (c_double, [c_void_p, c_int]),
    "neurocuda_results_images": (c_int64, [c_void_p, c_int]),
    "neurocuda_results_T": (c_int, [c_void_p, c_int]),
    "neurocuda_results_snn": (c_double, [c_void_p, c_int, c_int]),
    "neurocuda_results_table": (c_size_t, [c_void_p, c_char_p, c_size_t]),
    "neurocuda_results_layers": (c_int, [c_void_p]),
    "neurocuda_results_layer": (c_int, [c_void_p, c_int, ctypes.POINTER(LayerStruct)]),
    "neurocuda_convert": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, PROGRESS_FN, c_void_p,
                                  ctypes.POINTER(c_void_p), ctypes.POINTER(c_void_p), ERR_P]),
    "neurocuda_evaluate": (c_int, [c_void_p, c_void_p, c_void_p, PROGRESS_FN, c_void_p, ctypes.POINTER(c_void_p),
                                   ERR_P]),
    "neurocuda_engine_count": (c_int, []),
    "neurocuda_engine_name": (c_char_p, [c_int]),
    "neurocuda_engine_description": (c_char_p, [c_int]),
    "neurocuda_engine_available": (c_int, [c_char_p, c_char_p, c_size_t]),
}


def _candidates():
    env = os.environ.get("NEUROCUDA_LIB")
    if env:
        return [env]  # an explicit choice is the only one
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "libneurocuda.so"), os.path.join(here, SONAME)]  # a wheel, a copy
    source_root = os.path.dirname(os.path.dirname(here))
    found += sorted(glob.glob(os.path.join(source_root, "build*", "lib", SONAME)))
    found.append(SONAME)  # the system's library path
    return found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)  # CDLL: the GIL is released during every call
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        lib.path = path
        return lib
    raise ImportError("libneurocuda not found; build it (meson setup build && ninja -C build) or set "
                      "NEUROCUDA_LIB to its path.  Tried: " + "; ".join(tried))


lib = _load()
