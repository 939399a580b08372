// PowerSGD, one bucket per layer (bucket-cap-mb=0), as ddp-compress writes
// it. Bucket k's P travels while the backward pass computes the next
// layer's gradient; its Q is computed and sent at the next bucket's ready
// point (collectives keep their order); the reconstructions wait until the
// updates need them.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=1 start-iter=0 bucket-cap-mb=0" | FileCheck %s
// With a warm-up (start-iter=2) the step is versioned on step < 2: the
// warm-up version starts each plain allreduce after its gradient, and the
// compressed version is scheduled as above.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=1 start-iter=2 bucket-cap-mb=0" | FileCheck %s --check-prefix=WARM
// Without versioning each bucket's warm-up branch runs as one unit.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=1 start-iter=2 bucket-cap-mb=0 overlap=false" \
// RUN:   | ddp-opt --ddp-schedule-overlap=unswitch=false -mlir-print-op-on-diagnostic=false 2>&1 >/dev/null \
// RUN:   | FileCheck %s --check-prefix=UNIT

// CHECK-LABEL: func.func @powersgd
// CHECK:         %[[G3:.*]] = arith.mulf %arg3, %arg2
// CHECK-NEXT:    %[[P3:.*]] = ddp.project_residual %[[G3]]
// CHECK-NEXT:    %[[RP3:.*]] = ddp.allreduce_start sum %[[P3]] role compressed
// CHECK-NEXT:    arith.addf %[[G3]]
// CHECK-NEXT:    %[[G2:.*]] = arith.mulf
// CHECK-NEXT:    %[[P2:.*]] = ddp.project_residual %[[G2]]
// CHECK-NEXT:    ddp.wait %[[RP3]]
// CHECK-NEXT:    ddp.orthogonalize
// CHECK-NEXT:    ddp.backproject_residual %[[G3]]
// CHECK-NEXT:    %[[RQ3:.*]] = ddp.allreduce_start mean {{.*}} role compressed
// CHECK-NEXT:    %[[RP2:.*]] = ddp.allreduce_start sum %[[P2]] role compressed
// CHECK-NEXT:    arith.addf %[[G2]]
// CHECK-NEXT:    %[[G1:.*]] = arith.mulf
// CHECK-NEXT:    %[[P1:.*]] = ddp.project_residual %[[G1]]
// CHECK-NEXT:    ddp.wait %[[RP2]]
// CHECK-NEXT:    ddp.orthogonalize
// CHECK-NEXT:    ddp.backproject_residual %[[G2]]
// CHECK-NEXT:    %[[RQ2:.*]] = ddp.allreduce_start mean {{.*}} role compressed
// CHECK-NEXT:    %[[RP1:.*]] = ddp.allreduce_start sum %[[P1]] role compressed
// The last bucket has nothing left to overlap.
// CHECK-NEXT:    ddp.wait %[[RP1]]
// CHECK-NEXT:    ddp.orthogonalize
// CHECK-NEXT:    ddp.backproject_residual %[[G1]]
// CHECK-NEXT:    %[[RQ1:.*]] = ddp.allreduce_start mean {{.*}} role compressed
// CHECK-NEXT:    ddp.wait %[[RQ1]]
// CHECK-NEXT:    ddp.reconstruct_residual
// CHECK-NEXT:    arith.subf %arg0
// CHECK:         ddp.wait %[[RQ2]]
// CHECK-NEXT:    ddp.reconstruct_residual
// CHECK-NEXT:    arith.subf %arg1
// CHECK:         ddp.wait %[[RQ3]]
// CHECK-NEXT:    ddp.reconstruct_residual
// CHECK-NEXT:    arith.subf %arg2

// WARM-LABEL: func.func @powersgd
// WARM:         %[[STEP:.*]] = ddp.state_load @ddp.step.powersgd
// WARM:         %[[WARM:.*]] = arith.cmpi slt, %[[STEP]]
// WARM-NEXT:    %[[NEW:.*]]:3 = scf.if %[[WARM]]
// WARM:           %[[G3:.*]] = arith.mulf %arg3, %arg2
// WARM-NEXT:      %[[R3:.*]] = ddp.allreduce_start mean %[[G3]] role warmup
// WARM-NEXT:      arith.addf
// WARM-NEXT:      %[[G2:.*]] = arith.mulf
// WARM-NEXT:      ddp.allreduce_start mean %[[G2]] role warmup
// WARM:           } else {
// WARM-NOT:       role warmup
// WARM:           %[[G3:.*]] = arith.mulf %arg3, %arg2
// WARM-NEXT:      ddp.project_residual %[[G3]]
// WARM-NEXT:      ddp.allreduce_start sum {{.*}} role compressed
// WARM-NEXT:      arith.addf %[[G3]]
// WARM:           scf.yield
// WARM-NEXT:    }
// WARM-NEXT:    return %[[NEW]]#0, %[[NEW]]#1, %[[NEW]]#2

// UNIT-COUNT-3: remark: ddp-schedule-overlap: the collectives inside this 'scf.if' run as one unit

func.func @powersgd(%w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>, %w3: tensor<64x64xf32>,
                    %x: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %g3 = arith.mulf %x, %w3 : tensor<64x64xf32>
  %d2 = arith.addf %g3, %w3 : tensor<64x64xf32>
  %g2 = arith.mulf %d2, %w2 : tensor<64x64xf32>
  %d1 = arith.addf %g2, %w2 : tensor<64x64xf32>
  %g1 = arith.mulf %d1, %w1 : tensor<64x64xf32>
  %m3 = ddp.allreduce mean %g3 : tensor<64x64xf32>
  %m2 = ddp.allreduce mean %g2 : tensor<64x64xf32>
  %m1 = ddp.allreduce mean %g1 : tensor<64x64xf32>
  %n1 = arith.subf %w1, %m1 : tensor<64x64xf32>
  %n2 = arith.subf %w2, %m2 : tensor<64x64xf32>
  %n3 = arith.subf %w3, %m3 : tensor<64x64xf32>
  return %n1, %n2, %n3 : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}
