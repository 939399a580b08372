# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the small ONNX models the ddp-import-onnx tests read.

  make_tiny_model.py [-o Inputs/tiny.onnx]                    tiny.onnx
  make_tiny_model.py --variant odd-names -o Inputs/odd-names.onnx
      the same initializers under names a textual loc("...") must escape
  make_tiny_model.py --variant empty -o Inputs/no-initializers.onnx
      a graph without initializers (nor nodes)
  make_tiny_model.py --variant external -o Inputs/external.onnx
      tiny.onnx with fc.weight's data_location EXTERNAL (file not there)
  make_tiny_model.py --variant encodings -o Inputs/encodings.onnx
      float tensors in the other encodings and shapes: f16 in int32_data, f64
      in double_data, bf16 in raw_data, 0x4 and 4x0 f32, 1x1x1x8 f32
  make_tiny_model.py --variant other-types -o Inputs/other-types.onnx
      one f32 weight and one valid initializer of each non-float type (bool,
      u8, i8, u16, i16, i32, u32, u64, i64, string, complex64, complex128) in
      the encoding onnx.helper.make_tensor gives them (typed fields, no
      raw_data)
  make_tiny_model.py --variant V --check-report-locs REPORT.json
      checks a compression report's "loc"s against V's default trainables

Needs python3-onnx (and numpy), i.e. /usr/bin/python3 here; the checked-in
files under Inputs/ were generated with onnx 1.12 by the commands above (run
in test/Import), so the tests need no onnx package.

tiny.onnx: a Gemm -> BatchNormalization -> Mul -> Reshape graph plus an f16
MatMul branch; its initializers, in graph.initializer order:

  #  name                    type     dims    encoding    trainable by default
  0  fc.weight               f32      [8,4]   raw_data    yes
  1  fc.bias                 f32      [8]     float_data  yes
  2  bn.weight               f32      [8]     raw_data    yes
  3  bn.bias                 f32      [8]     raw_data    yes
  4  bn.running_mean         f32      [8]     raw_data    no (BatchNorm statistic)
  5  bn.running_var          f32      [8]     raw_data    no (BatchNorm statistic)
  6  bn.num_batches_tracked  int64    []      int64_data  no (integer)
  7  reshape.shape           int64    [2]     raw_data    no (integer)
  8  proj.weight             f16      [3,3]   raw_data    yes
  9  temperature             f32      []      float_data  yes (0-d)
 10  gate.weight             bf16     [2]     int32_data  yes
 11  aux.weight              f64      [2,5]   raw_data    yes

Default: 8 trainable tensors, 32+8+8+8+9+1+2+10 = 78 elements, 4 left out.
"""
import argparse
import json
import sys

# onnx and numpy are imported lazily: --check-report-locs runs with a plain
# python3 that has neither.


def raw(name, array):
    from onnx import numpy_helper
    return numpy_helper.from_array(array, name)


def initializers(names):
    import numpy as np
    from onnx import TensorProto, helper
    rng = np.random.RandomState(0)
    n = names
    return [
        raw(n[0], rng.randn(8, 4).astype(np.float32)),
        helper.make_tensor(n[1], TensorProto.FLOAT, [8],
                           rng.randn(8).astype(np.float32).tolist(), raw=False),
        raw(n[2], np.ones(8, dtype=np.float32)),
        raw(n[3], np.zeros(8, dtype=np.float32)),
        raw(n[4], np.zeros(8, dtype=np.float32)),
        raw(n[5], np.ones(8, dtype=np.float32)),
        helper.make_tensor(n[6], TensorProto.INT64, [], [0], raw=False),
        raw(n[7], np.array([2, 8], dtype=np.int64)),
        raw(n[8], rng.randn(3, 3).astype(np.float16)),
        helper.make_tensor(n[9], TensorProto.FLOAT, [], [0.5], raw=False),
        # helper.make_tensor converts the float values to bf16 bit patterns
        # in int32_data itself (1.0 -> 0x3F80, -2.5 -> 0xC020).
        helper.make_tensor(n[10], TensorProto.BFLOAT16, [2], [1.0, -2.5], raw=False),
        raw(n[11], rng.randn(2, 5).astype(np.float64)),
    ]


DEFAULT_NAMES = ["fc.weight", "fc.bias", "bn.weight", "bn.bias", "bn.running_mean",
                 "bn.running_var", "bn.num_batches_tracked", "reshape.shape",
                 "proj.weight", "temperature", "gate.weight", "aux.weight"]

# Names a textual loc("...") has to escape, or that look like MLIR syntax.
ODD_NAMES = ['fc/weight:0', 'fc "bias"', 'bn\\weight', 'bn.bias%1',
             "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
             "reshape.shape", "proj.weight\u00e9", "@temperature",
             "gate.weight) loc(", "aux.weight\n2"]


def make_model(names, with_graph=True):
    from onnx import TensorProto, helper
    inits = initializers(names)
    n = names
    nodes = [
        helper.make_node("Gemm", ["x", n[0], n[1]], ["y"], transB=1),
        helper.make_node("BatchNormalization", ["y", n[2], n[3], n[4], n[5]], ["z"]),
        helper.make_node("Mul", ["z", n[9]], ["s"]),
        helper.make_node("Reshape", ["s", n[7]], ["out"]),
        helper.make_node("MatMul", ["h", n[8]], ["out2"]),
    ]
    graph = helper.make_graph(
        nodes if with_graph else [], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT16, [3, 3])]
        if with_graph else [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("out2", TensorProto.FLOAT16, [3, 3])]
        if with_graph else [],
        initializer=inits)
    model = helper.make_model(graph, producer_name="make_tiny_model.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    # Pin the IR version so the checked-in bytes do not depend on the onnx
    # package's default.
    model.ir_version = 7
    return model


def bare_model(inits):
    from onnx import helper
    graph = helper.make_graph([], "tiny", [], [], initializer=inits)
    model = helper.make_model(graph, producer_name="make_tiny_model.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def encodings():
    import numpy as np
    from onnx import TensorProto, helper
    bf16 = raw("bf16.raw", np.array([0x3F80, 0xC020], dtype=np.uint16))
    bf16.data_type = TensorProto.BFLOAT16
    return [
        helper.make_tensor("f16.int32_data", TensorProto.FLOAT16, [2, 2],
                           [1.0, -2.0, 0.5, 3.0], raw=False),
        helper.make_tensor("f64.double_data", TensorProto.DOUBLE, [3], [1.0, 2.0, 3.0],
                           raw=False),
        raw("f32.0x4", np.zeros((0, 4), dtype=np.float32)),
        helper.make_tensor("f32.4x0", TensorProto.FLOAT, [4, 0], [], raw=False),
        raw("f32.1x1x1x8", np.ones((1, 1, 1, 8), dtype=np.float32)),
        bf16,
    ]


def other_types():
    import numpy as np
    from onnx import TensorProto, helper
    T = TensorProto
    return [raw("w", np.ones((2, 2), dtype=np.float32))] + [
        helper.make_tensor(name, dtype, [len(vals)], vals, raw=False)
        for name, dtype, vals in [
            ("bool", T.BOOL, [True, False]),
            ("u8", T.UINT8, [1, 2]),
            ("i8", T.INT8, [-1, 2]),
            ("u16", T.UINT16, [1, 2]),
            ("i16", T.INT16, [-1, 2]),
            ("i32", T.INT32, [-1, 2]),
            ("u32", T.UINT32, [1, 2]),
            ("u64", T.UINT64, [1, 2]),
            ("i64", T.INT64, [-1, 2]),
            ("string", T.STRING, [b"a", b"bc"]),
            ("c64", T.COMPLEX64, [1 + 2j, 3 - 4j]),
            ("c128", T.COMPLEX128, [1 + 2j, 3 - 4j]),
        ]]


# Indices of the initializers the importer keeps by default (see the table).
DEFAULT_TRAINABLE = [0, 1, 2, 3, 8, 9, 10, 11]


def check_report_locs(variant, path):
    names = {"tiny": DEFAULT_NAMES, "odd-names": ODD_NAMES}[variant]
    want = [names[i] for i in DEFAULT_TRAINABLE]
    with open(path, encoding="utf-8") as f:
        got = [row["loc"] for row in json.load(f)["tensors"]]
    if got != want:
        print("report locs %r\nexpected    %r" % (got, want))
        return 1
    print("OK: %d locs round-trip" % len(got))
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-o", dest="output", default="Inputs/tiny.onnx")
    parser.add_argument("--variant", default="tiny",
                        choices=["tiny", "odd-names", "empty", "external",
                                 "encodings", "other-types"])
    parser.add_argument("--check-report-locs", metavar="REPORT_JSON",
                        help="check that a ddp-compression-report JSON of the "
                        "--variant's default import names exactly its trainable "
                        "initializers, in order (plain python3)")
    args = parser.parse_args()
    if args.check_report_locs:
        return check_report_locs(args.variant, args.check_report_locs)
    import onnx
    from onnx import TensorProto
    if args.variant == "tiny":
        model = make_model(DEFAULT_NAMES)
        onnx.checker.check_model(model)
    elif args.variant == "odd-names":
        model = make_model(ODD_NAMES, with_graph=False)
    elif args.variant == "empty":
        model = make_model(DEFAULT_NAMES, with_graph=False)
        del model.graph.initializer[:]
    elif args.variant == "encodings":
        model = bare_model(encodings())
    elif args.variant == "other-types":
        model = bare_model(other_types())
    else:
        model = make_model(DEFAULT_NAMES)
        t = model.graph.initializer[0]
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in [("location", "tiny.weights.bin"), ("offset", "0"),
                     ("length", "128")]:
            e = t.external_data.add()
            e.key, e.value = k, v
    with open(args.output, "wb") as f:
        f.write(model.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
