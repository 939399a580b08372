# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The hook's cache of compiled buckets: a bucket is compiled once, found
again by the next process, compiled again when the compiler that made it
is not the one here, and taken as it is where there is no compiler. Prints
one line per case (checked by cache.test)."""
import os
import sys

import torch

import ddp_opt
import ddp_opt._native
import ddp_opt.torch

cache = sys.argv[1]
# This build's compiler, which exists where the test runs.
REAL = ddp_opt._native.compiler_identity()
assert REAL, "no compiler library next to the runtime"
ddp_opt.torch.init_process_group("gloo")
compiled = []
real_compile = ddp_opt.compile_step


def counted(*args, **kwargs):
    compiled.append(args)
    return real_compile(*args, **kwargs)


ddp_opt.compile_step = counted


def one_step(case):
    compiled.clear()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    state = ddp_opt.torch.HookState(model, compress="narrow=fp16",
                                    cache_dir=cache)
    model.register_comm_hook(state, ddp_opt.torch.hook)
    model(torch.ones(2, 8)).sum().backward()
    state.drain()
    made_by = [open(os.path.join(cache, d, "compiler.txt")).read().strip()
               for d in sorted(os.listdir(cache))
               if os.path.isfile(os.path.join(cache, d, "compiler.txt"))]
    print("%s: compiled %d, cache made by %s" % (
        case, len(compiled), ", ".join(
            "this compiler" if m == REAL else m or "none"
            for m in made_by)), flush=True)


one_step("first")
one_step("again")
here = ddp_opt._native.compiler_identity
ddp_opt._native.compiler_identity = lambda: "another"
one_step("another compiler")
ddp_opt._native.compiler_identity = lambda: None


def no_compiler(*args, **kwargs):
    raise ImportError("no compiler here")


ddp_opt.compile_step = no_compiler
one_step("no compiler")
ddp_opt._native.compiler_identity = here
ddp_opt.compile_step = counted
one_step("this compiler again")
