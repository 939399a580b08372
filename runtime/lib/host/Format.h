//===- Format.h - numbers and lists in the hosts' messages ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_HOST_FORMAT_H
#define DDPRT_HOST_FORMAT_H

#include <cstdint>
#include <string>
#include <vector>

namespace stephost {

/// At most `limit` of `names`, comma-separated, with how many more.
std::string listNames(const std::vector<std::string> &names, size_t limit = 8);
/// 1234567 -> "1,234,567".
std::string withThousands(uint64_t value);
/// `value` with `decimals` digits after the point ("%.*f").
std::string fixed(double value, int decimals);
/// A number of seconds as the options spell it: 3, 0.5, 1e+10.
std::string secondsText(double seconds);
/// `text` with control characters (NUL included) as \xHH, for messages.
std::string printableText(const std::string &text);

} // namespace stephost

#endif // DDPRT_HOST_FORMAT_H
