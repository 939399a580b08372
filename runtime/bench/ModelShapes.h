//===- ModelShapes.h - parameter shapes of benchmark models -----*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The trainable parameters of torchvision's ResNet-50 and of GPT-2 medium,
// in model.parameters() order, so both sides of a benchmark compress the
// same tensors.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_BENCH_MODELSHAPES_H
#define DDPRT_BENCH_MODELSHAPES_H

#include <cstdint>
#include <string>
#include <vector>

namespace ddprt::bench {

struct Parameter {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  /// PyTorch's matrix view: shape[0] x prod(shape[1:]).
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const { return rows() == 0 ? 0 : numel() / rows(); }
};

inline std::vector<Parameter> resnet50() {
  std::vector<Parameter> params;
  auto conv = [&](const std::string &name, int64_t out, int64_t in, int64_t k) {
    params.push_back({name + ".weight", {out, in, k, k}});
  };
  auto bn = [&](const std::string &name, int64_t c) {
    params.push_back({name + ".weight", {c}});
    params.push_back({name + ".bias", {c}});
  };
  conv("conv1", 64, 3, 7);
  bn("bn1", 64);
  int64_t in = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  const int blocks[4] = {3, 4, 6, 3};
  for (int layer = 0; layer < 4; ++layer) {
    int64_t width = widths[layer], out = width * 4;
    for (int block = 0; block < blocks[layer]; ++block) {
      std::string prefix =
          "layer" + std::to_string(layer + 1) + "." + std::to_string(block);
      conv(prefix + ".conv1", width, in, 1);
      bn(prefix + ".bn1", width);
      conv(prefix + ".conv2", width, width, 3);
      bn(prefix + ".bn2", width);
      conv(prefix + ".conv3", out, width, 1);
      bn(prefix + ".bn3", out);
      if (block == 0) {
        conv(prefix + ".downsample.0", out, in, 1);
        bn(prefix + ".downsample.1", out);
      }
      in = out;
    }
  }
  params.push_back({"fc.weight", {1000, 2048}});
  params.push_back({"fc.bias", {1000}});
  return params;
}

/// GPT-2 medium (24 layers, d = 1024, vocabulary 50257, context 1024), as
/// Hugging Face's GPT2Model lays out its parameters (Conv1D weights are
/// in x out).
inline std::vector<Parameter> gpt2Medium() {
  const int64_t d = 1024, layers = 24, vocab = 50257, positions = 1024;
  std::vector<Parameter> params;
  params.push_back({"wte.weight", {vocab, d}});
  params.push_back({"wpe.weight", {positions, d}});
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "h." + std::to_string(l);
    params.push_back({p + ".ln_1.weight", {d}});
    params.push_back({p + ".ln_1.bias", {d}});
    params.push_back({p + ".attn.c_attn.weight", {d, 3 * d}});
    params.push_back({p + ".attn.c_attn.bias", {3 * d}});
    params.push_back({p + ".attn.c_proj.weight", {d, d}});
    params.push_back({p + ".attn.c_proj.bias", {d}});
    params.push_back({p + ".ln_2.weight", {d}});
    params.push_back({p + ".ln_2.bias", {d}});
    params.push_back({p + ".mlp.c_fc.weight", {d, 4 * d}});
    params.push_back({p + ".mlp.c_fc.bias", {4 * d}});
    params.push_back({p + ".mlp.c_proj.weight", {4 * d, d}});
    params.push_back({p + ".mlp.c_proj.bias", {d}});
  }
  params.push_back({"ln_f.weight", {d}});
  params.push_back({"ln_f.bias", {d}});
  return params;
}

} // namespace ddprt::bench

#endif // DDPRT_BENCH_MODELSHAPES_H
