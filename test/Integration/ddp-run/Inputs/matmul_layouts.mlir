// Matmuls whose views BLAS cannot take as they are: a batch whose result
// interleaves the matrices (C indexed (m, b, n)), and a sum over K = 0.
#ba = affine_map<(b, m, n, k) -> (b, m, k)>
#bb = affine_map<(b, m, n, k) -> (b, k, n)>
#bc = affine_map<(b, m, n, k) -> (m, b, n)>
func.func @step(%a: tensor<3x4x8xf32> loc("a"), %b: tensor<3x8x5xf32> loc("b"),
                %e: tensor<4x0xf32> loc("e"), %f: tensor<0x5xf32> loc("f"))
    -> (tensor<4x3x5xf32>, tensor<4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %c0 = tensor.empty() : tensor<4x3x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%c0 : tensor<4x3x5xf32>) -> tensor<4x3x5xf32>
  %c = linalg.generic {indexing_maps = [#ba, #bb, #bc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<3x4x8xf32>, tensor<3x8x5xf32>) outs(%z : tensor<4x3x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x3x5xf32>
  %d0 = tensor.empty() : tensor<4x5xf32>
  %ones = linalg.fill ins(%one : f32) outs(%d0 : tensor<4x5xf32>) -> tensor<4x5xf32>
  %d = linalg.matmul ins(%e, %f : tensor<4x0xf32>, tensor<0x5xf32>) outs(%ones : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %c, %d : tensor<4x3x5xf32>, tensor<4x5xf32>
}
