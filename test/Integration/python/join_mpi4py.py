# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The runtime joins a communicator the script made (DDPRT_JOIN_MPI): 4
ranks split by mpi4py into two jobs of 2 (even and odd ranks), each with a
runtime of its own averaging a compiled step's gradient; MPI_COMM_WORLD is
left to the script, which still uses it afterwards."""
import os
import sys

import numpy as np
from mpi4py import MPI

import ddp_opt
import ddp_opt.torch

world = MPI.COMM_WORLD
half = world.Split(color=world.rank % 2, key=world.rank)
runtime = ddp_opt.Runtime(communicator=half)
work = sys.argv[1]
directory = os.path.join(work, "step%d" % world.rank)
ddp_opt.compile_step(ddp_opt.torch.bucket_module(["w"], [(4,)], "f32", "step"),
                     directory)
step = ddp_opt.Step(directory)
w = np.full(4, float(world.rank), np.float32)
step.run(runtime, [w.ctypes.data], [w.ctypes.data])
runtime.finalize()
# Even ranks 0, 2 average to 1; odd ranks 1, 3 to 2.
expected = 1.0 if world.rank % 2 == 0 else 2.0
ok = runtime is not None and float(w[0]) == expected
everyone = world.allreduce(int(ok), op=MPI.SUM)
if world.rank == 0:
    print("joined: %d of %d ranks averaged within their half (rank %d of %d "
          "there)" % (everyone, world.size, half.rank, half.size), flush=True)
