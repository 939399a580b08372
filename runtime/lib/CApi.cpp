//===- CApi.cpp - the C ABI over the backends -----------------------------===//
//
// Validates every argument (the backends trust what reaches them), checks
// that all ranks pass the same sizes, keeps counters and phase times, owns
// the persistent state and writes and reads checkpoints.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace ddprt;

/// What compiled code calls the runtime with, and what it reports
/// failures to (ddprt_set_current_context, ddprt_set_error_handler).
static ddprt_context *currentContext = nullptr;
static ddprt_error_handler errorHandler = nullptr;
static void *errorHandlerData = nullptr;

namespace {
/// Records `error` on the context and returns its status.
ddprt_status report(ddprt_context *context, const Error &error) {
  if (context)
    context->lastError = error ? error.message : std::string();
  return error.status;
}

/// Runs a backend call; an exception (out of memory) becomes an error, so
/// nothing escapes the C ABI.
template <typename Fn> Error guarded(Fn &&fn) {
  try {
    return fn();
  } catch (const std::exception &exception) {
    return fail(DDPRT_ERROR_BACKEND,
                std::string("the runtime ran out of resources: ") +
                    exception.what());
  }
}

Error invalid(const std::string &message) {
  return fail(DDPRT_ERROR_INVALID_ARGUMENT, message);
}

/// The integer a caller stored in an enum-typed argument or field. C
/// callers may store any int there; reading an out-of-range value as the
/// C++ enum type is undefined behaviour, so every enum that comes through
/// the C ABI is read as an int and validated before it is used as the enum.
template <typename Enum> int asInt(const Enum &value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized here");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

/// ddprt_dtype_size of a dtype read as an int: 0 if it is none.
size_t dtypeSize(int dtype) {
  switch (dtype) {
#define DDPRT_DTYPE_SIZE(NAME, value, bytes, kind, compute)                    \
  case DDPRT_##NAME:                                                           \
    return bytes;
    DDPRT_FOR_EACH_DTYPE(DDPRT_DTYPE_SIZE)
#undef DDPRT_DTYPE_SIZE
  }
  return 0;
}

/// The element types compute and collectives take (I64 is for state only).
bool knownDtype(int dtype) {
  switch (dtype) {
#define DDPRT_DTYPE_COMPUTE(NAME, value, bytes, kind, compute)                 \
  case DDPRT_##NAME:                                                           \
    return compute;
    DDPRT_FOR_EACH_DTYPE(DDPRT_DTYPE_COMPUTE)
#undef DDPRT_DTYPE_COMPUTE
  }
  return false;
}

std::string dtypeProblem(int dtype) {
  return dtype == DDPRT_I64 ? "i64 is only for state buffers"
                            : "unknown dtype " + std::to_string(dtype);
}

Error checkCount(const void *array, int count, const char *what) {
  if (count < 0)
    return invalid(std::string(what) + ": count " + std::to_string(count) +
                   " is negative");
  if (count > 0 && !array)
    return invalid(std::string(what) + ": the array of " +
                   std::to_string(count) + " is null");
  return Error::success();
}

Error checkBuffer(const ddprt_buffer &buffer, const char *what, int index) {
  std::string where = std::string(what) + " #" + std::to_string(index);
  if (!knownDtype(asInt(buffer.dtype)))
    return invalid(where + ": " + dtypeProblem(asInt(buffer.dtype)));
  if (buffer.numel < 0)
    return invalid(where + ": negative size " + std::to_string(buffer.numel));
  if (buffer.numel > INT64_MAX / int64_t(dtypeSize(asInt(buffer.dtype))))
    return invalid(where + ": " + std::to_string(buffer.numel) +
                   " elements are more bytes than a 64-bit size holds");
  if (buffer.numel > 0 && !buffer.data)
    return invalid(where + ": data is null");
  return Error::success();
}

Error checkBuffers(const ddprt_buffer *buffers, int count, const char *what) {
  DDPRT_TRY(checkCount(buffers, count, what));
  for (int i = 0; i < count; ++i)
    DDPRT_TRY(checkBuffer(buffers[i], what, i));
  return Error::success();
}

/// `dtype` is the validated dtype of the first matrix of the tuple.
Error checkMatrix(const ddprt_matrix &matrix, const char *what, int index,
                  int64_t rows, int64_t cols, int dtype) {
  std::string where = std::string(what) + " #" + std::to_string(index);
  if (asInt(matrix.dtype) != dtype)
    return invalid(where + ": dtype " + std::to_string(asInt(matrix.dtype)) +
                   " differs from the tensor's " + std::to_string(dtype));
  if (matrix.rows != rows || matrix.cols != cols)
    return invalid(where + " is " + std::to_string(matrix.rows) + "x" +
                   std::to_string(matrix.cols) + " but must be " +
                   std::to_string(rows) + "x" + std::to_string(cols));
  if (rows * cols > 0 && !matrix.data)
    return invalid(where + ": data is null");
  return Error::success();
}

Error checkFirstMatrix(const ddprt_matrix &matrix, const char *what,
                       int index) {
  if (!knownDtype(asInt(matrix.dtype)))
    return invalid(std::string(what) + " #" + std::to_string(index) + ": " +
                   dtypeProblem(asInt(matrix.dtype)));
  if (matrix.rows < 0 || matrix.cols < 0)
    return invalid(std::string(what) + " #" + std::to_string(index) +
                   ": negative size");
  return checkMatrix(matrix, what, index, matrix.rows, matrix.cols,
                     asInt(matrix.dtype));
}

double resolve(const ddprt_context *context, ddprt_world_scale factor) {
  int world = context->communicator->size();
  switch (factor) {
  case DDPRT_SCALE_NONE:
    return 1.0;
  case DDPRT_SCALE_INVERSE_WORLD_SIZE:
    return 1.0 / world;
  case DDPRT_SCALE_WORLD_SIZE:
    return double(world);
  }
  return 0.0;
}

Error checkScale(const ddprt_world_scale &factor) {
  int raw = asInt(factor);
  if (raw != DDPRT_SCALE_NONE && raw != DDPRT_SCALE_INVERSE_WORLD_SIZE &&
      raw != DDPRT_SCALE_WORLD_SIZE)
    return invalid("unknown world scale " + std::to_string(raw));
  return Error::success();
}

Error checkContext(const ddprt_context *context) {
  if (!context)
    return invalid("the context is null");
  if (!context->backend)
    return fail(DDPRT_ERROR_STATE, "the context failed to initialize");
  return Error::success();
}

/// Adds the time a call took to a phase.
class PhaseTimer {
public:
  PhaseTimer(ddprt_context *context, ddprt_phase phase)
      : context_(context), phase_(phase),
        start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    context_->counters.seconds[phase_] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
  }

private:
  ddprt_context *context_;
  ddprt_phase phase_;
  std::chrono::steady_clock::time_point start_;
};

/// Validates a bucket, checks all ranks agree on it, counts it.
Error prepareCollective(ddprt_context *context,
                        const ddprt_reduction &reduction,
                        const ddprt_role &role, const ddprt_buffer *buffers,
                        int count) {
  DDPRT_TRY(checkContext(context));
  if (asInt(reduction) != DDPRT_SUM && asInt(reduction) != DDPRT_MEAN)
    return invalid("unknown reduction " + std::to_string(asInt(reduction)));
  if (asInt(role) < 0 || asInt(role) >= DDPRT_ROLE_COUNT)
    return invalid("unknown role " + std::to_string(asInt(role)));
  DDPRT_TRY(checkBuffers(buffers, count, "allreduce buffer"));
  std::vector<int64_t> signature = {count, reduction};
  for (int i = 0; i < count; ++i) {
    signature.push_back(buffers[i].dtype);
    signature.push_back(buffers[i].numel);
  }
  DDPRT_TRY(context->communicator->checkSameOnAllRanks(signature, "allreduce"));
  ddprt_counters &counters = context->counters;
  uint64_t elements = 0, bytes = 0;
  for (int i = 0; i < count; ++i) {
    elements += uint64_t(buffers[i].numel);
    bytes += uint64_t(buffers[i].numel) * ddprt_dtype_size(buffers[i].dtype);
  }
  counters.collectives[role] += 1;
  counters.elements_sent[role] += elements;
  counters.bytes_sent[role] += bytes;
  counters.elements_after_compression += elements;
  if (role != DDPRT_ROLE_POWERSGD_P && role != DDPRT_ROLE_POWERSGD_Q)
    counters.elements_before_compression += elements;
  return Error::success();
}

/// Checks N (matrix, residual?, factor, output) tuples of a projection:
/// P = M Q (transpose = false) or Q = M^T P (true).
Error checkProjection(const ddprt_matrix *matrices,
                      const ddprt_matrix *residuals,
                      const ddprt_matrix *factors, const ddprt_matrix *outputs,
                      int count, bool transpose) {
  DDPRT_TRY(checkCount(matrices, count, "matrix"));
  DDPRT_TRY(checkCount(factors, count, "factor"));
  DDPRT_TRY(checkCount(outputs, count, "output"));
  for (int i = 0; i < count; ++i) {
    const ddprt_matrix &m = matrices[i];
    DDPRT_TRY(checkFirstMatrix(m, "matrix", i));
    if (residuals)
      DDPRT_TRY(
          checkMatrix(residuals[i], "residual", i, m.rows, m.cols, m.dtype));
    int64_t inner = transpose ? m.rows : m.cols;
    int64_t outer = transpose ? m.cols : m.rows;
    int64_t rank = factors[i].cols;
    if (rank < 0)
      return invalid("factor #" + std::to_string(i) + ": negative size");
    DDPRT_TRY(checkMatrix(factors[i], "factor", i, inner, rank, m.dtype));
    DDPRT_TRY(checkMatrix(outputs[i], "output", i, outer, rank, m.dtype));
  }
  return Error::success();
}

uint64_t checksum(const std::vector<char> &bytes) {
  uint64_t hash = 1469598103934665603ull; // FNV-1a
  for (char c : bytes) {
    hash ^= uint8_t(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

/// The whole file, with stdio: no exceptions, and a clear error for
/// directories and unreadable files.
Error readFile(const char *path, std::vector<char> &bytes) {
  auto ioError = [&](int code) {
    return fail(DDPRT_ERROR_IO, std::string("cannot read checkpoint '") + path +
                                    "': " + std::strerror(code));
  };
  std::FILE *file = std::fopen(path, "rb");
  if (!file)
    return ioError(errno);
  char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof(chunk), file)) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  bool failed = std::ferror(file);
  int code = errno;
  std::fclose(file);
  if (failed)
    return ioError(code == 0 ? EIO : code);
  return Error::success();
}

constexpr char kMagic[8] = {'D', 'D', 'P', 'R', 'T', 'C', 'K', '1'};

template <typename T> void append(std::vector<char> &out, const T &value) {
  const char *bytes = reinterpret_cast<const char *>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

/// Reads from a byte range, failing cleanly past its end.
struct Reader {
  const std::vector<char> &bytes;
  size_t offset = 0;
  bool read(void *out, size_t size) {
    if (offset + size > bytes.size())
      return false;
    std::memcpy(out, bytes.data() + offset, size);
    offset += size;
    return true;
  }
};
} // namespace

extern "C" {

void ddprt_default_options(ddprt_options *options) {
  if (!options)
    return;
  options->backend = DDPRT_BACKEND_CPU;
  options->timeout_seconds = 300.0;
  options->check_shapes = 1;
}

size_t ddprt_dtype_size(ddprt_dtype dtype) { return dtypeSize(asInt(dtype)); }

const char *ddprt_status_string(ddprt_status status) {
  switch (asInt(status)) {
  case DDPRT_OK:
    return "DDPRT_OK";
  case DDPRT_ERROR_INVALID_ARGUMENT:
    return "DDPRT_ERROR_INVALID_ARGUMENT";
  case DDPRT_ERROR_UNSUPPORTED:
    return "DDPRT_ERROR_UNSUPPORTED";
  case DDPRT_ERROR_COMMUNICATION:
    return "DDPRT_ERROR_COMMUNICATION";
  case DDPRT_ERROR_TIMEOUT:
    return "DDPRT_ERROR_TIMEOUT";
  case DDPRT_ERROR_MISMATCH:
    return "DDPRT_ERROR_MISMATCH";
  case DDPRT_ERROR_IO:
    return "DDPRT_ERROR_IO";
  case DDPRT_ERROR_BACKEND:
    return "DDPRT_ERROR_BACKEND";
  case DDPRT_ERROR_STATE:
    return "DDPRT_ERROR_STATE";
  case DDPRT_NONFINITE:
    return "DDPRT_NONFINITE";
  }
  return "DDPRT_UNKNOWN_STATUS";
}

ddprt_status ddprt_init(const ddprt_options *options, ddprt_context **result) {
  if (!result)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  auto context = std::make_unique<ddprt_context>();
  ddprt_default_options(&context->options);
  if (options)
    context->options = *options;
  *result = nullptr;
  const ddprt_options &opts = context->options;
  if (!(opts.timeout_seconds >= 0.0)) {
    *result = context.release();
    return report(*result, invalid("timeout_seconds must be >= 0"));
  }
  if (asInt(opts.backend) != DDPRT_BACKEND_CPU &&
      asInt(opts.backend) != DDPRT_BACKEND_CUDA) {
    *result = context.release();
    return report(*result, invalid("unknown backend " +
                                   std::to_string(asInt(opts.backend))));
  }
#if !defined(DDPRT_HAVE_CUDA)
  if (opts.backend == DDPRT_BACKEND_CUDA) {
    *result = context.release();
    return report(*result,
                  fail(DDPRT_ERROR_UNSUPPORTED,
                       "this build of the runtime has no CUDA backend"));
  }
#endif
  Error error = guarded(
      [&] { return Communicator::create(opts, context->communicator); });
  if (!error) {
#if defined(DDPRT_HAVE_CUDA)
    if (opts.backend == DDPRT_BACKEND_CUDA)
      error = guarded([&] {
        return createCudaBackend(*context->communicator, opts.timeout_seconds,
                                 context->backend);
      });
    else
#endif
      context->backend = createCpuBackend(*context->communicator);
  }
  *result = context.release();
  return report(*result, error);
}

ddprt_status ddprt_finalize(ddprt_context *context) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  // Freeing device memory waits for the device: first let the backend
  // drain it, within the timeout.
  if (context->backend)
    context->backend->shutdown();
  for (auto &entry : context->states) {
    if (entry.second->onHost)
      std::free(entry.second->data);
    else
      context->backend->deallocate(entry.second->data);
  }
  if (currentContext == context)
    currentContext = nullptr;
  context->states.clear();
  context->backend.reset();
  context->communicator.reset();
  delete context;
  return DDPRT_OK;
}

const char *ddprt_last_error(const ddprt_context *context) {
  return context ? context->lastError.c_str() : "the context is null";
}

int ddprt_rank(const ddprt_context *context) {
  return context && context->communicator ? context->communicator->rank() : -1;
}

int ddprt_world_size(const ddprt_context *context) {
  return context && context->communicator ? context->communicator->size() : 0;
}

ddprt_backend_kind ddprt_backend(const ddprt_context *context) {
  return context ? context->options.backend : DDPRT_BACKEND_CPU;
}

ddprt_status ddprt_allreduce(ddprt_context *context, ddprt_reduction reduction,
                             ddprt_role role, ddprt_buffer *buffers,
                             int count) {
  Error error = prepareCollective(context, reduction, role, buffers, count);
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMMUNICATION);
    error = guarded(
        [&] { return context->backend->allreduce(reduction, buffers, count); });
  }
  return report(context, error);
}

ddprt_status ddprt_allreduce_start(ddprt_context *context,
                                   ddprt_reduction reduction, ddprt_role role,
                                   ddprt_buffer *buffers, int count,
                                   ddprt_request **request) {
  Error error =
      request ? prepareCollective(context, reduction, role, buffers, count)
              : invalid("the request pointer is null");
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMMUNICATION);
    auto handle = std::make_unique<ddprt_request>();
    handle->role = role;
    error = guarded([&] {
      return context->backend->allreduceStart(reduction, buffers, count,
                                              handle->backendRequest);
    });
    if (!error)
      *request = handle.release();
  }
  return report(context, error);
}

ddprt_status ddprt_wait(ddprt_context *context, ddprt_request *request) {
  std::unique_ptr<ddprt_request> owned(request);
  Error error = checkContext(context);
  if (!error && !request)
    error = invalid("the request is null");
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMMUNICATION);
    error = guarded(
        [&] { return context->backend->wait(*request->backendRequest); });
  }
  return report(context, error);
}

ddprt_status ddprt_synchronize(ddprt_context *context) {
  Error error = checkContext(context);
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMMUNICATION);
    error = guarded([&] { return context->backend->synchronize(); });
  }
  return report(context, error);
}

ddprt_status ddprt_scale(ddprt_context *context, ddprt_world_scale factor,
                         ddprt_buffer *buffers, int count) {
  Error error = checkContext(context);
  if (!error)
    error = checkScale(factor);
  if (!error)
    error = checkBuffers(buffers, count, "buffer");
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_CAST);
    error = guarded([&] {
      return context->backend->scale(resolve(context, factor), buffers, count);
    });
  }
  return report(context, error);
}

ddprt_status ddprt_cast(ddprt_context *context, ddprt_world_scale factor,
                        const ddprt_buffer *inputs, ddprt_buffer *outputs,
                        int count) {
  Error error = checkContext(context);
  if (!error)
    error = checkScale(factor);
  if (!error)
    error = checkBuffers(inputs, count, "input");
  if (!error)
    error = checkBuffers(outputs, count, "output");
  for (int i = 0; !error && i < count; ++i)
    if (inputs[i].numel != outputs[i].numel)
      error = invalid("cast #" + std::to_string(i) + ": " +
                      std::to_string(inputs[i].numel) + " inputs but " +
                      std::to_string(outputs[i].numel) + " outputs");
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_CAST);
    error = guarded([&] {
      return context->backend->cast(resolve(context, factor), inputs, outputs,
                                    count);
    });
  }
  return report(context, error);
}

ddprt_status ddprt_project(ddprt_context *context, const ddprt_matrix *matrices,
                           const ddprt_matrix *residuals,
                           const ddprt_matrix *qs, ddprt_matrix *ps,
                           int count) {
  Error error = checkContext(context);
  if (!error)
    error = checkProjection(matrices, residuals, qs, ps, count, false);
  if (!error) {
    for (int i = 0; i < count; ++i)
      context->counters.elements_before_compression +=
          uint64_t(matrices[i].rows * matrices[i].cols);
    PhaseTimer timer(context, DDPRT_PHASE_COMPRESSION);
    error = guarded([&] {
      return context->backend->project(matrices, residuals, qs, ps, count);
    });
  }
  return report(context, error);
}

ddprt_status ddprt_backproject(ddprt_context *context,
                               const ddprt_matrix *matrices,
                               const ddprt_matrix *residuals,
                               const ddprt_matrix *ps, ddprt_matrix *qs,
                               int count) {
  Error error = checkContext(context);
  if (!error)
    error = checkProjection(matrices, residuals, ps, qs, count, true);
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMPRESSION);
    error = guarded([&] {
      return context->backend->backproject(matrices, residuals, ps, qs, count);
    });
  }
  return report(context, error);
}

ddprt_status ddprt_orthogonalize(ddprt_context *context, ddprt_matrix *ps,
                                 int count, double epsilon) {
  Error error = checkContext(context);
  if (!error && !(epsilon >= 0.0 && epsilon < HUGE_VAL))
    error = invalid("epsilon must be finite and >= 0");
  if (!error)
    error = checkCount(ps, count, "matrix");
  for (int i = 0; !error && i < count; ++i)
    error = checkFirstMatrix(ps[i], "matrix", i);
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMPRESSION);
    error = guarded(
        [&] { return context->backend->orthogonalize(ps, count, epsilon); });
  }
  return report(context, error);
}

ddprt_status ddprt_reconstruct(ddprt_context *context, const ddprt_matrix *ps,
                               const ddprt_matrix *qs,
                               const ddprt_matrix *matrices,
                               ddprt_matrix *residuals,
                               ddprt_matrix *reconstructions, int count) {
  Error error = checkContext(context);
  if (!error && (residuals != nullptr) != (matrices != nullptr))
    error = invalid("reconstruct needs both the matrices and the residuals, "
                    "or neither");
  if (!error)
    error = checkCount(ps, count, "P");
  if (!error)
    error = checkCount(qs, count, "Q");
  if (!error)
    error = checkCount(reconstructions, count, "reconstruction");
  for (int i = 0; !error && i < count; ++i) {
    const ddprt_matrix &p = ps[i];
    error = checkFirstMatrix(p, "P", i);
    if (!error)
      error = checkFirstMatrix(qs[i], "Q", i);
    if (!error &&
        (qs[i].cols != p.cols || asInt(qs[i].dtype) != asInt(p.dtype)))
      error = invalid("Q #" + std::to_string(i) + " must have " +
                      std::to_string(p.cols) + " columns and P's dtype");
    if (!error)
      error = checkMatrix(reconstructions[i], "reconstruction", i, p.rows,
                          qs[i].rows, asInt(p.dtype));
    if (!error && matrices)
      error = checkMatrix(matrices[i], "matrix", i, p.rows, qs[i].rows,
                          asInt(p.dtype));
    if (!error && residuals)
      error = checkMatrix(residuals[i], "residual", i, p.rows, qs[i].rows,
                          asInt(p.dtype));
  }
  std::string skipped;
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_DECOMPRESSION);
    error = guarded([&] {
      if (!residuals)
        return context->backend->reconstruct(ps, qs, matrices, residuals,
                                             reconstructions, count);
      // Error feedback keeps a tensor's E clean when its summed P or Q is
      // not finite: the check reads what was sent (r(n+m) elements, a
      // fraction r/m + r/n of the gradient), the same on every rank.
      std::vector<ddprt_buffer> factors;
      for (int i = 0; i < count; ++i) {
        factors.push_back({ps[i].data, ps[i].dtype, ps[i].rows * ps[i].cols});
        factors.push_back({qs[i].data, qs[i].dtype, qs[i].rows * qs[i].cols});
      }
      std::unique_ptr<bool[]> finite(new bool[factors.size()]);
      std::unique_ptr<bool[]> nonzero(new bool[factors.size()]);
      DDPRT_TRY(context->backend->inspect(factors.data(), int(factors.size()),
                                          finite.get(), nonzero.get()));
      std::vector<int> clean, poisoned;
      for (int i = 0; i < count; ++i)
        (finite[2 * i] && finite[2 * i + 1] ? clean : poisoned).push_back(i);
      if (poisoned.empty())
        return context->backend->reconstruct(ps, qs, matrices, residuals,
                                             reconstructions, count);
      auto pick = [](const auto *all, const std::vector<int> &indices) {
        std::vector<std::remove_const_t<std::remove_pointer_t<decltype(all)>>>
            out;
        for (int i : indices)
          out.push_back(all[i]);
        return out;
      };
      auto cleanPs = pick(ps, clean), cleanQs = pick(qs, clean),
           cleanMs = pick(matrices, clean), cleanEs = pick(residuals, clean),
           cleanOut = pick(reconstructions, clean);
      DDPRT_TRY(context->backend->reconstruct(
          cleanPs.data(), cleanQs.data(), cleanMs.data(), cleanEs.data(),
          cleanOut.data(), int(clean.size())));
      auto badPs = pick(ps, poisoned), badQs = pick(qs, poisoned),
           badOut = pick(reconstructions, poisoned);
      DDPRT_TRY(context->backend->reconstruct(badPs.data(), badQs.data(),
                                              nullptr, nullptr, badOut.data(),
                                              int(poisoned.size())));
      context->counters.nonfinite_skips += poisoned.size();
      for (int i : poisoned)
        skipped += std::string(skipped.empty() ? "" : ", ") + "#" +
                   std::to_string(i) + " (" + std::to_string(ps[i].rows) + "x" +
                   std::to_string(qs[i].rows) + ")";
      return Error::success();
    });
  }
  if (!error && !skipped.empty())
    error = fail(DDPRT_NONFINITE,
                 "non-finite values (NaN or Inf) in the averaged P or Q of "
                 "tensor " +
                     skipped + " of " + std::to_string(count) +
                     ": the error feedback skipped this step for it (its "
                     "state is unchanged; its output is not finite)");
  return report(context, error);
}

ddprt_status ddprt_inspect(ddprt_context *context, const ddprt_buffer *buffers,
                           int count, int32_t *all_finite,
                           int32_t *any_nonzero) {
  Error error = checkContext(context);
  if (!error)
    error = checkBuffers(buffers, count, "inspected buffer");
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMPRESSION);
    error = guarded([&] {
      std::unique_ptr<bool[]> finite(new bool[size_t(count) + 1]);
      std::unique_ptr<bool[]> nonzero(new bool[size_t(count) + 1]);
      DDPRT_TRY(context->backend->inspect(buffers, count, finite.get(),
                                          nonzero.get()));
      for (int i = 0; i < count; ++i) {
        if (all_finite)
          all_finite[i] = finite[i] ? 1 : 0;
        if (any_nonzero)
          any_nonzero[i] = nonzero[i] ? 1 : 0;
      }
      return Error::success();
    });
  }
  return report(context, error);
}

ddprt_status ddprt_random_normal(ddprt_context *context, ddprt_buffer *output,
                                 uint64_t seed, uint64_t stream,
                                 uint64_t step) {
  Error error = checkContext(context);
  if (!error)
    error = output ? checkBuffer(*output, "output", 0)
                   : invalid("the output is null");
  if (!error) {
    PhaseTimer timer(context, DDPRT_PHASE_COMPRESSION);
    error = guarded([&] {
      return context->backend->randomNormal(*output, seed, stream, step);
    });
  }
  return report(context, error);
}

static Error createState(ddprt_context *context, const char *name,
                         ddprt_dtype dtype, int64_t numel, ddprt_state **state);

ddprt_status ddprt_state_get(ddprt_context *context, const char *name,
                             ddprt_dtype dtype, int64_t numel,
                             ddprt_state **state) {
  Error error = checkContext(context);
  if (!error && (!name || !*name || !state))
    error = invalid("a state needs a non-empty name and a result pointer");
  if (!error && (dtypeSize(asInt(dtype)) == 0 || numel < 0 ||
                 numel > INT64_MAX / int64_t(dtypeSize(asInt(dtype)))))
    error = invalid(std::string("state '") + name +
                    "': unknown dtype, or a negative size or one whose bytes "
                    "a 64-bit size cannot hold");
  if (error)
    return report(context, error);
  // The map and the name allocate: failures become statuses, not throws.
  if ((error = guarded(
           [&] { return createState(context, name, dtype, numel, state); })))
    return report(context, error);
  return report(context, Error::success());
}

static Error createState(ddprt_context *context, const char *name,
                         ddprt_dtype dtype, int64_t numel,
                         ddprt_state **state) {
  auto found = context->states.find(name);
  if (found != context->states.end()) {
    ddprt_state &existing = *found->second;
    if (existing.dtype != dtype || existing.numel != numel)
      return fail(DDPRT_ERROR_MISMATCH,
                  std::string("state '") + name + "' exists with " +
                      std::to_string(existing.numel) + " elements of dtype " +
                      std::to_string(existing.dtype));
    *state = &existing;
    return Error::success();
  }
  auto created = std::make_unique<ddprt_state>();
  created->name = name;
  created->dtype = dtype;
  created->numel = numel;
  size_t bytes = size_t(numel) * ddprt_dtype_size(dtype);
  created->onHost = dtype == DDPRT_I64;
  if (created->onHost) {
    created->data = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (!created->data)
      return fail(DDPRT_ERROR_BACKEND,
                  std::string("state '") + name + "': out of host memory");
  } else {
    DDPRT_TRY(context->backend->allocateZeroed(bytes, &created->data));
  }
  *state = created.get();
  context->states[name] = std::move(created);
  return Error::success();
}

ddprt_buffer ddprt_state_buffer(const ddprt_state *state) {
  if (!state)
    return ddprt_buffer{nullptr, DDPRT_F32, 0};
  return ddprt_buffer{state->data, state->dtype, state->numel};
}

void *ddprt_state_data(const ddprt_state *state) {
  return state ? state->data : nullptr;
}

ddprt_status ddprt_copy(ddprt_context *context, const ddprt_buffer *sources,
                        ddprt_buffer *destinations, int count) {
  Error error = checkContext(context);
  if (!error)
    error = checkCount(sources, count, "ddprt_copy sources");
  if (!error)
    error = checkCount(destinations, count, "ddprt_copy destinations");
  for (int i = 0; !error && i < count; ++i) {
    const ddprt_buffer &from = sources[i], &to = destinations[i];
    if (asInt(from.dtype) != asInt(to.dtype) || from.numel != to.numel ||
        dtypeSize(asInt(from.dtype)) == 0 || from.numel < 0)
      error = invalid("ddprt_copy #" + std::to_string(i) +
                      ": the buffers differ in dtype or size");
    else if (from.numel > 0 && (!from.data || !to.data))
      error = invalid("ddprt_copy #" + std::to_string(i) + ": data is null");
  }
  for (int i = 0; !error && i < count; ++i)
    error = guarded([&] {
      return context->backend->copy(destinations[i].data, sources[i].data,
                                    size_t(sources[i].numel) *
                                        ddprt_dtype_size(sources[i].dtype));
    });
  return report(context, error);
}

ddprt_status ddprt_alloc(ddprt_context *context, size_t bytes, void **pointer) {
  Error error = checkContext(context);
  if (!error && !pointer)
    error = invalid("ddprt_alloc: the result pointer is null");
  if (!error)
    error = guarded(
        [&] { return context->backend->allocateShared(bytes, pointer); });
  return report(context, error);
}

void ddprt_free(ddprt_context *context, void *pointer) {
  if (context && context->backend && pointer)
    context->backend->deallocateShared(pointer);
}

void ddprt_set_current_context(ddprt_context *context) {
  currentContext = context;
}

ddprt_context *ddprt_current_context(void) { return currentContext; }

void ddprt_set_error_handler(ddprt_error_handler handler, void *user) {
  errorHandler = handler;
  errorHandlerData = user;
}

void ddprt_check(ddprt_context *context, ddprt_status status,
                 const char *where) {
  if (status == DDPRT_OK)
    return;
  if (errorHandler) {
    errorHandler(context, status, where, errorHandlerData);
    return;
  }
  std::fprintf(stderr, "ddprt: %s: %s: %s\n", where ? where : "?",
               ddprt_status_string(status),
               context ? context->lastError.c_str() : "no runtime context");
}

static ddprt_status checkpointSave(ddprt_context *context, const char *path) {
  Error error = checkContext(context);
  if (!error && (!path || !*path))
    error = invalid("the checkpoint path is empty");
  if (error)
    return report(context, error);
  std::vector<char> bytes(kMagic, kMagic + sizeof(kMagic));
  append(bytes, uint32_t(context->communicator->rank()));
  append(bytes, uint32_t(context->communicator->size()));
  append(bytes, uint64_t(context->states.size()));
  for (auto &[name, state] : context->states) {
    append(bytes, uint32_t(name.size()));
    bytes.insert(bytes.end(), name.begin(), name.end());
    append(bytes, uint32_t(state->dtype));
    append(bytes, int64_t(state->numel));
    size_t size = size_t(state->numel) * ddprt_dtype_size(state->dtype);
    size_t offset = bytes.size();
    bytes.resize(offset + size);
    if (state->onHost)
      std::memcpy(bytes.data() + offset, state->data, size);
    else if ((error = context->backend->copyToHost(bytes.data() + offset,
                                                   state->data, size)))
      return report(context, error);
  }
  append(bytes, checksum(bytes));
  // Write a temporary file and rename it: a crash leaves the old checkpoint.
  std::string temporary = std::string(path) + ".tmp." +
                          std::to_string(context->communicator->rank());
  {
    std::FILE *file = std::fopen(temporary.c_str(), "wb");
    bool written = file && std::fwrite(bytes.data(), 1, bytes.size(), file) ==
                               bytes.size();
    int savedErrno = errno;
    if (file && std::fclose(file) != 0 && written) {
      written = false;
      savedErrno = errno;
    }
    if (!written) {
      std::remove(temporary.c_str());
      return report(context, fail(DDPRT_ERROR_IO,
                                  "cannot write checkpoint '" + temporary +
                                      "': " + std::strerror(savedErrno)));
    }
  }
  if (std::rename(temporary.c_str(), path) != 0) {
    std::remove(temporary.c_str());
    return report(context, fail(DDPRT_ERROR_IO,
                                std::string("cannot rename checkpoint to '") +
                                    path + "': " + std::strerror(errno)));
  }
  return report(context, Error::success());
}

static ddprt_status checkpointLoad(ddprt_context *context, const char *path) {
  Error error = checkContext(context);
  if (!error && (!path || !*path))
    error = invalid("the checkpoint path is empty");
  if (error)
    return report(context, error);
  std::vector<char> bytes;
  if (Error readError = readFile(path, bytes))
    return report(context, readError);
  auto corrupt = [&](const std::string &why) {
    return report(context,
                  fail(DDPRT_ERROR_IO, std::string("checkpoint '") + path +
                                           "' is not valid: " + why));
  };
  if (bytes.size() < sizeof(kMagic) + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return corrupt("not a ddprt checkpoint");
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  std::vector<char> payload(bytes.begin(), bytes.end() - 8);
  if (checksum(payload) != stored)
    return corrupt("checksum mismatch (truncated or damaged)");
  Reader reader{payload, sizeof(kMagic)};
  uint32_t rank = 0, world = 0;
  uint64_t count = 0;
  if (!reader.read(&rank, 4) || !reader.read(&world, 4) ||
      !reader.read(&count, 8))
    return corrupt("truncated header");
  if (int(rank) != context->communicator->rank() ||
      int(world) != context->communicator->size())
    return report(context,
                  fail(DDPRT_ERROR_MISMATCH,
                       std::string("checkpoint '") + path + "' is rank " +
                           std::to_string(rank) + " of " +
                           std::to_string(world) + ", this is rank " +
                           std::to_string(context->communicator->rank()) +
                           " of " +
                           std::to_string(context->communicator->size())));
  if (count != context->states.size())
    return report(context,
                  fail(DDPRT_ERROR_MISMATCH,
                       std::string("checkpoint '") + path + "' has " +
                           std::to_string(count) + " states, the job has " +
                           std::to_string(context->states.size())));
  // Validate everything before touching any state.
  struct Entry {
    ddprt_state *state;
    size_t offset;
  };
  std::vector<Entry> entries;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t nameSize = 0, dtype = 0;
    int64_t numel = 0;
    if (!reader.read(&nameSize, 4) || nameSize > payload.size())
      return corrupt("truncated state name");
    std::string name(nameSize, '\0');
    if (!reader.read(name.data(), nameSize) || !reader.read(&dtype, 4) ||
        !reader.read(&numel, 8))
      return corrupt("truncated state header");
    auto found = context->states.find(name);
    if (found == context->states.end())
      return report(context, fail(DDPRT_ERROR_MISMATCH,
                                  "checkpoint state '" + name +
                                      "' does not exist in this job"));
    ddprt_state &state = *found->second;
    if (uint32_t(state.dtype) != dtype || state.numel != numel)
      return report(context, fail(DDPRT_ERROR_MISMATCH,
                                  "checkpoint state '" + name +
                                      "' has another dtype or size"));
    size_t size = size_t(numel) * ddprt_dtype_size(state.dtype);
    if (reader.offset + size > payload.size())
      return corrupt("truncated data of state '" + name + "'");
    entries.push_back({&state, reader.offset});
    reader.offset += size;
  }
  for (const Entry &entry : entries) {
    size_t size =
        size_t(entry.state->numel) * ddprt_dtype_size(entry.state->dtype);
    if (entry.state->onHost)
      std::memcpy(entry.state->data, payload.data() + entry.offset, size);
    else if ((error = context->backend->copyFromHost(
                  entry.state->data, payload.data() + entry.offset, size)))
      return report(context, error);
  }
  return report(context, Error::success());
}

/// Checkpoints hold a host copy of every state: running out of memory
/// there is an error, not an exception through the C ABI.
static ddprt_status noThrow(ddprt_context *context,
                            ddprt_status (*body)(ddprt_context *, const char *),
                            const char *path) {
  try {
    return body(context, path);
  } catch (const std::exception &exception) {
    return report(context, fail(DDPRT_ERROR_BACKEND,
                                std::string("checkpoint: out of resources: ") +
                                    exception.what()));
  }
}

ddprt_status ddprt_checkpoint_save(ddprt_context *context, const char *path) {
  return noThrow(context, checkpointSave, path);
}

ddprt_status ddprt_checkpoint_load(ddprt_context *context, const char *path) {
  return noThrow(context, checkpointLoad, path);
}

ddprt_status ddprt_get_counters(const ddprt_context *context,
                                ddprt_counters *counters) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  if (!counters) {
    context->lastError = "ddprt_get_counters: the output is null";
    return DDPRT_ERROR_INVALID_ARGUMENT;
  }
  *counters = context->counters;
  return DDPRT_OK;
}

ddprt_status ddprt_reset_counters(ddprt_context *context) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  context->counters = ddprt_counters{};
  return DDPRT_OK;
}

} // extern "C"
