// RUN: ddp-opt %s -split-input-file -verify-diagnostics

func.func @allreduce_empty() {
  // expected-error @+1 {{'ddp.allreduce' op needs at least one tensor}}
  "ddp.allreduce"() <{kind = #ddp<reduction mean>, role = #ddp<role gradient>}> : () -> ()
  return
}

// -----

func.func @allreduce_start_never_waited(%x: tensor<4xf32>) {
  // expected-error @+1 {{request must have exactly one use, a 'ddp.wait'}}
  %h = ddp.allreduce_start mean %x : tensor<4xf32>
  return
}

// -----

func.func @allreduce_start_waited_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{request must have exactly one use, a 'ddp.wait'}}
  %h = ddp.allreduce_start mean %x : tensor<4xf32>
  %a = ddp.wait %h : !ddp.request<tensor<4xf32>>
  %b = ddp.wait %h : !ddp.request<tensor<4xf32>>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{a request carries ranked tensors of f32, f16, bf16 or f64 (or, after bufferization, contiguous buffers), got 'memref<4xf32, strided<[2]>>'}}
func.func private @request_of_strided_memref(!ddp.request<memref<4xf32, strided<[2]>>>)

// -----

func.func @wait_wrong_result(%x: tensor<4xf32>) -> tensor<8xf32> {
  %h = ddp.allreduce_start mean %x : tensor<4xf32>
  // expected-error @+2 {{'ddp.wait' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'ddp.wait' op failed to infer returned types}}
  %r = "ddp.wait"(%h) : (!ddp.request<tensor<4xf32>>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @scale_empty() {
  // expected-error @+1 {{'ddp.scale' op needs at least one tensor}}
  "ddp.scale"() <{factor = #ddp<world_scale inverse_world_size>}> : () -> ()
  return
}

// -----

func.func @cast_empty() {
  // expected-error @+1 {{'ddp.cast' op needs at least one tensor}}
  "ddp.cast"() : () -> ()
  return
}

// -----

// MultiTensorOpInterface's verifier: results come in whole groups of N.
func.func @cast_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ddp.cast' op has 2 results for its 1 tensors (1 per tensor)}}
  %a, %b = "ddp.cast"(%x) : (tensor<4xf32>) -> (tensor<4xf16>, tensor<4xf16>)
  return
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) -> tensor<8xf16> {
  // expected-error @+1 {{result #0 has type 'tensor<8xf16>' but a cast keeps the shape of 'tensor<4xf32>'}}
  %r = ddp.cast %x : tensor<4xf32> to tensor<8xf16>
  return %r : tensor<8xf16>
}

// -----

// Only a cast that narrows what is sent is a compression.
func.func @cast_scheme_widens(%x: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'ddp.cast' op with scheme #ddp.compression<"fp16"> narrows what it sends, but result #0 ('tensor<4xf32>') is not narrower than its input ('tensor<4xf16>')}}
  %r = ddp.cast %x scheme <"fp16"> : tensor<4xf16> to tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @cast_scheme_same_width(%x: tensor<4xf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{result #0 ('tensor<4xbf16>') is not narrower than its input ('tensor<4xf16>')}}
  %r = ddp.cast %x scheme <"bf16"> : tensor<4xf16> to tensor<4xbf16>
  return %r : tensor<4xbf16>
}

// -----

// fp16 sends f16, bf16 sends bf16.
func.func @cast_scheme_other_type(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'ddp.cast' op with scheme #ddp.compression<"fp16"> sends 'f16', but result #0 is 'tensor<4xbf16>'}}
  %r = ddp.cast %x scheme <"fp16"> : tensor<4xf32> to tensor<4xbf16>
  return %r : tensor<4xbf16>
}

// -----

// A projection is no narrowing.
func.func @project_narrowing_scheme(%m: tensor<8x4xf32>, %q: tensor<4x2xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'ddp.project' op scheme #ddp.compression<"bf16"> names a narrowing cast's compression, not a projection's}}
  %p = ddp.project %m times %q scheme <"bf16"> : tensor<8x4xf32> times tensor<4x2xf32>
  return %p : tensor<8x2xf32>
}

// -----

func.func @backproject_residual_narrowing_scheme(%m: tensor<8x4xf32>, %e: tensor<8x4xf32>, %p: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'ddp.backproject_residual' op scheme #ddp.compression<"fp16"> names a narrowing cast's compression, not a projection's}}
  %q = ddp.backproject_residual %m plus %e times %p scheme <"fp16"> : tensor<8x4xf32> times tensor<8x2xf32>
  return %q : tensor<4x2xf32>
}

// -----

func.func @add_residual_empty() {
  // expected-error @+1 {{'ddp.add_residual' op needs at least one tensor}}
  "ddp.add_residual"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

func.func @add_residual_count(%g: tensor<4x4xf32>) {
  // expected-error @+1 {{'ddp.add_residual' op has 1 input but 0 residual; each tensor needs one of each}}
  %r = "ddp.add_residual"(%g) <{operandSegmentSizes = array<i32: 1, 0>}> : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @add_residual_type(%g: tensor<4x4xf32>, %e: tensor<4x2xf32>) {
  // expected-error @+1 {{residual #0 has type 'tensor<4x2xf32>' but must have the type of input #0, 'tensor<4x4xf32>'}}
  %r = "ddp.add_residual"(%g, %e) <{operandSegmentSizes = array<i32: 1, 1>}> : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @project_not_matrix(%m: tensor<4x4x4xf32>, %q: tensor<4x2xf32>) {
  // expected-error @+1 {{'ddp.project' op expects statically shaped 2-D tensors of f32, f16, bf16 or f64, got 'tensor<4x4x4xf32>'}}
  %p = ddp.project %m times %q : tensor<4x4x4xf32> times tensor<4x2xf32>
  return
}

// -----

func.func @project_dynamic(%m: tensor<?x4xf32>, %q: tensor<4x2xf32>) {
  // expected-error @+1 {{'ddp.project' op expects statically shaped 2-D tensors of f32, f16, bf16 or f64, got 'tensor<?x4xf32>'}}
  %p = ddp.project %m times %q : tensor<?x4xf32> times tensor<4x2xf32>
  return
}

// -----

func.func @project_empty() {
  // expected-error @+1 {{'ddp.project' op needs at least one tensor}}
  "ddp.project"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()
  return
}

// -----

func.func @project_count(%m: tensor<4x4xf32>, %q: tensor<4x2xf32>) {
  // expected-error @+1 {{'ddp.project' op has 1 matrices but 2 factors; each tensor needs one of each}}
  %p = ddp.project %m times %q, %q : tensor<4x4xf32> times tensor<4x2xf32>, tensor<4x2xf32>
  return
}

// -----

func.func @project_element_types(%m: tensor<4x4xf32>, %q: tensor<4x2xf16>) {
  // expected-error @+1 {{'ddp.project' op tensor #0 mixes element types 'f32' and 'f16'}}
  %p = ddp.project %m times %q : tensor<4x4xf32> times tensor<4x2xf16>
  return
}

// -----

func.func @project_inner_dim(%m: tensor<64x32xf32>, %q: tensor<3x2xf32>) {
  // expected-error @+1 {{'ddp.project' op tensor #0: factor has 3 rows but the matrix has 32 columns}}
  %p = ddp.project %m times %q : tensor<64x32xf32> times tensor<3x2xf32>
  return
}

// -----

func.func @project_result(%m: tensor<64x32xf32>, %q: tensor<32x2xf32>) {
  // expected-error @+2 {{'ddp.project' op inferred type(s) 'tensor<64x2xf32>' are incompatible with return type(s) of operation 'tensor<64x3xf32>'}}
  // expected-error @+1 {{'ddp.project' op failed to infer returned types}}
  %p = "ddp.project"(%m, %q) <{operandSegmentSizes = array<i32: 1, 1>}> : (tensor<64x32xf32>, tensor<32x2xf32>) -> tensor<64x3xf32>
  return
}

// -----

func.func @backproject_inner_dim(%m: tensor<64x32xf32>, %p: tensor<32x2xf32>) {
  // expected-error @+1 {{'ddp.backproject' op tensor #0: factor has 32 rows but the matrix (transposed) has 64 columns}}
  %q = ddp.backproject %m times %p : tensor<64x32xf32> times tensor<32x2xf32>
  return
}

// -----

func.func @orthogonalize_empty() {
  // expected-error @+1 {{'ddp.orthogonalize' op needs at least one tensor}}
  "ddp.orthogonalize"() <{epsilon = 0.0 : f64}> : () -> ()
  return
}

// -----

func.func @orthogonalize_negative_epsilon(%p: tensor<4x2xf32>) {
  // expected-error @+1 {{epsilon must be finite and non-negative, got -1.000000e-03}}
  %o = ddp.orthogonalize %p {epsilon = -1.0e-3 : f64} : tensor<4x2xf32>
  return
}

// -----

func.func @reconstruct_rank(%p: tensor<64x2xf32>, %q: tensor<32x3xf32>) {
  // expected-error @+1 {{'ddp.reconstruct' op tensor #0: P has rank 2 but Q has rank 3}}
  %m = ddp.reconstruct %p times %q : tensor<64x2xf32> times tensor<32x3xf32>
  return
}

// -----

func.func @reconstruct_count(%p: tensor<64x2xf32>, %q: tensor<32x2xf32>) {
  // expected-error @+1 {{'ddp.reconstruct' op has 2 P factors but 1 Q factors; each tensor needs one of each}}
  %m:2 = ddp.reconstruct %p, %p times %q : tensor<64x2xf32>, tensor<64x2xf32> times tensor<32x2xf32>
  return
}

// -----

func.func @update_residual_type(%m: tensor<4x4xf32>, %mh: tensor<4x4xf16>) {
  // expected-error @+1 {{reconstruction #0 has type 'tensor<4x4xf16>' but must have the type of input #0, 'tensor<4x4xf32>'}}
  %e = "ddp.update_residual"(%m, %mh) <{operandSegmentSizes = array<i32: 1, 1>}> : (tensor<4x4xf32>, tensor<4x4xf16>) -> tensor<4x4xf32>
  return
}

// -----

func.func @project_residual_type(%g: tensor<4x4xf32>, %e: tensor<4x4xf16>, %q: tensor<4x1xf32>) {
  // expected-error @+1 {{'ddp.project_residual' op residual #0 has type 'tensor<4x4xf16>' but its matrix has type 'tensor<4x4xf32>'}}
  %p = "ddp.project_residual"(%g, %e, %q) <{operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<4x4xf32>, tensor<4x4xf16>, tensor<4x1xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @project_residual_count(%g: tensor<4x4xf32>, %q: tensor<4x1xf32>) {
  // expected-error @+1 {{'ddp.project_residual' op has 1 matrices but 0 residuals; each tensor needs one of each}}
  %p = "ddp.project_residual"(%g, %q) <{operandSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @backproject_residual_dim(%g: tensor<4x8xf32>, %p: tensor<8x1xf32>) {
  // expected-error @+1 {{'ddp.backproject_residual' op tensor #0: factor has 8 rows but the matrix (transposed) has 4 columns}}
  %q = ddp.backproject_residual %g plus %g times %p : tensor<4x8xf32> times tensor<8x1xf32>
  return
}

// -----

func.func @reconstruct_residual_shape(%p: tensor<4x1xf32>, %q: tensor<8x1xf32>, %g: tensor<4x4xf32>) {
  // expected-error @+1 {{'ddp.reconstruct_residual' op tensor #0: P * Q^T has type 'tensor<4x8xf32>' but the matrix has type 'tensor<4x4xf32>'}}
  %r:2 = ddp.reconstruct_residual %p times %q from %g plus %g : tensor<4x1xf32> times tensor<8x1xf32> from tensor<4x4xf32>
  return
}

// -----

func.func @reconstruct_residual_count(%p: tensor<4x1xf32>, %q: tensor<4x1xf32>, %g: tensor<4x4xf32>) {
  // expected-error @+1 {{'ddp.reconstruct_residual' op has 2 factor pairs but 1 matrices}}
  %r:2 = ddp.reconstruct_residual %p, %p times %q, %q from %g plus %g : tensor<4x1xf32>, tensor<4x1xf32> times tensor<4x1xf32>, tensor<4x1xf32> from tensor<4x4xf32>
  return
}

// -----

// expected-error @+1 {{state must be an i64 counter or a ranked tensor of f32, f16, bf16 or f64, got 'f32'}}
ddp.state @scalar_float : f32

// -----

func.func @state_op_outside_module() {
  // expected-error @+1 {{'ddp.state' op expects parent op 'builtin.module'}}
  "ddp.state"() <{sym_name = "s", type = i64}> : () -> ()
  return
}

// -----

func.func @load_unknown_state() -> i64 {
  // expected-error @+1 {{'ddp.state_load' op 'missing' does not name a 'ddp.state'}}
  %s = ddp.state_load @missing : i64
  return %s : i64
}

// -----

func.func private @not_a_state()

func.func @load_from_function() -> i64 {
  // expected-error @+1 {{'not_a_state' does not name a 'ddp.state'}}
  %s = ddp.state_load @not_a_state : i64
  return %s : i64
}

// -----

ddp.state @q : tensor<32x2xf32>

func.func @load_wrong_type() -> tensor<32x1xf32> {
  // expected-error @+1 {{type 'tensor<32x1xf32>' does not match the type 'tensor<32x2xf32>' of state 'q'}}
  %q = ddp.state_load @q : tensor<32x1xf32>
  return %q : tensor<32x1xf32>
}

// -----

ddp.state @step : i64

func.func @store_wrong_type(%x: i32) {
  // expected-error @+1 {{type 'i32' does not match the type 'i64' of state 'step'}}
  ddp.state_store %x, @step : i32
  return
}

// -----

func.func @random_normal_dynamic(%step: i64) {
  // expected-error @+1 {{'ddp.random_normal' op result #0 must be statically shaped tensor of f32, f16, bf16 or f64 (the runtime's float types) values}}
  %q = ddp.random_normal %step seed 0 stream 0 : tensor<?x2xf32>
  return
}

// -----

func.func @inspect_dynamic(%q: tensor<?x2xf32>) {
  // expected-error @+1 {{'ddp.inspect' op operand #0 must be statically shaped tensor of f32, f16, bf16 or f64 (the runtime's float types) values}}
  %f, %nz = ddp.inspect %q : tensor<?x2xf32>
  return
}

// -----

func.func @inspect_integers(%q: tensor<4xi32>) {
  // expected-error @+1 {{'ddp.inspect' op operand #0 must be statically shaped tensor of f32, f16, bf16 or f64 (the runtime's float types) values}}
  %f, %nz = ddp.inspect %q : tensor<4xi32>
  return
}

// -----

func.func @report_without_message(%finite: i1) {
  // expected-error @+1 {{'ddp.report_nonfinite' op needs a message that says what was not finite}}
  ddp.report_nonfinite %finite, ""
  return
}

// -----

// Dimensions whose product overflows int64 (they used to pass every pass
// and wrap to wrong counts).
func.func @allreduce_too_many_elements(%g: tensor<4294967296x4294967296xf32>) {
  // expected-error @+1 {{'ddp.allreduce' op type 'tensor<4294967296x4294967296xf32>' has more elements or bytes than a 64-bit count holds}}
  %r = ddp.allreduce mean %g : tensor<4294967296x4294967296xf32>
  return
}

// -----

// The element count fits, the byte count does not.
func.func @allreduce_too_many_bytes(%g: tensor<9223372036854775807xf32>) {
  // expected-error @+1 {{has more elements or bytes than a 64-bit count holds}}
  %r = ddp.allreduce sum %g : tensor<9223372036854775807xf32>
  return
}

// -----

// expected-error @+1 {{'ddp.state' op type 'tensor<3037000500x3037000500xf64>' has more elements or bytes than a 64-bit count holds}}
ddp.state @huge : tensor<3037000500x3037000500xf64>

// -----

// The dialect's discardable attributes (ddp.donate_arguments,
// ddp.start_iter) are checked where they appear.
func.func @donated() attributes {ddp.donate_arguments} {
  return
}
ddp.state @ddp.step.donated : i64 {ddp.start_iter = 10 : i64}

// -----

// expected-error @+1 {{'ddp.donate_arguments' is a unit attribute of functions}}
ddp.state @not_a_function : i64 {ddp.donate_arguments}

// -----

// expected-error @+1 {{'ddp.start_iter' is an i64 attribute of a 'ddp.state'}}
ddp.state @wrong_type : i64 {ddp.start_iter = 1.0 : f32}

// -----

// expected-error @+1 {{unknown ddp attribute 'ddp.bogus'}}
func.func @bogus() attributes {ddp.bogus} {
  return
}

// -----

// The enums are dialect attributes (#ddp<role gradient> in generic form); a
// keyword that is none of their cases says which ones there are.
func.func @bad_role(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{expected a role (gradient, uncompressed, warmup, compressed), got 'bogus'}}
  // expected-error @+1 {{failed to parse DDP_CommRole parameter}}
  %r = ddp.allreduce mean %x role bogus : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @flatten_mixed(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'ddp.flatten' op input #1 has element type 'f16' but the bucket has 'f32'}}
  %f = ddp.flatten %a, %b scheme <"s"> : tensor<4xf32>, tensor<4xf16> -> tensor<8xf32>
  return
}

// -----

func.func @flatten_count(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'ddp.flatten' op the inputs hold 8 elements but the bucket 'tensor<9xf32>' holds 9}}
  %f = ddp.flatten %a scheme <"s"> : tensor<4x2xf32> -> tensor<9xf32>
  return
}

// -----

func.func @flatten_not_flat(%a: tensor<4x2xf32>) {
  // expected-error @+1 {{'ddp.flatten' op the bucket must be a 1-D tensor, got 'tensor<4x2xf32>'}}
  %f = ddp.flatten %a scheme <"s"> : tensor<4x2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @flatten_unnamed(%a: tensor<4xf32>) {
  // expected-error @+1 {{a compression scheme needs a name}}
  %f = ddp.flatten %a scheme <""> : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @flatten_dynamic(%a: tensor<?xf32>) {
  // expected-error @+1 {{'ddp.flatten' op operand #0 must be variadic of statically shaped tensor}}
  %f = ddp.flatten %a scheme <"s"> : tensor<?xf32> -> tensor<4xf32>
  return
}

// -----

func.func @unflatten_count(%f: tensor<8xf32>) {
  // expected-error @+1 {{'ddp.unflatten' op the results hold 6 elements but the bucket 'tensor<8xf32>' holds 8}}
  %u:2 = ddp.unflatten %f : tensor<8xf32> -> tensor<2x2xf32>, tensor<2xf32>
  return
}

// -----

func.func @allgather_empty() {
  // expected-error @+1 {{'ddp.allgather' op needs at least one tensor}}
  "ddp.allgather"() : () -> ()
  return
}

// -----

func.func @allgather_unknown_type(%x: tensor<4xi16>) {
  // expected-error @+1 {{'ddp.allgather' op operand #0 must be variadic of ranked tensor of f32, f16, bf16, f64, i64, i8 or i32 (the runtime's types) values, but got 'tensor<4xi16>'}}
  %g = ddp.allgather %x : tensor<4xi16>
  return
}

// -----

// expected-error @+1 {{'ddp.name' on argument 0 must be a non-empty string on a function}}
func.func @name_not_a_string(%g: tensor<4xf32> {ddp.name = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{'ddp.name' on result 0 must be a non-empty string on a function}}
func.func private @empty_result_name() -> (tensor<4xf32> {ddp.name = ""})

// -----

// expected-error @+1 {{unknown ddp argument attribute 'ddp.nmae'}}
func.func @misspelled(%g: tensor<4xf32> {ddp.nmae = "w"}) {
  return
}

// -----

// expected-error @+1 {{'ddp.world_size' is an i64 attribute >= 1 of a function}}
func.func @no_ranks() attributes {ddp.world_size = 0 : i64} {
  return
}

// -----

func.func @top_k_matrix(%m: tensor<4x8xf32>) {
  // expected-error @+1 {{'ddp.top_k' op selects from a 1-D input into 1-D values and indices}}
  %v, %i = ddp.top_k %m : tensor<4x8xf32> -> tensor<3xf32>, tensor<3xi32>
  return
}

// -----

func.func @top_k_value_type(%m: tensor<32xf32>) {
  // expected-error @+1 {{'ddp.top_k' op values of 'f16' but an input of 'f32'}}
  %v, %i = ddp.top_k %m : tensor<32xf32> -> tensor<3xf16>, tensor<3xi32>
  return
}

// -----

func.func @top_k_index_type(%m: tensor<32xf32>) {
  // expected-error @+1 {{'ddp.top_k' op result #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %v, %i = ddp.top_k %m : tensor<32xf32> -> tensor<3xf32>, tensor<3xi8>
  return
}

// -----

func.func @top_k_sizes_differ(%m: tensor<32xf32>) {
  // expected-error @+1 {{'ddp.top_k' op 3 values but 4 indices}}
  %v, %i = ddp.top_k %m : tensor<32xf32> -> tensor<3xf32>, tensor<4xi32>
  return
}

// -----

func.func @top_k_too_many(%m: tensor<32xf32>) {
  // expected-error @+1 {{'ddp.top_k' op k = 33 must be between 1 and the input's 32 elements}}
  %v, %i = ddp.top_k %m : tensor<32xf32> -> tensor<33xf32>, tensor<33xi32>
  return
}

// -----

func.func @top_k_none(%m: tensor<32xf32>) {
  // expected-error @+1 {{'ddp.top_k' op k = 0 must be between 1 and the input's 32 elements}}
  %v, %i = ddp.top_k %m : tensor<32xf32> -> tensor<0xf32>, tensor<0xi32>
  return
}

// -----

func.func @top_k_narrow_indices(%m: tensor<3000000000xf32>) {
  // expected-error @+1 {{'ddp.top_k' op i32 indices cannot address 3000000000 elements: use i64}}
  %v, %i = ddp.top_k %m : tensor<3000000000xf32> -> tensor<3xf32>, tensor<3xi32>
  return
}

// -----

func.func @buffer_top_k_sizes_differ(%m: memref<32xf32>, %v: memref<3xf32>, %i: memref<2xi64>) {
  // expected-error @+1 {{'ddp.buffer.top_k' op 3 values but 2 indices}}
  ddp.buffer.top_k %m into %v, %i : memref<32xf32> into memref<3xf32>, memref<2xi64>
  return
}

// -----

func.func @count_negative() {
  // expected-error @+1 {{'ddp.count_uncompressed' op attribute 'elements' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  ddp.count_uncompressed -3
  return
}

// -----

func.func @device_memory_on_a_load(%m: memref<4xf32>, %i: index) -> f32 {
  // expected-error @+1 {{'ddp.device_memory' is a unit attribute of a 'memref.alloc' or 'memref.dealloc'}}
  %x = memref.load %m[%i] {ddp.device_memory} : memref<4xf32>
  return %x : f32
}

// -----

// ddp-plan's decision belongs on a bucket still to be compressed.
func.func @planned_not_a_gradient(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ddp.planned' is a #ddp.compression attribute of a gradient 'ddp.allreduce' (role gradient, group world or across_nodes)}}
  %0 = ddp.allreduce mean %g role uncompressed {ddp.planned = #ddp.compression<"fp16">} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @planned_not_a_compression(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ddp.planned' is a #ddp.compression attribute of a gradient 'ddp.allreduce' (role gradient, group world or across_nodes)}}
  %0 = ddp.allreduce mean %g {ddp.planned = "fp16"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}
