// The report's row of a scheme bucket counts what one step sends: a hook
// whose branches send differently (an scf.if: one of them runs) counts the
// larger branch, not both; collectives after each other add up.
// RUN: ddp-opt %s --ddp-apply-hook=hook=h --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s
// Two-level collectives (a sum within the node, then across nodes): the
// same bucket sends the same across nodes.
// RUN: ddp-opt %s --ddp-compress="hook=h two-level=collectives" --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s

// CHECK: bucket of 1 [@step:%arg1] 16 f32 hook:h - f32+f16 16 18 0.89x
// CHECK: total: 1 tensors, 1 compressed; elements 16 -> 18 (0.89x); bytes 64 -> 72 (0.89x)
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %first = tensor.extract %g[%c0] : tensor<?xf32>
  %big = arith.cmpf ogt, %first, %zero : f32
  %r = scf.if %big -> tensor<?xf32> {
    // 16 f32: 64 bytes.
    %m = ddp.allreduce mean %g : tensor<?xf32>
    scf.yield %m : tensor<?xf32>
  } else {
    // 16 f16: 32 bytes.
    %n = ddp.cast %g : tensor<?xf32> to tensor<?xf16>
    %m = ddp.allreduce mean %n : tensor<?xf16>
    %w = ddp.cast %m : tensor<?xf16> to tensor<?xf32>
    scf.yield %w : tensor<?xf32>
  }
  // And every step two 0-d f32 more: 8 bytes. The larger branch (64)
  // plus these: 72 bytes, 18 elements (both branches would be 104).
  %s = tensor.from_elements %first : tensor<f32>
  %all:2 = ddp.allgather %s, %s : tensor<f32>, tensor<f32>
  return %r : tensor<?xf32>
}
func.func @step(%x: i1, %g: tensor<16xf32>) -> tensor<16xf32> {
  %r = ddp.allreduce mean %g : tensor<16xf32>
  return %r : tensor<16xf32>
}
