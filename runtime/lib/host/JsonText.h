//===- JsonText.h - JSON files written with nlohmann-json -------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The files the hosts and ddprt-calibrate write (step.json, the summary,
// the machine profile) are built as nlohmann-json values, which write every
// string and number; jsonText only lays them out over lines the way people
// and line-oriented tests read them.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_JSONTEXT_H
#define DDPRT_HOST_JSONTEXT_H

#include <nlohmann/json.hpp>

#include <string>

namespace stephost {

/// Members keep the order they were added in.
using OrderedJson = nlohmann::ordered_json;

/// `value` as JSON text ending in a newline. Objects nested less than
/// `objectDepth` deep have a member per line; an array of objects has an
/// element per line at any depth; everything else is written on one line,
/// with a space after each ':' and ',' (as Python's json.dumps). Bytes that
/// are not UTF-8 in a string are replaced (U+FFFD) rather than failing.
std::string jsonText(const OrderedJson &value, int objectDepth = 1);

/// `value` rounded to `decimals` digits after the point, as a number
/// (printed with the fewest digits that give it back).
double roundTo(double value, int decimals);
/// `value` to `digits` significant digits ("%.*g"), as a number.
double significant(double value, int digits);

} // namespace stephost

#endif // DDPRT_HOST_JSONTEXT_H
