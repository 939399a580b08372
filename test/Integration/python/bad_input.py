# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""What the package says to bad input: each case prints the exception's
type and message (checked by bad-input.test); anything else is a failure."""
import os
import sys

import numpy as np

import ddp_opt
import ddp_opt.torch

work = sys.argv[1]


def case(name, call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 (printing is the test)
        print("%s: %s: %s" % (name, type(error).__name__,
                              str(error).splitlines()[0]), flush=True)
        return
    print("%s: no error" % name, flush=True)
    sys.exit(1)


module = ddp_opt.torch.bucket_module(["w"], [(8, 4)], "f32", "step")
case("option", lambda: ddp_opt.compile_step(
    module, os.path.join(work, "a"),
    pipeline="builtin.module(ddp-compress{powersgd-rank=2 narow=fp16})"))
case("module", lambda: ddp_opt.compile_step(
    "func.func @step(%g: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %r = ddp.allreduce mean %g : tensor<4xf32>\n  return %r\n}\n",
    os.path.join(work, "b")))
case("entry", lambda: ddp_opt.compile_step(module, os.path.join(work, "c"),
                                           entry="nope"))
case("missing step", lambda: ddp_opt.Step(os.path.join(work, "none")))
case("backend", lambda: ddp_opt.Runtime(backend="gpu"))
case("communicator", lambda: ddp_opt.Runtime(communicator=object()))
case("unique id", lambda: ddp_opt.Runtime(backend="cuda",
                                          nccl_unique_id=b"short", rank=0,
                                          world_size=1))
ddp_opt.compile_step(module, os.path.join(work, "ok"))
step = ddp_opt.Step(os.path.join(work, "ok"))
runtime = ddp_opt.Runtime()
w = np.ones((8, 4), np.float32)
case("arguments", lambda: step.run(runtime, [], []))
step.run(runtime, [w.ctypes.data], [w.ctypes.data])
print("ran: mean of ones on %d rank(s) is %g" % (runtime.world_size,
                                                float(w.mean())), flush=True)
runtime.finalize()
case("finalized", lambda: runtime.rank)

# A step that fails inside DDP's backward (here a timeout, made up) fails
# the backward with the runtime's message, in both modes of the hook.
import torch  # noqa: E402

ddp_opt.torch.init_process_group("gloo")
real_run = ddp_opt.Step.run


def timed_out(self, *unused):
    raise ddp_opt.RuntimeFailure(4, "a collective did not complete within 1 s")


for asynchronous in (False, True):
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
    state = ddp_opt.torch.HookState(model, compress="narrow=fp16",
                                    cache_dir=os.path.join(work, "cache"),
                                    asynchronous=asynchronous)
    model.register_comm_hook(state, ddp_opt.torch.hook)
    ddp_opt.Step.run = timed_out
    case("backward (asynchronous=%s)" % asynchronous,
         lambda: model(torch.randn(2, 4)).sum().backward())
    ddp_opt.Step.run = real_run

# A runtime that did not start fails the backward with its message, and
# the next backward with the same one: it is not tried again (on CUDA a
# second try would start the id's broadcast on some ranks only).
starts = []
real_runtime = ddp_opt.Runtime


def counted(*args, **kwargs):
    starts.append(kwargs)
    return real_runtime(*args, **kwargs)


ddp_opt.Runtime = counted
linear = torch.nn.Linear(4, 4)
state = None
for attempt in (1, 2):
    # DDP (1.13) cannot go on after a hook failed: a new DDP around the
    # same module, with the same state, for the second backward.
    model = torch.nn.parallel.DistributedDataParallel(linear)
    state = state or ddp_opt.torch.HookState(
        model, communicator=object(), cache_dir=os.path.join(work, "cache"))
    model.register_comm_hook(state, ddp_opt.torch.hook)
    case("runtime start, backward %d" % attempt,
         lambda: model(torch.randn(2, 4)).sum().backward())
print("runtime starts tried: %d" % len(starts), flush=True)
ddp_opt.Runtime = real_runtime
