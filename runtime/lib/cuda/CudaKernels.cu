//===- CudaKernels.cu - the compression kernels on NVIDIA GPUs ------------===//
//
// Bytes and bounds (per tensor, n x m gradient, rank r <= 8, element size s):
//  - scale/cast: reads and writes n*m elements once: bandwidth-bound.
//  - project (G+E)Q: reads G and E once (2nms bytes), Q from cache: bound by
//    reading G and E.
//  - backproject (G+E)^T P: the same reads, plus partial sums of
//    (n/kRowsPerChunk) * m * r floats written and read once.
//  - reconstruct + residual: reads G, E, P, Q, writes M_hat and E' (4nms):
//    bandwidth-bound; M + E is never stored.
//  - orthogonalize: one block per matrix, r passes over n*r elements.
// Every reduction has a fixed order, so results are bitwise reproducible.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "../Numeric.h"
#include "../Philox.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace ddprt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTensorsPerLaunch = 96;
constexpr int kRowsPerChunk = 128;
constexpr int kMaxRankPerLaunch = 8;

//===--- Element types
//------------------------------------------------------===//

template <typename T> struct Device;
template <> struct Device<float> {
  using Compute = float;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
template <> struct Device<double> {
  using Compute = double;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
template <> struct Device<__half> {
  using Compute = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Device<__nv_bfloat16> {
  using Compute = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) {
    return __float2bfloat16_rn(v);
  }
};

/// Calls fn(T{}) with the device storage type of `dtype`.
template <typename Fn> cudaError_t dispatch(ddprt_dtype dtype, Fn &&fn) {
  switch (dtype) {
  case DDPRT_F32:
    return fn(float{});
  case DDPRT_F64:
    return fn(double{});
  case DDPRT_F16:
    return fn(__half{});
  case DDPRT_BF16:
    return fn(__nv_bfloat16{});
  case DDPRT_I64: // state only: the C API keeps it from the kernels
    break;
  }
  return cudaErrorInvalidValue;
}

//===--- Work distribution
//--------------------------------------------------===//

/// The tensors of one launch; block b works on the tensor t with
/// firstBlock[t] <= b < firstBlock[t + 1]. Passed by value as a kernel
/// parameter (a few KB; CUDA 12.1+ allows 32 KB).
template <typename Tensor> struct Launch {
  Tensor tensors[kTensorsPerLaunch];
  int64_t firstBlock[kTensorsPerLaunch + 1];
  int count;
};

/// CUDA 12.1+ (Volta and newer) takes up to 32764 bytes of kernel
/// parameters; the kernels add at most two 8-byte scalars to a Launch.
constexpr size_t kMaxLaunchBytes = 32764 - 2 * sizeof(int64_t);

template <typename Tensor>
__device__ int findTensor(const Launch<Tensor> &launch, int64_t block) {
  int lo = 0, hi = launch.count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (launch.firstBlock[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// Splits `tensors` into launches of at most kTensorsPerLaunch and runs
/// `kernel` on each; `blocksOf(tensor)` says how many blocks a tensor needs.
template <typename Tensor, typename BlocksOf, typename Kernel>
cudaError_t launchAll(const std::vector<Tensor> &tensors, BlocksOf blocksOf,
                      Kernel kernel, cudaStream_t) {
  static_assert(sizeof(Launch<Tensor>) <= kMaxLaunchBytes,
                "a Launch must fit in the kernel parameters");
  for (size_t begin = 0; begin < tensors.size(); begin += kTensorsPerLaunch) {
    Launch<Tensor> launch{};
    launch.count =
        int(std::min<size_t>(kTensorsPerLaunch, tensors.size() - begin));
    int64_t blocks = 0;
    for (int t = 0; t < launch.count; ++t) {
      launch.tensors[t] = tensors[begin + t];
      launch.firstBlock[t] = blocks;
      blocks += std::max<int64_t>(1, blocksOf(launch.tensors[t]));
    }
    launch.firstBlock[launch.count] = blocks;
    // `kernel` launches with a grid capped at 2^20 blocks; the kernels loop
    // over the blocks they stand for.
    kernel(launch, blocks);
    if (cudaError_t error = cudaGetLastError())
      return error;
  }
  return cudaSuccess;
}

//===--- scale, cast
//--------------------------------------------------------===//

struct Elementwise {
  const void *in;
  void *out;
  int64_t numel;
};
constexpr int kElementsPerThread = 8;
constexpr int64_t kElementsPerBlock = int64_t(kThreads) * kElementsPerThread;

/// Eight consecutive elements through 16-byte accesses (sizeof(T) * 8 is
/// 16, 32 or 64 bytes), when the tensor starts 16-byte aligned.
template <typename T> struct Vector8 {
  T value[8];
};
template <typename T>
__device__ void load8(const T *source, bool aligned, int64_t valid,
                      Vector8<T> &out) {
  if (aligned && valid >= 8) {
    constexpr int kWords = int(sizeof(T)) * 8 / 16;
    uint4 raw[kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w)
      raw[w] = reinterpret_cast<const uint4 *>(source)[w];
    memcpy(&out, raw, sizeof(out));
    return;
  }
#pragma unroll
  for (int k = 0; k < 8; ++k)
    if (k < valid)
      out.value[k] = source[k];
}
template <typename T>
__device__ void store8(T *target, bool aligned, int64_t valid,
                       const Vector8<T> &in) {
  if (aligned && valid >= 8) {
    constexpr int kWords = int(sizeof(T)) * 8 / 16;
    uint4 raw[kWords];
    memcpy(raw, &in, sizeof(in));
#pragma unroll
    for (int w = 0; w < kWords; ++w)
      reinterpret_cast<uint4 *>(target)[w] = raw[w];
    return;
  }
#pragma unroll
  for (int k = 0; k < 8; ++k)
    if (k < valid)
      target[k] = in.value[k];
}

/// convert(product) to Out; from f64 to a narrow type through f32 rounded to
/// odd.
template <typename Out, typename C> __device__ Out convertTo(C product) {
  constexpr bool narrow =
      std::is_same_v<Out, __half> || std::is_same_v<Out, __nv_bfloat16>;
  if constexpr (narrow && std::is_same_v<C, double>)
    return Device<Out>::store(roundToOddFloat(product));
  else
    return Device<Out>::store(typename Device<Out>::Compute(product));
}

/// out = convert(in * factor), the product in the wider type C. Each thread
/// converts 8 consecutive elements with 16-byte loads and stores.
template <typename In, typename Out, typename C>
__global__ void castKernel(Launch<Elementwise> launch, int64_t blocks,
                           C factor) {
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const Elementwise &e = launch.tensors[t];
    const In *in = static_cast<const In *>(e.in);
    Out *out = static_cast<Out *>(e.out);
    bool aligned = reinterpret_cast<uintptr_t>(in) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out) % 16 == 0;
    int64_t base = (block - launch.firstBlock[t]) * kElementsPerBlock +
                   int64_t(threadIdx.x) * kElementsPerThread;
    int64_t valid = e.numel - base;
    if (valid <= 0)
      continue;
    Vector8<In> values;
    load8(in + base, aligned, valid, values);
    Vector8<Out> results;
#pragma unroll
    for (int k = 0; k < 8; ++k)
      results.value[k] =
          convertTo<Out>(C(Device<In>::load(values.value[k])) * factor);
    store8(out + base, aligned, valid, results);
  }
}

//===--- project: P = (G + E) Q
//---------------------------------------------===//

struct Projection {
  const void *g, *e, *factor;
  void *out;
  int64_t n, m, r;
  int64_t column; // first column of the factor this launch computes
};

template <typename C> __device__ C warpSum(C value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

/// One warp per row of G: the lanes read the row coalesced, each keeps R
/// partial sums, and a shuffle reduction finishes them.
template <typename T, int R, bool HasResidual>
__global__ void projectKernel(Launch<Projection> launch, int64_t blocks) {
  using C = typename Device<T>::Compute;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warpsPerBlock = kThreads / 32;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const Projection &p = launch.tensors[t];
    int64_t row = (block - launch.firstBlock[t]) * warpsPerBlock + warp;
    if (row >= p.n)
      continue;
    const T *g = static_cast<const T *>(p.g) + row * p.m;
    const T *e =
        HasResidual ? static_cast<const T *>(p.e) + row * p.m : nullptr;
    const T *q = static_cast<const T *>(p.factor);
    int cols = int((p.r - p.column < R ? p.r - p.column : R));
    C acc[R];
#pragma unroll
    for (int k = 0; k < R; ++k)
      acc[k] = C(0);
    for (int64_t j = lane; j < p.m; j += 32) {
      C v = Device<T>::load(g[j]);
      if (HasResidual)
        v += Device<T>::load(e[j]);
      const T *qRow = q + j * p.r + p.column;
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (k < cols)
          acc[k] += v * Device<T>::load(qRow[k]);
    }
#pragma unroll
    for (int k = 0; k < R; ++k) {
      C total = warpSum(acc[k]);
      if (lane == 0 && k < cols)
        static_cast<T *>(p.out)[row * p.r + p.column + k] =
            Device<T>::store(total);
    }
  }
}

//===--- backproject: Q = (G + E)^T P
//---------------------------------------===//

struct BackProjection {
  const void *g, *e, *factor;
  void *out;
  float *partials; // [chunks][m][R] for this tensor (f64: double)
  int64_t n, m, r, column, chunks, tiles;
};

/// Block = (chunk of kRowsPerChunk rows) x (tile of kThreads columns); each
/// thread owns one column and sums its rows; partials go to scratch, and a
/// second kernel adds the chunks in order (deterministic, no atomics).
template <typename T, int R, bool HasResidual>
__global__ void backprojectPartialKernel(Launch<BackProjection> launch,
                                         int64_t blocks) {
  using C = typename Device<T>::Compute;
  __shared__ C pTile[kRowsPerChunk][R];
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const BackProjection &b = launch.tensors[t];
    int64_t local = block - launch.firstBlock[t];
    int64_t chunk = local / b.tiles, tile = local % b.tiles;
    int64_t rowBegin = chunk * kRowsPerChunk;
    int64_t rows = (b.n - rowBegin < kRowsPerChunk ? b.n - rowBegin
                                                   : int64_t(kRowsPerChunk));
    int cols = int((b.r - b.column < R ? b.r - b.column : R));
    const T *p = static_cast<const T *>(b.factor);
    __syncthreads();
    for (int index = threadIdx.x; index < kRowsPerChunk * R;
         index += blockDim.x) {
      int i = index / R, k = index % R;
      pTile[i][k] =
          (i < rows && k < cols)
              ? Device<T>::load(p[(rowBegin + i) * b.r + b.column + k])
              : C(0);
    }
    __syncthreads();
    int64_t j = tile * kThreads + threadIdx.x;
    if (j >= b.m)
      continue;
    C acc[R];
#pragma unroll
    for (int k = 0; k < R; ++k)
      acc[k] = C(0);
    const T *g = static_cast<const T *>(b.g);
    const T *e = static_cast<const T *>(b.e);
    for (int64_t i = 0; i < rows; ++i) {
      int64_t index = (rowBegin + i) * b.m + j;
      C v = Device<T>::load(g[index]);
      if (HasResidual)
        v += Device<T>::load(e[index]);
#pragma unroll
      for (int k = 0; k < R; ++k)
        acc[k] += v * pTile[i][k];
    }
    C *partials = reinterpret_cast<C *>(b.partials);
#pragma unroll
    for (int k = 0; k < R; ++k)
      partials[(chunk * b.m + j) * R + k] = acc[k];
  }
}

template <typename T, int R>
__global__ void backprojectSumKernel(Launch<BackProjection> launch,
                                     int64_t blocks) {
  using C = typename Device<T>::Compute;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const BackProjection &b = launch.tensors[t];
    int64_t j = (block - launch.firstBlock[t]) * kThreads + threadIdx.x;
    if (j >= b.m)
      continue;
    const C *partials = reinterpret_cast<const C *>(b.partials);
    int cols = int((b.r - b.column < R ? b.r - b.column : R));
    for (int k = 0; k < cols; ++k) {
      C sum = C(0);
      for (int64_t chunk = 0; chunk < b.chunks; ++chunk)
        sum += partials[(chunk * b.m + j) * R + k];
      static_cast<T *>(b.out)[j * b.r + b.column + k] = Device<T>::store(sum);
    }
  }
}

//===--- orthogonalize
//------------------------------------------------------===//

struct Orthogonalization {
  void *data;
  double *work; // n x r working copy in f64
  int64_t n, r;
};

/// Sum over the block, in a fixed order.
__device__ double blockSum(double value, double *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}

__device__ double blockMax(double value, double *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] =
          fmax(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}

/// One block per matrix: the same modified Gram-Schmidt as the CPU kernel
/// (scaled norms, zero columns stay zero, non-finite columns become NaN),
/// in f64 on a working copy.
template <typename T>
__global__ void orthogonalizeKernel(Launch<Orthogonalization> launch,
                                    int64_t blocks, double epsilon) {
  __shared__ double shared[kThreads];
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    const Orthogonalization &o = launch.tensors[findTensor(launch, block)];
    T *data = static_cast<T *>(o.data);
    double *a = o.work;
    int64_t n = o.n, r = o.r;
    for (int64_t i = threadIdx.x; i < n * r; i += blockDim.x)
      a[i] = double(Device<T>::load(data[i]));
    __syncthreads();
    for (int64_t j = 0; j < r; ++j) {
      double largest = 0.0, nonFinite = 0.0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        double v = a[i * r + j];
        if (!isfinite(v))
          nonFinite = 1.0;
        else
          largest = fmax(largest, fabs(v));
      }
      largest = blockMax(largest, shared);
      nonFinite = blockMax(nonFinite, shared);
      if (nonFinite == 0.0 && largest == 0.0) {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
          a[i * r + j] = 0.0;
        __syncthreads();
        continue;
      }
      double norm = nan("");
      if (nonFinite == 0.0) {
        double squares = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
          double scaled = a[i * r + j] / largest;
          squares += scaled * scaled;
        }
        norm = largest * sqrt(blockSum(squares, shared));
      }
      double inverse = 1.0 / (norm + epsilon);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        a[i * r + j] *= inverse;
      __syncthreads();
      for (int64_t k = j + 1; k < r; ++k) {
        double dot = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
          dot += a[i * r + j] * a[i * r + k];
        dot = blockSum(dot, shared);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
          a[i * r + k] -= dot * a[i * r + j];
        __syncthreads();
      }
    }
    for (int64_t i = threadIdx.x; i < n * r; i += blockDim.x)
      data[i] = Device<T>::store(typename Device<T>::Compute(a[i]));
    __syncthreads();
  }
}

//===--- reconstruct (+ residual)
//-------------------------------------------===//

struct Reconstruction {
  const void *p, *q, *g;
  void *e, *out;
  int64_t n, m, r;
};

/// Thread per element of M_hat; with the residual, E' = G + E - M_hat in
/// the same pass (`out` may alias `g`: each element is read before it is
/// written, by the same thread).
template <typename T, bool HasResidual>
__global__ void reconstructKernel(Launch<Reconstruction> launch,
                                  int64_t blocks) {
  using C = typename Device<T>::Compute;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const Reconstruction &c = launch.tensors[t];
    int64_t index = (block - launch.firstBlock[t]) * kThreads + threadIdx.x;
    if (index >= c.n * c.m)
      continue;
    int64_t i = index / c.m, j = index % c.m;
    const T *p = static_cast<const T *>(c.p) + i * c.r;
    const T *q = static_cast<const T *>(c.q) + j * c.r;
    C mHat = C(0);
    for (int64_t k = 0; k < c.r; ++k)
      mHat += Device<T>::load(p[k]) * Device<T>::load(q[k]);
    if (HasResidual) {
      T *e = static_cast<T *>(c.e);
      C sum = Device<T>::load(static_cast<const T *>(c.g)[index]) +
              Device<T>::load(e[index]);
      e[index] = Device<T>::store(sum - mHat);
    }
    static_cast<T *>(c.out)[index] = Device<T>::store(mHat);
  }
}

//===--- random normal
//------------------------------------------------------===//

template <typename T>
__global__ void randomNormalKernel(T *out, int64_t numel, PhiloxKey key,
                                   uint64_t step) {
  int64_t quad = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (quad * 4 >= numel)
    return;
  double samples[4];
  normalQuad(key, step, uint64_t(quad), samples);
  for (int k = 0; k < 4 && quad * 4 + k < numel; ++k)
    out[quad * 4 + k] =
        Device<T>::store(typename Device<T>::Compute(samples[k]));
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

//===--- Scratch
//------------------------------------------------------------===//

Scratch::~Scratch() {
  if (device_)
    cudaFree(device_);
}

cudaError_t Scratch::device(size_t bytes, void **pointer) {
  if (bytes > deviceBytes_) {
    if (device_) {
      // The stream may still use the old buffer.
      if (cudaError_t error = cudaDeviceSynchronize())
        return error;
      cudaFree(device_);
      device_ = nullptr;
      deviceBytes_ = 0;
    }
    if (cudaError_t error = cudaMalloc(&device_, bytes))
      return error;
    deviceBytes_ = bytes;
  }
  *pointer = device_;
  return cudaSuccess;
}

//===--- Launchers
//----------------------------------------------------------===//

cudaError_t cast(double factor, const ddprt_buffer *inputs,
                 const ddprt_buffer *outputs, int count, Scratch &,
                 cudaStream_t stream) {
  // Group by (input, output) dtype: one launch sequence per pair.
  for (int fromCode = 0; fromCode < 4; ++fromCode)
    for (int toCode = 0; toCode < 4; ++toCode) {
      std::vector<Elementwise> tensors;
      for (int i = 0; i < count; ++i)
        if (inputs[i].dtype == fromCode && outputs[i].dtype == toCode &&
            inputs[i].numel > 0)
          tensors.push_back({inputs[i].data, outputs[i].data, inputs[i].numel});
      if (tensors.empty())
        continue;
      bool wide = fromCode == DDPRT_F64 || toCode == DDPRT_F64;
      cudaError_t error = dispatch(ddprt_dtype(fromCode), [&](auto inTag) {
        using In = decltype(inTag);
        return dispatch(ddprt_dtype(toCode), [&](auto outTag) {
          using Out = decltype(outTag);
          auto blocksOf = [](const Elementwise &e) {
            return ceilDiv(e.numel, kElementsPerBlock);
          };
          if (wide)
            return launchAll(
                tensors, blocksOf,
                [&](const Launch<Elementwise> &launch, int64_t blocks) {
                  castKernel<In, Out, double>
                      <<<unsigned(std::min<int64_t>(blocks, 1 << 20)), kThreads,
                         0, stream>>>(launch, blocks, factor);
                },
                stream);
          return launchAll(
              tensors, blocksOf,
              [&](const Launch<Elementwise> &launch, int64_t blocks) {
                castKernel<In, Out, float>
                    <<<unsigned(std::min<int64_t>(blocks, 1 << 20)), kThreads,
                       0, stream>>>(launch, blocks, float(factor));
              },
              stream);
        });
      });
      if (error)
        return error;
    }
  return cudaSuccess;
}

cudaError_t scale(double factor, const ddprt_buffer *buffers, int count,
                  Scratch &scratch, cudaStream_t stream) {
  // An in-place cast to the same type.
  return cast(factor, buffers, buffers, count, scratch, stream);
}

namespace {
/// Dispatches a rank chunk R in {1, 2, 4, 8} for a kernel template.
template <typename Fn> cudaError_t withRank(int64_t cols, Fn &&fn) {
  if (cols <= 1)
    return fn(std::integral_constant<int, 1>{});
  if (cols <= 2)
    return fn(std::integral_constant<int, 2>{});
  if (cols <= 4)
    return fn(std::integral_constant<int, 4>{});
  return fn(std::integral_constant<int, 8>{});
}
} // namespace

cudaError_t project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *qs, const ddprt_matrix *ps, int count,
                    Scratch &, cudaStream_t stream) {
  // Tensors grouped by dtype and rank chunk: one launch sequence each.
  for (int code = 0; code < 4; ++code) {
    int64_t maxRank = 0;
    for (int i = 0; i < count; ++i)
      if (matrices[i].dtype == code)
        maxRank = std::max(maxRank, qs[i].cols);
    for (int64_t column = 0; column < maxRank; column += kMaxRankPerLaunch) {
      std::vector<Projection> tensors;
      int64_t widest = 0;
      for (int i = 0; i < count; ++i)
        if (matrices[i].dtype == code && qs[i].cols > column &&
            matrices[i].rows > 0) {
          tensors.push_back({matrices[i].data,
                             residuals ? residuals[i].data : nullptr,
                             qs[i].data, ps[i].data, matrices[i].rows,
                             matrices[i].cols, qs[i].cols, column});
          widest = std::max(widest, qs[i].cols - column);
        }
      if (tensors.empty())
        continue;
      cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
        using T = decltype(tag);
        return withRank(widest, [&](auto rankTag) {
          constexpr int R = decltype(rankTag)::value;
          auto blocksOf = [](const Projection &p) {
            return ceilDiv(p.n, kThreads / 32);
          };
          return launchAll(
              tensors, blocksOf,
              [&](const Launch<Projection> &launch, int64_t blocks) {
                unsigned grid = unsigned(std::min<int64_t>(blocks, 1 << 20));
                if (residuals)
                  projectKernel<T, R, true>
                      <<<grid, kThreads, 0, stream>>>(launch, blocks);
                else
                  projectKernel<T, R, false>
                      <<<grid, kThreads, 0, stream>>>(launch, blocks);
              },
              stream);
        });
      });
      if (error)
        return error;
    }
  }
  return cudaSuccess;
}

cudaError_t backproject(const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals, const ddprt_matrix *ps,
                        const ddprt_matrix *qs, int count, Scratch &scratch,
                        cudaStream_t stream) {
  for (int code = 0; code < 4; ++code) {
    int64_t maxRank = 0;
    for (int i = 0; i < count; ++i)
      if (matrices[i].dtype == code)
        maxRank = std::max(maxRank, ps[i].cols);
    size_t computeSize = code == DDPRT_F64 ? sizeof(double) : sizeof(float);
    for (int64_t column = 0; column < maxRank; column += kMaxRankPerLaunch) {
      std::vector<BackProjection> tensors;
      int64_t widest = 0;
      size_t partialBytes = 0;
      for (int i = 0; i < count; ++i)
        if (matrices[i].dtype == code && ps[i].cols > column &&
            matrices[i].cols > 0) {
          int64_t chunks =
              std::max<int64_t>(1, ceilDiv(matrices[i].rows, kRowsPerChunk));
          BackProjection b{matrices[i].data,
                           residuals ? residuals[i].data : nullptr,
                           ps[i].data,
                           qs[i].data,
                           nullptr,
                           matrices[i].rows,
                           matrices[i].cols,
                           ps[i].cols,
                           column,
                           chunks,
                           ceilDiv(matrices[i].cols, kThreads)};
          // Offsets now; the base pointer once the scratch is sized.
          b.partials = reinterpret_cast<float *>(partialBytes);
          partialBytes += size_t(chunks * matrices[i].cols) *
                          kMaxRankPerLaunch * computeSize;
          tensors.push_back(b);
          widest = std::max(widest, ps[i].cols - column);
        }
      if (tensors.empty())
        continue;
      void *base = nullptr;
      if (cudaError_t error = scratch.device(partialBytes, &base))
        return error;
      for (BackProjection &b : tensors)
        b.partials = reinterpret_cast<float *>(
            static_cast<char *>(base) + reinterpret_cast<size_t>(b.partials));
      cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
        using T = decltype(tag);
        // Partials are laid out for kMaxRankPerLaunch columns; R = 8 keeps
        // the layout one shape (columns past the rank are zero).
        constexpr int R = kMaxRankPerLaunch;
        auto partialBlocks = [](const BackProjection &b) {
          return b.chunks * b.tiles;
        };
        if (cudaError_t e = launchAll(
                tensors, partialBlocks,
                [&](const Launch<BackProjection> &launch, int64_t blocks) {
                  unsigned grid = unsigned(std::min<int64_t>(blocks, 1 << 20));
                  if (residuals)
                    backprojectPartialKernel<T, R, true>
                        <<<grid, kThreads, 0, stream>>>(launch, blocks);
                  else
                    backprojectPartialKernel<T, R, false>
                        <<<grid, kThreads, 0, stream>>>(launch, blocks);
                },
                stream))
          return e;
        auto sumBlocks = [](const BackProjection &b) { return b.tiles; };
        return launchAll(
            tensors, sumBlocks,
            [&](const Launch<BackProjection> &launch, int64_t blocks) {
              backprojectSumKernel<T, R>
                  <<<unsigned(std::min<int64_t>(blocks, 1 << 20)), kThreads, 0,
                     stream>>>(launch, blocks);
            },
            stream);
      });
      (void)widest;
      if (error)
        return error;
    }
  }
  return cudaSuccess;
}

cudaError_t orthogonalize(const ddprt_matrix *ps, int count, double epsilon,
                          Scratch &scratch, cudaStream_t stream) {
  size_t workBytes = 0;
  for (int i = 0; i < count; ++i)
    workBytes += size_t(ps[i].rows * ps[i].cols) * sizeof(double);
  void *base = nullptr;
  if (cudaError_t error = scratch.device(std::max<size_t>(workBytes, 8), &base))
    return error;
  for (int code = 0; code < 4; ++code) {
    std::vector<Orthogonalization> tensors;
    size_t offset = 0;
    for (int i = 0; i < count; ++i) {
      size_t bytes = size_t(ps[i].rows * ps[i].cols) * sizeof(double);
      if (ps[i].dtype == code && bytes > 0)
        tensors.push_back(
            {ps[i].data,
             reinterpret_cast<double *>(static_cast<char *>(base) + offset),
             ps[i].rows, ps[i].cols});
      offset += bytes;
    }
    if (tensors.empty())
      continue;
    cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
      using T = decltype(tag);
      return launchAll(
          tensors, [](const Orthogonalization &) { return int64_t(1); },
          [&](const Launch<Orthogonalization> &launch, int64_t blocks) {
            orthogonalizeKernel<T><<<unsigned(blocks), kThreads, 0, stream>>>(
                launch, blocks, epsilon);
          },
          stream);
    });
    if (error)
      return error;
  }
  return cudaSuccess;
}

cudaError_t reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                        const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals,
                        const ddprt_matrix *reconstructions, int count,
                        Scratch &, cudaStream_t stream) {
  for (int code = 0; code < 4; ++code) {
    std::vector<Reconstruction> tensors;
    for (int i = 0; i < count; ++i)
      if (ps[i].dtype == code && ps[i].rows * qs[i].rows > 0)
        tensors.push_back(
            {ps[i].data, qs[i].data, matrices ? matrices[i].data : nullptr,
             residuals ? residuals[i].data : nullptr, reconstructions[i].data,
             ps[i].rows, qs[i].rows, ps[i].cols});
    if (tensors.empty())
      continue;
    cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
      using T = decltype(tag);
      return launchAll(
          tensors,
          [](const Reconstruction &c) { return ceilDiv(c.n * c.m, kThreads); },
          [&](const Launch<Reconstruction> &launch, int64_t blocks) {
            unsigned grid = unsigned(std::min<int64_t>(blocks, 1 << 20));
            if (residuals)
              reconstructKernel<T, true>
                  <<<grid, kThreads, 0, stream>>>(launch, blocks);
            else
              reconstructKernel<T, false>
                  <<<grid, kThreads, 0, stream>>>(launch, blocks);
          },
          stream);
    });
    if (error)
      return error;
  }
  return cudaSuccess;
}

cudaError_t randomNormal(const ddprt_buffer &output, uint64_t seed,
                         uint64_t streamId, uint64_t step,
                         cudaStream_t stream) {
  if (output.numel == 0)
    return cudaSuccess;
  PhiloxKey key = philoxKeyFor(seed, streamId);
  int64_t quads = ceilDiv(output.numel, 4);
  unsigned grid = unsigned(ceilDiv(quads, kThreads));
  return dispatch(output.dtype, [&](auto tag) {
    using T = decltype(tag);
    randomNormalKernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<T *>(output.data), output.numel, key, step);
    return cudaGetLastError();
  });
}

} // namespace ddprt::cuda
