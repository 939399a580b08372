//===- Format.cpp - numbers and lists in the hosts' messages --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Format.h"

#include <cstdio>
#include <sstream>

namespace stephost {

std::string listNames(const std::vector<std::string> &names, size_t limit) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i)
    text += (i ? ", " : "") + names[i];
  if (names.size() > limit)
    text += " and " + std::to_string(names.size() - limit) + " more";
  return text;
}

std::string withThousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

std::string printableText(const std::string &text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else
      out += char(c);
  }
  return out;
}

std::string secondsText(double seconds) {
  std::ostringstream os;
  os << seconds;
  return os.str();
}

} // namespace stephost
