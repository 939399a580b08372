# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""ddp-opt from Python: compile a gradient-sync step with ddp-opt's passes
and run it with the ddprt runtime, inside a process that trains.

    import ddp_opt
    report = ddp_opt.compile_step(module_text, "out/step",
                                  pipeline="builtin.module(ddp-compress{powersgd-rank=2})")
    runtime = ddp_opt.Runtime()            # joins the job (mpirun's world)
    step = ddp_opt.Step("out/step")
    step.run(runtime, [grad.data_ptr()], [grad.data_ptr()])

PyTorch's DDP communication hook over the same pieces is ddp_opt.torch
(docs/user-guide.md, "From PyTorch's training loop").
"""
import ctypes
import json
import os
import weakref

import numpy as np

from . import _native

__version__ = _native.version()

__all__ = ["CompileError", "RuntimeFailure", "Runtime", "Step",
           "compile_step", "run_pipeline", "library_dir"]

library_dir = _native.library_dir


class CompileError(Exception):
    """ddp-opt refused the module or the pipeline; the message is its
    diagnostics."""


class RuntimeFailure(RuntimeError):
    """The runtime failed: `status` is the ddprt_status name."""

    def __init__(self, status, message):
        self.status = _native.STATUS.get(status, str(status))
        super().__init__("%s: %s" % (self.status, message))


def run_pipeline(module, pipeline):
    """`pipeline` run on `module` (MLIR text): (the module after it, the
    compression reports). Raises CompileError."""
    lib = _native.compiler()
    output, diagnostics, report = (ctypes.c_void_p(), ctypes.c_void_p(),
                                   ctypes.c_void_p())
    ok = lib.ddpRunPipelineWithReport(pipeline.encode(), module.encode(),
                                      ctypes.byref(output),
                                      ctypes.byref(diagnostics),
                                      ctypes.byref(report))
    text = _native.take_string(lib, output)
    messages = _native.take_string(lib, diagnostics)
    reports = _native.take_string(lib, report)
    if not ok:
        raise CompileError(messages.strip() or "the pipeline failed")
    return text, reports


def compile_step(module, directory, pipeline=None, entry=None):
    """Compiles `module` (MLIR text) after `pipeline` (a textual pass
    pipeline, e.g. "builtin.module(ddp-compress{powersgd-rank=2})"; None:
    the module as it is) into `directory` (libstep.so and step.json, what
    `ddp-run --emit-step` writes). Returns the compression reports the
    pipeline printed. Raises CompileError with ddp-opt's diagnostics."""
    lib = _native.compiler()
    diagnostics, report = ctypes.c_void_p(), ctypes.c_void_p()
    ok = lib.ddpCompileStep((pipeline or "").encode(), module.encode(),
                            (entry or "").encode(),
                            os.fspath(directory).encode(),
                            ctypes.byref(diagnostics), ctypes.byref(report))
    messages = _native.take_string(lib, diagnostics)
    reports = _native.take_string(lib, report)
    if not ok:
        raise CompileError(messages.strip() or "the compilation failed")
    return reports


def _check(runtime, status, what):
    if status != _native.OK:
        rt, _ = _native.runtime()
        message = rt.ddprt_last_error(runtime._context) if runtime else b""
        raise RuntimeFailure(status, "%s: %s" % (
            what, (message or b"").decode("utf-8", "replace")))


class Runtime:
    """A ddprt runtime context: this process's part of the job.

    communicator: None joins the job mpirun started (MPI's world; MPI is
      started here unless something in the process already did); an
      mpi4py communicator joins that one (the runtime works on a duplicate).
    backend: "cpu" or "cuda". On CUDA the job is joined through NCCL, with
      `nccl_unique_id` (bytes from Runtime.nccl_unique_id() on rank 0,
      passed to every rank by the caller), `rank` and `world_size`;
      `device` and `stream` (an int cudaStream_t, e.g.
      torch.cuda.current_stream().cuda_stream) are where it works.
    timeout: seconds a collective may take before it fails (0: forever).
    threads: the runtime's compute threads (None: the node's cores divided
      by its ranks, less one, as ddp-run).
    """

    def __init__(self, backend="cpu", communicator=None, timeout=300.0,
                 check_shapes=True, ranks_per_node=0, threads=None,
                 nccl_unique_id=None, rank=None, world_size=None, device=None,
                 stream=None):
        rt, st = _native.runtime()
        if backend not in _native.BACKENDS:
            raise ValueError("backend must be 'cpu' or 'cuda', not %r" %
                             (backend,))
        options = _native.Options.defaults()
        options.backend = _native.BACKENDS[backend]
        options.timeout_seconds = float(timeout)
        options.check_shapes = 1 if check_shapes else 0
        options.ranks_per_node = int(ranks_per_node)
        self._keep = None
        if communicator is not None:
            if backend != "cpu":
                raise ValueError("an MPI communicator is joined on the cpu "
                                 "backend; CUDA joins through NCCL "
                                 "(nccl_unique_id)")
            try:
                from mpi4py import MPI
            except ImportError:
                raise ValueError("communicator must be an mpi4py "
                                 "communicator, and mpi4py is not "
                                 "installed") from None
            if not isinstance(communicator, MPI.Comm):
                raise ValueError("communicator must be an mpi4py "
                                 "communicator, not %s" %
                                 type(communicator).__name__)
            options.join = _native.JOIN["mpi"]
            options.join_handle = MPI._addressof(communicator)
            self._keep = communicator
        elif nccl_unique_id is not None:
            if backend != "cuda":
                raise ValueError("nccl_unique_id joins on the cuda backend")
            unique = bytes(nccl_unique_id)
            if len(unique) != _native.NCCL_UNIQUE_ID_BYTES:
                raise ValueError("nccl_unique_id must be %d bytes, not %d" %
                                 (_native.NCCL_UNIQUE_ID_BYTES, len(unique)))
            if rank is None or world_size is None:
                raise ValueError("joining through NCCL needs rank and "
                                 "world_size")
            options.join = _native.JOIN["nccl-unique-id"]
            ctypes.memmove(options.nccl_unique_id, unique, len(unique))
            options.join_rank, options.join_world_size = rank, world_size
        if device is not None:
            options.device = int(device)
        if stream is not None:
            options.stream = int(stream)
        context = ctypes.c_void_p()
        status = rt.ddprt_init(ctypes.byref(options), ctypes.byref(context))
        self._context = context
        if status != _native.OK:
            message = rt.ddprt_last_error(context) or b""
            if context.value:
                rt.ddprt_finalize(context)
            self._context = None
            raise RuntimeFailure(status, "the runtime did not start: " +
                               message.decode("utf-8", "replace"))
        self.backend = backend
        self.threads = st.ddprt_step_set_threads(context, int(threads or 0))
        # Steps that ran here keep buffers of this context (CUDA staging):
        # given back before it ends.
        self._steps = weakref.WeakSet()

    @staticmethod
    def nccl_unique_id():
        """A new ncclUniqueId (bytes), for rank 0 to give every rank."""
        rt, _ = _native.runtime()
        buffer = (ctypes.c_ubyte * _native.NCCL_UNIQUE_ID_BYTES)()
        status = rt.ddprt_nccl_unique_id(buffer)
        if status != _native.OK:
            rt_status = rt.ddprt_status_string(status).decode()
            raise RuntimeFailure(status, "no NCCL unique id: %s%s" % (
                rt_status, " (this runtime was built without CUDA)"
                if status == _native.UNSUPPORTED else ""))
        return bytes(buffer)

    def _live(self):
        if not self._context:
            raise ValueError("the runtime was finalized")
        return self._context

    @property
    def rank(self):
        rt, _ = _native.runtime()
        return rt.ddprt_rank(self._live())

    @property
    def world_size(self):
        rt, _ = _native.runtime()
        return rt.ddprt_world_size(self._live())

    def node_layout(self):
        """(nodes in the job, ranks on this rank's node)."""
        rt, _ = _native.runtime()
        nodes, ranks = ctypes.c_int(), ctypes.c_int()
        _check(self, rt.ddprt_node_layout(self._live(), ctypes.byref(nodes),
                                          ctypes.byref(ranks)), "node layout")
        return nodes.value, ranks.value

    def synchronize(self):
        rt, _ = _native.runtime()
        _check(self, rt.ddprt_synchronize(self._live()), "synchronize")

    def _state(self, name, dtype, numel):
        rt, _ = _native.runtime()
        state = ctypes.c_void_p()
        _check(self, rt.ddprt_state_get(self._live(), name.encode(),
                                        _native.DTYPES[dtype], int(numel),
                                        ctypes.byref(state)),
               "state '%s'" % name)
        return rt.ddprt_state_data(state)

    def read_state(self, name, dtype, numel):
        """A copy of state `name` (created, zero, if missing) as a flat
        numpy array; dtype is step.json's ("f32", "i64", "bf16" as uint16)."""
        rt, _ = _native.runtime()
        data = self._state(name, dtype, numel)
        array = np.empty(int(numel), dtype=_numpy_dtype(dtype))
        self._copy(data, array.ctypes.data, dtype, numel)
        return array

    def write_state(self, name, dtype, values):
        """Overwrites state `name` (created if missing) with `values`."""
        array = np.ascontiguousarray(values, dtype=_numpy_dtype(dtype))
        data = self._state(name, dtype, array.size)
        self._copy(array.ctypes.data, data, dtype, array.size)

    def _copy(self, source, target, dtype, numel):
        rt, _ = _native.runtime()
        code = _native.DTYPES[dtype]
        src = _native.Buffer(source, code, int(numel))
        dst = _native.Buffer(target, code, int(numel))
        _check(self, rt.ddprt_copy(self._live(), ctypes.byref(src),
                                   ctypes.byref(dst), 1), "copy")
        self.synchronize()

    def checkpoint_save(self, path):
        rt, _ = _native.runtime()
        _check(self, rt.ddprt_checkpoint_save(self._live(),
                                              os.fspath(path).encode()),
               "checkpoint")

    def checkpoint_load(self, path):
        rt, _ = _native.runtime()
        _check(self, rt.ddprt_checkpoint_load(self._live(),
                                              os.fspath(path).encode()),
               "checkpoint")

    def finalize(self):
        """Ends the context (waits for the collectives still running)."""
        if self._context:
            rt, st = _native.runtime()
            for step in list(self._steps):
                if step._handle:
                    st.ddprt_step_release_buffers(step._handle)
            self._steps.clear()
            rt.ddprt_finalize(self._context)
            self._context = None


def _numpy_dtype(dtype):
    return {"f32": np.float32, "f16": np.float16, "bf16": np.uint16,
            "f64": np.float64, "i64": np.int64, "i8": np.int8,
            "i32": np.int32}[dtype]


class Step:
    """A compiled step (a directory compile_step or `ddp-run --emit-step`
    wrote), loaded into this process."""

    def __init__(self, directory):
        _, st = _native.runtime()
        self.directory = os.fspath(directory)
        handle = ctypes.c_void_p()
        message = ctypes.create_string_buffer(4096)
        status = st.ddprt_step_load(self.directory.encode(),
                                    ctypes.byref(handle), message, 4096)
        if status != _native.OK:
            raise RuntimeFailure(status, message.value.decode("utf-8",
                                                            "replace"))
        self._handle = handle
        with open(os.path.join(self.directory, "step.json")) as f:
            self.signature = json.load(f)
        self.arguments = self.signature["arguments"]
        self.results = self.signature["results"]
        self.states = self.signature.get("states", [])

    def run(self, runtime, arguments, results):
        """Runs the step once on `runtime`: `arguments` and `results` are
        data addresses (ints) of contiguous buffers of step.json's shapes
        and types; a result may be an argument (in place). Returns True, or
        False when a tensor's averaged values were not finite (its error
        feedback was left as it was; a warning says which)."""
        _, st = _native.runtime()
        if len(arguments) != len(self.arguments) or \
                len(results) != len(self.results):
            raise ValueError("the step takes %d arguments and returns %d "
                             "results, not %d and %d" % (
                                 len(self.arguments), len(self.results),
                                 len(arguments), len(results)))
        args = (ctypes.c_void_p * max(1, len(arguments)))(*arguments)
        outs = (ctypes.c_void_p * max(1, len(results)))(*results)
        message = ctypes.create_string_buffer(4096)
        context = runtime._live()
        runtime._steps.add(self)
        status = st.ddprt_step_run(self._handle, context, args, outs,
                                   message, 4096)
        text = message.value.decode("utf-8", "replace")
        if status == _native.NONFINITE:
            import warnings
            warnings.warn("ddp_opt: " + text, RuntimeWarning, stacklevel=2)
            return False
        if status != _native.OK:
            raise RuntimeFailure(status, text)
        return True

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle and _native._step is not None:
            _native._step.ddprt_step_free(handle)
            self._handle = None
