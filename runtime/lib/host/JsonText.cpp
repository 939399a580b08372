//===- JsonText.cpp - JSON files written with nlohmann-json ---------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "JsonText.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace stephost {

namespace {

/// A scalar as the library writes it.
std::string scalarText(const OrderedJson &value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false,
                    OrderedJson::error_handler_t::replace);
}

/// `value` on one line: "{"a": 1, "b": [2, 3]}".
void writeInline(const OrderedJson &value, std::string &out) {
  if (value.is_object()) {
    out += '{';
    const char *separator = "";
    for (const auto &[key, member] : value.items()) {
      out += separator + scalarText(key) + ": ";
      writeInline(member, out);
      separator = ", ";
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    const char *separator = "";
    for (const OrderedJson &element : value) {
      out += separator;
      writeInline(element, out);
      separator = ", ";
    }
    out += ']';
  } else {
    out += scalarText(value);
  }
}

bool holdsObjects(const OrderedJson &value) {
  if (!value.is_array() || value.empty())
    return false;
  for (const OrderedJson &element : value)
    if (!element.is_object())
      return false;
  return true;
}

void write(const OrderedJson &value, int depth, int objectDepth,
           std::string &out) {
  bool expandObject =
      value.is_object() && !value.empty() && depth < objectDepth;
  if (!expandObject && !holdsObjects(value))
    return writeInline(value, out);
  std::string indent(2 * (depth + 1), ' ');
  out += expandObject ? '{' : '[';
  const char *separator = "\n";
  for (const auto &[key, member] : value.items()) {
    out += separator + indent;
    if (expandObject)
      out += scalarText(key) + ": ";
    write(member, depth + 1, objectDepth, out);
    separator = ",\n";
  }
  out += '\n' + std::string(2 * depth, ' ') + (expandObject ? '}' : ']');
}

} // namespace

std::string jsonText(const OrderedJson &value, int objectDepth) {
  std::string out;
  write(value, 0, objectDepth, out);
  return out + '\n';
}

double roundTo(double value, int decimals) {
  if (!std::isfinite(value))
    return value;
  double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

double significant(double value, int digits) {
  if (!std::isfinite(value))
    return value;
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return std::strtod(text, nullptr);
}

} // namespace stephost
