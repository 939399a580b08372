# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch DDP's gradient buckets for a torchvision model, and ours.

    ddp_buckets.py torch MODEL --cap-mb C --out FILE
        DDP's buckets, twice: from dist._compute_bucket_assignment_by_size
        as DDP's Reducer rebuilds them after the first step (the gradients in
        the order they became ready, limits [first bucket, cap]), and as a
        real DDP (gloo, 1 process) hands them to a communication hook on its
        third step. Both must hold the same tensors in the same buckets;
        FILE gets one line per bucket, the parameter names in the function's
        order (reverse parameter order).
    ddp_buckets.py ours IR_FILE --out FILE
        The buckets of `ddp-opt --ddp-bucketize` output: one line per
        ddp.allreduce, the arguments' ddp.name in its operand order.
"""

import argparse
import datetime
import re
import socket
import sys


def torch_buckets(model_name, cap_mb):
    import torch
    import torch.distributed as dist
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, model_name)()
    names = {id(p): n for n, p in model.named_parameters() if p.requires_grad}
    params = [p for p in model.parameters() if p.requires_grad]
    limits = [dist._DEFAULT_FIRST_BUCKET_BYTES, int(cap_mb * 1024 * 1024)]

    # As Reducer::rebuild_buckets: the ready order (here, as DDP assumes,
    # reverse parameter order; checked against the real run below), the
    # indices given, so the buckets are not sorted again.
    order = list(reversed(range(len(params))))
    assigned, _ = dist._compute_bucket_assignment_by_size(
        [params[i] for i in order], limits, [False] * len(params), order)
    by_function = [[names[id(params[i])] for i in bucket] for bucket in assigned]

    # A real DDP's buckets after its rebuild.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_mb)
        seen = {}

        def hook(state, bucket):
            seen[bucket.index()] = [names[id(p)] for p in bucket.parameters()]
            future = torch.futures.Future()
            future.set_result(bucket.buffer())
            return future

        ddp.register_comm_hook(None, hook)
        x = torch.randn(2, 3, 64, 64)
        for _ in range(3):
            seen.clear()
            ddp(x).sum().backward()
        by_ddp = [seen[i] for i in sorted(seen)]
    finally:
        dist.destroy_process_group()
    # The same tensors in the same buckets. Within a bucket autograd's real
    # order differs from reverse parameter order where one node produces
    # several gradients (a BatchNorm's weight before its bias).
    if [sorted(b) for b in by_ddp] != [sorted(b) for b in by_function]:
        sys.exit("DDP's own buckets differ from _compute_bucket_assignment_by_size's:\n"
                 "%s\n%s" % (by_ddp, by_function))
    return by_function


def our_buckets(path):
    text = open(path).read()
    header = re.search(r"func\.func @\w+\((.*?)\)\s*->", text, re.S)
    names = dict(re.findall(r'%(arg\d+): tensor<[^>]*> \{ddp\.name = "([^"]+)"\}',
                            header.group(1)))
    buckets = []
    for line in text.splitlines():
        match = re.search(r"ddp\.allreduce\s+\w+\s+([^:]*?)\s*:", line)
        if match:
            buckets.append([names[a.strip().lstrip("%")] for a in match.group(1).split(",")])
    return buckets


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["torch", "ours"])
    parser.add_argument("source")
    parser.add_argument("--cap-mb", type=float, default=25.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    buckets = (torch_buckets(args.source, args.cap_mb) if args.which == "torch"
               else our_buckets(args.source))
    with open(args.out, "w") as out:
        for bucket in buckets:
            out.write(" ".join(bucket) + "\n")
    print("%s: %d buckets of %s tensors" % (args.which, len(buckets),
                                             ", ".join(str(len(b)) for b in buckets)))


if __name__ == "__main__":
    main()
