//===- Philox.h - counter-based random numbers ------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a keyed bijection of a 128-bit counter. Every sample is a pure
// function of (seed, stream, step, index), so every rank, and a run resumed
// from a checkpoint, draws the same values without communicating.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_PHILOX_H
#define DDPRT_PHILOX_H

#include <cmath>
#include <cstdint>

#include "HostDevice.h"

namespace ddprt {

/// Four 32-bit words (a counter, or the output) and a 64-bit key, as plain
/// structs so that the same code runs on the host and on CUDA devices.
struct PhiloxWords {
  uint32_t w[4];
};
struct PhiloxKey {
  uint32_t k[2];
};

DDPRT_HOST_DEVICE inline PhiloxWords philox(PhiloxWords counter,
                                            PhiloxKey key) {
  const uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  const uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t product0 = uint64_t(kMul0) * counter.w[0];
    uint64_t product1 = uint64_t(kMul1) * counter.w[2];
    PhiloxWords next = {{uint32_t(product1 >> 32) ^ counter.w[1] ^ key.k[0],
                         uint32_t(product1),
                         uint32_t(product0 >> 32) ^ counter.w[3] ^ key.k[1],
                         uint32_t(product0)}};
    counter = next;
    key.k[0] += kWeyl0;
    key.k[1] += kWeyl1;
  }
  return counter;
}

/// The key of the sequence (seed, stream): the seed keys one Philox call on
/// the stream, so distinct (seed, stream) pairs get unrelated keys.
DDPRT_HOST_DEVICE inline PhiloxKey philoxKeyFor(uint64_t seed,
                                                uint64_t stream) {
  PhiloxWords mixed =
      philox({{uint32_t(stream), uint32_t(stream >> 32), 0x5eedu, 0u}},
             {{uint32_t(seed), uint32_t(seed >> 32)}});
  return {{mixed.w[0], mixed.w[1]}};
}

/// Standard normal sample `lane` (0..3) of block `block` of the sequence
/// keyed by `key` at `step`: Box-Muller on two pairs of uniforms from one
/// Philox call on the counter (block, step).
DDPRT_HOST_DEVICE inline void normalQuad(PhiloxKey key, uint64_t step,
                                         uint64_t block, double out[4]) {
  PhiloxWords bits = philox({{uint32_t(block), uint32_t(block >> 32),
                              uint32_t(step), uint32_t(step >> 32)}},
                            key);
  const double kTwoPi = 6.283185307179586476925286766559;
  const double kInv2To32 = 1.0 / 4294967296.0;
  for (int pair = 0; pair < 2; ++pair) {
    double u1 = (double(bits.w[2 * pair]) + 1.0) * kInv2To32; // (0, 1]
    double u2 = double(bits.w[2 * pair + 1]) * kInv2To32;     // [0, 1)
    double radius = ::sqrt(-2.0 * ::log(u1));
    out[2 * pair] = radius * ::cos(kTwoPi * u2);
    out[2 * pair + 1] = radius * ::sin(kTwoPi * u2);
  }
}

} // namespace ddprt

#endif // DDPRT_PHILOX_H
