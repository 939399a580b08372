// Every way a hook can be wrong gets a message that says what to change.
// RUN: not ddp-opt %s --split-input-file --ddp-apply-hook=hook=h 2>&1 | FileCheck %s
// RUN: not ddp-opt %s --split-input-file --ddp-apply-hook 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not ddp-opt %s --split-input-file --ddp-apply-hook=hook=missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not ddp-opt %s --split-input-file --ddp-apply-hook="hook=h buckets=(" 2>&1 | FileCheck %s --check-prefix=REGEX
// NONE: error: ddp-apply-hook: needs hook=<the name of a function of the module>, e.g. hook=my_hook
// MISSING: error: ddp-apply-hook: the module has no function @missing to use as a hook
// REGEX: error: ddp-apply-hook: buckets='(' is not a valid regular expression

// CHECK: error: ddp-apply-hook: the hook @h must take the flat bucket and return its average over the ranks, one 1-D tensor of f32, f16, bf16 or f64 in and the same type out, e.g. (tensor<?xf32>) -> tensor<?xf32>; it has type '(tensor<4x4xf32>) -> tensor<4x4xf32>'
func.func private @h(%g: tensor<4x4xf32>) -> tensor<4x4xf32> {
  return %g : tensor<4x4xf32>
}

// -----

// CHECK: error: ddp-apply-hook: the hook @h must take the flat bucket
// CHECK-SAME: it has type '(tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>'
func.func private @h(%g: tensor<?xf32>, %x: tensor<?xf32>) -> tensor<?xf32> {
  return %g : tensor<?xf32>
}

// -----

// CHECK: error: ddp-apply-hook: the hook @h is called here; a hook is applied to buckets, not called
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  return %g : tensor<?xf32>
}
func.func @user(%g: tensor<?xf32>) -> tensor<?xf32> {
  %r = func.call @h(%g) : (tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// CHECK: error: ddp-apply-hook: the hook @h has no body
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32>


// -----

// A hook that returns another size than its bucket's: an error of the pass
// once the shapes are known, not an out-of-bounds slice in the lowering.
// CHECK: error: ddp-apply-hook: the hook @h returns a tensor of another size than the bucket's 15 elements (bucket of @step:%arg0)
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %c5 = arith.constant 5 : index
  %e = tensor.empty(%c5) : tensor<?xf32>
  return %e : tensor<?xf32>
}
func.func @step(%a: tensor<15xf32>) -> tensor<15xf32> {
  %r = ddp.allreduce mean %a : tensor<15xf32>
  return %r : tensor<15xf32>
}

// -----

// The same through a helper the hook calls: helpers are inlined, so the
// size is known here too (a call hid it until an assertion failed in the
// compiled step).
// CHECK: error: ddp-apply-hook: the hook @h returns a tensor of another size than the bucket's 17 elements (bucket of @step:%arg0, @step:%arg1)
func.func private @shrink(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %m = arith.subi %n, %c1 : index
  %s = tensor.extract_slice %x[0] [%m] [1] : tensor<?xf32> to tensor<?xf32>
  return %s : tensor<?xf32>
}
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %x = func.call @shrink(%g) : (tensor<?xf32>) -> tensor<?xf32>
  %r = ddp.allreduce mean %x : tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @step(%a: tensor<4x3xf32>, %b: tensor<5xf32>) -> (tensor<4x3xf32>, tensor<5xf32>) {
  %r:2 = ddp.allreduce mean %a, %b : tensor<4x3xf32>, tensor<5xf32>
  return %r#0, %r#1 : tensor<4x3xf32>, tensor<5xf32>
}

// -----

// CHECK: error: ddp-apply-hook: the hook @h calls @h2 more than 64 calls deep; a hook's helpers cannot be recursive
func.func private @h2(%x: tensor<?xf32>) -> tensor<?xf32> {
  %y = func.call @h2(%x) : (tensor<?xf32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %x = func.call @h2(%g) : (tensor<?xf32>) -> tensor<?xf32>
  return %x : tensor<?xf32>
}
func.func @step(%a: tensor<15xf32>) -> tensor<15xf32> {
  %r = ddp.allreduce mean %a : tensor<15xf32>
  return %r : tensor<15xf32>
}

// -----

// CHECK: error: ddp-apply-hook: the hook @h calls @external, which is not a function with a body in the module; a hook's helpers are inlined into it
func.func private @external(tensor<?xf32>) -> tensor<?xf32>
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %x = func.call @external(%g) : (tensor<?xf32>) -> tensor<?xf32>
  return %x : tensor<?xf32>
}
func.func @step(%a: tensor<15xf32>) -> tensor<15xf32> {
  %r = ddp.allreduce mean %a : tensor<15xf32>
  return %r : tensor<15xf32>
}

// -----

// The contract: a hook's body holds the listed ddp ops and arith, math,
// linalg, tensor and scf; a call into the host (llvm.call @system) would
// otherwise run on every rank.
// CHECK: error: ddp-apply-hook: the hook @h holds 'llvm.mlir.addressof', which a hook may not: its body holds the ddp ops allreduce, allgather, world_size, cast, scale, state_load and state_store, and ops of arith, math, linalg, tensor and scf
llvm.func @system(!llvm.ptr) -> i32
llvm.mlir.global internal constant @cmd("touch /tmp/x\00")
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %p = llvm.mlir.addressof @cmd : !llvm.ptr
  %r = llvm.call @system(%p) : (!llvm.ptr) -> i32
  %m = ddp.allreduce mean %g : tensor<?xf32>
  return %m : tensor<?xf32>
}
func.func @step(%g: tensor<8xf32>) -> tensor<8xf32> {
  %r = ddp.allreduce mean %g : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// In a helper the hook calls too (helpers are inlined first); and memref
// ops, which would write behind the bucket's back.
// CHECK: error: ddp-apply-hook: the hook @h holds 'bufferization.to_buffer', which a hook may not
func.func private @helper(%g: tensor<?xf32>) -> tensor<?xf32> {
  %b = bufferization.to_buffer %g : tensor<?xf32> to memref<?xf32>
  return %g : tensor<?xf32>
}
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %x = func.call @helper(%g) : (tensor<?xf32>) -> tensor<?xf32>
  %m = ddp.allreduce mean %x : tensor<?xf32>
  return %m : tensor<?xf32>
}
func.func @step(%g: tensor<8xf32>) -> tensor<8xf32> {
  %r = ddp.allreduce mean %g : tensor<8xf32>
  return %r : tensor<8xf32>
}
