// The cost model's arithmetic on a CPU-backend profile with measured
// points (Inputs/plan-cpu-points.json: 1 KiB 10 us, 64 KiB 40 us, 1 MiB
// 300 us, 16 MiB 5 ms; kernels timed 4 matrices per call).
// Plain, as the CPU backend issues the bucket: a and b (1 MiB each) are
// reduced on their own, 300 us each (a measured point); d (144 KiB) on
// its own, 72.11 us (log-log between 40 us and 300 us); c (4000 bytes,
// under 64 KiB) in the staging buffer, 15.75 us: 687.86 us.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-cpu-points.json choices=plain,powersgd ranks=1" | FileCheck %s
// CHECK: predicted_ns = {plain = 687860 : i64, "powersgd-r1" = 3272118 : i64}
// CHECK-SAME: reason = "plain 687.9 us is fastest: powersgd-r1 would take 3.27 ms (50.4 us on the link, 3.24 ms computing)"
// At another world size than the profile's the points do not apply: the
// fit, 10 us + 2 (W - 1) / W * bytes / 30 Gb/s per collective.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-cpu-points.json choices=plain world=8" | FileCheck %s --check-prefix=WORLD
// WORLD: predicted_ns = {plain = 1089350 : i64}

func.func @step(%a: tensor<512x512xf32> loc("a"), %b: tensor<512x512xf32> loc("b"),
                %c: tensor<1000xf32> loc("c"), %d: tensor<64x64x3x3xf32> loc("d"))
    -> (tensor<512x512xf32>, tensor<512x512xf32>, tensor<1000xf32>, tensor<64x64x3x3xf32>) {
  %r:4 = ddp.allreduce mean %a, %b, %c, %d
      : tensor<512x512xf32>, tensor<512x512xf32>, tensor<1000xf32>, tensor<64x64x3x3xf32>
  return %r#0, %r#1, %r#2, %r#3
      : tensor<512x512xf32>, tensor<512x512xf32>, tensor<1000xf32>, tensor<64x64x3x3xf32>
}
