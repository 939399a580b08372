// PyTorch 1.13's quantization_pertensor_hook and quantization_perchannel_hook
// as a rewrite: min-max per channel, scale and zero point in float32 as
// _calculate_qparams computes them, uint8 payload, one allgather (or two,
// exchange=pytorch), dequantized and summed in rank order, divided by W.
// RUN: ddp-opt %s --insert-quantization 2>&1 | FileCheck %s
// RUN: ddp-opt %s --insert-quantization="granularity=per-channel channel-size=4" 2>&1 | FileCheck %s --check-prefix=CHANNEL
// RUN: ddp-opt %s --insert-quantization="granularity=per-channel channel-size=5" 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: ddp-opt %s --insert-quantization="exchange=pytorch" 2>&1 | FileCheck %s --check-prefix=PYTORCH
// RUN: not ddp-opt %s --insert-quantization="granularity=per-row" 2>&1 | FileCheck %s --check-prefix=BAD-GRANULARITY
// RUN: not ddp-opt %s --insert-quantization="exchange=both" 2>&1 | FileCheck %s --check-prefix=BAD-EXCHANGE
// RUN: not ddp-opt %s --insert-quantization="granularity=per-channel channel-size=0" 2>&1 | FileCheck %s --check-prefix=BAD-SIZE
// BAD-GRANULARITY: for the --granularity option: Cannot find option named 'per-row'!
// BAD-GRANULARITY: error: insert-quantization: an option's value is invalid
// BAD-EXCHANGE: for the --exchange option: Cannot find option named 'both'!
// BAD-EXCHANGE: error: insert-quantization: an option's value is invalid
// BAD-SIZE: error: insert-quantization: channel-size=0 must be positive

// CHECK: remark: insert-quantization leaves a bucket of 1 tensor(s) of 'f64' (@step:%arg2) as a plain allreduce: quantization takes float32 buckets, as PyTorch's hooks do
// CHECK-LABEL: func.func @step
// CHECK: %[[FLAT:.*]] = ddp.flatten %arg0, %arg1 scheme <"quantize-per-tensor", {exchange = "fused"}> : tensor<2x5xf32>, tensor<5xf32> -> tensor<15xf32>
// One channel of the whole bucket.
// CHECK: %[[X:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [1, 15] : tensor<15xf32> into tensor<1x15xf32>
// min and max, NaN-propagating (torch.aminmax).
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<1x15xf32>)
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// scale = max((max(mx, 0) - min(mn, 0)) / 255, eps); zero point clamp(0 - round(mn' / scale), 0, 255).
// CHECK: %[[QP:.*]]:2 = linalg.generic
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: arith.constant 1.1920929E-7 : f32
// CHECK: math.roundeven
// CHECK: arith.fptosi %{{.*}} : f32 to i32
// CHECK: arith.minsi
// q = clamp(round(x / scale) + zero point, 0, 255) as uint8 (i8).
// CHECK: %[[Q:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[QP]]#0, %[[QP]]#1 : tensor<1x15xf32>, tensor<1xf32>, tensor<1xf32>)
// CHECK: arith.divf
// CHECK: math.roundeven
// CHECK: arith.fptoui %{{.*}} : f32 to i8
// CHECK: %[[G:.*]]:3 = ddp.allgather %[[QP]]#0, %[[QP]]#1, %[[Q]] : tensor<1xf32>, tensor<1xf32>, tensor<1x15xi8>
// Ranks outermost: summed in rank order.
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[G]]#2, %[[G]]#0, %[[G]]#1 : tensor<?x1x15xi8>, tensor<?x1xf32>, tensor<?x1xf32>)
// CHECK: arith.uitofp %{{.*}} : i8 to f32
// Divided by the world size in the channels' shape, then flat again.
// CHECK: tensor.dim %[[G]]#2, %{{.*}} : tensor<?x1x15xi8>
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<1x15xf32>)
// CHECK: arith.divf
// CHECK: %[[FLATMEAN:.*]] = tensor.collapse_shape %[[MEAN]] {{\[}}[0, 1]] : tensor<1x15xf32> into tensor<15xf32>
// CHECK: ddp.unflatten %[[FLATMEAN]] : tensor<15xf32> -> tensor<2x5xf32>, tensor<5xf32>
// CHECK: ddp.allreduce mean %arg2 : tensor<3xf64>

// 15 elements in channels of 4: 4 channels, one padding zero.
// CHANNEL: %[[FLAT:.*]] = ddp.flatten %arg0, %arg1 scheme <"quantize-per-channel", {channel_size = {{[0-9]+}} : i64, exchange = "fused"}>
// CHANNEL: %[[PAD:.*]] = tensor.insert_slice %[[FLAT]] into %{{.*}}[0] [15] [1] : tensor<15xf32> into tensor<16xf32>
// CHANNEL: tensor.expand_shape %[[PAD]] {{\[}}[0, 1]] output_shape [4, 4] : tensor<16xf32> into tensor<4x4xf32>
// CHANNEL: ddp.allgather %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4x4xi8>
// CHANNEL: tensor.collapse_shape %{{.*}} {{\[}}[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
// CHANNEL: tensor.extract_slice %{{.*}}[0] [15] [1] : tensor<16xf32> to tensor<15xf32>

// 15 in channels of 5: PyTorch pads a whole zero channel (5 - 15 % 5 = 5).
// WHOLE: tensor.insert_slice %{{.*}} into %{{.*}}[0] [15] [1] : tensor<15xf32> into tensor<20xf32>
// WHOLE: ddp.allgather %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4x5xi8>

// PyTorch's exchange: the scales and zero points, then the payload.
// PYTORCH: %[[SZ:.*]]:2 = ddp.allgather %{{.*}}, %{{.*}} : tensor<1xf32>, tensor<1xf32>
// PYTORCH: %[[P:.*]] = ddp.allgather %{{.*}} : tensor<1x15xi8>
// PYTORCH: linalg.generic {{.*}} ins(%[[P]], %[[SZ]]#0, %[[SZ]]#1 : tensor<?x1x15xi8>, tensor<?x1xf32>, tensor<?x1xf32>)
func.func @step(%w: tensor<2x5xf32>, %b: tensor<5xf32>, %d: tensor<3xf64>)
    -> (tensor<2x5xf32>, tensor<5xf32>, tensor<3xf64>) {
  %r:3 = ddp.allreduce mean %w, %b, %d : tensor<2x5xf32>, tensor<5xf32>, tensor<3xf64>
  return %r#0, %r#1, %r#2 : tensor<2x5xf32>, tensor<5xf32>, tensor<3xf64>
}

// The report: one row per bucket, what its collectives send (scales and
// zero points in f32, the payload in uint8).
// RUN: ddp-opt %s --insert-quantization --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT-DAG: bucket of 2 [@step:%arg0,@step:%arg1] 15 f32 quantize-per-tensor - f32+i8 15 17 0.88x
// REPORT-DAG: @step:%arg2 3 f64 plain - f64 3 3 1.00x
// REPORT: total: 3 tensors, 2 compressed; elements 18 -> 20 (0.90x); bytes 84 -> 47 (1.79x)
