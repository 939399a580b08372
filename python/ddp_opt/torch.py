# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A PyTorch DDP communication hook backed by steps ddp-opt compiled.

    import ddp_opt.torch
    model = DistributedDataParallel(net)
    state = ddp_opt.torch.HookState(model, compress="powersgd-rank=2 start-iter=10")
    model.register_comm_hook(state, ddp_opt.torch.hook)

For each of DDP's gradient buckets the hook writes the bucket's
gradient-sync function (one `ddp.allreduce mean` per gradient, named after
the parameter, in the bucket's order), compiles it once with ddp-opt's
pipeline (`ddp-compress{<compress>}`, or `pipeline`) into a library, and
on every call runs it on the bucket's buffer in place, on a thread of its
own (the future is returned at once; `asynchronous=False`: in the hook). A bucket DDP rebuilds after its first iteration is a new
function and is compiled again; compiled libraries are cached on disk
(`cache_dir`), keyed by the function and the pipeline.

The compression state (PowerSGD's Q and error feedback, step counters)
lives in the runtime, per gradient name; HookState.state_dict() and
load_state_dict() save and restore it with the rest of a checkpoint.

The ranks are the job's: start the script under mpirun (`mpirun -np 4
python train.py`), PyTorch's process group with the same ranks (for
example RANK=$OMPI_COMM_WORLD_RANK); the runtime joins MPI's world, or the
mpi4py communicator given as `communicator`. CUDA buckets join through
NCCL: rank 0's unique id goes to every rank through the process group. The
runtime works on the bucket's device, on a stream of its own: each bucket's
step waits for an event recorded on PyTorch's current stream when DDP
called the hook, and its future completes once the results are in the
bucket.
"""
import atexit
import contextlib
import fcntl
import hashlib
import os
import queue
import shutil
import tempfile
import threading
import weakref

import numpy as np
import torch
import torch.distributed as dist

import ddp_opt

__all__ = ["HookState", "hook", "bucket_module", "init_process_group"]

_MLIR_TYPES = {torch.float32: "f32", torch.float64: "f64",
               torch.float16: "f16", torch.bfloat16: "bf16"}
_TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64,
                 "f16": torch.float16, "bf16": torch.bfloat16,
                 "i64": torch.int64, "i32": torch.int32, "i8": torch.int8}


def init_process_group(backend="gloo", **kwargs):
    """torch.distributed.init_process_group with the ranks of the job
    mpirun started (Open MPI's OMPI_COMM_WORLD_RANK/SIZE, or PMI's), so
    that PyTorch's group and the runtime's agree. MASTER_ADDR defaults to
    127.0.0.1 when every rank is on this host (else set it to rank 0's
    host); MASTER_PORT to a port derived from the job's id, the same on
    every rank and different for jobs side by side."""
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK"))
    size = os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE"))
    if rank is None or size is None:
        raise RuntimeError("ddp_opt: no MPI launcher's ranks in the "
                           "environment: start the script under mpirun "
                           "(mpirun -np N python3 ...)")
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    if "MASTER_ADDR" not in os.environ:
        if local is not None and local != size:
            raise RuntimeError("ddp_opt: the job spans several hosts: set "
                               "MASTER_ADDR to rank 0's host (mpirun -x "
                               "MASTER_ADDR=...)")
        os.environ["MASTER_ADDR"] = "127.0.0.1"
    if "MASTER_PORT" not in os.environ:
        job = os.environ.get("OMPI_MCA_ess_base_jobid", "0")
        digest = hashlib.sha256(job.encode()).digest()
        os.environ["MASTER_PORT"] = str(
            20000 + int.from_bytes(digest[:4], "little") % 20000)
    dist.init_process_group(backend, rank=int(rank), world_size=int(size),
                            **kwargs)


# Keeps a DDP bucket's gradients one bucket, in the bucket's order.
_ONE_BUCKET = ("ddp-bucketize{mode=ddp-param-order first-bucket-mb=0 "
               "cap-mb=1048576}")


def _mlir_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def _tensor_type(shape, element):
    return "tensor<%s>" % "x".join([str(int(d)) for d in shape] + [element])


def bucket_module(names, shapes, element, entry):
    """The gradient-sync function of one bucket: gradient i (named names[i],
    of shape shapes[i]) averaged over the ranks, as MLIR text."""
    types = [_tensor_type(shape, element) for shape in shapes]
    arguments = ", ".join("%%g%d: %s loc(%s)" % (i, t, _mlir_string(n))
                          for i, (t, n) in enumerate(zip(types, names)))
    lines = ["func.func @%s(%s) -> (%s) {" % (entry, arguments,
                                              ", ".join(types))]
    for i, t in enumerate(types):
        lines.append("  %%r%d = ddp.allreduce mean %%g%d : %s" % (i, i, t))
    lines.append("  return %s : %s" % (
        ", ".join("%%r%d" % i for i in range(len(types))), ", ".join(types)))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _default_cache_dir():
    base = os.environ.get("DDP_OPT_CACHE_DIR")
    if base:
        return base
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(home, "ddp-opt", "steps")


class _BucketStep:
    def __init__(self, step, key, report):
        self.step = step
        self.key = key
        self.report = report
        self.started = False


class HookState:
    """What ddp_opt.torch.hook needs across calls: how to compile, the
    runtime, the compiled buckets and the iteration.

    model: the DDP model (or the module it wraps): gradients are named
      after its parameters, which names the runtime's states.
    compress: ddp-compress's options ("powersgd-rank=2 start-iter=10",
      "narrow=fp16", "quantize=per-tensor", "hook=NAME hook-from=FILE.mlir",
      "plan=PROFILE.json", ...); None or "" averages exactly.
    pipeline: a textual pass pipeline instead ("builtin.module(...)").
    process_group: PyTorch's group DDP reduces over (None: the default
      one); its ranks must be the runtime's.
    runtime: a ddp_opt.Runtime to use; None: one is started at the first
      bucket (MPI's world on CPU, or `communicator`; NCCL on CUDA).
    cache_dir: where compiled buckets are kept (None: $DDP_OPT_CACHE_DIR,
      else ~/.cache/ddp-opt/steps).
    timeout, threads, communicator: the runtime's (ddp_opt.Runtime).
    asynchronous: run each bucket's step on a thread of the hook's own and
      return its future at once, so that autograd computes the next
      buckets' gradients meanwhile, as PyTorch's own hooks let it (the
      steps still run one at a time, in DDP's bucket order); False: run
      it in the hook and return a completed future.
    """

    def __init__(self, model, compress=None, pipeline=None,
                 process_group=None, runtime=None, cache_dir=None,
                 timeout=300.0, threads=None, communicator=None,
                 asynchronous=True):
        if compress and pipeline:
            raise ValueError("give compress or pipeline, not both")
        if pipeline is None:
            # A function is one DDP bucket: its gradients stay one bucket, in
            # DDP's order (what PyTorch's hooks see, and the rows of the
            # per-channel quantization), then the scheme; the report says,
            # per gradient, what it decided (state.reports).
            pipeline = "builtin.module(func.func(%s)%s)" % (
                _ONE_BUCKET, ",ddp-compress{%s},ddp-compression-report" %
                compress if compress else "")
        self.pipeline = pipeline
        names = {}
        for name, parameter in model.named_parameters():
            if name.startswith("module."):
                name = name[len("module."):]
            names[id(parameter)] = name
        self._names = names
        self.process_group = process_group
        self.runtime = runtime
        self.cache_dir = cache_dir or _default_cache_dir()
        self.timeout = timeout
        self.threads = threads
        self.communicator = communicator
        self.iteration = 0
        self._buckets = {}
        self._states = {}
        self._pending = {}
        # Per bucket index, the compression report of its latest function.
        self.reports = {}
        self.asynchronous = asynchronous
        self._work = None
        self._worker = None
        self._start_error = None

    # --- the steps' thread ---------------------------------------------

    def _submit(self, job):
        """Runs job() on the hook's thread, after the jobs before it; the
        runtime's context is used by that thread only (between drains)."""
        if self._worker is None:
            self._work = queue.Queue()
            self._worker = threading.Thread(target=self._serve, daemon=True,
                                            name="ddp_opt hook")
            self._worker.start()
            # Ended before the interpreter: a thread still inside PyTorch
            # when Python finalizes aborts the process.
            atexit.register(HookState._stop_worker, weakref.ref(self))
        self._work.put(job)

    def _serve(self):
        while True:
            job = self._work.get()
            try:
                if job is None:
                    return
                job()
            finally:
                self._work.task_done()

    @staticmethod
    def _stop_worker(reference):
        self = reference()
        if self is not None and self._worker is not None:
            self._work.put(None)
            self._worker.join()
            self._worker = None

    def drain(self):
        """Waits until every bucket's step handed to the hook's thread has
        run (state_dict and load_state_dict call it)."""
        if self._work is not None:
            self._work.join()

    # --- the runtime ---------------------------------------------------

    def _start_runtime(self, buffer):
        group = self.process_group
        rank = dist.get_rank(group)
        world = dist.get_world_size(group)
        if buffer.is_cuda:
            # Rank 0 of the group makes the id (or says why it cannot), and
            # every rank learns which: a failure on rank 0 alone would leave
            # the others waiting in the broadcast.
            made = [None]
            if rank == 0:
                try:
                    made[0] = (True, ddp_opt.Runtime.nccl_unique_id())
                except ddp_opt.RuntimeFailure as error:
                    made[0] = (False, str(error))
            source = 0 if group is None else dist.get_global_rank(group, 0)
            dist.broadcast_object_list(made, src=source, group=group)
            ok, unique = made[0]
            if not ok:
                raise RuntimeError("ddp_opt: rank 0 could not make an NCCL "
                                   "unique id: %s" % unique)
            # Ranks per host, for the runtime's node groups: torchrun's, or
            # mpirun's (0: every rank on one host).
            local = os.environ.get("LOCAL_WORLD_SIZE") or \
                os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or 0
            # The runtime's own stream: ordered after PyTorch's work by an
            # event per bucket (hook), not by sharing PyTorch's stream,
            # whose later backward work its host barriers would wait for.
            self.runtime = ddp_opt.Runtime(
                backend="cuda", nccl_unique_id=unique, rank=rank,
                world_size=world, device=buffer.device.index,
                ranks_per_node=int(local), timeout=self.timeout,
                threads=self.threads)
        else:
            self.runtime = ddp_opt.Runtime(
                communicator=self.communicator, timeout=self.timeout,
                threads=self.threads)
        if (self.runtime.rank, self.runtime.world_size) != (rank, world):
            raise RuntimeError(
                "ddp_opt: the runtime is rank %d of %d but PyTorch's process "
                "group rank %d of %d: start the group with the job's ranks "
                "(under mpirun: RANK=$OMPI_COMM_WORLD_RANK, WORLD_SIZE="
                "$OMPI_COMM_WORLD_SIZE)" % (self.runtime.rank,
                                            self.runtime.world_size, rank,
                                            world))
        for name, (dtype, values) in self._pending.items():
            self.runtime.write_state(name, dtype, values)
        self._pending = {}

    # --- compiling buckets ---------------------------------------------

    def _compile(self, names, shapes, element):
        digest = hashlib.sha256()
        for part in (ddp_opt.__version__, self.pipeline, element):
            digest.update(part.encode() + b"\0")
        for name, shape in zip(names, shapes):
            digest.update(("%s:%s\0" % (name, list(shape))).encode())
        key = digest.hexdigest()[:24]
        entry = "bucket_" + key[:12]
        directory = os.path.join(self.cache_dir, key)
        report = ""
        os.makedirs(self.cache_dir, exist_ok=True)
        # One process of a host compiles; the others wait and load it. A
        # step another compiler made is made again where there is a compiler
        # (a rebuilt ddp-opt of the same version must not run old code);
        # where there is none, the cache is what there is.
        compiler = ddp_opt._native.compiler_identity()
        with open(directory + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            made_by = None
            with contextlib.suppress(OSError), \
                    open(os.path.join(directory, "compiler.txt")) as f:
                made_by = f.read().strip()
            stale = compiler is not None and made_by != compiler
            if stale or not os.path.exists(os.path.join(directory,
                                                        "step.json")):
                module = bucket_module(names, shapes, element, entry)
                scratch = tempfile.mkdtemp(prefix=key + ".",
                                           dir=self.cache_dir)
                try:
                    try:
                        report = ddp_opt.compile_step(module, scratch,
                                                      pipeline=self.pipeline,
                                                      entry=entry)
                    except ImportError as error:
                        raise ImportError(
                            "%s\nddp_opt: bucket %s (%d gradients, first "
                            "'%s') is not in the cache %s, and compiling it "
                            "needs the compiler: compile the buckets where "
                            "ddp-opt is built (the same model, compress and "
                            "version) and carry the cache here" % (
                                error, key, len(names), names[0],
                                self.cache_dir)) from None
                    with open(os.path.join(scratch, "report.txt"), "w") as f:
                        f.write(report)
                    with open(os.path.join(scratch, "bucket.mlir"), "w") as f:
                        f.write(module)
                    with open(os.path.join(scratch, "compiler.txt"),
                              "w") as f:
                        f.write((compiler or "") + "\n")
                    # Another compiler's step is moved aside, then removed.
                    old = None
                    if os.path.exists(directory):
                        old = tempfile.mkdtemp(prefix=key + ".old.",
                                               dir=self.cache_dir)
                        os.rename(directory, os.path.join(old, "step"))
                    os.rename(scratch, directory)
                    if old:
                        shutil.rmtree(old, ignore_errors=True)
                except BaseException:
                    shutil.rmtree(scratch, ignore_errors=True)
                    raise
            else:
                with contextlib.suppress(OSError), \
                        open(os.path.join(directory, "report.txt")) as f:
                    report = f.read()
        return _BucketStep(ddp_opt.Step(directory), key, report)

    def _bucket_step(self, bucket, gradients):
        element = _MLIR_TYPES.get(gradients[0].dtype)
        if element is None:
            raise TypeError("ddp_opt: gradients of %s are not averaged by "
                            "ddp-opt (f32, f64, f16, bf16 are)" %
                            gradients[0].dtype)
        names = []
        for i, parameter in enumerate(bucket.parameters()):
            name = self._names.get(id(parameter))
            if name is None:
                raise ValueError("ddp_opt: a parameter of bucket %d is not "
                                 "one of the model's given to HookState" %
                                 bucket.index())
            names.append(name)
        shapes = [tuple(g.shape) for g in gradients]
        signature = (element, tuple(names), tuple(shapes))
        compiled = self._buckets.get(signature)
        if compiled is None:
            compiled = self._compile(names, shapes, element)
            self._buckets[signature] = compiled
            for spec in compiled.step.states:
                dtype = ddp_opt._native.NPY_TO_DTYPE[spec["dtype"]]
                numel = int(np.prod(spec["shape"], dtype=np.int64))
                self._states[spec["name"]] = (dtype, numel,
                                              "start_iter" in spec)
        self.reports[bucket.index()] = compiled.report
        return compiled

    # --- checkpoints ---------------------------------------------------

    def state_dict(self):
        """The iteration and every compression state of the runtime (by
        name), as tensors: saved with the model's and optimizer's."""
        self.drain()
        states = {}
        for name, (dtype, numel, _) in sorted(self._states.items()):
            values = self.runtime.read_state(name, dtype, numel)
            tensor = torch.from_numpy(values)
            if dtype == "bf16":
                tensor = tensor.view(torch.int16).view(torch.bfloat16)
            states[name] = tensor
        for name, (dtype, values) in self._pending.items():
            states.setdefault(name, _to_tensor(dtype, values))
        return {"iteration": self.iteration, "states": states}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned (before or after the first
        iteration)."""
        self.drain()
        self.iteration = int(state_dict["iteration"])
        for name, tensor in state_dict["states"].items():
            dtype = {v: k for k, v in _TORCH_DTYPES.items()}.get(tensor.dtype)
            if dtype is None:
                raise ValueError("ddp_opt: state '%s' is %s, which no state "
                                 "of the runtime holds" % (name, tensor.dtype))
            values = tensor.detach().cpu().contiguous()
            if dtype == "bf16":
                values = values.view(torch.int16)
            values = values.numpy().reshape(-1)
            if self.runtime is None:
                self._pending[name] = (dtype, values)
            else:
                self.runtime.write_state(name, dtype, values)
            self._states.setdefault(name, (dtype, values.size, False))
        for compiled in self._buckets.values():
            compiled.started = False


def _to_tensor(dtype, values):
    tensor = torch.from_numpy(np.array(values))
    if dtype == "bf16":
        tensor = tensor.view(torch.int16).view(torch.bfloat16)
    return tensor


def hook(state, bucket):
    """The communication hook: `model.register_comm_hook(state, hook)`."""
    buffer = bucket.buffer()
    gradients = bucket.gradients()
    if state.runtime is None:
        if state._start_error is not None:
            # Not tried again: a second try could run the collective start
            # on some ranks only.
            raise state._start_error
        try:
            state._start_runtime(buffer)
        except Exception as error:
            state._start_error = error
            raise
    compiled = state._bucket_step(bucket, gradients)
    iteration = state.iteration
    if bucket.is_last():
        state.iteration += 1
    pointers = [g.data_ptr() for g in gradients]
    future = torch.futures.Future()
    # On CUDA, DDP filled the bucket on PyTorch's current stream, maybe
    # still running: the step, on the runtime's stream, waits for it.
    ready = None
    if buffer.is_cuda:
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(buffer.device))

    def run():
        if ready is not None:
            ready.synchronize()
        runtime = state.runtime
        if not compiled.started:
            # The step counters of a function compiled now (a bucket DDP
            # rebuilt, or a restored checkpoint) continue from this
            # iteration, as powerSGD_hook's one counter does.
            for spec in compiled.step.states:
                if "start_iter" in spec:
                    runtime.write_state(spec["name"], "i64",
                                        np.array([iteration], np.int64))
            compiled.started = True
        compiled.step.run(runtime, pointers, pointers)

    if not state.asynchronous:
        run()
        future.set_result(buffer)
        return future

    def job():
        try:
            run()
        except BaseException as error:  # noqa: BLE001 (to DDP, through the future)
            # DDP re-raises what the future holds as a RuntimeError.
            future.set_exception(RuntimeError("%s: %s" % (
                type(error).__name__, error)))
            return
        future.set_result(buffer)

    state._submit(job)
    return future
