//===- NonFinite.cpp - NaN and Inf in PowerSGD's factors ------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "NonFinite.h"

#include "Counters.h"

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace ddprt {

Error inspect(ddprt_context &context, const ddprt_buffer *buffers, int count,
              int32_t *allFinite, int32_t *anyNonzero) {
  return timed(&context, DDPRT_PHASE_COMPRESSION, [&] {
    std::unique_ptr<bool[]> finite(new bool[size_t(count) + 1]);
    std::unique_ptr<bool[]> nonzero(new bool[size_t(count) + 1]);
    DDPRT_TRY(
        context.backend->inspect(buffers, count, finite.get(), nonzero.get()));
    for (int i = 0; i < count; ++i) {
      if (allFinite)
        allFinite[i] = finite[i] ? 1 : 0;
      if (anyNonzero)
        anyNonzero[i] = nonzero[i] ? 1 : 0;
    }
    return Error::success();
  });
}

Error reconstruct(ddprt_context &context, const ddprt_matrix *ps,
                  const ddprt_matrix *qs, const ddprt_matrix *matrices,
                  ddprt_matrix *residuals, ddprt_matrix *reconstructions,
                  int count) {
  Backend &backend = *context.backend;
  std::string skipped;
  Error error = timed(&context, DDPRT_PHASE_DECOMPRESSION, [&] {
    if (!residuals)
      return backend.reconstruct(ps, qs, matrices, residuals, reconstructions,
                                 count);
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
    DDPRT_TRY(backend.inspect(factors.data(), int(factors.size()), finite.get(),
                              nonzero.get()));
    std::vector<int> clean, poisoned;
    for (int i = 0; i < count; ++i)
      (finite[2 * i] && finite[2 * i + 1] ? clean : poisoned).push_back(i);
    if (poisoned.empty())
      return backend.reconstruct(ps, qs, matrices, residuals, reconstructions,
                                 count);
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
    DDPRT_TRY(backend.reconstruct(cleanPs.data(), cleanQs.data(),
                                  cleanMs.data(), cleanEs.data(),
                                  cleanOut.data(), int(clean.size())));
    auto badPs = pick(ps, poisoned), badQs = pick(qs, poisoned),
         badOut = pick(reconstructions, poisoned);
    DDPRT_TRY(backend.reconstruct(badPs.data(), badQs.data(), nullptr, nullptr,
                                  badOut.data(), int(poisoned.size())));
    context.counters.nonfinite_skips += poisoned.size();
    for (int i : poisoned)
      skipped += std::string(skipped.empty() ? "" : ", ") + "#" +
                 std::to_string(i) + " (" + std::to_string(ps[i].rows) + "x" +
                 std::to_string(qs[i].rows) + ")";
    return Error::success();
  });
  if (!error && !skipped.empty())
    error = fail(DDPRT_NONFINITE,
                 "non-finite values (NaN or Inf) in the averaged P or Q of "
                 "tensor " +
                     skipped + " of " + std::to_string(count) +
                     ": the error feedback skipped this step for it (its "
                     "state is unchanged; its output is not finite)");
  return error;
}

} // namespace ddprt
