// RUN: ddp-opt %s --convert-ddp-to-llvm -split-input-file | FileCheck %s
// The same patterns through upstream's convert-to-llvm, which finds them
// with the dialect's ConvertToLLVMPatternInterface (func, memref and arith
// are lowered in the same pass).
// RUN: ddp-opt %s --convert-to-llvm -split-input-file | FileCheck %s --check-prefix=GENERIC
// RUN: ddp-opt %s --convert-to-llvm -split-input-file | FileCheck %s --check-prefix=LEFT
// And through convert-ddp-to-llvm{include-upstream}, which lowers func and
// memref in the same conversion (ddp-lower-to-llvm's way).
// RUN: ddp-opt %s --convert-ddp-to-llvm=include-upstream=true -split-input-file | FileCheck %s --check-prefix=GENERIC

// One test per pattern of the lowering. Each checks the runtime function's
// signature and the ABI values the call passes: ddprt.h's enumerators
// (dtype, reduction, role, scale), the ddprt_buffer {ptr, i32, i64} and
// ddprt_matrix {ptr, i32, i64, i64} structs, the count, the current context
// and the checked status. A struct array is a stack array filled from a
// constant table of i64 words (data 0, dtype, numel or rows and cols) by
// llvm.intr.memcpy, then each data pointer (and each size known only at run
// time) is stored into it. The context and the constants are built once per
// function, at its entry.

// Nothing is left of ddp, func or memref.
// LEFT-NOT: {{^ *(%[^ ]* = )?ddp\.}}
// LEFT-NOT: builtin.unrealized_conversion_cast
// LEFT-NOT: func.func
// LEFT-NOT: memref

// CHECK-DAG: llvm.func @ddprt_current_context() -> !llvm.ptr
// CHECK-DAG: llvm.func @ddprt_check(!llvm.ptr, i32, !llvm.ptr)
// CHECK-DAG: llvm.func @ddprt_allreduce(!llvm.ptr, i32, i32, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @[[WHERE:__ddp_str_[0-9A-F]+]]("ddp.allreduce at {{.*}}ops.mlir:[[# @LINE + 22]]:3\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 2, 12]> : tensor<3xi64>) {{.*}} : !llvm.array<3 x i64>

// ddp.buffer.allreduce: sum = DDPRT_SUM 0, role compressed = DDPRT_ROLE_COMPRESSED 3,
// bf16 = DDPRT_BF16 2 (the table's second word), 12 elements (its third).
// CHECK-LABEL: func.func @allreduce(
// CHECK-DAG: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK-DAG: %[[ARRAY:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[SUM:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[ROLE:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[BYTES:.*]] = llvm.mlir.constant(24 : i64) : i64
// CHECK: %[[WORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: "llvm.intr.memcpy"(%[[ARRAY]], %[[WORDS]], %[[BYTES]]) <{isVolatile = false}>
// CHECK: %[[SLOT:.*]] = llvm.getelementptr %[[ARRAY]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i64)>
// CHECK: %[[DATA:.*]] = llvm.extractvalue %{{.*}}[1]
// CHECK: llvm.store %[[DATA]], %[[SLOT]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[STATUS:.*]] = llvm.call @ddprt_allreduce(%[[CTX]], %[[SUM]], %[[ROLE]], %[[ARRAY]], %[[COUNT]])
// CHECK: %[[TEXT:.*]] = llvm.mlir.addressof @[[WHERE]]
// CHECK: llvm.call @ddprt_check(%[[CTX]], %[[STATUS]], %[[TEXT]])
// CHECK-NOT: llvm.call @ddprt_current_context
func.func @allreduce(%a: memref<3x4xbf16>) {
  ddp.buffer.allreduce sum %a role compressed : memref<3x4xbf16>
  return
}

// -----

// ddp.buffer.allreduce_start / wait: the request comes back through a stack
// slot (preset to null) and goes to ddprt_wait. mean = 1, compressed = 3,
// f64 = 3, f32 = 0; a dynamic size is read from the descriptor.
// CHECK-DAG: llvm.func @ddprt_allreduce_start(!llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-DAG: llvm.func @ddprt_wait(!llvm.ptr, !llvm.ptr) -> i32
// The dynamic size's word is 0 in the table and stored after the copy.
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 3, 8, 0, 0, 0]> : tensor<6xi64>)
// CHECK-LABEL: func.func @allreduce_start_wait(
// CHECK-DAG: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK-DAG: %[[REQ:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-DAG: %[[ARRAY:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-DAG: %[[MEAN:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[ROLE:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[BYTES:.*]] = llvm.mlir.constant(48 : i64) : i64
// CHECK: %[[WORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: "llvm.intr.memcpy"(%[[ARRAY]], %[[WORDS]], %[[BYTES]])
// CHECK: llvm.getelementptr %[[ARRAY]][0, 0]
// CHECK: %[[SLOT1:.*]] = llvm.getelementptr %[[ARRAY]][1, 0]
// CHECK: %[[DATA1:.*]] = llvm.extractvalue %[[B:.*]][1]
// CHECK: llvm.store %[[DATA1]], %[[SLOT1]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[SIZE:.*]] = llvm.extractvalue %[[B]][3, 0]
// CHECK: %[[DYN:.*]] = llvm.mul %[[SIZE]], %{{.*}} : i64
// CHECK: %[[NUMEL1:.*]] = llvm.getelementptr %[[ARRAY]][1, 2]
// CHECK: llvm.store %[[DYN]], %[[NUMEL1]] : i64, !llvm.ptr
// CHECK: llvm.store %[[NULL]], %[[REQ]]
// CHECK: %[[STATUS:.*]] = llvm.call @ddprt_allreduce_start(%[[CTX]], %[[MEAN]], %[[ROLE]], %[[ARRAY]], %[[COUNT]], %[[REQ]])
// CHECK: llvm.call @ddprt_check(%[[CTX]], %[[STATUS]], %{{.*}})
// CHECK: %[[HANDLE:.*]] = llvm.load %[[REQ]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[WAITED:.*]] = llvm.call @ddprt_wait(%[[CTX]], %[[HANDLE]])
// CHECK: llvm.call @ddprt_check(%[[CTX]], %[[WAITED]], %{{.*}})
func.func @allreduce_start_wait(%a: memref<8xf64>, %b: memref<?xf32>) {
  %r = ddp.buffer.allreduce_start mean %a, %b role compressed : memref<8xf64>, memref<?xf32> -> !ddp.request<memref<8xf64>, memref<?xf32>>
  ddp.buffer.wait %r : !ddp.request<memref<8xf64>, memref<?xf32>>
  return
}

// -----

// A group other than the world calls the group entry points, the group
// first: node = DDPRT_GROUP_NODE 1, across_nodes = DDPRT_GROUP_ACROSS_NODES 2.
// CHECK-DAG: llvm.func @ddprt_allreduce_group(!llvm.ptr, i32, i32, i32, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.func @ddprt_allreduce_group_start(!llvm.ptr, i32, i32, i32, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-LABEL: func.func @groups(
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[ACROSS:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @ddprt_allreduce_group(%{{[0-9]+}}, %[[ONE]], %[[ONE]],
// CHECK: llvm.call @ddprt_allreduce_group_start(%{{[0-9]+}}, %[[ACROSS]], %[[ONE]],
// CHECK: llvm.call @ddprt_wait(
// CHECK-NOT: @ddprt_allreduce(
func.func @groups(%a: memref<8xf32>) {
  ddp.buffer.allreduce mean %a group node : memref<8xf32>
  %r = ddp.buffer.allreduce_start mean %a group across_nodes : memref<8xf32> -> !ddp.request<memref<8xf32>>
  ddp.buffer.wait %r : !ddp.request<memref<8xf32>>
  return
}

// -----

// A request that crosses a call (split-functions cuts between a start
// and its wait) is passed as the pointer it becomes; the memrefs stay for
// func-to-llvm.
// CHECK-LABEL: func.func private @waits(
// CHECK-SAME:      %[[R:.*]]: !llvm.ptr)
// CHECK: llvm.call @ddprt_wait(%{{.*}}, %[[R]])
// CHECK-LABEL: func.func @starts(
// CHECK-SAME:      %{{.*}}: memref<8xf32>)
// CHECK: %[[PTR:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: call @waits(%[[PTR]]) : (!llvm.ptr) -> ()
func.func private @waits(%r: !ddp.request<memref<8xf32>>) {
  ddp.buffer.wait %r : !ddp.request<memref<8xf32>>
  return
}
func.func @starts(%a: memref<8xf32>) {
  %r = ddp.buffer.allreduce_start mean %a : memref<8xf32> -> !ddp.request<memref<8xf32>>
  func.call @waits(%r) : (!ddp.request<memref<8xf32>>) -> ()
  return
}

// -----

// ddp.buffer.host_barrier: the context only.
// CHECK-DAG: llvm.func @ddprt_host_barrier(!llvm.ptr) -> i32
// CHECK-LABEL: func.func @host_barrier(
// CHECK: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK: %[[STATUS:.*]] = llvm.call @ddprt_host_barrier(%[[CTX]])
// CHECK: llvm.call @ddprt_check(%[[CTX]], %[[STATUS]], %{{.*}})
func.func @host_barrier() {
  ddp.buffer.host_barrier
  return
}

// -----

// ddp.buffer.allgather: role compressed = DDPRT_ROLE_COMPRESSED 3; i8 =
// DDPRT_I8 5 with 15 elements in, and world size times as many out (the
// output's leading dimension, from its descriptor).
// CHECK-DAG: llvm.func @ddprt_allgather(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32) -> i32
// One table per op, a record per memref operand; each array is copied
// from its operands' slice.
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 5, 15, 0, 5, 0]> : tensor<6xi64>)
// CHECK-LABEL: func.func @allgather(
// (Stack arrays are placed at the function's entry, the last one first.)
// CHECK-DAG: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK-DAG: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[IN:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[ROLE:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[FIFTEEN:.*]] = llvm.mlir.constant(15 : i64) : i64
// CHECK: %[[INWORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: "llvm.intr.memcpy"(%[[IN]], %[[INWORDS]], %{{.*}})
// CHECK: %[[OUTWORDS:.*]] = llvm.getelementptr %[[INWORDS]][3] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK: "llvm.intr.memcpy"(%[[OUT]], %[[OUTWORDS]], %{{.*}})
// CHECK: %[[RANKS:.*]] = llvm.extractvalue %{{.*}}[3, 0]
// CHECK: %[[TOTAL:.*]] = llvm.mul %[[RANKS]], %[[FIFTEEN]] : i64
// CHECK: %[[NUMEL:.*]] = llvm.getelementptr %[[OUT]][0, 2]
// CHECK: llvm.store %[[TOTAL]], %[[NUMEL]] : i64, !llvm.ptr
// CHECK: %[[STATUS:.*]] = llvm.call @ddprt_allgather(%[[CTX]], %[[ROLE]], %[[IN]], %[[OUT]], %[[COUNT]])
// CHECK: llvm.call @ddprt_check(%[[CTX]], %[[STATUS]], %{{.*}})
func.func @allgather(%in: memref<15xi8>, %out: memref<?x15xi8>) {
  ddp.buffer.allgather %in into %out : memref<15xi8> into memref<?x15xi8>
  return
}

// -----

// ddp.world_size: ddprt_world_size(context) (an int), widened to index.
// CHECK-DAG: llvm.func @ddprt_world_size(!llvm.ptr) -> i32
// CHECK-LABEL: func.func @world_size(
// CHECK: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK: %[[SIZE:.*]] = llvm.call @ddprt_world_size(%[[CTX]]) : (!llvm.ptr) -> i32
// CHECK: %[[WIDE:.*]] = llvm.sext %[[SIZE]] : i32 to i64
func.func @world_size() -> index {
  %n = ddp.world_size : index
  return %n : index
}

// -----

// ddp.buffer.scale: world_size = DDPRT_SCALE_WORLD_SIZE 2, f16 = 1.
// CHECK-DAG: llvm.func @ddprt_scale(!llvm.ptr, i32, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 1, 32]> : tensor<3xi64>)
// CHECK-LABEL: func.func @scale(
// CHECK-DAG: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK-DAG: %[[ARRAY:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[FACTOR:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[WORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: "llvm.intr.memcpy"(%[[ARRAY]], %[[WORDS]], %{{.*}})
// CHECK: llvm.call @ddprt_scale(%[[CTX]], %[[FACTOR]], %[[ARRAY]], %[[COUNT]])
func.func @scale(%b: memref<32xf16>) {
  ddp.buffer.scale %b by world_size : memref<32xf16>
  return
}

// -----

// ddp.buffer.cast: inverse_world_size = DDPRT_SCALE_INVERSE_WORLD_SIZE 1;
// inputs f32 (0), outputs f16 (1); without a factor, DDPRT_SCALE_NONE 0.
// CHECK-DAG: llvm.func @ddprt_cast(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 0, 32, 0, 1, 32]> : tensor<6xi64>)
// CHECK-LABEL: func.func @cast(
// CHECK-DAG: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[IN:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// (The factor and the count are both 1: one constant.)
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[INWORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: "llvm.intr.memcpy"(%[[IN]], %[[INWORDS]], %{{.*}})
// CHECK: llvm.getelementptr %[[IN]][0, 0]
// CHECK: %[[OUTWORDS:.*]] = llvm.getelementptr %[[INWORDS]][3]
// CHECK: "llvm.intr.memcpy"(%[[OUT]], %[[OUTWORDS]], %{{.*}})
// CHECK: llvm.getelementptr %[[OUT]][0, 0]
// CHECK: llvm.call @ddprt_cast(%{{.*}}, %[[ONE]], %[[IN]], %[[OUT]], %[[ONE]])
func.func @cast(%b: memref<32xf32>, %h: memref<32xf16>) {
  ddp.buffer.cast %b scaled by inverse_world_size into %h : memref<32xf32> into memref<32xf16>
  return
}

// CHECK-LABEL: func.func @cast_unscaled(
// CHECK-DAG: %[[NONE:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @ddprt_cast(%{{.*}}, %[[NONE]], %{{.*}}, %{{.*}}, %{{.*}})
func.func @cast_unscaled(%b: memref<32xf32>, %h: memref<32xf16>) {
  ddp.buffer.cast %h into %b : memref<32xf16> into memref<32xf32>
  return
}

// -----

// ddp.buffer.copy: sources, then destinations, then the count.
// CHECK-DAG: llvm.func @ddprt_copy(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// Sources and destinations have the same records (f32 x 4, then bf16 x 6).
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 0, 4, 0, 2, 6, 0, 0, 4, 0, 2, 6]> : tensor<12xi64>)
// CHECK-LABEL: func.func @copy(
// CHECK-DAG: %[[DST:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[SRC:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: %[[WORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: llvm.getelementptr %[[SRC]][1, 0]
// CHECK: llvm.getelementptr %[[WORDS]][6]
// CHECK: llvm.getelementptr %[[DST]][1, 0]
// CHECK: llvm.call @ddprt_copy(%{{.*}}, %[[SRC]], %[[DST]], %[[COUNT]])
func.func @copy(%a: memref<4xf32>, %b: memref<4xf32>, %c: memref<2x3xbf16>, %d: memref<2x3xbf16>) {
  ddp.buffer.copy %a, %c into %b, %d : memref<4xf32>, memref<2x3xbf16>
  return
}

// -----

// ddp.buffer.random_normal: one buffer, then seed, stream and the step.
// CHECK-DAG: llvm.func @ddprt_random_normal(!llvm.ptr, !llvm.ptr, i64, i64, i64) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 0, 64]> : tensor<3xi64>)
// CHECK-LABEL: func.func @random_normal(
// CHECK-SAME: %[[STEP:[^:]*]]: i64
// CHECK-DAG: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-DAG: %[[SEED:.*]] = llvm.mlir.constant(7 : i64) : i64
// CHECK-DAG: %[[STREAM:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: llvm.mlir.addressof @[[TABLE]]
// CHECK: llvm.call @ddprt_random_normal(%{{.*}}, %[[OUT]], %[[SEED]], %[[STREAM]], %[[STEP]])
func.func @random_normal(%step: i64, %q: memref<32x2xf32>) {
  ddp.buffer.random_normal %step seed 7 stream 3 into %q : memref<32x2xf32>
  return
}

// -----

// ddp.count_uncompressed: one checked call with the bucket's elements.
// CHECK-DAG: llvm.func @ddprt_count_uncompressed(!llvm.ptr, i64) -> i32
// CHECK-LABEL: func.func @count_uncompressed(
// CHECK: %[[N:.*]] = llvm.mlir.constant(2112 : i64) : i64
// CHECK: llvm.call @ddprt_count_uncompressed(%{{.*}}, %[[N]])
func.func @count_uncompressed() {
  ddp.count_uncompressed 2112
  return
}

// -----

// ddp.buffer.top_k: the input, the values and the indices, each one
// ddprt_buffer {data, dtype, numel} (f32 is dtype 0, i32 dtype 6).
// CHECK-DAG: llvm.func @ddprt_top_k(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 0, 2112, 0, 0, 21, 0, 6, 21]> : tensor<9xi64>)
// CHECK-LABEL: func.func @top_k(
// CHECK: %[[IN:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: llvm.getelementptr %[[IN]][3]
// CHECK: llvm.getelementptr %[[IN]][6]
// CHECK: llvm.call @ddprt_top_k(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
func.func @top_k(%m: memref<2112xf32>, %v: memref<21xf32>, %i: memref<21xi32>) {
  ddp.buffer.top_k %m into %v, %i : memref<2112xf32> into memref<21xf32>, memref<21xi32>
  return
}

// -----

// ddp.buffer.project: matrices, residuals, factors, outputs as arrays of
// ddprt_matrix {data, dtype, rows, cols}; transposed is ddprt_backproject,
// and an empty residual group is a null pointer.
// CHECK-DAG: llvm.func @ddprt_project(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.func @ddprt_backproject(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// The op's table of {data, dtype, rows, cols}: f32 64x32 (twice), 32x2 and
// 64x2.
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 0, 64, 32, 0, 0, 64, 32, 0, 0, 32, 2, 0, 0, 64, 2]> : tensor<16xi64>) {{.*}} : !llvm.array<16 x i64>
// CHECK-LABEL: func.func @project(
// CHECK-DAG: %[[P:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[Q:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[E:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[G:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[BYTES:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK: %[[GWORDS:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: "llvm.intr.memcpy"(%[[G]], %[[GWORDS]], %[[BYTES]])
// CHECK: llvm.getelementptr %[[G]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i64, i64)>
// CHECK: %[[EWORDS:.*]] = llvm.getelementptr %[[GWORDS]][4]
// CHECK: "llvm.intr.memcpy"(%[[E]], %[[EWORDS]], %[[BYTES]])
// CHECK: %[[QWORDS:.*]] = llvm.getelementptr %[[GWORDS]][8]
// CHECK: "llvm.intr.memcpy"(%[[Q]], %[[QWORDS]], %[[BYTES]])
// CHECK: %[[PWORDS:.*]] = llvm.getelementptr %[[GWORDS]][12]
// CHECK: "llvm.intr.memcpy"(%[[P]], %[[PWORDS]], %[[BYTES]])
// CHECK: llvm.call @ddprt_project(%{{.*}}, %[[G]], %[[E]], %[[Q]], %[[P]], %[[COUNT]])
func.func @project(%g: memref<64x32xf32>, %e: memref<64x32xf32>, %q: memref<32x2xf32>, %p: memref<64x2xf32>) {
  ddp.buffer.project %g plus %e times %q into %p : memref<64x32xf32> plus memref<64x32xf32> times memref<32x2xf32> into memref<64x2xf32>
  return
}

// CHECK-LABEL: func.func @backproject(
// CHECK-DAG: %[[Q:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[P:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[G:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[NONE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @ddprt_backproject(%{{.*}}, %[[G]], %[[NONE]], %[[P]], %[[Q]], %{{.*}})
func.func @backproject(%g: memref<64x32xf32>, %q: memref<32x2xf32>, %p: memref<64x2xf32>) {
  ddp.buffer.project transposed %g times %p into %q : memref<64x32xf32> times memref<64x2xf32> into memref<32x2xf32>
  return
}

// -----

// ddp.buffer.orthogonalize: the matrices, the count, then epsilon as f64.
// CHECK-DAG: llvm.func @ddprt_orthogonalize(!llvm.ptr, !llvm.ptr, i32, f64) -> i32
// CHECK-LABEL: func.func @orthogonalize(
// CHECK-DAG: %[[P:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[EPS:.*]] = llvm.mlir.constant(1.000000e-08 : f64) : f64
// CHECK: llvm.call @ddprt_orthogonalize(%{{.*}}, %[[P]], %[[COUNT]], %[[EPS]])
func.func @orthogonalize(%p: memref<64x2xf32>) {
  ddp.buffer.orthogonalize %p {epsilon = 1.0e-8 : f64} : memref<64x2xf32>
  return
}

// -----

// ddp.buffer.reconstruct: ps, qs, matrices, residuals, outputs; without
// error feedback the matrices and residuals are null.
// CHECK-DAG: llvm.func @ddprt_reconstruct(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-LABEL: func.func @reconstruct(
// CHECK: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK: %[[E:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK: %[[G:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK: %[[Q:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK: %[[P:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK: llvm.call @ddprt_reconstruct(%{{.*}}, %[[P]], %[[Q]], %[[G]], %[[E]], %[[OUT]], %{{.*}})
func.func @reconstruct(%g: memref<64x32xf32>, %e: memref<64x32xf32>, %q: memref<32x2xf32>, %p: memref<64x2xf32>) {
  ddp.buffer.reconstruct %p times %q from %g plus %e into %g : memref<64x2xf32> times memref<32x2xf32> from memref<64x32xf32> plus memref<64x32xf32> into memref<64x32xf32>
  return
}

// CHECK-LABEL: func.func @reconstruct_plain(
// CHECK-DAG: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[Q:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[P:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64, i64)>
// CHECK-DAG: %[[NONE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @ddprt_reconstruct(%{{.*}}, %[[P]], %[[Q]], %[[NONE]], %[[NONE]], %[[OUT]], %{{.*}})
func.func @reconstruct_plain(%e: memref<64x32xf32>, %q: memref<32x2xf32>, %p: memref<64x2xf32>) {
  ddp.buffer.reconstruct %p times %q into %e : memref<64x2xf32> times memref<32x2xf32> into memref<64x32xf32>
  return
}

// -----

// ddp.buffer.inspect: one buffer into two stack words (preset to "finite,
// nonzero"), compared with 0.
// CHECK-DAG: llvm.func @ddprt_inspect(!llvm.ptr, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: func.func @inspect(
// CHECK: %[[FLAGS:.*]] = llvm.alloca %{{.*}} x i32
// CHECK: %[[NONZERO:.*]] = llvm.getelementptr %[[FLAGS]][1]
// CHECK: llvm.store %{{.*}}, %[[FLAGS]] : i32, !llvm.ptr
// CHECK: llvm.store %{{.*}}, %[[NONZERO]] : i32, !llvm.ptr
// CHECK: %[[STATUS:.*]] = llvm.call @ddprt_inspect(%{{.*}}, %{{.*}}, %{{.*}}, %[[FLAGS]], %[[NONZERO]])
// CHECK: llvm.call @ddprt_check(%{{.*}}, %[[STATUS]], %{{.*}})
// CHECK: %[[F:.*]] = llvm.load %[[FLAGS]] : !llvm.ptr -> i32
// CHECK: %[[FINITE:.*]] = llvm.icmp "ne" %[[F]], %{{.*}} : i32
// CHECK: %[[N:.*]] = llvm.load %[[NONZERO]] : !llvm.ptr -> i32
// CHECK: %[[ANY:.*]] = llvm.icmp "ne" %[[N]], %{{.*}} : i32
// CHECK: return %[[FINITE]], %[[ANY]]
func.func @inspect(%q: memref<32x2xf32>) -> (i1, i1) {
  %finite, %nonzero = ddp.buffer.inspect %q : memref<32x2xf32>
  return %finite, %nonzero : i1, i1
}

// -----

// ddp.state disappears; ddp.buffer.state is ddprt_state_get by name (dtype,
// element count) and its data pointer, wrapped in a static descriptor.
// CHECK-NOT: {{^ *}}ddp.state
// CHECK-DAG: llvm.func @ddprt_state_get(!llvm.ptr, !llvm.ptr, i32, i64, !llvm.ptr) -> i32
// CHECK-DAG: llvm.func @ddprt_state_data(!llvm.ptr) -> !llvm.ptr
// CHECK-DAG: llvm.mlir.global internal constant @[[NAME:.*]]("ddp.q.fc1\00")
// CHECK-LABEL: func.func @buffer_state(
// CHECK-DAG: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[NUMEL:.*]] = llvm.mlir.constant(64 : i64) : i64
// CHECK-DAG: %[[SLOT:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: llvm.store %{{.*}}, %[[SLOT]]
// CHECK: %[[TEXT:.*]] = llvm.mlir.addressof @[[NAME]]
// CHECK: llvm.call @ddprt_state_get(%{{.*}}, %[[TEXT]], %[[BF16]], %[[NUMEL]], %[[SLOT]])
// CHECK: %[[STATE:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[DATA:.*]] = llvm.call @ddprt_state_data(%[[STATE]])
// CHECK: llvm.insertvalue %[[DATA]], %{{.*}}[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
ddp.state @ddp.q.fc1 : tensor<32x2xbf16>
func.func @buffer_state() -> memref<32x2xbf16> {
  %q = ddp.buffer.state @ddp.q.fc1 : memref<32x2xbf16>
  return %q : memref<32x2xbf16>
}

// -----

// The i64 step counter: ddp.state_load and ddp.state_store read and write
// the state's host memory (DDPRT_I64 4, one element).
// CHECK-LABEL: func.func @counter(
// (The count, 1, is not told apart here from the entry allocas' own
// constant 1; the integration tests read and write the counter.)
// CHECK-DAG: %[[I64:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-DAG: llvm.call @ddprt_current_context()
// CHECK: llvm.call @ddprt_state_get(%{{.*}}, %{{.*}}, %[[I64]], %{{.*}}, %{{.*}})
// CHECK: %[[DATA:.*]] = llvm.call @ddprt_state_data
// CHECK: %[[OLD:.*]] = llvm.load %[[DATA]] : !llvm.ptr -> i64
// CHECK: %[[NEW:.*]] = arith.addi %[[OLD]]
// CHECK: llvm.call @ddprt_state_get
// CHECK: %[[DATA2:.*]] = llvm.call @ddprt_state_data
// CHECK: llvm.store %[[NEW]], %[[DATA2]] : i64, !llvm.ptr
// CHECK: return %[[OLD]]
ddp.state @ddp.step.train : i64
func.func @counter() -> i64 {
  %s = ddp.state_load @ddp.step.train : i64
  %c1 = arith.constant 1 : i64
  %n = arith.addi %s, %c1 : i64
  ddp.state_store %n, @ddp.step.train : i64
  return %s : i64
}

// GENERIC-LABEL: llvm.func @allreduce(
// GENERIC: llvm.call @ddprt_allreduce(
// GENERIC-LABEL: llvm.func @allreduce_start_wait(
// GENERIC: llvm.call @ddprt_allreduce_start(
// GENERIC: llvm.call @ddprt_wait(
// GENERIC-LABEL: llvm.func @waits(
// GENERIC-SAME:      %{{.*}}: !llvm.ptr)
// GENERIC-LABEL: llvm.func @host_barrier(
// GENERIC: llvm.call @ddprt_host_barrier(
// GENERIC-LABEL: llvm.func @scale(
// GENERIC-LABEL: llvm.func @cast(
// GENERIC-LABEL: llvm.func @cast_unscaled(
// GENERIC-LABEL: llvm.func @copy(
// GENERIC-LABEL: llvm.func @random_normal(
// GENERIC-LABEL: llvm.func @count_uncompressed(
// GENERIC: llvm.call @ddprt_count_uncompressed(
// GENERIC-LABEL: llvm.func @top_k(
// GENERIC: llvm.call @ddprt_top_k(
// GENERIC-LABEL: llvm.func @project(
// GENERIC-LABEL: llvm.func @backproject(
// GENERIC-LABEL: llvm.func @orthogonalize(
// GENERIC-LABEL: llvm.func @reconstruct(
// GENERIC-LABEL: llvm.func @reconstruct_plain(
// GENERIC-LABEL: llvm.func @inspect(
// GENERIC-LABEL: llvm.func @buffer_state(
// GENERIC: llvm.call @ddprt_state_get(
// GENERIC-LABEL: llvm.func @counter(
// (convert-to-llvm lowers arith too; include-upstream leaves it.)
// GENERIC: {{llvm.add|arith.addi}}

// -----

// ddp.report_nonfinite: when the flag is false, ddprt_report_nonfinite
// with the op's location, the message and whether it is this rank's own;
// then the step goes on.
// CHECK-DAG: llvm.func @ddprt_report_nonfinite(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32)
// CHECK-LABEL: func.func @report_nonfinite(
// CHECK: %[[ONLY:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.cond_br %{{.*}}, ^[[GO:.*]], ^[[REPORT:.*]]
// CHECK: ^[[GO]]:
// CHECK: return
// CHECK: ^[[REPORT]]:
// CHECK: llvm.call @ddprt_report_nonfinite(%{{.*}}, %{{.*}}, %{{.*}}, %[[ONLY]])
// CHECK: llvm.br ^[[GO]]
func.func @report_nonfinite(%finite: i1) {
  ddp.report_nonfinite %finite, "a state" this_rank_only
  return
}
