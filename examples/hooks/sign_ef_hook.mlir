// Error-feedback scaled-sign compression (EF-SignSGD, Karimireddy et al.,
// ICML 2019) written as a communication hook: a user's own scheme, in the
// user's own module, applied by `ddp-opt --ddp-apply-hook=hook=sign_ef_hook`.
//
// Each rank adds its carried error to the bucket (m = g + e), sends one
// scale (the mean of |m|) and one sign per element (an i8: 4x fewer bytes
// than f32), and keeps what the signs did not say as its next error
// (e' = m - scale * sign(m)). Every rank then averages the ranks' scaled
// signs. The hook is written for any bucket size (tensor<?xf32>);
// ddp-apply-hook gives each bucket its static size and its own error state.

// The error, per bucket: `?` becomes the bucket's size.
ddp.state @sign_ef.error : tensor<?xf32>

func.func private @sign_ef_hook(%g: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %g, %c0 : tensor<?xf32>

  // m = g + e
  %e = ddp.state_load @sign_ef.error : tensor<?xf32>
  %m = arith.addf %g, %e : tensor<?xf32>

  // scale = mean(|m|)
  %acc0 = tensor.empty() : tensor<f32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<f32>) -> tensor<f32>
  %abs_sum = linalg.reduce ins(%m : tensor<?xf32>) outs(%acc : tensor<f32>) dimensions = [0]
    (%x: f32, %sum: f32) {
      %a = math.absf %x : f32
      %s = arith.addf %sum, %a : f32
      linalg.yield %s : f32
    }
  %n_i64 = arith.index_cast %n : index to i64
  %n_f32 = arith.sitofp %n_i64 : i64 to f32
  %total = tensor.extract %abs_sum[] : tensor<f32>
  %scale = arith.divf %total, %n_f32 : f32
  %scale_t = tensor.from_elements %scale : tensor<f32>

  // sign(m) as +1 / -1 in i8, and the value it stands for.
  %signs0 = tensor.empty(%n) : tensor<?xi8>
  %signs = linalg.map ins(%m : tensor<?xf32>) outs(%signs0 : tensor<?xi8>)
    (%x: f32, %unused: i8) {
      %one = arith.constant 1 : i8
      %minus = arith.constant -1 : i8
      %nonneg = arith.cmpf oge, %x, %zero : f32
      %s = arith.select %nonneg, %one, %minus : i8
      linalg.yield %s : i8
    }
  %sent0 = tensor.empty(%n) : tensor<?xf32>
  %sent = linalg.map ins(%signs : tensor<?xi8>) outs(%sent0 : tensor<?xf32>)
    (%s: i8, %unused: f32) {
      %f = arith.sitofp %s : i8 to f32
      %v = arith.mulf %f, %scale : f32
      linalg.yield %v : f32
    }

  // e' = m - scale * sign(m)
  %e_next = arith.subf %m, %sent : tensor<?xf32>
  ddp.state_store %e_next, @sign_ef.error : tensor<?xf32>

  // Every rank's scale and signs; their mean.
  %scales, %all_signs = ddp.allgather %scale_t, %signs : tensor<f32>, tensor<?xi8>
  %ranks = ddp.world_size : index
  %sum0 = tensor.empty(%n) : tensor<?xf32>
  %sum_init = linalg.fill ins(%zero : f32) outs(%sum0 : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {
      indexing_maps = [affine_map<(r, i) -> (r, i)>, affine_map<(r, i) -> (r)>,
                       affine_map<(r, i) -> (i)>],
      iterator_types = ["reduction", "parallel"]}
      ins(%all_signs, %scales : tensor<?x?xi8>, tensor<?xf32>)
      outs(%sum_init : tensor<?xf32>) {
    ^bb0(%s: i8, %rank_scale: f32, %partial: f32):
      %f = arith.sitofp %s : i8 to f32
      %v = arith.mulf %f, %rank_scale : f32
      %p = arith.addf %partial, %v : f32
      linalg.yield %p : f32
    } -> tensor<?xf32>
  %ranks_i64 = arith.index_cast %ranks : index to i64
  %ranks_f32 = arith.sitofp %ranks_i64 : i64 to f32
  %mean0 = tensor.empty(%n) : tensor<?xf32>
  %mean = linalg.map ins(%sum : tensor<?xf32>) outs(%mean0 : tensor<?xf32>)
    (%x: f32, %unused: f32) {
      %v = arith.divf %x, %ranks_f32 : f32
      linalg.yield %v : f32
    }
  return %mean : tensor<?xf32>
}
