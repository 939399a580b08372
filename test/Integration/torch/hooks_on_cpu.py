# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Runs PyTorch 1.13's quantization hooks, unchanged, on CPU tensors and gloo.

PyTorch 1.13's quantization_pertensor_hook and quantization_perchannel_hook
(torch/distributed/algorithms/ddp_comm_hooks/quantization_hooks.py) were
written for CUDA and NCCL, and fail on CPU with gloo for two reasons:

1. They move observers and tensors with `.cuda(tensor.device)`:
   `MinMaxObserver().cuda(tensor.device)`, `torch.FloatTensor([s, z]).cuda(...)`,
   `PerChannelMinMaxObserver().cuda(...)`, `tensor_in_channels ... .cuda(...)`,
   `y.to(torch.float32).cuda(y.device)`, `torch.flatten(...).cuda(...)`.
   With a CPU device that raises "Invalid device, must be cuda device".
2. They read the allgathered scales and zero points from the allgather's
   future: `all_ranks_s_and_z = fut.wait()[0]`, then `[rank][0]` (per
   tensor) or `[rank, 0, :]` (per channel). ProcessGroupNCCL's allgather
   completes its future with its flattened output, ONE tensor of shape
   (world_size, *input.shape), so `[0]` is every rank's values stacked.
   ProcessGroupGloo's completes it with the list of world_size output
   tensors, so `[0]` is rank 0's tensor alone, and the indexing fails
   ("invalid index of a 0-dim tensor", "too many indices").

`run_quantization_hook` works around both for the duration of one hook call
(the call and the wait for its future), and changes nothing else:

1. `torch.Tensor.cuda(device)` and `torch.nn.Module.cuda(device)` behave as
   `.to(device)` when `device` is a CPU device (a no-op for the CPU tensors
   and modules here); any other call goes to the original, unchanged.
2. The name `dist` inside quantization_hooks (its `import torch.distributed
   as dist`) is pointed at a proxy of torch.distributed whose `all_gather`
   is the real gloo all_gather, except that the future of its work resolves
   to `[torch.stack(outputs)]`: the value NCCL's future has. The output
   list the hook passed in is filled as before (the hook also reads it).

The hook's own code (observers, quantize, allgathers, dequantize, sum,
division) runs as written. Its arithmetic is device independent: f32
division, torch.round (half to even), clamp, casts (docs/pytorch-comparison.md).

Only PyTorch is needed. Patch 2 asserts that quantization_hooks still
imports torch.distributed as `dist`.
"""
import contextlib
import types

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks


def _is_cpu(device):
    return device is not None and torch.device(device).type == "cpu"


@contextlib.contextmanager
def cuda_is_to_for_cpu_devices():
    """`.cuda(d)` acts as `.to(d)` for a CPU device `d` (patch 1 above)."""
    tensor_cuda, module_cuda = torch.Tensor.cuda, torch.nn.Module.cuda

    def tensor_cuda_or_to(self, device=None, non_blocking=False, **kwargs):
        if _is_cpu(device):
            return self.to(device, non_blocking=non_blocking)
        return tensor_cuda(self, device, non_blocking, **kwargs)

    def module_cuda_or_to(self, device=None):
        if _is_cpu(device):
            return self.to(device)
        return module_cuda(self, device)

    torch.Tensor.cuda, torch.nn.Module.cuda = tensor_cuda_or_to, module_cuda_or_to
    try:
        yield
    finally:
        torch.Tensor.cuda, torch.nn.Module.cuda = tensor_cuda, module_cuda


class _StackedFutureWork:
    """A gloo allgather's work whose future resolves as NCCL's does."""

    def __init__(self, work):
        self._work = work

    def wait(self, *args):
        return self._work.wait(*args)

    def get_future(self):
        return self._work.get_future().then(lambda fut: [torch.stack(fut.value())])


class _DistWithNcclAllgatherFuture(types.ModuleType):
    """torch.distributed, but all_gather's future holds the stacked outputs;
    each all_gather's input (what this rank sends) is appended to `log`."""

    def __init__(self, log):
        super().__init__("torch.distributed (allgather futures as NCCL's)")
        self._log = log

    def __getattr__(self, name):
        return getattr(dist, name)

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        self._log.append({"dtype": str(tensor.dtype).replace("torch.", ""),
                          "numel": tensor.numel(),
                          "bytes": tensor.numel() * tensor.element_size()})
        work = dist.all_gather(tensor_list, tensor, group=group, async_op=async_op)
        return _StackedFutureWork(work) if async_op else work


@contextlib.contextmanager
def nccl_allgather_futures(log):
    """Patch 2 above, for quantization_hooks only."""
    assert quantization_hooks.dist is dist, "quantization_hooks no longer imports dist"
    quantization_hooks.dist = _DistWithNcclAllgatherFuture(log)
    try:
        yield
    finally:
        quantization_hooks.dist = dist


def run_quantization_hook(hook, process_group, bucket, allgathers=None, **kwargs):
    """Runs `hook(process_group, bucket, **kwargs)` with both patches and
    waits for it; returns a completed future with its result (DDP waits for
    a hook's future anyway). Appends one {dtype, numel, bytes} per allgather
    the hook issued (this rank's input) to `allgathers`, if given."""
    log = [] if allgathers is None else allgathers
    with cuda_is_to_for_cpu_devices(), nccl_allgather_futures(log):
        result = hook(process_group, bucket, **kwargs).wait()
    fut = torch.futures.Future()
    fut.set_result(result)
    return fut
