// RUN: ddp-opt %s -allow-unregistered-dialect --split-input-file --ddp-schedule-overlap -verify-diagnostics | FileCheck %s
// The schedule is a fixed point: scheduling again changes nothing.
// RUN: ddp-opt %s -allow-unregistered-dialect --split-input-file --ddp-schedule-overlap -o %t.once 2>/dev/null
// RUN: ddp-opt %t.once -allow-unregistered-dialect --split-input-file --ddp-schedule-overlap -o %t.twice 2>/dev/null
// RUN: diff %t.once %t.twice

// Three layers; backward produces g3, g2, g1 in that order and the
// allreduces are written after it, in parameter order. Each starts right
// after its gradient, in the order the gradients are ready; each wait sits
// right before the update that reads it.
// CHECK-LABEL: func.func @layers
// CHECK-NEXT:    %[[G3:.*]] = arith.mulf %arg3, %arg2
// CHECK-NEXT:    %[[R3:.*]] = ddp.allreduce_start mean %[[G3]]
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    %[[G2:.*]] = arith.mulf
// CHECK-NEXT:    %[[R2:.*]] = ddp.allreduce_start mean %[[G2]]
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    %[[G1:.*]] = arith.mulf
// CHECK-NEXT:    %[[R1:.*]] = ddp.allreduce_start mean %[[G1]]
// CHECK-NEXT:    %[[M1:.*]] = ddp.wait %[[R1]]
// CHECK-NEXT:    arith.subf %arg0, %[[M1]]
// CHECK-NEXT:    %[[M2:.*]] = ddp.wait %[[R2]]
// CHECK-NEXT:    arith.subf %arg1, %[[M2]]
// CHECK-NEXT:    %[[M3:.*]] = ddp.wait %[[R3]]
// CHECK-NEXT:    arith.subf %arg2, %[[M3]]
// CHECK-NEXT:    return
func.func @layers(%w1: tensor<256xf32>, %w2: tensor<256xf32>, %w3: tensor<256xf32>,
                  %x: tensor<256xf32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  %g3 = arith.mulf %x, %w3 : tensor<256xf32>
  %d2 = arith.addf %g3, %w3 : tensor<256xf32>
  %g2 = arith.mulf %d2, %w2 : tensor<256xf32>
  %d1 = arith.addf %g2, %w2 : tensor<256xf32>
  %g1 = arith.mulf %d1, %w1 : tensor<256xf32>
  %m1 = ddp.allreduce mean %g1 : tensor<256xf32>
  %m2 = ddp.allreduce mean %g2 : tensor<256xf32>
  %m3 = ddp.allreduce mean %g3 : tensor<256xf32>
  %n1 = arith.subf %w1, %m1 : tensor<256xf32>
  %n2 = arith.subf %w2, %m2 : tensor<256xf32>
  %n3 = arith.subf %w3, %m3 : tensor<256xf32>
  return %n1, %n2, %n3 : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
}

// -----

// fp16 (as insert-fp16-compression writes it): the scale and cast down go
// with the start, above the computation that does not need them; the cast
// back goes with the wait.
// CHECK-LABEL: func.func @fp16
// CHECK-NEXT:    %[[G2:.*]] = arith.mulf %arg2, %arg1
// CHECK-NEXT:    %[[S2:.*]] = ddp.scale %[[G2]]
// CHECK-NEXT:    %[[C2:.*]] = ddp.cast %[[S2]]
// CHECK-NEXT:    %[[R2:.*]] = ddp.allreduce_start sum %[[C2]]
// CHECK-NEXT:    %[[G1:.*]] = arith.mulf %[[G2]], %arg0
// CHECK-NEXT:    ddp.scale %[[G1]]
// CHECK-NEXT:    ddp.cast
// CHECK-NEXT:    %[[R1:.*]] = ddp.allreduce_start sum
// CHECK-NEXT:    ddp.wait %[[R1]]
// CHECK-NEXT:    ddp.cast
// CHECK-NEXT:    arith.subf %arg0
// CHECK-NEXT:    ddp.wait %[[R2]]
// CHECK-NEXT:    ddp.cast
// CHECK-NEXT:    arith.subf %arg1
func.func @fp16(%w1: tensor<256xf32>, %w2: tensor<256xf32>, %x: tensor<256xf32>)
    -> (tensor<256xf32>, tensor<256xf32>) {
  %g2 = arith.mulf %x, %w2 : tensor<256xf32>
  %g1 = arith.mulf %g2, %w1 : tensor<256xf32>
  %s2 = ddp.scale %g2 by inverse_world_size : tensor<256xf32>
  %h2 = ddp.cast %s2 : tensor<256xf32> to tensor<256xf16>
  %r2 = ddp.allreduce sum %h2 : tensor<256xf16>
  %m2 = ddp.cast %r2 : tensor<256xf16> to tensor<256xf32>
  %s1 = ddp.scale %g1 by inverse_world_size : tensor<256xf32>
  %h1 = ddp.cast %s1 : tensor<256xf32> to tensor<256xf16>
  %r1 = ddp.allreduce sum %h1 : tensor<256xf16>
  %m1 = ddp.cast %r1 : tensor<256xf16> to tensor<256xf32>
  %n1 = arith.subf %w1, %m1 : tensor<256xf32>
  %n2 = arith.subf %w2, %m2 : tensor<256xf32>
  return %n1, %n2 : tensor<256xf32>, tensor<256xf32>
}

// -----

// A call may communicate or touch anything: no collective and no effect
// crosses it (pure compression steps may), and the collective it holds back
// gets a remark naming it.
func.func private @opaque()
// CHECK-LABEL: func.func @barrier
// CHECK-NEXT:    ddp.state_load @s
// CHECK-NEXT:    %[[G2:.*]] = arith.mulf %arg2, %arg1
// CHECK-NEXT:    ddp.scale %[[G2]]
// CHECK-NEXT:    call @opaque()
// CHECK-NEXT:    ddp.allreduce_start
// CHECK-NEXT:    ddp.state_store
// CHECK-NEXT:    %[[G1:.*]] = arith.mulf %[[G2]], %arg0
ddp.state @s : tensor<256xf32>
func.func @barrier(%w1: tensor<256xf32>, %w2: tensor<256xf32>, %x: tensor<256xf32>)
    -> (tensor<256xf32>, tensor<256xf32>) {
  %g2 = arith.mulf %x, %w2 : tensor<256xf32>
  %e = ddp.state_load @s : tensor<256xf32>
  func.call @opaque() : () -> ()
  %g1 = arith.mulf %g2, %w1 : tensor<256xf32>
  %s2 = ddp.scale %g2 by inverse_world_size : tensor<256xf32>
  // expected-remark @below {{ddp-schedule-overlap: this collective cannot start before 'func.call' at}}
  %m2 = ddp.allreduce sum %s2 : tensor<256xf32>
  ddp.state_store %e, @s : tensor<256xf32>
  %m1 = ddp.allreduce mean %g1 : tensor<256xf32>
  %n1 = arith.subf %w1, %m1 : tensor<256xf32>
  %n2 = arith.subf %w2, %m2 : tensor<256xf32>
  return %n1, %n2 : tensor<256xf32>, tensor<256xf32>
}

// -----

// Control flow around the backward pass: a gradient accumulated over two
// micro-batches in a loop, then a layer computed under a condition. Each op
// with regions is one step of the computation: a bucket starts right after
// the op that defines its last gradient.
// CHECK-LABEL: func.func @control_flow
// CHECK:         %[[G2:.*]] = scf.for
// CHECK:           scf.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R2:.*]] = ddp.allreduce_start mean %[[G2]]
// CHECK-NEXT:    %[[G1:.*]] = scf.if
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    %[[R1:.*]] = ddp.allreduce_start mean %[[G1]]
// CHECK-NEXT:    ddp.wait %[[R1]]
// CHECK-NEXT:    arith.subf %arg0
// CHECK-NEXT:    ddp.wait %[[R2]]
// CHECK-NEXT:    arith.subf %arg1
func.func @control_flow(%w1: tensor<256xf32>, %w2: tensor<256xf32>,
                        %x: tensor<2x256xf32>, %c: i1)
    -> (tensor<256xf32>, tensor<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : tensor<256xf32>
  %g2 = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %zero) -> tensor<256xf32> {
    %xi = tensor.extract_slice %x[%i, 0] [1, 256] [1, 1] : tensor<2x256xf32> to tensor<256xf32>
    %p = arith.mulf %xi, %w2 : tensor<256xf32>
    %s = arith.addf %acc, %p : tensor<256xf32>
    scf.yield %s : tensor<256xf32>
  }
  %g1 = scf.if %c -> tensor<256xf32> {
    %a = arith.mulf %g2, %w1 : tensor<256xf32>
    scf.yield %a : tensor<256xf32>
  } else {
    %b = arith.addf %g2, %w1 : tensor<256xf32>
    scf.yield %b : tensor<256xf32>
  }
  %m2 = ddp.allreduce mean %g2 : tensor<256xf32>
  %m1 = ddp.allreduce mean %g1 : tensor<256xf32>
  %n1 = arith.subf %w1, %m1 : tensor<256xf32>
  %n2 = arith.subf %w2, %m2 : tensor<256xf32>
  return %n1, %n2 : tensor<256xf32>, tensor<256xf32>
}

// -----

// A collective inside a loop is scheduled within the loop's body; outside,
// the loop runs as one unit, with a remark.
// CHECK-LABEL: func.func @in_loop
// CHECK:         scf.for
// CHECK-NEXT:      %[[G:.*]] = arith.mulf
// CHECK-NEXT:      %[[R:.*]] = ddp.allreduce_start mean %[[G]]
// CHECK-NEXT:      %[[H:.*]] = arith.mulf
// CHECK-NEXT:      %[[M:.*]] = ddp.wait %[[R]]
// CHECK-NEXT:      arith.subf %[[H]], %[[M]]
func.func @in_loop(%w: tensor<256xf32>, %x: tensor<256xf32>, %n: index) -> tensor<256xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-remark @below {{the collectives inside this 'scf.for' run as one unit, waiting for their results inside it: nothing outside it overlaps them}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %w) -> tensor<256xf32> {
    %g = arith.mulf %acc, %x : tensor<256xf32>
    %m = ddp.allreduce mean %g : tensor<256xf32>
    %h = arith.mulf %acc, %acc : tensor<256xf32>
    %s = arith.subf %h, %m : tensor<256xf32>
    scf.yield %s : tensor<256xf32>
  }
  return %r : tensor<256xf32>
}

// -----

// An unregistered op's effects are unknown: a barrier too (it crashed the
// pass once).
// CHECK-LABEL: func.func @unregistered
// CHECK-NEXT:    %[[G:.*]] = arith.mulf
// CHECK-NEXT:    "foo.op"()
// CHECK-NEXT:    ddp.allreduce_start mean %[[G]]
func.func @unregistered(%w: tensor<16xf32>, %x: tensor<16xf32>) -> tensor<16xf32> {
  %g = arith.mulf %x, %w : tensor<16xf32>
  "foo.op"() : () -> ()
  // expected-remark @below {{this collective cannot start before 'foo.op'}}
  %m = ddp.allreduce mean %g : tensor<16xf32>
  return %m : tensor<16xf32>
}

// -----

// A collective started before branches on one condition and waited for
// after them would be waited for in both versions: not versioned.
ddp.state @st : i64
// CHECK-LABEL: func.func @started_before
// CHECK-NOT:     scf.if %{{.*}} -> (tensor<16xf32>, tensor<16xf32>)
func.func @started_before(%g: tensor<16xf32>, %h: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %r = ddp.allreduce_start mean %h : tensor<16xf32>
  %s = ddp.state_load @st : i64
  %c2 = arith.constant 2 : i64
  %c = arith.cmpi slt, %s, %c2 : i64
  // expected-remark @below {{the collectives inside this 'scf.if' run as one unit}}
  %x = scf.if %c -> tensor<16xf32> {
    %a = ddp.allreduce mean %g : tensor<16xf32>
    scf.yield %a : tensor<16xf32>
  } else {
    %b = ddp.allreduce sum %g : tensor<16xf32>
    scf.yield %b : tensor<16xf32>
  }
  // expected-remark @below {{not versioning @started_before on its branches' condition: this op waits for a collective started before the branches}}
  %m = ddp.wait %r : !ddp.request<tensor<16xf32>>
  %y = arith.addf %x, %m : tensor<16xf32>
  return %y, %m : tensor<16xf32>, tensor<16xf32>
}
