//===- Philox.h - counter-based random numbers ------------------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a keyed bijection of a 128-bit counter. Every sample is a pure
// function of (seed, stream, step, index), so every rank, and a run resumed
// from a checkpoint, draws the same values without communicating.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_PHILOX_H
#define DDPRT_PHILOX_H

#include <array>
#include <cmath>
#include <cstdint>

namespace ddprt {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                          std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t product0 = uint64_t(kMul0) * counter[0];
    uint64_t product1 = uint64_t(kMul1) * counter[2];
    counter = {
        uint32_t(product1 >> 32) ^ counter[1] ^ key[0], uint32_t(product1),
        uint32_t(product0 >> 32) ^ counter[3] ^ key[1], uint32_t(product0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

/// The key of the sequence (seed, stream): the seed keys one Philox round
/// of the stream, so distinct (seed, stream) pairs get unrelated keys.
inline std::array<uint32_t, 2> philoxKey(uint64_t seed, uint64_t stream) {
  std::array<uint32_t, 4> mixed =
      philox4x32({uint32_t(stream), uint32_t(stream >> 32), 0x5eedu, 0u},
                 {uint32_t(seed), uint32_t(seed >> 32)});
  return {mixed[0], mixed[1]};
}

/// Four standard normal samples for elements 4*block .. 4*block+3 of the
/// sequence keyed by `key` at `step`, by Box-Muller on two pairs of
/// uniforms. The 128-bit counter is (block, step).
inline std::array<double, 4> normalBlock(std::array<uint32_t, 2> key,
                                         uint64_t step, uint64_t block) {
  std::array<uint32_t, 4> counter = {uint32_t(block), uint32_t(block >> 32),
                                     uint32_t(step), uint32_t(step >> 32)};
  std::array<uint32_t, 4> bits = philox4x32(counter, key);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInv2To32 = 1.0 / 4294967296.0;
  std::array<double, 4> out;
  for (int pair = 0; pair < 2; ++pair) {
    double u1 = (double(bits[2 * pair]) + 1.0) * kInv2To32; // (0, 1]
    double u2 = double(bits[2 * pair + 1]) * kInv2To32;     // [0, 1)
    double radius = std::sqrt(-2.0 * std::log(u1));
    out[2 * pair] = radius * std::cos(kTwoPi * u2);
    out[2 * pair + 1] = radius * std::sin(kTwoPi * u2);
  }
  return out;
}

} // namespace ddprt

#endif // DDPRT_PHILOX_H
