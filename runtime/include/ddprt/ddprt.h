/*===- ddprt.h - ddp runtime C ABI ------------------------------*- C -*-===*\
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * The runtime that executes the ddp dialect's ops: collectives over all
 * ranks of a job and the compression kernels, behind one C ABI, with a CPU
 * backend (MPI) and a CUDA backend (NCCL, cuBLAS, fused kernels).
 *
 * Conventions
 *  - Every function returns a ddprt_status; DDPRT_OK is 0. After a failure,
 *    ddprt_last_error(ctx) says what went wrong. Library code never aborts
 *    or exits the process.
 *  - Buffers are memref-style: a data pointer (host memory for the CPU
 *    backend, device memory for CUDA), an element type and sizes; tensors are
 *    dense and row-major. Matrices are n x m, row-major, contiguous.
 *  - Multi-tensor calls take arrays of N buffers and run as one operation
 *    (one collective, one kernel launch) for the whole bucket. Tensor i of
 *    every array belongs together.
 *  - Every rank calls the same collectives in the same order.
 *  - Calls are ordered like a CUDA stream: each sees the results of the calls
 *    before it. On the CPU backend a call is complete when it returns, except
 *    a started allreduce, which progresses on the runtime's communication
 *    thread until its ddprt_wait; on the CUDA backend a call is enqueued, and
 *    ddprt_synchronize waits for the device (call it before the host reads
 *    device memory).
 *
 *  - Threads: a context is used by one thread at a time (calls on one
 *    context must not overlap). Compiled code finds its context through
 *    ddprt_current_context(), which is process-wide and thread-safe: see
 *    "Compiled code" below.
 *  - Versions: ddprt_get_version says which runtime is loaded; structs the
 *    caller fills for the runtime (ddprt_options) carry their size and the
 *    DDPRT_VERSION they were compiled with, so that later runtimes can add
 *    fields and still read what older callers pass.
 *
\*===----------------------------------------------------------------------===*/

#ifndef DDPRT_DDPRT_H
#define DDPRT_DDPRT_H

#include <stddef.h>
#include <stdint.h>

/* The runtime's version, the project's (VERSION at the top of the tree; the
   runtime's CMake refuses to configure when they differ), as
   MAJOR * 10000 + MINOR * 100 + PATCH (0.2.0 is 200). */
#define DDPRT_VERSION_MAJOR 0
#define DDPRT_VERSION_MINOR 4
#define DDPRT_VERSION_PATCH 0
#define DDPRT_VERSION                                                          \
  (DDPRT_VERSION_MAJOR * 10000 + DDPRT_VERSION_MINOR * 100 +                   \
   DDPRT_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; its API is exported. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef enum ddprt_status {
  DDPRT_OK = 0,
  DDPRT_ERROR_INVALID_ARGUMENT =
      1,                         /* a null pointer, a size that does not fit */
  DDPRT_ERROR_UNSUPPORTED = 2,   /* a dtype or backend this build lacks */
  DDPRT_ERROR_COMMUNICATION = 3, /* MPI or NCCL failed */
  DDPRT_ERROR_TIMEOUT = 4,       /* a collective did not finish in time */
  DDPRT_ERROR_MISMATCH = 5,      /* ranks passed different sizes or types */
  DDPRT_ERROR_IO = 6,            /* checkpoint file errors */
  DDPRT_ERROR_BACKEND = 7,       /* CUDA, cuBLAS or allocation failures */
  DDPRT_ERROR_STATE = 8,         /* calls out of order (finalized context) */
  DDPRT_NONFINITE = 9 /* the call completed, but some tensor's averaged
                         values were not finite (NaN or Inf), so its
                         state was left as it was: see ddprt_reconstruct */
} ddprt_status;

typedef enum ddprt_backend_kind {
  DDPRT_BACKEND_CPU = 0,
  DDPRT_BACKEND_CUDA = 1
} ddprt_backend_kind;

/* Whose job a context joins (ddprt_options.join). Since 0.4.0.
     NONE             the runtime's own: MPI's world (MPI started by the
                      runtime unless the host already did)
     MPI              an MPI communicator the caller made (MPI already
                      initialized, for example by mpi4py): join_handle is
                      the address of its MPI_Comm; the runtime works on a
                      duplicate of it and never finalizes MPI
     NCCL_COMM        CUDA: an NCCL communicator the caller made
                      (join_handle is its ncclComm_t); the runtime splits
                      one of its own off it, which is itself a collective
     NCCL_UNIQUE_ID   CUDA: an ncclUniqueId rank 0 made
                      (ddprt_nccl_unique_id) and the caller passed to every
                      rank through its own store (torch.distributed's
                      TCPStore, a file); join_rank and join_world_size say
                      where this rank stands
   With either NCCL kind the job needs no MPI: its size and this rank come
   from join_rank and join_world_size, and ranks check that they pass the
   same shapes through NCCL. */
typedef enum ddprt_join_kind {
  DDPRT_JOIN_NONE = 0,
  DDPRT_JOIN_MPI = 1,
  DDPRT_JOIN_NCCL_COMM = 2,
  DDPRT_JOIN_NCCL_UNIQUE_ID = 3
} ddprt_join_kind;

/* The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES). */
#define DDPRT_NCCL_UNIQUE_ID_BYTES 128

/* Every element type the runtime knows, listed once for the runtime and for
   the compiler that targets it: the ddp dialect's verifiers and its lowering
   derive the types they accept from this list (ddp/Dialect/DDP/IR/
   RuntimeABI.h), so a type the runtime lacks fails at verification.
     X(NAME, value, bytes, kind, compute)
   kind: FLOAT (IEEE 754 binary), BFLOAT (bfloat16) or INT (signless two's
   complement). compute: 1 if allreduces and kernels take the type; 0 if
   only state buffers and ddprt_allgather hold it (the step counter; a
   quantized payload in i8, read as unsigned by the code that made it). */
#define DDPRT_FOR_EACH_DTYPE(X)                                                \
  X(F32, 0, 4, FLOAT, 1)                                                       \
  X(F16, 1, 2, FLOAT, 1)                                                       \
  X(BF16, 2, 2, BFLOAT, 1)                                                     \
  X(F64, 3, 8, FLOAT, 1)                                                       \
  X(I64, 4, 8, INT, 0)                                                         \
  X(I8, 5, 1, INT, 0)                                                          \
  X(I32, 6, 4, INT, 0)

typedef enum ddprt_dtype {
#define DDPRT_DTYPE_ENUMERATOR(NAME, value, bytes, kind, compute)              \
  DDPRT_##NAME = value,
  DDPRT_FOR_EACH_DTYPE(DDPRT_DTYPE_ENUMERATOR)
#undef DDPRT_DTYPE_ENUMERATOR
} ddprt_dtype;

typedef enum ddprt_reduction {
  DDPRT_SUM = 0, /* element-wise sum over ranks */
  DDPRT_MEAN = 1 /* the sum divided by the world size */
} ddprt_reduction;

/* Which ranks a collective joins (ddprt_allreduce_group). A node is the
   ranks that share a machine (the same processor name, or
   ddprt_options.ranks_per_node consecutive ranks). A mean divides by the
   number of members: the world size, the ranks on this node, the number of
   nodes. */
typedef enum ddprt_group {
  DDPRT_GROUP_WORLD = 0, /* every rank of the job */
  DDPRT_GROUP_NODE = 1,  /* the ranks of this rank's node, through shared
                            memory; never over the network */
  /* One member per node: the buffers must hold the same values on every
     rank of a node (what an allreduce within the node left there). The
     node's first rank exchanges them with the other nodes' first ranks over
     the network, then passes the result to the rest of its node. A mean
     across nodes of node means is the job's mean only if every node has as
     many ranks: on a job whose nodes differ it is refused. */
  DDPRT_GROUP_ACROSS_NODES = 2
} ddprt_group;

/* A factor known only at run time (ddp.scale, ddp.cast scaled by). */
typedef enum ddprt_world_scale {
  DDPRT_SCALE_NONE = 0,
  DDPRT_SCALE_INVERSE_WORLD_SIZE = 1,
  DDPRT_SCALE_WORLD_SIZE = 2,
  /* The number of nodes (ddprt_group), for a mean across nodes. Since
     0.3.0. */
  DDPRT_SCALE_INVERSE_NODE_COUNT = 3,
  DDPRT_SCALE_NODE_COUNT = 4
} ddprt_world_scale;

/* What a collective carries, for the counters: every role once, for the
   runtime, its hosts and the compiler (the ddp dialect's CommRole, whose
   cases RuntimeABI.cpp checks against this list at compile time). The roles
   say where a collective stands in compression, not which scheme issued
   it: PowerSGD, top-k, quantization and hooks written in MLIR all send
   COMPRESSED.
     X(NAME, value, name)
   name: the dialect's keyword (#ddp<role name>) and the key of ddp-run's
   JSON summary.
     GRADIENT      gradients nobody has compressed yet
     UNCOMPRESSED  what a scheme leaves uncompressed (biases, small layers)
     WARMUP        the plain allreduce before a scheme's start iteration
     COMPRESSED    what a scheme sends instead of gradients (PowerSGD's P
                   and Q factors, top-k's values and indices, a quantized
                   payload and its scales, a hook's collectives) */
#define DDPRT_FOR_EACH_ROLE(X)                                                 \
  X(GRADIENT, 0, gradient)                                                     \
  X(UNCOMPRESSED, 1, uncompressed)                                             \
  X(WARMUP, 2, warmup)                                                         \
  X(COMPRESSED, 3, compressed)

typedef enum ddprt_role {
#define DDPRT_ROLE_ENUMERATOR(NAME, value, name) DDPRT_ROLE_##NAME = value,
  DDPRT_FOR_EACH_ROLE(DDPRT_ROLE_ENUMERATOR)
#undef DDPRT_ROLE_ENUMERATOR
#define DDPRT_ROLE_ONE(NAME, value, name) +1
      DDPRT_ROLE_COUNT = 0 DDPRT_FOR_EACH_ROLE(DDPRT_ROLE_ONE)
#undef DDPRT_ROLE_ONE
} ddprt_role;

/* A dense tensor: `numel` elements of `dtype` at `data`. Compiled code
   builds these (and ddprt_matrix) from constant tables: the lowering checks
   its layout against this one with static_asserts. Every function reads the
   arrays of ddprt_buffer and ddprt_matrix it is passed during the call
   only (a started allreduce keeps the data, not the array), so compiled
   code reuses one stack array for every call of a step. */
typedef struct ddprt_buffer {
  void *data;
  ddprt_dtype dtype;
  int64_t numel;
} ddprt_buffer;

/* A dense row-major rows x cols matrix. */
typedef struct ddprt_matrix {
  void *data;
  ddprt_dtype dtype;
  int64_t rows;
  int64_t cols;
} ddprt_matrix;

/* The loaded runtime's DDPRT_VERSION (which may differ from the one the
   caller was compiled with). */
ddprt_status ddprt_get_version(int *version);

/* How a context starts. Extensible as NCCL's ncclConfig_t is: fill it with
   DDPRT_OPTIONS_INITIALIZER or ddprt_default_options, then change the
   fields you need. `size` and `version` say which ddprt_options the caller
   was compiled with; later versions only append fields. ddprt_init reads
   the fields that lie within `size` (the others keep their defaults), so a
   runtime takes the smaller struct of an older caller; it refuses
   (DDPRT_ERROR_INVALID_ARGUMENT) a size that is no ddprt_options it knows
   (0 included: a struct not filled as above) or larger than its own, and a
   version that is none of its own or older ones. */
typedef struct ddprt_options {
  size_t size;          /* sizeof(ddprt_options) */
  unsigned int version; /* DDPRT_VERSION */
  ddprt_backend_kind backend;
  /* A collective that has not finished after this many seconds fails with
     DDPRT_ERROR_TIMEOUT (a dead rank must not hang the others). 0: wait
     forever. */
  double timeout_seconds;
  /* Before each collective, check that every rank passes the same sizes and
     types (one small extra collective); a mismatch is DDPRT_ERROR_MISMATCH
     instead of a silent wrong reduction. */
  int check_shapes;
  /* A measuring tool, off by default (0): the CPU backend holds each
     collective until latency + bytes / bandwidth has passed since it began
     (its real time counted), as if the ranks were joined by a network link
     of this bandwidth (10^9 bits per second) and latency (microseconds);
     `bytes` is what this rank sends (an allreduce of B bytes on W ranks:
     2 (W - 1) / W * B; an allgather of B bytes from each rank:
     (W - 1) * B). The environment variable
     DDPRT_SIMULATED_LINK=<gbps>,<latency_us> (e.g. 10,20) overrides both.
     The CUDA backend refuses it (DDPRT_ERROR_UNSUPPORTED). */
  double simulated_link_gbps;
  double simulated_link_latency_us;
  /* 0 (the default): ranks with the same processor name share a node
     (ddprt_group). k > 0: ranks r with the same r / k do, as if the job
     ran k ranks per machine (a test of a multi-node layout on one machine;
     Open MPI's --map-by ppr:k:node places ranks so). The environment
     variable DDPRT_RANKS_PER_NODE=<k> overrides it. Since 0.3.0. */
  int ranks_per_node;
  /* Since 0.4.0: joining a job someone else started (ddprt_join_kind).
     The handle comes first: an 8-byte field starts past the padding at
     the end of a 0.3.0 struct, which is the caller's garbage. */
  const void *join_handle;
  ddprt_join_kind join;
  int join_rank, join_world_size;
  unsigned char nccl_unique_id[DDPRT_NCCL_UNIQUE_ID_BYTES];
  /* CUDA: the device this rank works on (-1, the default: the rank among
     its node's ranks, modulo the devices), and the stream compiled steps
     and the runtime's kernels run on (NULL, the default: a stream of the
     runtime's own; a caller's stream, for example PyTorch's current one,
     orders the runtime's work after what the caller queued on it). */
  int device;
  void *stream;
} ddprt_options;

/* The defaults: CPU backend, 300 s timeout, shape checks on, no simulated
   link, nodes from the processor names, the runtime's own job. */
#define DDPRT_OPTIONS_INITIALIZER                                              \
  {                                                                            \
    sizeof(ddprt_options), DDPRT_VERSION, DDPRT_BACKEND_CPU, 300.0, 1, 0, 0,   \
        0, NULL, DDPRT_JOIN_NONE, 0, 0, {0}, -1, NULL                          \
  }

/* Fills `options` with DDPRT_OPTIONS_INITIALIZER. Inline, so that it
   writes the struct the caller was compiled with: a function in the
   library would write its own, maybe larger, ddprt_options. */
static inline void ddprt_default_options(ddprt_options *options) {
  const ddprt_options defaults = DDPRT_OPTIONS_INITIALIZER;
  if (options)
    *options = defaults;
}

/* Reads `text` written as DDPRT_SIMULATED_LINK is, "<gbps>,<latency_us>"
   (for example "10,20"), into *gbps and *latency_us, checked as ddprt_init
   checks them, for hosts that take the same setting (ddp-run
   --simulated-link). Returns DDPRT_ERROR_INVALID_ARGUMENT for a text that
   is not one, and then, if `why` is not NULL, points *why at a message that
   says why (valid until this thread's next call). */
ddprt_status ddprt_parse_simulated_link(const char *text, double *gbps,
                                        double *latency_us, const char **why);

/* CUDA: a new ncclUniqueId in `id` (DDPRT_NCCL_UNIQUE_ID_BYTES bytes), for
   rank 0 to pass to every rank as ddprt_options.nccl_unique_id.
   DDPRT_ERROR_UNSUPPORTED in a runtime built without CUDA. Since 0.4.0. */
ddprt_status ddprt_nccl_unique_id(unsigned char *id);

typedef struct ddprt_context ddprt_context;
typedef struct ddprt_request ddprt_request;

/* Starts the runtime on this rank. Rank and world size come from MPI
   (initialized here unless the host already did; then it is finalized at
   process exit, so contexts can be created again after ddprt_finalize). On
   failure *context may still be set, so that ddprt_last_error can say why;
   finalize it. */
ddprt_status ddprt_init(const ddprt_options *options, ddprt_context **context);
/* Frees the context and everything it owns. Allreduces started and not
   waited for are completed first (within the timeout): their buffers must
   stay valid until it returns. */
ddprt_status ddprt_finalize(ddprt_context *context);
/* The options the context runs with (DDPRT_SIMULATED_LINK applied), into
   `options`, which the caller filled with ddprt_default_options: the fields
   that lie within its `size`. */
ddprt_status ddprt_get_options(const ddprt_context *context,
                               ddprt_options *options);

/* The message of the last failure on this context ("" if none). */
const char *ddprt_last_error(const ddprt_context *context);
/* A fixed name for a status ("DDPRT_ERROR_TIMEOUT"). */
const char *ddprt_status_string(ddprt_status status);

int ddprt_rank(const ddprt_context *context);
int ddprt_world_size(const ddprt_context *context);
ddprt_backend_kind ddprt_backend(const ddprt_context *context);

/* Waits until every call so far has completed on the device (CUDA), or
   fails with DDPRT_ERROR_TIMEOUT after the configured timeout. On the CPU
   backend: waits until every started allreduce has completed (and fails if
   the communicator broke); afterwards the runtime makes no MPI call until
   the next collective, so the host may call MPI itself. */
ddprt_status ddprt_synchronize(ddprt_context *context);

/* Waits until host code may read and write what the calls so far produced
   and consumed: every kernel, and every collective already waited for
   (ddprt_wait). Collectives started and not yet waited for keep running
   (their buffers belong to them until the wait). Compiled steps call it
   right before host code touches memory after runtime calls; fails with
   DDPRT_ERROR_TIMEOUT after the configured timeout. A no-op on the CPU
   backend, where calls are complete when they return. */
ddprt_status ddprt_host_barrier(ddprt_context *context);

/* Size in bytes of one element, 0 for an unknown dtype. */
size_t ddprt_dtype_size(ddprt_dtype dtype);

/*===--- Collectives ------------------------------------------------------===*/

/* In place over all ranks, for all `count` buffers as one bucket (they may
   mix dtypes). f16/bf16 partial sums are added in f32 and rounded back to
   the narrow type at each combine, as NCCL does; every rank gets
   bitwise-identical results. */
ddprt_status ddprt_allreduce(ddprt_context *context, ddprt_reduction reduction,
                             ddprt_role role, ddprt_buffer *buffers, int count);
/* The same, split: the buffers must stay valid and untouched until
   ddprt_wait returns. Requests complete in the order they were started
   (ddprt_allreduce keeps its place among them). On the CPU backend the
   allreduce progresses on the runtime's communication thread meanwhile;
   its errors (DDPRT_ERROR_MISMATCH, DDPRT_ERROR_TIMEOUT, ...) are reported
   by its ddprt_wait. */
ddprt_status ddprt_allreduce_start(ddprt_context *context,
                                   ddprt_reduction reduction, ddprt_role role,
                                   ddprt_buffer *buffers, int count,
                                   ddprt_request **request);
/* ddprt_allreduce and ddprt_allreduce_start over the ranks of `group`
   only: DDPRT_GROUP_NODE within this rank's node, DDPRT_GROUP_ACROSS_NODES
   exchanges one copy per node (see ddprt_group). Together they make a
   two-level allreduce: the mean within the node, then the mean across the
   nodes (compressed or not). DDPRT_GROUP_WORLD is ddprt_allreduce. Collectives
   within a node are not counted in ddprt_counters (they send nothing over
   the network); across nodes, every rank of a node counts what its node
   sends. The CUDA backend serves a group only where it is every rank (a
   job on one node, or of one rank per node), and refuses the others
   (DDPRT_ERROR_UNSUPPORTED). Since 0.3.0. */
ddprt_status ddprt_allreduce_group(ddprt_context *context, ddprt_group group,
                                   ddprt_reduction reduction, ddprt_role role,
                                   ddprt_buffer *buffers, int count);
ddprt_status ddprt_allreduce_group_start(ddprt_context *context,
                                         ddprt_group group,
                                         ddprt_reduction reduction,
                                         ddprt_role role, ddprt_buffer *buffers,
                                         int count, ddprt_request **request);

/* The number of nodes of the job and this rank's node's number of ranks
   (see ddprt_group); either pointer may be NULL. */
ddprt_status ddprt_node_layout(const ddprt_context *context, int *nodes,
                               int *ranks_on_node);

/* Waits for the request and frees it (also on failure). */
ddprt_status ddprt_wait(ddprt_context *context, ddprt_request *request);
/* *completed = 1 if the request has completed (on the device, for CUDA),
   else 0; it never waits or makes progress, and the request stays valid
   (ddprt_wait still frees it and reports its status). */
ddprt_status ddprt_request_completed(ddprt_context *context,
                                     ddprt_request *request,
                                     int32_t *completed);

/* Gathers every rank's `inputs` on every rank, for all `count` tensors as
   one collective: outputs[i] has inputs[i]'s dtype and world size times its
   numel, rank-major (rank r's inputs[i] at element r * inputs[i].numel).
   Any dtype of the list, integers included; every rank must pass the same
   sizes and dtypes (DDPRT_ERROR_MISMATCH otherwise). The counters add
   what this rank contributes (inputs[i].numel) to `role`. An output may
   not overlap an input, except that inputs[i] may be this rank's slice of
   outputs[i] (in place, as NCCL allows). Ordered as ddprt_allreduce is:
   after the allreduces started before it. */
ddprt_status ddprt_allgather(ddprt_context *context, ddprt_role role,
                             const ddprt_buffer *inputs,
                             const ddprt_buffer *outputs, int count);

/*===--- Scaling and casting ----------------------------------------------===*/

/* buffers[i] *= factor, in place. */
ddprt_status ddprt_scale(ddprt_context *context, ddprt_world_scale factor,
                         ddprt_buffer *buffers, int count);
/* outputs[i] = convert(inputs[i] * factor): converted to the wider type,
   multiplied there, converted to the output type (round to nearest even). */
ddprt_status ddprt_cast(ddprt_context *context, ddprt_world_scale factor,
                        const ddprt_buffer *inputs, ddprt_buffer *outputs,
                        int count);

/*===--- PowerSGD ---------------------------------------------------------===*/
/* `residuals` may be NULL (no error feedback); otherwise M_i = G_i + E_i is
   used without being stored. All matrices of one tensor share a dtype. */

/* P_i = M_i Q_i; M n x m, Q m x r, P n x r. */
ddprt_status ddprt_project(ddprt_context *context, const ddprt_matrix *matrices,
                           const ddprt_matrix *residuals,
                           const ddprt_matrix *qs, ddprt_matrix *ps, int count);
/* Q_i = M_i^T P_i; Q m x r. */
ddprt_status ddprt_backproject(ddprt_context *context,
                               const ddprt_matrix *matrices,
                               const ddprt_matrix *residuals,
                               const ddprt_matrix *ps, ddprt_matrix *qs,
                               int count);
/* Modified Gram-Schmidt over the columns, in place: v / (|v| + epsilon); a
   column of norm zero becomes zero. */
ddprt_status ddprt_orthogonalize(ddprt_context *context, ddprt_matrix *ps,
                                 int count, double epsilon);
/* M_hat_i = P_i Q_i^T into reconstructions[i]. With residuals (then
   matrices too): E_i = G_i + E_i - M_hat_i, in place, in the same pass.
   A reconstruction may alias its matrix G_i (in-place decompression).
   Non-finite values: with residuals, a tensor whose P_i or Q_i (summed over
   the ranks, so every rank sees the same) holds a NaN or an Inf keeps its
   E_i as it was (error feedback skips the step for it; its reconstruction
   is P_i Q_i^T, non-finite); the others are done as usual, and the call
   returns DDPRT_NONFINITE with the tensors named in ddprt_last_error. */
ddprt_status ddprt_reconstruct(ddprt_context *context, const ddprt_matrix *ps,
                               const ddprt_matrix *qs,
                               const ddprt_matrix *matrices,
                               ddprt_matrix *residuals,
                               ddprt_matrix *reconstructions, int count);
/* Per buffer i: all_finite[i] = 1 if no element is NaN or +-Inf, and
   any_nonzero[i] = 1 if some element is not zero (else 0); either array
   may be NULL. Waits for the data (on GPUs, a copy to the host). PowerSGD
   uses it to tell a usable Q from a collapsed (zero) or poisoned one. */
ddprt_status ddprt_inspect(ddprt_context *context, const ddprt_buffer *buffers,
                           int count, int32_t *all_finite,
                           int32_t *any_nonzero);
/* Standard normal samples, a pure function of (seed, stream, step, index):
   identical on every rank and across restarts. */
ddprt_status ddprt_random_normal(ddprt_context *context, ddprt_buffer *output,
                                 uint64_t seed, uint64_t stream, uint64_t step);

/*===--- Compiled kernels -------------------------------------------------===*/

/* Launches kernel `name` of `image` on the compute stream, in stream order
   with the runtime's own kernels and the collectives: a grid of grid_x *
   grid_y * grid_z blocks of block_x * block_y * block_z threads,
   `shared_bytes` of dynamic shared memory, `params` one pointer per kernel
   parameter (to its value). `image` is what the compiler embedded in the
   step (NUL-terminated PTX, or a cubin or fatbin); it is loaded once per
   context, the first time it is launched, and stays loaded until the
   context is finalized (it is keyed by its address, which must stay valid
   that long). A grid with no block launches nothing. Returns without
   waiting; ddprt_host_barrier waits. Steps lowered with
   ddp-lower-to-llvm{target=cuda} call it; the CPU backend answers
   DDPRT_ERROR_UNSUPPORTED. Since 0.4.0. */
ddprt_status ddprt_launch_kernel(ddprt_context *context, const void *image,
                                 const char *name, int64_t grid_x,
                                 int64_t grid_y, int64_t grid_z,
                                 int64_t block_x, int64_t block_y,
                                 int64_t block_z, int32_t shared_bytes,
                                 void **params);

/*===--- Sparsification ---------------------------------------------------===*/

/* Top-k selection: the k elements of `input` largest in magnitude, k =
   values->numel = indices->numel (1 <= k <= input->numel). Their positions
   go to `indices` (DDPRT_I32, only where input->numel fits in it, or
   DDPRT_I64), largest magnitude first, equal magnitudes in index order;
   their values to `values` (input's dtype, one of F32, F16, BF16, F64).
   The order is total and the same on every backend: magnitudes compare as
   the bits of |x|, so -0 equals +0 and a NaN is larger than any number (a
   non-finite gradient is selected, not hidden). The outputs must not
   overlap the input or each other. */
ddprt_status ddprt_top_k(ddprt_context *context, const ddprt_buffer *input,
                         ddprt_buffer *values, ddprt_buffer *indices);

/*===--- Dense linear algebra ---------------------------------------------===*/

/* A strided batch of matrix products, row-major as cblas_sgemm's
   CblasRowMajor: for b < batch,
     C_b = alpha op(A_b) op(B_b) + beta C_b,
   op(A_b) m x k, op(B_b) k x n, C_b m x n; op(X) is X, or X^T when
   transpose_x is nonzero (A_b is then stored k x m, B_b n x k). lda, ldb
   and ldc count the elements between two rows as stored (at least the
   stored row length, and at least 1); stride_a, stride_b and stride_c the
   elements between two matrices of the batch (0 repeats one matrix of A or
   B). DDPRT_F32 only. Compiled steps call it for their matmuls (the CPU
   backend: OpenBLAS, with ddprt_set_compute_threads' threads; CUDA:
   cuBLAS, strict f32, no TF32 rounding, on the compute stream). The
   library's blocked sums do not round as a loop over k in order would. */
ddprt_status ddprt_gemm(ddprt_context *context, ddprt_dtype dtype,
                        int transpose_a, int transpose_b, int64_t batch,
                        int64_t m, int64_t n, int64_t k, float alpha,
                        const void *a, int64_t lda, int64_t stride_a,
                        const void *b, int64_t ldb, int64_t stride_b,
                        float beta, void *c, int64_t ldc, int64_t stride_c);
/* The threads the CPU backend's dense linear algebra (ddprt_gemm) may use
   in this process, at least 1. ddp-run sets it from its --threads-per-rank
   (default: this node's cores divided by the ranks on it, less one for
   the rank's communication thread). The CUDA
   backend ignores it. */
ddprt_status ddprt_set_compute_threads(ddprt_context *context, int threads);

/*===--- Persistent state and checkpoints ---------------------------------===*/

typedef struct ddprt_state ddprt_state;

/* A zero-initialized buffer owned by the runtime (device memory on GPUs),
   named for checkpoints; creating an existing name returns it if dtype and
   size match, else DDPRT_ERROR_MISMATCH. The name must pass
   ddprt_name_problem. */
ddprt_status ddprt_state_get(ddprt_context *context, const char *name,
                             ddprt_dtype dtype, int64_t numel,
                             ddprt_state **state);
/* Why the `length` bytes at `name` cannot name a state or stand for {name}
   in a file pattern, or NULL if they can: a name is one file-name
   component, so it is not empty, "." or "..", and holds no '/', '\\', NUL
   or other control character (a name from outside must not lead a file out
   of its directory, and two names must not become one when cut at a NUL).
   The reason is a static string. */
const char *ddprt_name_problem(const char *name, size_t length);
/* The state's buffer. */
ddprt_buffer ddprt_state_buffer(const ddprt_state *state);
/* The state's data pointer (what ddprt_state_buffer returns in `data`), for
   callers that cannot take a struct by value. I64 states (step counters)
   are in host memory on every backend; the others in backend memory. */
void *ddprt_state_data(const ddprt_state *state);
/* destinations[i] = sources[i]; same dtype and size; host or backend memory
   on either side, ordered with the other calls. */
ddprt_status ddprt_copy(ddprt_context *context, const ddprt_buffer *sources,
                        ddprt_buffer *destinations, int count);
/* Writes every state of this rank to `path` (written to a temporary file
   and renamed, so a crash never leaves a half-written checkpoint). */
ddprt_status ddprt_checkpoint_save(ddprt_context *context, const char *path);
/* Restores every state in `path`; each must exist with the same dtype and
   size (bitwise round trip). */
ddprt_status ddprt_checkpoint_load(ddprt_context *context, const char *path);

/* Memory both the host and the backend address: 64-byte aligned host
   memory on the CPU backend, CUDA managed memory on the CUDA backend. For
   buffers that compiled host code and runtime calls share (ddp-run's
   inputs, and the allocations of a step run on a GPU). */
ddprt_status ddprt_alloc(ddprt_context *context, size_t bytes, void **pointer);
void ddprt_free(ddprt_context *context, void *pointer);
/* Memory of the backend alone, in stream order: on the CUDA backend device
   memory from the device's stream-ordered pool (cudaMallocAsync on the
   compute stream; the pool keeps what is freed for the next allocation
   instead of returning it to the driver), usable by every call and kernel
   enqueued after the allocation; ddprt_device_free gives it back after the
   work enqueued before the free, without waiting. The host must not read
   or write it (ddprt_copy does). On the CPU backend, 64-byte aligned host
   memory. Steps lowered for the GPU (ddp-lower-to-llvm{target=cuda})
   allocate the buffers only their kernels and runtime calls touch with it.
   Since 0.4.0. */
ddprt_status ddprt_device_alloc(ddprt_context *context, size_t bytes,
                                void **pointer);
ddprt_status ddprt_device_free(ddprt_context *context, void *pointer);
/*===--- Compiled code ---------------------------------------------------===*/
/* Code lowered from the ddp dialect (convert-ddp-to-llvm) calls the runtime
   with the current context and passes every status to ddprt_check.

   The current context and the error handler are process-wide, not
   per-thread, and setting and reading them is thread-safe (atomic): a rank
   of a job is a process with one context, and a host may start the runtime
   on one thread and run compiled steps on another (mlir-runner's loader,
   a thread pool); a thread_local context would be null there. Set the
   context before the first step; ddprt_finalize clears it if it is the
   context finalized. Two threads that run compiled steps at once must not
   share one context (calls on a context must not overlap). */
void ddprt_set_current_context(ddprt_context *context);
ddprt_context *ddprt_current_context(void);
/* Called by ddprt_check on a failure, on the thread that checked; `where`
   names the op and its source location. A host that cannot continue
   (ddp-run) stops the job here; if the handler returns, compiled code runs
   on with unspecified results. The handler and its `user` pointer are set
   together: a failure sees either the old pair or the new one. */
typedef void (*ddprt_error_handler)(ddprt_context *context, ddprt_status status,
                                    const char *where, void *user);
void ddprt_set_error_handler(ddprt_error_handler handler, void *user);
/* Nothing for DDPRT_OK; otherwise calls the handler, or without one prints
   the failure to stderr. */
void ddprt_check(ddprt_context *context, ddprt_status status,
                 const char *where);
/* A check of compiled code's own failed (a cf.assert: e.g. the size a
   user's hook returns, known only at run time): sets the context's last
   error to `message` and reports DDPRT_ERROR_INVALID_ARGUMENT at `where` as
   ddprt_check reports a failed call (the handler, or stderr). Compiled code
   aborts if it returns. */
void ddprt_fail(ddprt_context *context, const char *where,
                const char *message);
/* Compiled code found values that are not finite (NaN or Inf) and has
   recovered (a state reset to zeros) or passed them on (an average that is
   the data's): reports DDPRT_NONFINITE at `where` with `message`, as
   ddprt_reconstruct's skip is reported, through the handler (a host warns
   or, with --on-nonfinite=fail, stops the job), and counts it in
   ddprt_counters.nonfinite_skips. `this_rank_only`: what was found is this
   rank's own (its state), not the same on every rank (an average). */
void ddprt_report_nonfinite(ddprt_context *context, const char *where,
                            const char *message, int32_t this_rank_only);
/* During the handler's call for a DDPRT_NONFINITE: whether it is this
   rank's own (ddprt_report_nonfinite's this_rank_only), so that a host
   that says once what every rank saw still says what one rank saw. */
int32_t ddprt_nonfinite_is_this_rank_only(const ddprt_context *context);
/* Every function that code lowered from the ddp dialect calls, as
     X(name)
   The compiler declares each with the LLVM signature of its prototype in
   this header (convert-ddp-to-llvm derives it at compile time), and a host
   that runs compiled steps binds each by name (ddp-run's JIT and the slots
   of a step library): one list, so that an entry point the lowering uses
   cannot be missing from the host, nor declared with another signature. */
#define DDPRT_FOR_EACH_STEP_FUNCTION(X)                                        \
  X(ddprt_current_context)                                                     \
  X(ddprt_check)                                                               \
  X(ddprt_fail)                                                                \
  X(ddprt_report_nonfinite)                                                    \
  X(ddprt_world_size)                                                          \
  X(ddprt_host_barrier)                                                        \
  X(ddprt_allreduce)                                                           \
  X(ddprt_allreduce_start)                                                     \
  X(ddprt_allreduce_group)                                                     \
  X(ddprt_allreduce_group_start)                                               \
  X(ddprt_wait)                                                                \
  X(ddprt_allgather)                                                           \
  X(ddprt_scale)                                                               \
  X(ddprt_cast)                                                                \
  X(ddprt_copy)                                                                \
  X(ddprt_inspect)                                                             \
  X(ddprt_random_normal)                                                       \
  X(ddprt_top_k)                                                               \
  X(ddprt_launch_kernel)                                                       \
  X(ddprt_device_alloc)                                                        \
  X(ddprt_device_free)                                                         \
  X(ddprt_project)                                                             \
  X(ddprt_backproject)                                                         \
  X(ddprt_orthogonalize)                                                       \
  X(ddprt_reconstruct)                                                         \
  X(ddprt_state_get)                                                           \
  X(ddprt_state_data)                                                          \
  X(ddprt_count_uncompressed)
/*===--- Counters ---------------------------------------------------------===*/

/* A compression scheme's bucket of `elements` gradient elements is sent
   this step in another form (a quantized payload, selected values and
   their indices): adds them to ddprt_counters.elements_before_compression.
   Compiled code calls it once per bucket and step where the scheme's
   collectives (DDPRT_ROLE_COMPRESSED, which count as sent after compression
   only) are issued, so that the counters compare what the bucket would
   have sent with what it sent. */
ddprt_status ddprt_count_uncompressed(ddprt_context *context,
                                      int64_t elements);

typedef enum ddprt_phase {
  DDPRT_PHASE_COMMUNICATION = 0, /* inside collectives (and waits) */
  DDPRT_PHASE_COMPRESSION = 1,   /* project, backproject, orthogonalize,
                                    random_normal, top_k */
  DDPRT_PHASE_DECOMPRESSION = 2, /* reconstruct */
  DDPRT_PHASE_CAST = 3,          /* scale, cast */
  DDPRT_PHASE_COUNT = 4
} ddprt_phase;

/* Versioned as ddprt_options is: the caller fills `size` and `version`
   (DDPRT_COUNTERS_INITIALIZER or ddprt_default_counters) and
   ddprt_get_counters writes the fields that lie within `size`, so that
   later runtimes can append counters and still serve older callers.
   Counters from before 0.2.0 (six roles) are refused: rebuild the caller
   with this header. */
typedef struct ddprt_counters {
  size_t size;          /* sizeof(ddprt_counters) */
  unsigned int version; /* DDPRT_VERSION */
  /* Per role: collectives, elements and bytes this rank contributed. */
  uint64_t collectives[DDPRT_ROLE_COUNT];
  uint64_t elements_sent[DDPRT_ROLE_COUNT];
  uint64_t bytes_sent[DDPRT_ROLE_COUNT];
  /* Elements before and after compression, as PowerSGD's
     compression_stats() counts them: project adds n*m before and
     ddprt_count_uncompressed a scheme's bucket; DDPRT_ROLE_COMPRESSED
     collectives add what they send after only; other collectives add what
     they send to both. */
  uint64_t elements_before_compression;
  uint64_t elements_after_compression;
  /* Seconds spent in each phase on this rank: wall time inside the calls.
     For DDPRT_PHASE_COMMUNICATION on the CPU backend that is the time the
     caller waited (communication not hidden behind its compute), not the
     time the communication thread worked. On the CUDA backend that is the
     host's time to enqueue work (and, for DDPRT_PHASE_COMMUNICATION,
     ddprt_synchronize's wait); time kernels with CUDA events or a
     profiler. */
  double seconds[DDPRT_PHASE_COUNT];
  /* Tensors whose error feedback skipped a step because their averaged P or
     Q was not finite (DDPRT_NONFINITE), and what compiled code reported
     through ddprt_report_nonfinite (a state reset, an average). */
  uint64_t nonfinite_skips;
} ddprt_counters;

/* Zeros, with `size` and `version` filled (every field written out, so
   that -Wextra finds nothing to say in a caller's code). */
#define DDPRT_COUNTERS_INITIALIZER                                             \
  { sizeof(ddprt_counters), DDPRT_VERSION, {0}, {0}, {0}, 0, 0, {0.0}, 0 }

/* Fills `counters` with DDPRT_COUNTERS_INITIALIZER (inline, as
   ddprt_default_options, so that it writes the caller's struct). */
static inline void ddprt_default_counters(ddprt_counters *counters) {
  const ddprt_counters initial = DDPRT_COUNTERS_INITIALIZER;
  if (counters)
    *counters = initial;
}

/* This rank's counters so far, into `counters`, which the caller filled
   with ddprt_default_counters: the fields that lie within its `size`. A
   size that is no ddprt_counters this runtime knows (0 included: a struct
   not filled so) or a version that is none of its own or older ones is
   refused (DDPRT_ERROR_INVALID_ARGUMENT). */
ddprt_status ddprt_get_counters(const ddprt_context *context,
                                ddprt_counters *counters);
ddprt_status ddprt_reset_counters(ddprt_context *context);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* DDPRT_DDPRT_H */
