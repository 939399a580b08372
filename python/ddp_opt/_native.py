# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""ctypes bindings of the three C libraries the package drives.

  libDDPCAPI.so   the compiler (include/ddp-c/DDP.h): pipelines, and a step
                  compiled to a library (ddpCompileStep)
  libddprt.so     the runtime (runtime/include/ddprt/ddprt.h): the context,
                  states, checkpoints, counters
  libddprt-step.so  a compiled step loaded and run on the caller's memory
                  (runtime/include/ddprt-host/ddprt_step.h)

The libraries are looked up in DDP_OPT_LIBRARY_DIR if set, else where the
build or the install put them (_config.py, written by CMake). The compiler
is loaded only when something is compiled: a process that runs steps
compiled elsewhere needs only the runtime.
"""
import ctypes
import functools
import hashlib
import os

try:
    from . import _config
except ImportError:  # the source tree's copy: no build wrote _config.py
    _config = None

# ddprt.h, checked against the loaded runtime (DDPRT_VERSION).
VERSION = 400  # 0.4.0: ddprt_options with the join fields
NCCL_UNIQUE_ID_BYTES = 128

STATUS = {0: "DDPRT_OK", 1: "DDPRT_ERROR_INVALID_ARGUMENT",
          2: "DDPRT_ERROR_UNSUPPORTED", 3: "DDPRT_ERROR_COMMUNICATION",
          4: "DDPRT_ERROR_TIMEOUT", 5: "DDPRT_ERROR_MISMATCH",
          6: "DDPRT_ERROR_IO", 7: "DDPRT_ERROR_BACKEND",
          8: "DDPRT_ERROR_STATE", 9: "DDPRT_NONFINITE"}
OK, UNSUPPORTED, NONFINITE = 0, 2, 9
BACKENDS = {"cpu": 0, "cuda": 1}
JOIN = {"none": 0, "mpi": 1, "nccl-comm": 2, "nccl-unique-id": 3}
# ddprt_dtype: the runtime's numbers and step.json's names.
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3, "i64": 4, "i8": 5, "i32": 6}
NPY_TO_DTYPE = {"<f4": "f32", "<f2": "f16", "bf16": "bf16", "<f8": "f64",
                "<i8": "i64", "|i1": "i8", "<i4": "i32"}


class Options(ctypes.Structure):
    """ddprt_options (0.4.0)."""
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint),
                ("backend", ctypes.c_int), ("timeout_seconds", ctypes.c_double),
                ("check_shapes", ctypes.c_int),
                ("simulated_link_gbps", ctypes.c_double),
                ("simulated_link_latency_us", ctypes.c_double),
                ("ranks_per_node", ctypes.c_int),
                ("join_handle", ctypes.c_void_p), ("join", ctypes.c_int),
                ("join_rank", ctypes.c_int),
                ("join_world_size", ctypes.c_int),
                ("nccl_unique_id", ctypes.c_ubyte * NCCL_UNIQUE_ID_BYTES),
                ("device", ctypes.c_int), ("stream", ctypes.c_void_p)]

    @classmethod
    def defaults(cls):
        options = cls()
        options.size = ctypes.sizeof(cls)
        options.version = VERSION
        options.backend = BACKENDS["cpu"]
        options.timeout_seconds = 300.0
        options.check_shapes = 1
        options.device = -1
        return options


class Buffer(ctypes.Structure):
    """ddprt_buffer."""
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("numel", ctypes.c_int64)]


def library_dir():
    directory = os.environ.get("DDP_OPT_LIBRARY_DIR") or (
        _config.LIBRARY_DIR if _config else None)
    if not directory:
        raise ImportError(
            "ddp_opt: this copy of the package was not built or installed "
            "(no _config.py): set DDP_OPT_LIBRARY_DIR to the directory "
            "holding libddprt.so (a runtime built alone: its lib/)")
    return directory


def version():
    """The project's version: the build's, or the source tree's VERSION."""
    if _config:
        return _config.VERSION
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..", "VERSION")
    with open(path) as f:
        return f.readline().strip()


@functools.lru_cache(maxsize=None)
def compiler_identity():
    """What the compiler here is (a digest of libDDPCAPI.so), or None where
    there is no compiler (a machine with the runtime alone)."""
    try:
        with open(os.path.join(library_dir(), "libDDPCAPI.so"), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except (OSError, ImportError):
        return None


def _load(name):
    path = os.path.join(library_dir(), name)
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise ImportError(
            "ddp_opt: cannot load %s (%s); set DDP_OPT_LIBRARY_DIR to the "
            "directory holding ddp-opt's libraries (the build's lib/, or the "
            "install's)" % (path, error)) from None


_runtime = None
_step = None
_compiler = None

c_void_pp = ctypes.POINTER(ctypes.c_void_p)


def runtime():
    """libddprt.so and libddprt-step.so, with their prototypes."""
    global _runtime, _step
    if _runtime is None:
        rt = _load("libddprt.so")
        proto = [
            ("ddprt_get_version", ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
            ("ddprt_init", ctypes.c_int,
             [ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]),
            ("ddprt_finalize", ctypes.c_int, [ctypes.c_void_p]),
            ("ddprt_rank", ctypes.c_int, [ctypes.c_void_p]),
            ("ddprt_world_size", ctypes.c_int, [ctypes.c_void_p]),
            ("ddprt_last_error", ctypes.c_char_p, [ctypes.c_void_p]),
            ("ddprt_status_string", ctypes.c_char_p, [ctypes.c_int]),
            ("ddprt_synchronize", ctypes.c_int, [ctypes.c_void_p]),
            ("ddprt_nccl_unique_id", ctypes.c_int,
             [ctypes.POINTER(ctypes.c_ubyte)]),
            ("ddprt_state_get", ctypes.c_int,
             [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64,
              ctypes.POINTER(ctypes.c_void_p)]),
            ("ddprt_state_data", ctypes.c_void_p, [ctypes.c_void_p]),
            ("ddprt_copy", ctypes.c_int,
             [ctypes.c_void_p, ctypes.POINTER(Buffer), ctypes.POINTER(Buffer),
              ctypes.c_int]),
            ("ddprt_checkpoint_save", ctypes.c_int,
             [ctypes.c_void_p, ctypes.c_char_p]),
            ("ddprt_checkpoint_load", ctypes.c_int,
             [ctypes.c_void_p, ctypes.c_char_p]),
            ("ddprt_node_layout", ctypes.c_int,
             [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
              ctypes.POINTER(ctypes.c_int)]),
        ]
        for name, restype, argtypes in proto:
            function = getattr(rt, name)
            function.restype, function.argtypes = restype, argtypes
        version = ctypes.c_int()
        rt.ddprt_get_version(ctypes.byref(version))
        if version.value // 100 != VERSION // 100:
            raise ImportError(
                "ddp_opt: the runtime in %s is version %d.%d.%d; this package "
                "was written for %d.%d" % (
                    library_dir(), version.value // 10000,
                    version.value // 100 % 100, version.value % 100,
                    VERSION // 10000, VERSION // 100 % 100))
        st = _load("libddprt-step.so")
        proto = [
            ("ddprt_step_load", ctypes.c_int,
             [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
              ctypes.c_char_p, ctypes.c_size_t]),
            ("ddprt_step_free", None, [ctypes.c_void_p]),
            ("ddprt_step_release_buffers", None, [ctypes.c_void_p]),
            ("ddprt_step_argument_count", ctypes.c_int, [ctypes.c_void_p]),
            ("ddprt_step_result_count", ctypes.c_int, [ctypes.c_void_p]),
            ("ddprt_step_run", ctypes.c_int,
             [ctypes.c_void_p, ctypes.c_void_p, c_void_pp, c_void_pp,
              ctypes.c_char_p, ctypes.c_size_t]),
            ("ddprt_step_set_threads", ctypes.c_int,
             [ctypes.c_void_p, ctypes.c_int]),
        ]
        for name, restype, argtypes in proto:
            function = getattr(st, name)
            function.restype, function.argtypes = restype, argtypes
        _runtime, _step = rt, st
    return _runtime, _step


def compiler():
    """libDDPCAPI.so, with its prototypes."""
    global _compiler
    if _compiler is None:
        lib = _load("libDDPCAPI.so")
        lib.ddpRunPipelineWithReport.restype = ctypes.c_int
        lib.ddpRunPipelineWithReport.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, c_void_pp, c_void_pp, c_void_pp]
        lib.ddpCompileStep.restype = ctypes.c_int
        lib.ddpCompileStep.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
            c_void_pp, c_void_pp]
        lib.ddpFree.restype = None
        lib.ddpFree.argtypes = [ctypes.c_void_p]
        _compiler = lib
    return _compiler


def take_string(lib, pointer):
    """The C string at `pointer` (a c_void_p the API set), freed."""
    if not pointer.value:
        return ""
    text = ctypes.string_at(pointer.value).decode("utf-8", "replace")
    lib.ddpFree(pointer)
    return text
