//===- StepSignature.cpp - a compiled step's signature (step.json) --------===//
//===----------------------------------------------------------------------===//

#include "StepSignature.h"

#include "Format.h"
#include "Npy.h"

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

std::string argumentName(const StepSignature &signature, size_t index) {
  if (index < signature.argumentNames.size() &&
      !signature.argumentNames[index].empty())
    return signature.argumentNames[index];
  return "arg" + std::to_string(index);
}

//===----------------------------------------------------------------------===//
// Writing step.json
//===----------------------------------------------------------------------===//

namespace {

std::string shapeJson(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

bool writeStepJson(const std::string &path, const StepSignature &signature,
                   std::string &error) {
  std::string text =
      "{\n  \"format\": 1,\n  \"entry\": " + jsonString(signature.entry) +
      ",\n  \"library\": " + jsonString(signature.library) + ",\n";
  auto tensors = [&](const char *key, const std::vector<TensorSpec> &list,
                     const std::vector<std::string> *names) {
    text += std::string("  \"") + key + "\": [";
    for (size_t i = 0; i < list.size(); ++i) {
      text += std::string(i ? ",\n    " : "\n    ") + "{";
      if (names && i < names->size() && !(*names)[i].empty())
        text += "\"name\": " + jsonString((*names)[i]) + ", ";
      text += "\"dtype\": " + jsonString(list[i].dtype) +
              ", \"shape\": " + shapeJson(list[i].shape) + "}";
    }
    text += list.empty() ? "],\n" : "\n  ],\n";
  };
  tensors("arguments", signature.arguments, &signature.argumentNames);
  tensors("results", signature.results, nullptr);
  text += "  \"states\": [";
  for (size_t i = 0; i < signature.states.size(); ++i) {
    const StateSpec &state = signature.states[i];
    text += std::string(i ? ",\n    " : "\n    ") +
            "{\"name\": " + jsonString(state.name) +
            ", \"dtype\": " + jsonString(state.type.dtype) +
            ", \"shape\": " + shapeJson(state.type.shape) +
            (state.startIter >= 0
                 ? ", \"start_iter\": " + std::to_string(state.startIter)
                 : std::string()) +
            "}";
  }
  text += signature.states.empty() ? "],\n" : "\n  ],\n";
  text += "  \"host_functions\": [";
  for (size_t i = 0; i < signature.hostFunctions.size(); ++i)
    text += (i ? ", " : "") + jsonString(signature.hostFunctions[i]);
  text += "]\n}\n";

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

/// A JSON value: just enough of JSON for step.json.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json *get(const std::string &key) const {
    for (const auto &[k, v] : members)
      if (k == key)
        return &v;
    return nullptr;
  }
};

class JsonParser {
public:
  explicit JsonParser(std::string_view text) : text(text) {}

  bool parse(Json &value, std::string &error) {
    if (!parseValue(value, 0) || (skip(), at != text.size())) {
      if (message.empty())
        message = "unexpected text";
      error = message + " at offset " + std::to_string(at);
      return false;
    }
    return true;
  }

private:
  void skip() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\n' ||
                                text[at] == '\t' || text[at] == '\r'))
      ++at;
  }
  bool fail(const char *why) {
    if (message.empty())
      message = why;
    return false;
  }
  bool literal(std::string_view word) {
    if (text.substr(at, word.size()) != word)
      return fail("unexpected text");
    at += word.size();
    return true;
  }
  bool parseString(std::string &out) {
    if (at >= text.size() || text[at] != '"')
      return fail("expected a string");
    ++at;
    while (at < text.size() && text[at] != '"') {
      char c = text[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= text.size())
        return fail("unterminated string");
      char e = text[at++];
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (at + 4 > text.size())
          return fail("bad escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char h = text[at++];
          code = code * 16 + (h >= '0' && h <= '9'   ? unsigned(h - '0')
                              : h >= 'a' && h <= 'f' ? unsigned(h - 'a' + 10)
                              : h >= 'A' && h <= 'F' ? unsigned(h - 'A' + 10)
                                                     : 99u);
          if (code >= 0x10000u)
            return fail("bad escape");
        }
        if (code >= 0x80)
          return fail("non-ASCII escapes are not supported");
        out += char(code);
        break;
      }
      default:
        out += e;
        break;
      }
    }
    if (at >= text.size())
      return fail("unterminated string");
    ++at;
    return true;
  }
  bool parseValue(Json &value, int depth) {
    if (depth > 32)
      return fail("nested too deeply");
    skip();
    if (at >= text.size())
      return fail("unexpected end");
    char c = text[at];
    if (c == '{') {
      value.kind = Json::Object;
      ++at;
      skip();
      if (at < text.size() && text[at] == '}')
        return ++at, true;
      for (;;) {
        skip();
        std::string key;
        if (!parseString(key))
          return false;
        skip();
        if (at >= text.size() || text[at] != ':')
          return fail("expected ':'");
        ++at;
        Json member;
        if (!parseValue(member, depth + 1))
          return false;
        value.members.emplace_back(std::move(key), std::move(member));
        skip();
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at < text.size() && text[at] == '}')
          return ++at, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      value.kind = Json::Array;
      ++at;
      skip();
      if (at < text.size() && text[at] == ']')
        return ++at, true;
      for (;;) {
        Json item;
        if (!parseValue(item, depth + 1))
          return false;
        value.items.push_back(std::move(item));
        skip();
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at < text.size() && text[at] == ']')
          return ++at, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      value.kind = Json::String;
      return parseString(value.text);
    }
    if (c == 't' || c == 'f') {
      value.kind = Json::Bool;
      value.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return literal("null");
    size_t start = at;
    while (at < text.size() &&
           std::strchr("+-0123456789.eE", text[at]) != nullptr)
      ++at;
    if (start == at)
      return fail("unexpected text");
    std::string number(text.substr(start, at - start));
    char *end = nullptr;
    value.kind = Json::Number;
    value.number = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size())
      return fail("bad number");
    return true;
  }

  std::string_view text;
  size_t at = 0;
  std::string message;
};

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

bool jsonShape(const Json *value, std::vector<int64_t> &shape) {
  if (!value || value->kind != Json::Array)
    return false;
  shape.clear();
  for (const Json &d : value->items) {
    if (d.kind != Json::Number || d.number != std::floor(d.number) ||
        d.number < -1 || d.number > 9.0e15)
      return false;
    shape.push_back(int64_t(d.number));
  }
  return true;
}

bool jsonTensor(const Json &value, TensorSpec &type, bool dynamicAllowed) {
  if (value.kind != Json::Object)
    return false;
  const Json *dtype = value.get("dtype");
  if (!dtype || dtype->kind != Json::String || elementBytes(dtype->text) == 0)
    return false;
  type.dtype = dtype->text;
  if (!jsonShape(value.get("shape"), type.shape))
    return false;
  for (int64_t d : type.shape)
    if (d < 0 && !dynamicAllowed)
      return false;
  return true;
}

} // namespace

bool readStepJson(const std::string &path, StepSignature &signature,
                  std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  Json root;
  std::string why;
  if (!JsonParser(bytes).parse(root, why)) {
    error = "'" + path + "' is not valid JSON: " + why;
    return false;
  }
  auto bad = [&](const std::string &what) {
    error = "'" + path + "' is not a step description (ddp-run " +
            "--emit-step writes one): " + what;
    return false;
  };
  if (root.kind != Json::Object)
    return bad("not an object");
  const Json *format = root.get("format");
  if (!format || format->kind != Json::Number || format->number != 1)
    return bad("\"format\" is not 1");
  signature = StepSignature();
  const Json *entry = root.get("entry");
  if (!entry || entry->kind != Json::String || entry->text.empty())
    return bad("no \"entry\"");
  signature.entry = entry->text;
  if (const Json *library = root.get("library")) {
    if (library->kind != Json::String || library->text.empty())
      return bad("\"library\" is not a file name");
    signature.library = library->text;
  }
  for (auto [key, list] : {std::pair{"arguments", &signature.arguments},
                           std::pair{"results", &signature.results}}) {
    const Json *items = root.get(key);
    if (!items || items->kind != Json::Array)
      return bad(std::string("no \"") + key + "\" list");
    for (size_t i = 0; i < items->items.size(); ++i) {
      TensorSpec type;
      if (!jsonTensor(items->items[i], type, /*dynamicAllowed=*/true))
        return bad(std::string(key) + " " + std::to_string(i) +
                   " is not {\"dtype\": a .npy type, \"shape\": [sizes]}");
      list->push_back(type);
      if (list != &signature.arguments)
        continue;
      std::string argumentName;
      if (const Json *name = items->items[i].get("name")) {
        if (name->kind != Json::String)
          return bad("argument " + std::to_string(i) +
                     ": \"name\" is not a string");
        argumentName = name->text;
      }
      signature.argumentNames.push_back(argumentName);
    }
  }
  const Json *states = root.get("states");
  if (!states || states->kind != Json::Array)
    return bad("no \"states\" list");
  for (size_t i = 0; i < states->items.size(); ++i) {
    const Json &item = states->items[i];
    StateSpec state;
    const Json *name = item.get("name");
    if (item.kind != Json::Object || !name || name->kind != Json::String ||
        !jsonTensor(item, state.type, /*dynamicAllowed=*/false))
      return bad("state " + std::to_string(i) +
                 " is not {\"name\", \"dtype\", \"shape\"}");
    state.name = name->text;
    if (const Json *start = item.get("start_iter")) {
      if (start->kind != Json::Number || !(start->number >= 0) ||
          start->number > 9.0e15 || start->number != std::floor(start->number))
        return bad("state " + std::to_string(i) +
                   ": \"start_iter\" is not a step number");
      state.startIter = int64_t(start->number);
    }
    signature.states.push_back(state);
  }
  if (const Json *functions = root.get("host_functions")) {
    if (functions->kind != Json::Array)
      return bad("\"host_functions\" is not a list");
    for (const Json &name : functions->items) {
      if (name.kind != Json::String)
        return bad("\"host_functions\" holds a non-string");
      signature.hostFunctions.push_back(name.text);
    }
  }
  return true;
}

} // namespace stephost
