// The text a lowered op hands ddprt_check names the gradients it covers, in
// the order of the runtime call's tensors: the runtime's "tensor #1 of 2"
// (e.g. a non-finite P or Q in ddp.reconstruct) is fc1.weight here (DDP's
// buckets are in reverse parameter order), and the
// uncompressed bias travels alone. Each per-tensor op carries its own
// gradient's location; collectives carry theirs together.
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0" --ddp-lower-to-llvm | FileCheck %s

// CHECK-DAG: ("ddp.reconstruct (fc2.weight, fc1.weight)\00")
// CHECK-DAG: ("ddp.allreduce (fc2.weight, fc1.weight)\00")
// CHECK-DAG: ("ddp.allreduce_start (fc1.bias)\00")
// CHECK-DAG: ("ddp.wait (fc1.bias)\00")
// CHECK-DAG: ("ddp.inspect (fc2.weight)\00")

func.func @step(%a: tensor<64x32xf32>, %c: tensor<32xf32>, %b: tensor<48x24xf32>)
    -> (tensor<64x32xf32>, tensor<32xf32>, tensor<48x24xf32>) {
  %r = ddp.allreduce mean %a : tensor<64x32xf32> loc("fc1.weight")
  %t = ddp.allreduce mean %c : tensor<32xf32> loc("fc1.bias")
  %s = ddp.allreduce mean %b : tensor<48x24xf32> loc("fc2.weight")
  return %r, %t, %s : tensor<64x32xf32>, tensor<32xf32>, tensor<48x24xf32>
}
