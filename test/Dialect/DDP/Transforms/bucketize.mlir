// The default, mode=ddp: PyTorch DDP's assignment (reverse parameter order
// among gradients ready together, a bucket closed once it reaches its cap,
// the first at first-bucket-mb). mode=strict: no bucket over its cap,
// program order among gradients ready together.
// RUN: ddp-opt %s --ddp-bucketize | FileCheck %s
// RUN: ddp-opt %s --ddp-bucketize="mode=strict first-bucket-mb=0" | FileCheck %s --check-prefix=STRICT
// 64x32xf32 is 8 KiB: a 0.01 MiB (10485 byte) cap holds one of them.
// RUN: ddp-opt %s --ddp-bucketize="cap-mb=0.01 first-bucket-mb=0" | FileCheck %s --check-prefix=SMALL
// RUN: ddp-opt %s --ddp-bucketize="cap-mb=0.01 first-bucket-mb=0 mode=strict" | FileCheck %s --check-prefix=STRICT-SMALL
// mode=ddp-param-order: DDP's rule in parameter order (DDP with
// find_unused_parameters=True).
// RUN: ddp-opt %s --ddp-bucketize="mode=ddp-param-order" | FileCheck %s --check-prefix=PARAM
// RUN: ddp-opt %s --ddp-bucketize="mode=ddp-param-order cap-mb=0.01 first-bucket-mb=0" | FileCheck %s --check-prefix=PARAM-SMALL
// The first bucket has its own cap: one 64x32 tensor, then 25 MiB.
// RUN: ddp-opt %s --ddp-bucketize="first-bucket-mb=0.005" | FileCheck %s --check-prefix=FIRST
// RUN: not ddp-opt %s --ddp-bucketize="mode=fast" 2>&1 | FileCheck %s --check-prefix=BAD-MODE
// BAD-MODE: for the --mode option: Cannot find option named 'fast'!
// BAD-MODE: error: ddp-bucketize: an option's value is invalid (the line above says which; --help lists the values each option takes)
// RUN: not ddp-opt %s --ddp-bucketize="first-bucket-mb=-1" 2>&1 | FileCheck %s --check-prefix=BAD-FIRST
// BAD-FIRST: error: ddp-bucketize: first-bucket-mb must be a number of MiB in [0, 1.07374e+09], got -1
// RUN: not ddp-opt %s --ddp-bucketize="first-bucket-mb=1e300" 2>&1 | FileCheck %s --check-prefix=HUGE-FIRST
// HUGE-FIRST: error: ddp-bucketize: first-bucket-mb must be a number of MiB in [0, 1.07374e+09], got 1e+300

// Arguments are ready together: DDP takes them in reverse parameter order.
// CHECK-LABEL: func.func @consecutive(
// CHECK-SAME: %[[A:[^:]*]]: tensor<64x32xf32>, %[[B:[^:]*]]: tensor<64xf32>, %[[C:[^:]*]]: tensor<64x32xf32>
// CHECK: %[[R:.*]]:3 = ddp.allreduce mean %[[C]], %[[B]], %[[A]] : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
// CHECK-NEXT: return %[[R]]#2, %[[R]]#1, %[[R]]#0
// STRICT-LABEL: func.func @consecutive(
// STRICT-SAME: %[[A:[^:]*]]: tensor<64x32xf32>, %[[B:[^:]*]]: tensor<64xf32>, %[[C:[^:]*]]: tensor<64x32xf32>
// STRICT: %[[R:.*]]:3 = ddp.allreduce mean %[[A]], %[[B]], %[[C]] : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
// STRICT-NEXT: return %[[R]]#0, %[[R]]#1, %[[R]]#2
// DDP closes a bucket once it reaches the cap: 8 KiB + 256 B + 8 KiB.
// SMALL-LABEL: func.func @consecutive(
// SMALL: ddp.allreduce mean %arg2, %arg1, %arg0 : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
// STRICT-SMALL-LABEL: func.func @consecutive(
// STRICT-SMALL: %[[R0:.*]]:2 = ddp.allreduce mean %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<64xf32>
// STRICT-SMALL: %[[R1:.*]] = ddp.allreduce mean %{{.*}} : tensor<64x32xf32>
// PARAM-LABEL: func.func @consecutive(
// PARAM: ddp.allreduce mean %arg0, %arg1, %arg2 : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
// PARAM-SMALL-LABEL: func.func @consecutive(
// PARAM-SMALL: ddp.allreduce mean %arg0, %arg1, %arg2 : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
// FIRST-LABEL: func.func @consecutive(
// FIRST: ddp.allreduce mean %arg2 : tensor<64x32xf32>
// FIRST-NEXT: ddp.allreduce mean %arg1, %arg0 : tensor<64xf32>, tensor<64x32xf32>
func.func @consecutive(%a: tensor<64x32xf32>, %b: tensor<64xf32>, %c: tensor<64x32xf32>)
    -> (tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>) {
  %0 = ddp.allreduce mean %a : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64xf32>
  %2 = ddp.allreduce mean %c : tensor<64x32xf32>
  return %0, %1, %2 : tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
}

// Buckets hold one reduction kind and one element type; an allreduce is
// never moved past a use of its result. Allreduces written one after the
// other are put in the order their inputs are ready first: %e (an
// argument) before %x.
// CHECK-LABEL: func.func @separated(
// CHECK: ddp.allreduce mean %arg2 : tensor<4xf16>
// CHECK: ddp.allreduce sum %arg1 : tensor<4xf32>
// CHECK: %[[M:.*]]:2 = ddp.allreduce mean %arg3, %arg0 : tensor<4xf32>, tensor<4xf32>
// CHECK: %[[X:.*]] = arith.addf %[[M]]#1, %[[M]]#1
// CHECK: %[[L:.*]]:2 = ddp.allreduce mean %arg4, %[[X]] : tensor<4xf32>, tensor<4xf32>
// CHECK: return %[[M]]#1, %{{.*}}, %{{.*}}, %[[M]]#0, %[[L]]#1, %[[L]]#0
// STRICT-LABEL: func.func @separated(
// STRICT: ddp.allreduce sum %arg1 : tensor<4xf32>
// STRICT: ddp.allreduce mean %arg2 : tensor<4xf16>
// STRICT: %[[M:.*]]:2 = ddp.allreduce mean %arg0, %arg3 : tensor<4xf32>, tensor<4xf32>
// STRICT: %[[X:.*]] = arith.addf %[[M]]#0, %[[M]]#0
// STRICT: %[[L:.*]]:2 = ddp.allreduce mean %arg4, %[[X]] : tensor<4xf32>, tensor<4xf32>
// STRICT: return %[[M]]#0, %{{.*}}, %{{.*}}, %[[M]]#1, %[[L]]#1, %[[L]]#0
func.func @separated(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf16>, %d: tensor<4xf32>, %e: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = ddp.allreduce mean %a : tensor<4xf32>
  %1 = ddp.allreduce sum %b : tensor<4xf32>
  %2 = ddp.allreduce mean %c : tensor<4xf16>
  %3 = ddp.allreduce mean %d : tensor<4xf32>
  %x = arith.addf %0, %0 : tensor<4xf32>
  %4 = ddp.allreduce mean %x : tensor<4xf32>
  %5 = ddp.allreduce mean %e : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Dynamic shapes and allreduces PowerSGD emitted (they have a role) are not
// bucketed; nested blocks are bucketed on their own.
// CHECK-LABEL: func.func @not_bucketed(
// CHECK: ddp.allreduce mean %arg0 : tensor<?xf32>
// CHECK: ddp.allreduce mean %arg1 : tensor<4xf32>
// CHECK: ddp.allreduce sum %arg1 role compressed : tensor<4xf32>
// CHECK: scf.if
// CHECK:   ddp.allreduce mean %arg1, %arg1 : tensor<4xf32>, tensor<4xf32>
func.func @not_bucketed(%d: tensor<?xf32>, %a: tensor<4xf32>, %c: i1) -> (tensor<?xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = ddp.allreduce mean %d : tensor<?xf32>
  %1 = ddp.allreduce mean %a : tensor<4xf32>
  %2 = ddp.allreduce sum %a role compressed : tensor<4xf32>
  %3 = scf.if %c -> tensor<4xf32> {
    %4 = ddp.allreduce mean %a : tensor<4xf32>
    %5 = ddp.allreduce mean %a : tensor<4xf32>
    %6 = arith.addf %4, %5 : tensor<4xf32>
    scf.yield %6 : tensor<4xf32>
  } else {
    scf.yield %a : tensor<4xf32>
  }
  return %0, %1, %2, %3 : tensor<?xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Written in parameter order after the backward pass (w1's gradient is
// computed last): bucketed in the order the gradients are ready, in both
// modes. With a cap of 0.01 MiB, DDP's rule puts g3 and g2 together (the
// bucket is closed once it reaches the cap); the strict rule shares
// nothing.
// CHECK-LABEL: func.func @parameter_order(
// CHECK: %[[G3:.*]] = arith.mulf %arg3, %arg2
// CHECK: %[[G2:.*]] = arith.mulf %[[G3]], %arg1
// CHECK: %[[G1:.*]] = arith.mulf %[[G2]], %arg0
// CHECK: %[[R:.*]]:3 = ddp.allreduce mean %[[G3]], %[[G2]], %[[G1]]
// CHECK: return %[[R]]#2, %[[R]]#1, %[[R]]#0
// STRICT-LABEL: func.func @parameter_order(
// STRICT: ddp.allreduce mean %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>
// SMALL-LABEL: func.func @parameter_order(
// SMALL: ddp.allreduce mean %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<64x32xf32>
// SMALL-NEXT: ddp.allreduce mean %{{.*}} : tensor<64x32xf32>
// STRICT-SMALL-LABEL: func.func @parameter_order(
// STRICT-SMALL: ddp.allreduce mean %{{.*}} : tensor<64x32xf32>
// STRICT-SMALL-NEXT: ddp.allreduce mean %{{.*}} : tensor<64x32xf32>
// STRICT-SMALL-NEXT: ddp.allreduce mean %{{.*}} : tensor<64x32xf32>
func.func @parameter_order(%w1: tensor<64x32xf32>, %w2: tensor<64x32xf32>, %w3: tensor<64x32xf32>, %x: tensor<64x32xf32>)
    -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>) {
  %g3 = arith.mulf %x, %w3 : tensor<64x32xf32>
  %g2 = arith.mulf %g3, %w2 : tensor<64x32xf32>
  %g1 = arith.mulf %g2, %w1 : tensor<64x32xf32>
  %m1 = ddp.allreduce mean %g1 : tensor<64x32xf32>
  %m2 = ddp.allreduce mean %g2 : tensor<64x32xf32>
  %m3 = ddp.allreduce mean %g3 : tensor<64x32xf32>
  return %m1, %m2, %m3 : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>
}
