//===- StepSignature.cpp - a compiled step's signature (step.json) --------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// step.json is read and written with nlohmann-json, one tensor per line
// (jsonText), as the tests and people read it.
//
//===----------------------------------------------------------------------===//

#include "StepSignature.h"

#include "Format.h"
#include "JsonText.h"
#include "Npy.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace stephost {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

namespace {
struct DtypeInfo {
  const char *dtype;
  const char *element;
  size_t bytes;
};
const DtypeInfo kDtypes[] = {
    {"<f4", "f32", 4}, {"<f8", "f64", 8},   {"<f2", "f16", 2},
    {"<i8", "i64", 8}, {"<i4", "i32", 4},   {"<i2", "i16", 2},
    {"|i1", "i8", 1},  {"bf16", "bf16", 2},
};
} // namespace

std::string elementTypeName(const std::string &dtype) {
  for (const DtypeInfo &info : kDtypes)
    if (dtype == info.dtype)
      return info.element;
  return dtype;
}

size_t elementBytes(const std::string &dtype) {
  for (const DtypeInfo &info : kDtypes)
    if (dtype == info.dtype)
      return info.bytes;
  return 0;
}

std::string typeString(const TensorSpec &type) {
  std::string text = "tensor<";
  for (int64_t d : type.shape)
    text += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return text + elementTypeName(type.dtype) + ">";
}

std::string shapeString(const std::vector<int64_t> &shape) {
  return npy::shapeString(shape);
}

bool runtimeDtype(const std::string &dtype, ddprt_dtype &out) {
  if (dtype == "<f4")
    out = DDPRT_F32;
  else if (dtype == "<f2")
    out = DDPRT_F16;
  else if (dtype == "bf16")
    out = DDPRT_BF16;
  else if (dtype == "<f8")
    out = DDPRT_F64;
  else if (dtype == "<i8")
    out = DDPRT_I64;
  else
    return false;
  return true;
}

bool argumentHasName(const StepSignature &signature, size_t index) {
  return index < signature.argumentNames.size() &&
         !signature.argumentNames[index].empty();
}

std::string argumentName(const StepSignature &signature, size_t index) {
  if (argumentHasName(signature, index))
    return signature.argumentNames[index];
  return "arg" + std::to_string(index);
}

std::string resultName(const StepSignature &signature, size_t index) {
  if (index < signature.resultNames.size() &&
      !signature.resultNames[index].empty())
    return signature.resultNames[index];
  return "result" + std::to_string(index);
}

//===----------------------------------------------------------------------===//
// Writing step.json
//===----------------------------------------------------------------------===//

bool writeStepJson(const std::string &path, const StepSignature &signature,
                   std::string &error) {
  OrderedJson json = {{"format", 1},
                      {"entry", signature.entry},
                      {"library", signature.library}};
  auto tensors = [](const std::vector<TensorSpec> &list,
                    const std::vector<std::string> &names) {
    OrderedJson array = OrderedJson::array();
    for (size_t i = 0; i < list.size(); ++i) {
      OrderedJson tensor = OrderedJson::object();
      if (i < names.size() && !names[i].empty())
        tensor["name"] = names[i];
      tensor["dtype"] = list[i].dtype;
      tensor["shape"] = list[i].shape;
      array.push_back(std::move(tensor));
    }
    return array;
  };
  json["arguments"] = tensors(signature.arguments, signature.argumentNames);
  json["results"] = tensors(signature.results, signature.resultNames);
  OrderedJson &states = json["states"] = OrderedJson::array();
  for (const StateSpec &state : signature.states) {
    OrderedJson entry = {{"name", state.name},
                         {"dtype", state.type.dtype},
                         {"shape", state.type.shape}};
    if (state.startIter >= 0)
      entry["start_iter"] = state.startIter;
    states.push_back(std::move(entry));
  }
  if (signature.worldSize > 0)
    json["world_size"] = signature.worldSize;
  json["host_functions"] = signature.hostFunctions;
  std::string text = jsonText(json);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Reading step.json
//===----------------------------------------------------------------------===//

namespace {

using Json = nlohmann::json;

bool readFile(const std::string &path, std::string &bytes, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) {
    error = "cannot read '" + path + "'";
    return false;
  }
  bytes = os.str();
  return true;
}

/// What nlohmann-json says is wrong, without its exception's id and with
/// the position last: "[json.exception.parse_error.101] parse error at
/// line 2, column 0: syntax error while parsing value - unexpected end of
/// input; expected ..." becomes "unexpected end of input; expected ... at
/// line 2, column 0".
std::string parseErrorText(const Json::exception &exception) {
  std::string text = exception.what();
  if (size_t id = text.find("] ");
      text.rfind("[json.exception.", 0) == 0 && id != std::string::npos)
    text.erase(0, id + 2);
  size_t at = text.find(" at line ");
  size_t colon = at == std::string::npos ? at : text.find(": ", at);
  if (colon == std::string::npos)
    return text;
  std::string position = text.substr(at + 1, colon - at - 1);
  size_t dash = text.find(" - ", colon);
  std::string why =
      text.substr(dash == std::string::npos ? colon + 2 : dash + 3);
  return why + " " + position;
}

/// The member `key` of `object`; null if `object` is no object or has none.
const Json *member(const Json &object, const char *key) {
  if (!object.is_object())
    return nullptr;
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

/// Whether `value` is a number equal to a whole number in [low, high].
bool wholeNumber(const Json *value, double low, double high, double &number) {
  if (!value || !value->is_number())
    return false;
  number = value->get<double>();
  return number >= low && number <= high && number == std::floor(number);
}

bool jsonShape(const Json *value, std::vector<int64_t> &shape) {
  if (!value || !value->is_array())
    return false;
  shape.clear();
  for (const Json &d : *value) {
    double size;
    if (!wholeNumber(&d, -1, 9.0e15, size))
      return false;
    shape.push_back(int64_t(size));
  }
  return true;
}

bool jsonTensor(const Json &value, TensorSpec &type, bool dynamicAllowed) {
  if (!value.is_object())
    return false;
  const Json *dtype = member(value, "dtype");
  if (!dtype || !dtype->is_string() ||
      elementBytes(dtype->get_ref<const std::string &>()) == 0)
    return false;
  type.dtype = dtype->get<std::string>();
  if (!jsonShape(member(value, "shape"), type.shape))
    return false;
  for (int64_t d : type.shape)
    if (d < 0 && !dynamicAllowed)
      return false;
  return true;
}

/// The signature in `root`; false with what is wrong in `why`.
bool signatureFromJson(const Json &root, StepSignature &signature,
                       std::string &why) {
  auto bad = [&](const std::string &what) {
    why = what;
    return false;
  };
  if (!root.is_object())
    return bad("not an object");
  const Json *format = member(root, "format");
  if (!format || !format->is_number() || format->get<double>() != 1)
    return bad("\"format\" is not 1");
  signature = StepSignature();
  const Json *entry = member(root, "entry");
  if (!entry || !entry->is_string() ||
      entry->get_ref<const std::string &>().empty())
    return bad("no \"entry\"");
  signature.entry = entry->get<std::string>();
  if (const Json *library = member(root, "library")) {
    if (!library->is_string() ||
        library->get_ref<const std::string &>().empty())
      return bad("\"library\" is not a file name");
    signature.library = library->get<std::string>();
  }
  for (auto [key, list] : {std::pair{"arguments", &signature.arguments},
                           std::pair{"results", &signature.results}}) {
    const Json *items = member(root, key);
    if (!items || !items->is_array())
      return bad(std::string("no \"") + key + "\" list");
    for (size_t i = 0; i < items->size(); ++i) {
      const Json &item = (*items)[i];
      TensorSpec type;
      if (!jsonTensor(item, type, /*dynamicAllowed=*/true))
        return bad(std::string(key) + " " + std::to_string(i) +
                   " is not {\"dtype\": a .npy type, \"shape\": [sizes]}");
      list->push_back(type);
      bool isArgument = list == &signature.arguments;
      std::string tensorName;
      if (const Json *name = member(item, "name")) {
        if (!name->is_string())
          return bad(std::string(isArgument ? "argument " : "result ") +
                     std::to_string(i) + ": \"name\" is not a string");
        tensorName = name->get<std::string>();
      }
      (isArgument ? signature.argumentNames : signature.resultNames)
          .push_back(tensorName);
    }
  }
  const Json *states = member(root, "states");
  if (!states || !states->is_array())
    return bad("no \"states\" list");
  for (size_t i = 0; i < states->size(); ++i) {
    const Json &item = (*states)[i];
    StateSpec state;
    const Json *name = member(item, "name");
    if (!name || !name->is_string() ||
        !jsonTensor(item, state.type, /*dynamicAllowed=*/false))
      return bad("state " + std::to_string(i) +
                 " is not {\"name\", \"dtype\", \"shape\"}");
    state.name = name->get<std::string>();
    if (const Json *start = member(item, "start_iter")) {
      double startIter;
      if (!wholeNumber(start, 0, 9.0e15, startIter))
        return bad("state " + std::to_string(i) +
                   ": \"start_iter\" is not a step number");
      state.startIter = int64_t(startIter);
    }
    signature.states.push_back(state);
  }
  if (const Json *world = member(root, "world_size")) {
    double size;
    if (!wholeNumber(world, 1, 1.0e9, size))
      return bad("\"world_size\" is not a number of ranks");
    signature.worldSize = int64_t(size);
  }
  if (const Json *functions = member(root, "host_functions")) {
    if (!functions->is_array())
      return bad("\"host_functions\" is not a list");
    for (const Json &name : *functions) {
      if (!name.is_string())
        return bad("\"host_functions\" holds a non-string");
      signature.hostFunctions.push_back(name.get<std::string>());
    }
  }
  return true;
}

} // namespace

bool readStepJson(const std::string &path, StepSignature &signature,
                  std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  Json root;
  try {
    root = Json::parse(bytes);
  } catch (const Json::exception &exception) {
    error = "'" + path + "' is not valid JSON: " + parseErrorText(exception);
    return false;
  }
  std::string why;
  if (!signatureFromJson(root, signature, why)) {
    error = "'" + path + "' is not a step description (ddp-run " +
            "--emit-step writes one): " + why;
    return false;
  }
  return true;
}

} // namespace stephost
