// A plan that sends each bucket its own way: PowerSGD for the matrix, top-k
// for the vector PowerSGD cannot compress and for the bias. Every choice
// rewrites only the buckets it won, and the module lowers.
// DEFINE: %{stages} = --insert-powersgd=planned=true --ddp-apply-planned-schemes \
// DEFINE:   --insert-fp16-compression=planned=true --insert-bf16-compression=planned=true
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,powersgd,topk{ratio=0.1} bucket-cap-mb=0" %{stages} \
// RUN:   --ddp-compression-report=output=%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,powersgd,topk{ratio=0.1} bucket-cap-mb=0" %{stages} \
// RUN:   --ddp-lower-to-llvm -o /dev/null

// REPORT: #  bucket {{.*}} plain powersgd-r1 powersgd-r2 powersgd-r4 topk{ratio=0.1}  chosen
// REPORT-NEXT: 0  @step:%arg0 {{.*}} powersgd-r1 {{.*}}x faster than plain
// REPORT-NEXT: 1  @step:%arg1 {{.*}} topk{ratio=0.1} {{.*}}x faster than plain
// REPORT-NEXT: 2  @step:%arg2 {{.*}} topk{ratio=0.1} {{.*}}x faster than plain

// The top-k buckets' error feedback and PowerSGD's step, Q and error.
// CHECK-DAG: ddp.state @ddp.topk_error.step.0 : tensor<1048576xf32>
// CHECK-DAG: ddp.state @ddp.topk_error.step.1 : tensor<1024xf32>
// CHECK-DAG: ddp.state @ddp.step.step : i64 {ddp.start_iter = 1000 : i64}
// CHECK-DAG: ddp.state @ddp.q.step.0 : tensor<1024x1xf32>
// CHECK-DAG: ddp.state @ddp.error.step.0 : tensor<1024x1024xf32>
// CHECK-LABEL: func.func @step
// CHECK: ddp.project %{{.*}} times %{{.*}} : tensor<1024x1024xf32> times tensor<1024x1xf32>
// CHECK: ddp.allreduce sum %{{.*}} role compressed : tensor<1024x1xf32>
// CHECK: ddp.top_k
// CHECK: ddp.allgather
// CHECK: ddp.top_k
// CHECK: ddp.allgather
// CHECK-NOT: ddp.allreduce mean
// CHECK: return
func.func @step(%w: tensor<1024x1024xf32>, %v: tensor<1048576xf32>, %b: tensor<1024xf32>) -> (tensor<1024x1024xf32>, tensor<1048576xf32>, tensor<1024xf32>) {
  %0 = ddp.allreduce mean %w : tensor<1024x1024xf32>
  %1 = ddp.allreduce mean %v : tensor<1048576xf32>
  %2 = ddp.allreduce mean %b : tensor<1024xf32>
  return %0, %1, %2 : tensor<1024x1024xf32>, tensor<1048576xf32>, tensor<1024xf32>
}
