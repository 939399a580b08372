//===- Npy.cpp - NumPy .npy files -----------------------------------------===//

#include "Npy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace llvm;

namespace npy {

static constexpr char kMagic[] = "\x93NUMPY";
static constexpr size_t kMagicSize = 6;

int64_t Array::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

size_t elementSize(StringRef descr) {
  // '<' little endian, '|' not applicable (one byte), '=' native (little
  // on every machine we run on).
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    return 0;
  StringRef kind = descr.substr(1);
  if (kind == "f2" || kind == "i2" || kind == "u2")
    return 2;
  if (kind == "f4" || kind == "i4" || kind == "u4")
    return 4;
  if (kind == "f8" || kind == "i8" || kind == "u8")
    return 8;
  if (kind == "i1" || kind == "u1" || kind == "b1")
    return 1;
  return 0;
}

static Error malformed(StringRef name, const Twine &why) {
  return createStringError(inconvertibleErrorCode(),
                           "'" + name + "' is not a valid .npy file: " + why);
}

/// The value text of `key` in the header dict, up to the next top-level
/// comma or the closing brace.
static std::optional<StringRef> dictValue(StringRef header, StringRef key) {
  std::string quoted[2] = {"'" + key.str() + "'", "\"" + key.str() + "\""};
  for (const std::string &k : quoted) {
    size_t at = header.find(k);
    if (at == StringRef::npos)
      continue;
    StringRef rest = header.substr(at + k.size()).ltrim();
    if (!rest.consume_front(":"))
      return std::nullopt;
    rest = rest.ltrim();
    int depth = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      char c = rest[i];
      if (c == '(' || c == '[')
        ++depth;
      else if (c == ')' || c == ']')
        --depth;
      else if ((c == ',' || c == '}') && depth == 0)
        return rest.take_front(i).trim();
    }
    return std::nullopt;
  }
  return std::nullopt;
}

Expected<Array> parse(StringRef bytes, StringRef name) {
  if (bytes.size() < kMagicSize + 4 ||
      std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    return malformed(name, "no NumPy magic string");
  unsigned major = uint8_t(bytes[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return malformed(name, "truncated header length");
    headerLength = 0;
    for (int i = 0; i < 4; ++i)
      headerLength |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return malformed(name, "unknown format version " + Twine(major));
  }
  if (headerStart + headerLength > bytes.size())
    return malformed(name, "truncated header");
  StringRef header = bytes.substr(headerStart, headerLength).trim();
  if (!header.starts_with("{") || !header.ends_with("}"))
    return malformed(name, "the header is not a dict");

  Array array;
  std::optional<StringRef> descr = dictValue(header, "descr");
  std::optional<StringRef> order = dictValue(header, "fortran_order");
  std::optional<StringRef> shape = dictValue(header, "shape");
  if (!descr || !order || !shape)
    return malformed(name, "the header lacks descr, fortran_order or shape");
  StringRef d = *descr;
  if (d.size() < 2 || (d.front() != '\'' && d.front() != '"') ||
      d.back() != d.front())
    return malformed(name, "descr " + d + " is not a plain type string");
  array.descr = d.drop_front().drop_back().str();
  if (*order == "True")
    return malformed(name, "Fortran order is not supported; save it with "
                           "numpy.ascontiguousarray");
  if (*order != "False")
    return malformed(name, "fortran_order is " + *order);
  StringRef dims = *shape;
  if (!dims.consume_front("(") || !dims.consume_back(")"))
    return malformed(name, "shape " + *shape + " is not a tuple");
  SmallVector<StringRef> parts;
  dims.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    part = part.trim();
    if (part.empty())
      continue;
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim < 0)
      return malformed(name, "shape " + *shape + " has a bad dimension");
    array.shape.push_back(dim);
  }
  size_t element = elementSize(array.descr);
  if (element == 0)
    return malformed(name, "element type '" + array.descr +
                               "' is not a little-endian number type");
  // Multiply with overflow checks: the sizes come from the file.
  uint64_t count = 1;
  for (int64_t dim : array.shape)
    if (dim != 0 && count > UINT64_MAX / uint64_t(dim))
      return malformed(name, "shape " + *shape + " is too large");
    else
      count *= uint64_t(dim);
  size_t dataStart = headerStart + headerLength;
  uint64_t available = bytes.size() - dataStart;
  if (count > available / element || count * element != available)
    return malformed(name, "shape " + *shape + " of '" + array.descr +
                               "' needs " + Twine(count * element) +
                               " bytes of data, the file has " +
                               Twine(available));
  array.data.assign(bytes.begin() + dataStart, bytes.end());
  return array;
}

Expected<Array> read(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!file)
    return createStringError(file.getError(), "cannot read '" + path +
                                                  "': " +
                                                  file.getError().message());
  return parse((*file)->getBuffer(), path);
}

Error write(StringRef path, const Array &array) {
  // Python tuple syntax: (), (n,), (a, b).
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(array.shape[i]);
  if (array.shape.size() == 1)
    shape += ",";
  shape += ")";
  std::string header = "{'descr': '" + array.descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces to a multiple of 64 bytes, ending in a newline.
  bool wide = header.size() + 11 > 65535;
  size_t prefix = wide ? 12 : 10;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::string bytes(kMagic, kMagicSize);
  bytes.push_back(char(wide ? 2 : 1));
  bytes.push_back(0);
  size_t length = header.size();
  for (size_t i = 0; i < (wide ? 4u : 2u); ++i)
    bytes.push_back(char((length >> (8 * i)) & 0xff));
  bytes += header;
  bytes.append(array.data.begin(), array.data.end());

  // Output trees (out/r0.s0.o0.npy) are created as needed.
  StringRef parent = sys::path::parent_path(path);
  if (!parent.empty())
    if (std::error_code error = sys::fs::create_directories(parent))
      return createStringError(error, "cannot create '" + parent +
                                          "': " + error.message());
  std::string temporary = (path + ".tmp").str();
  {
    std::error_code error;
    raw_fd_ostream out(temporary, error, sys::fs::OF_None);
    if (error)
      return createStringError(error, "cannot write '" + temporary +
                                          "': " + error.message());
    out << bytes;
    out.close();
    if (out.has_error()) {
      std::error_code writeError = out.error();
      out.clear_error();
      sys::fs::remove(temporary);
      return createStringError(writeError, "cannot write '" + temporary +
                                               "': " + writeError.message());
    }
  }
  if (std::error_code error = sys::fs::rename(temporary, path)) {
    sys::fs::remove(temporary);
    return createStringError(error, "cannot rename to '" + path +
                                        "': " + error.message());
  }
  return Error::success();
}

} // namespace npy
