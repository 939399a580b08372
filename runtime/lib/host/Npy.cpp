//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// .npy files (parsing the header, reading a file or an .npz member within
// the bounds its header sets, writing atomically) and the directories
// outputs go to; .npz archives are in Npz.cpp.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"
#include "NpyDetail.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace npy {

using namespace detail;

bool detail::isSpecialFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode) &&
         !S_ISDIR(info.st_mode);
}

static constexpr char kMagic[] = "\x93NUMPY";
static constexpr size_t kMagicSize = 6;

int64_t Array::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

size_t elementSize(std::string_view descr) {
  // '<' little endian, '|' not applicable (one byte), '=' native (little
  // on every machine we run on).
  if (descr.size() < 3 ||
      (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    return 0;
  std::string_view kind = descr.substr(1);
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

static bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
         c == '\r';
}

static std::string_view trim(std::string_view text) {
  while (!text.empty() && isSpace(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back()))
    text.remove_suffix(1);
  return text;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

static bool malformed(const std::string &name, const std::string &why,
                      std::string &error) {
  error = "'" + name + "' is not a valid .npy file: " + why;
  return false;
}

/// The value text of `key` in the header dict, up to the next top-level
/// comma or the closing brace.
static std::optional<std::string_view> dictValue(std::string_view header,
                                                 const std::string &key) {
  std::string quoted[2] = {"'" + key + "'", "\"" + key + "\""};
  for (const std::string &k : quoted) {
    size_t at = header.find(k);
    if (at == std::string_view::npos)
      continue;
    std::string_view rest = trim(header.substr(at + k.size()));
    if (rest.empty() || rest.front() != ':')
      return std::nullopt;
    rest = trim(rest.substr(1));
    int depth = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      char c = rest[i];
      if (c == '(' || c == '[')
        ++depth;
      else if (c == ')' || c == ']')
        --depth;
      else if ((c == ',' || c == '}') && depth == 0)
        return trim(rest.substr(0, i));
    }
    return std::nullopt;
  }
  return std::nullopt;
}

/// A non-negative decimal integer that fits in int64_t.
static bool parseDimension(std::string_view text, int64_t &value) {
  if (text.empty())
    return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    if (v > (uint64_t(INT64_MAX) - uint64_t(c - '0')) / 10)
      return false;
    v = v * 10 + uint64_t(c - '0');
  }
  value = int64_t(v);
  return true;
}

/// The magic string and the header length: how many bytes the header
/// takes (prefix included), or 0 after setting `error`. `bytes` needs only
/// the first 12.
static size_t headerEnd(std::string_view bytes, const std::string &name,
                        size_t &headerStart, std::string &error) {
  if (bytes.size() < kMagicSize + 4 ||
      std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    return malformed(name, "no NumPy magic string", error), 0;
  unsigned major = uint8_t(bytes[6]);
  size_t headerLength;
  if (major == 1) {
    headerLength = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return malformed(name, "truncated header length", error), 0;
    headerLength = 0;
    for (int i = 0; i < 4; ++i)
      headerLength |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return malformed(name, "unknown format version " + std::to_string(major),
                     error),
           0;
  }
  // NumPy writes headers of a few hundred bytes (and reads at most 10000
  // by default); a huge declared length is damage, not a header.
  const size_t kMaxHeader = size_t(1) << 20;
  if (headerLength > kMaxHeader)
    return malformed(name,
                     "header length " + std::to_string(headerLength) +
                         " is larger than 1 MiB",
                     error),
           0;
  return headerStart + headerLength;
}

/// Parses the header dict (`header` is the whole header, prefix included)
/// into `array`'s type and shape, and the size of the data it promises.
static bool parseHeader(std::string_view bytes, const std::string &name,
                        Array &array, uint64_t &dataBytes, std::string &error) {
  size_t headerStart = 0;
  size_t end = headerEnd(bytes, name, headerStart, error);
  if (end == 0)
    return false;
  if (end > bytes.size())
    return malformed(name, "truncated header", error);
  std::string_view header = trim(bytes.substr(headerStart, end - headerStart));
  if (header.empty() || header.front() != '{' || header.back() != '}')
    return malformed(name, "the header is not a dict", error);

  array = Array();
  std::optional<std::string_view> descr = dictValue(header, "descr");
  std::optional<std::string_view> order = dictValue(header, "fortran_order");
  std::optional<std::string_view> shape = dictValue(header, "shape");
  if (!descr || !order || !shape)
    return malformed(name, "the header lacks descr, fortran_order or shape",
                     error);
  std::string_view d = *descr;
  if (d.size() < 2 || (d.front() != '\'' && d.front() != '"') ||
      d.back() != d.front())
    return malformed(
        name, "descr " + std::string(d) + " is not a plain type string", error);
  array.descr = std::string(d.substr(1, d.size() - 2));
  if (*order == "True")
    return malformed(name,
                     "Fortran order is not supported; save it with "
                     "numpy.ascontiguousarray",
                     error);
  if (*order != "False")
    return malformed(name, "fortran_order is " + std::string(*order), error);
  std::string shapeText(*shape);
  std::string_view dims = *shape;
  if (dims.size() < 2 || dims.front() != '(' || dims.back() != ')')
    return malformed(name, "shape " + shapeText + " is not a tuple", error);
  dims = dims.substr(1, dims.size() - 2);
  while (!dims.empty()) {
    size_t comma = dims.find(',');
    std::string_view part = trim(dims.substr(0, comma));
    dims = comma == std::string_view::npos ? std::string_view()
                                           : dims.substr(comma + 1);
    if (part.empty())
      continue;
    int64_t dim;
    if (!parseDimension(part, dim))
      return malformed(name, "shape " + shapeText + " has a bad dimension",
                       error);
    array.shape.push_back(dim);
  }
  size_t element = elementSize(array.descr);
  if (element == 0)
    return malformed(name,
                     "element type '" + array.descr +
                         "' is not a little-endian number type",
                     error);
  // Multiply with overflow checks: the sizes come from the file. A step's
  // tensors hold at most INT64_MAX elements and bytes.
  uint64_t count = 1;
  for (int64_t dim : array.shape) {
    if (dim != 0 && count > uint64_t(INT64_MAX) / uint64_t(dim))
      return malformed(name,
                       "shape " + shapeText +
                           " has more elements than a 64-bit count holds",
                       error);
    count *= uint64_t(dim);
  }
  if (count > uint64_t(INT64_MAX) / element)
    return malformed(name,
                     "shape " + shapeText + " of '" + array.descr +
                         "' needs more bytes than a 64-bit size holds",
                     error);
  dataBytes = count * element;
  return true;
}

static bool wrongSize(const std::string &name, const Array &array,
                      uint64_t dataBytes, const std::string &has,
                      std::string &error) {
  return malformed(name,
                   "shape " + shapeString(array.shape) + " of '" + array.descr +
                       "' needs " + std::to_string(dataBytes) +
                       " bytes of data, the file has " + has,
                   error);
}

bool parse(std::string_view bytes, const std::string &name, Array &array,
           std::string &error) {
  uint64_t dataBytes = 0;
  if (!parseHeader(bytes, name, array, dataBytes, error))
    return false;
  size_t start = 0;
  size_t dataStart = headerEnd(bytes, name, start, error);
  uint64_t available = bytes.size() - dataStart;
  if (dataBytes != available)
    return wrongSize(name, array, dataBytes, std::to_string(available), error);
  array.data.assign(bytes.begin() + dataStart, bytes.end());
  return true;
}

namespace {
class FileSource : public Source {
public:
  explicit FileSource(int fd) : fd(fd) {}

private:
  int64_t readSome(char *data, size_t size, std::string &why) override {
    for (;;) {
      ssize_t n = ::read(fd, data, size);
      if (n >= 0)
        return n;
      if (errno != EINTR) {
        why = std::strerror(errno);
        return -1;
      }
    }
  }

  int fd;
};

} // namespace

bool detail::readFrom(Source &source, const std::string &name,
                      const std::string &cannotRead, Array &array,
                      std::string &error, const HeaderCheck &check) {
  std::string why;
  auto fail = [&] {
    error = cannotRead + why;
    return false;
  };
  std::string bytes(12, '\0');
  size_t got = 0;
  if (!source.readUpTo(bytes.data(), bytes.size(), got, why))
    return fail();
  bytes.resize(got);
  size_t headerStart = 0;
  size_t end = headerEnd(bytes, name, headerStart, error);
  if (end == 0)
    return false;
  if (end > bytes.size()) {
    size_t had = bytes.size();
    bytes.resize(end);
    if (!source.readUpTo(bytes.data() + had, end - had, got, why))
      return fail();
    bytes.resize(had + got);
  }
  uint64_t dataBytes = 0;
  if (!parseHeader(bytes, name, array, dataBytes, error))
    return false;
  if (check && !check(array, error))
    return false;
  if (source.size) {
    uint64_t available = *source.size > end ? *source.size - end : 0;
    if (available != dataBytes)
      return wrongSize(name, array, dataBytes, std::to_string(available),
                       error);
  }
  // Grown as data arrives, so that a source that ends early costs only
  // what it sent.
  const size_t kChunk = size_t(1) << 24;
  for (uint64_t done = 0; done < dataBytes;) {
    size_t piece = size_t(std::min<uint64_t>(kChunk, dataBytes - done));
    array.data.resize(size_t(done) + piece);
    if (!source.readUpTo(array.data.data() + done, piece, got, why))
      return fail();
    done += got;
    if (got < piece) {
      array.data.clear();
      return wrongSize(name, array, dataBytes, std::to_string(done), error);
    }
  }
  char extra;
  if (!source.readUpTo(&extra, 1, got, why))
    return fail();
  if (got != 0) {
    array.data.clear();
    return wrongSize(name, array, dataBytes,
                     source.stream ? "more (it does not end where the "
                                     "shape says)"
                                   : "more",
                     error);
  }
  return true;
}

bool read(const std::string &path, Array &array, std::string &error,
          const HeaderCheck &check) {
  auto fail = [&](int code) {
    error = "cannot read '" + path + "': " + std::strerror(code);
    return false;
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info;
  if (::fstat(fd, &info) != 0)
    return fail(errno);
  if (S_ISDIR(info.st_mode))
    return fail(EISDIR);
  FileSource source(fd);
  if (S_ISREG(info.st_mode))
    source.size = uint64_t(info.st_size);
  else
    source.stream = true;
  return readFrom(source, path, "cannot read '" + path + "': ", array, error,
                  check);
}

std::string parentPath(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return "";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

bool createDirectories(const std::string &directory, std::string &error) {
  if (directory.empty() || directory == "." || directory == "/")
    return true;
  struct stat info;
  if (::stat(directory.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      return true;
    error = "cannot create '" + directory + "': " + std::strerror(ENOTDIR);
    return false;
  }
  if (!createDirectories(parentPath(directory), error))
    return false;
  if (::mkdir(directory.c_str(), 0777) != 0 && errno != EEXIST) {
    error = "cannot create '" + directory + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

std::string detail::headerBytes(const Array &array) {
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
  return bytes;
}

bool write(const std::string &path, const Array &array, std::string &error) {
  std::string bytes = headerBytes(array);
  // A device or a pipe (/dev/null) is written into; renaming a file over
  // it would replace the device with a regular file.
  if (isSpecialFile(path)) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && writeAll(fd, bytes.data(), bytes.size()) &&
              writeAll(fd, array.data.data(), array.data.size());
    int code = errno;
    if (fd >= 0)
      ::close(fd);
    if (!ok)
      error = "cannot write '" + path + "': " + std::strerror(code);
    return ok;
  }
  // Output trees (out/r0.s0.o0.npy) are created as needed.
  if (!createDirectories(parentPath(path), error))
    return false;
  std::string temporary = path + ".tmp";
  int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    error = "cannot write '" + temporary + "': " + std::strerror(errno);
    return false;
  }
  bool ok = writeAll(fd, bytes.data(), bytes.size()) &&
            writeAll(fd, array.data.data(), array.data.size());
  int code = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    code = errno;
  }
  if (!ok) {
    ::unlink(temporary.c_str());
    error = "cannot write '" + temporary + "': " + std::strerror(code);
    return false;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    code = errno;
    ::unlink(temporary.c_str());
    error = "cannot rename to '" + path + "': " + std::strerror(code);
    return false;
  }
  return true;
}

} // namespace npy
