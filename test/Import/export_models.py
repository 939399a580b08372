# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Exports a torchvision / torch.nn model to ONNX, and/or writes what PyTorch's
PowerSGD hook would do with its parameters.

Runs with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision,
python3-onnx). Models are built with random initialization: nothing is
downloaded.

  export_models.py --model resnet18|resnet50|transformer -o OUT.onnx
  export_models.py --model M --stats-json OUT.json --rank 1 [--rank 2 ...] [--rate 2]

Both modes can be combined in one call (the model is built once).

The ONNX model is exported with training=TrainingMode.TRAINING and
do_constant_folding=False: BatchNorm's running statistics stay initializers
next to the trainable parameters (in EVAL mode the exporter may also fold
and deduplicate initializers -- e.g. LayerNorm weights that are all ones --
which would lose parameters). After export the initializers are checked with
onnx: every parameter of named_parameters() must be there (by name, or failing
that by the multiset of shapes), and for the ResNets every
running_mean/running_var buffer too.

The stats JSON holds, for each requested rank R, one row per parameter in
named_parameters() order with PyTorch's own rule, as powerSGD_hook applies it
(torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py):

  matrix = p.view(p.shape[0], -1); n, m = matrix.shape
  r = min(n, m, R)
  compress, numel_before, numel_after = _should_compress(n, m, r, rate)
  total_numel_before += numel_before
  total_numel_after  += numel_after if compress else numel_before

and the totals are what PowerSGDState.compression_stats() returns. 0-d
parameters cannot be viewed as (shape[0], -1); they are skipped and listed
under "skipped_0d" (none of these models has one).

With -o, the stats also name the ONNX file's float initializers other than
running statistics, in graph.initializer order ("onnx_trainable_order"): the
order the importer's function arguments must have.

Format:
  {"model": M, "rate": 2.0, "onnx_trainable_order": [...],
   "ranks": {"2": {"tensors": [{"name", "shape", "compressed", "rank",
                               "numel_before", "numel_after"}, ...],
                   "numel_before": ..., "numel_after": ..., "ratio": ...,
                   "skipped_0d": [...]}}}
"""
import argparse
import collections
import json
import sys
import warnings

# The exporter warns about every BatchNorm's num_batches_tracked update it
# drops; that is expected and not interesting in test logs.
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook  # noqa: E402


class TransformerModel(torch.nn.Module):
    """A small TransformerEncoder (d_model 64, 2 layers, 4 heads) with a Linear
    head. Its parameters include the fused in_proj_weight [3*d, d] of
    nn.MultiheadAttention."""

    def __init__(self, d_model=64, nhead=4, num_layers=2, dim_feedforward=128,
                 num_classes=10):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(
            d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
            batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=num_layers)
        self.head = torch.nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.head(self.encoder(x))


def build(name):
    torch.manual_seed(0)
    if name in ("resnet18", "resnet50"):
        import torchvision
        ctor = getattr(torchvision.models, name)
        # Random initialization; no weights= argument, nothing is downloaded.
        model = ctor()
        # A small image keeps the export fast; the parameters do not depend on
        # the input size (adaptive average pooling before fc).
        example = torch.randn(1, 3, 64, 64)
    elif name == "transformer":
        model = TransformerModel()
        example = torch.randn(2, 5, 64)
    else:
        raise SystemExit("export_models.py: unknown model %r" % name)
    return model, example


def check_initializers(name, model, onnx_path):
    import onnx
    proto = onnx.load(onnx_path)
    inits = {t.name: t for t in proto.graph.initializer}
    params = list(model.named_parameters())
    missing = [n for n, _ in params if n not in inits]
    if missing:
        # The exporter may rename parameters (fused or shared ones); then the
        # multiset of parameter shapes must still be among the float
        # initializers' shapes.
        have = collections.Counter(tuple(t.dims) for t in proto.graph.initializer
                                   if t.data_type == onnx.TensorProto.FLOAT)
        want = collections.Counter(tuple(p.shape) for _, p in params)
        short = want - have
        if short:
            raise SystemExit("export_models.py: %s: parameters missing from the "
                             "ONNX initializers (by name: %s; by shape: %s)"
                             % (name, missing[:5], dict(short)))
    for bname, buf in model.named_buffers():
        if bname.endswith(("running_mean", "running_var")) and bname not in inits:
            raise SystemExit("export_models.py: %s: BatchNorm buffer %s is not an "
                             "ONNX initializer" % (name, bname))
        if bname in inits and list(inits[bname].dims) != list(buf.shape):
            raise SystemExit("export_models.py: %s: %s has dims %s, torch %s"
                             % (name, bname, list(inits[bname].dims), list(buf.shape)))
    for n, p in params:
        if n in inits and list(inits[n].dims) != list(p.shape):
            raise SystemExit("export_models.py: %s: %s has dims %s, torch %s"
                             % (name, n, list(inits[n].dims), list(p.shape)))
    # What the importer's contract says it keeps, in graph.initializer order.
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
              onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)
    return [t.name for t in proto.graph.initializer
            if t.data_type in floats
            and not t.name.endswith(("running_mean", "running_var"))]


def export(name, model, example, path):
    model.train()
    torch.onnx.export(model, example, path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    return check_initializers(name, model, path)


def powersgd_stats(model, rank, rate):
    rows = []
    skipped = []
    before = after = 0
    for pname, p in model.named_parameters():
        if p.dim() == 0:
            skipped.append(pname)
            continue
        matrix = p.detach().view(p.shape[0], -1)
        n, m = matrix.shape
        r = min(n, m, rank)
        compress, numel_before, numel_after = powerSGD_hook._should_compress(
            n, m, r, rate)
        before += numel_before
        after += numel_after if compress else numel_before
        rows.append({
            "name": pname,
            "shape": list(p.shape),
            "compressed": bool(compress),
            "rank": r if compress else 0,
            "numel_before": numel_before,
            "numel_after": numel_after if compress else numel_before,
        })
    return {"tensors": rows, "numel_before": before, "numel_after": after,
            "ratio": before / after if after > 0 else 0,
            "skipped_0d": skipped}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True,
                        choices=["resnet18", "resnet50", "transformer"])
    parser.add_argument("-o", dest="output", help="ONNX file to write")
    parser.add_argument("--stats-json", help="PowerSGD stats file to write ('-': stdout)")
    parser.add_argument("--rank", type=int, action="append", default=[])
    parser.add_argument("--rate", type=float, default=2.0)
    args = parser.parse_args()
    if not args.output and not args.stats_json:
        parser.error("nothing to do: give -o and/or --stats-json")
    if args.stats_json and not args.rank:
        parser.error("--stats-json needs at least one --rank")

    model, example = build(args.model)
    order = None
    if args.output:
        order = export(args.model, model, example, args.output)
    if args.stats_json:
        stats = {"model": args.model, "rate": args.rate, "torch": torch.__version__,
                 "ranks": {str(r): powersgd_stats(model, r, args.rate)
                           for r in args.rank}}
        if order is not None:
            stats["onnx_trainable_order"] = order
        text = json.dumps(stats, indent=1)
        if args.stats_json == "-":
            print(text)
        else:
            with open(args.stats_json, "w") as f:
                f.write(text + "\n")
        for r in args.rank:
            s = stats["ranks"][str(r)]
            print("%s rank %d: %d parameters, %d compressed, %d -> %d elements"
                  % (args.model, r, len(s["tensors"]),
                     sum(t["compressed"] for t in s["tensors"]),
                     s["numel_before"], s["numel_after"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
