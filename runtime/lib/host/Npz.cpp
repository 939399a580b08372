//===- Npz.cpp - NumPy .npz archives --------------------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// .npz archives (a zip of .npy files, as np.savez writes them) through
// libzip, when the build found it: each member is read and written as
// Npy.cpp reads and writes a .npy file.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"
#include "NpyDetail.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(DDPRT_HAVE_LIBZIP)
#include <zip.h>
#endif

namespace npy {

using namespace detail;

#if defined(DDPRT_HAVE_LIBZIP)
namespace {
std::string zipErrorText(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

class ZipMemberSource : public Source {
public:
  explicit ZipMemberSource(zip_file_t *file) : file(file) {}

private:
  int64_t readSome(char *data, size_t size, std::string &why) override {
    zip_int64_t n = zip_fread(file, data, size);
    if (n < 0)
      why = zip_file_strerror(file);
    return n < 0 ? -1 : int64_t(n);
  }

  zip_file_t *file;
};
} // namespace

bool archiveSupported() { return true; }

bool writeArchive(
    const std::string &path,
    const std::vector<std::pair<std::string, const Array *>> &arrays,
    std::string &error) {
  if (!createDirectories(parentPath(path), error))
    return false;
  // Written beside the target and renamed into place, as .npy files are.
  std::string temporary = path + ".tmp";
  int code = 0;
  zip_t *archive =
      zip_open(temporary.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!archive) {
    error = "cannot write '" + temporary + "': " + zipErrorText(code);
    return false;
  }
  auto fail = [&](const std::string &why) {
    error = "cannot write '" + path + "': " + why;
    zip_discard(archive);
    ::unlink(temporary.c_str());
    return false;
  };
  // Each member is its .npy file, stored as np.savez stores it; the
  // headers live until zip_close reads them.
  std::vector<std::string> headers;
  headers.reserve(arrays.size());
  for (const auto &[name, array] : arrays) {
    headers.push_back(headerBytes(*array));
    // Header and data without copying the data: two fragments.
    zip_buffer_fragment_t fragments[2] = {
        {reinterpret_cast<zip_uint8_t *>(headers.back().data()),
         headers.back().size()},
        {reinterpret_cast<zip_uint8_t *>(
             const_cast<char *>(array->data.data())),
         array->data.size()}};
    zip_error_t zipError;
    zip_error_init(&zipError);
    zip_source_t *source = zip_source_buffer_fragment_create(
        fragments, array->data.empty() ? 1 : 2, 0, &zipError);
    if (!source) {
      std::string why = zip_error_strerror(&zipError);
      zip_error_fini(&zipError);
      return fail(why);
    }
    zip_error_fini(&zipError);
    zip_int64_t index = zip_file_add(archive, (name + ".npy").c_str(), source,
                                     ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      return fail(zip_strerror(archive));
    }
    if (zip_set_file_compression(archive, zip_uint64_t(index), ZIP_CM_STORE,
                                 0) != 0)
      return fail(zip_strerror(archive));
  }
  if (zip_close(archive) != 0) {
    std::string why = zip_strerror(archive);
    zip_discard(archive);
    ::unlink(temporary.c_str());
    error = "cannot write '" + path + "': " + why;
    return false;
  }
  // A device or a pipe gets the archive's bytes; a file, the archive.
  if (isSpecialFile(path)) {
    int in = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
    int out = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    bool ok = in >= 0 && out >= 0;
    char chunk[1 << 16];
    ssize_t got = 0;
    while (ok && (got = ::read(in, chunk, sizeof chunk)) > 0)
      ok = writeAll(out, chunk, size_t(got));
    int code = errno;
    if (in >= 0)
      ::close(in);
    if (out >= 0)
      ::close(out);
    ::unlink(temporary.c_str());
    if (!ok || got < 0)
      error = "cannot write '" + path + "': " + std::strerror(code);
    return ok && got >= 0;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int renameError = errno;
    ::unlink(temporary.c_str());
    error = "cannot rename to '" + path + "': " + std::strerror(renameError);
    return false;
  }
  return true;
}

Archive::~Archive() {
  if (zip)
    zip_discard(static_cast<zip_t *>(zip));
}

bool Archive::open(const std::string &path, std::string &error) {
  this->path = path;
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(info.st_mode)) {
    error = "cannot read '" + path + "': not a regular file (an .npz is " +
            "read by its table of contents at the end)";
    return false;
  }
  int code = 0;
  zip_t *archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (!archive) {
    error = "cannot read '" + path +
            "' as an .npz (a zip of .npy files): " + zipErrorText(code);
    return false;
  }
  zip = archive;
  zip_int64_t count = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    const char *member = zip_get_name(archive, zip_uint64_t(i), 0);
    if (!member)
      continue;
    std::string name = member;
    // np.savez stores array `x` as member "x.npy".
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    for (const auto &[other, otherMember] : members)
      if (other == name) {
        error = "cannot read '" + path + "': it holds two arrays named '" +
                name + "' (members '" + otherMember + "' and '" + member + "')";
        return false;
      }
    members.emplace_back(std::move(name), member);
  }
  return true;
}

std::vector<std::string> Archive::names() const {
  std::vector<std::string> out;
  for (const auto &[name, member] : members)
    out.push_back(name);
  return out;
}

bool Archive::contains(const std::string &name) const {
  for (const auto &entry : members)
    if (entry.first == name)
      return true;
  return false;
}

bool Archive::read(const std::string &name, Array &array, std::string &error,
                   const HeaderCheck &check) {
  const std::string *member = nullptr;
  for (const auto &entry : members)
    if (entry.first == name)
      member = &entry.second;
  if (!member) {
    error = "'" + path + "' has no array '" + name + "'";
    return false;
  }
  zip_t *archive = static_cast<zip_t *>(zip);
  std::string where = "'" + name + "' in '" + path + "'";
  zip_stat_t info;
  zip_stat_init(&info);
  if (zip_stat(archive, member->c_str(), 0, &info) != 0) {
    error = "cannot read " + where + ": " + zip_strerror(archive);
    return false;
  }
  zip_file_t *file = zip_fopen(archive, member->c_str(), 0);
  if (!file) {
    error = "cannot read " + where + ": " + zip_strerror(archive);
    return false;
  }
  ZipMemberSource source(file);
  if (info.valid & ZIP_STAT_SIZE)
    source.size = uint64_t(info.size);
  // Messages about the array's contents name it PATH:NAME.
  bool ok = readFrom(source, path + ":" + name, "cannot read " + where + ": ",
                     array, error, check);
  zip_fclose(file);
  return ok;
}
#else
bool archiveSupported() { return false; }
bool writeArchive(const std::string &path,
                  const std::vector<std::pair<std::string, const Array *>> &,
                  std::string &error) {
  error = "cannot write '" + path + "': this build writes no .npz (libzip " +
          "was not found when it was built; install libzip-dev and rebuild)";
  return false;
}
Archive::~Archive() = default;
bool Archive::open(const std::string &path, std::string &error) {
  error = "cannot read '" + path + "': this build reads no .npz (libzip " +
          "was not found when it was built; install libzip-dev and rebuild)";
  return false;
}
std::vector<std::string> Archive::names() const { return {}; }
bool Archive::contains(const std::string &) const { return false; }
bool Archive::read(const std::string &name, Array &, std::string &error,
                   const HeaderCheck &) {
  error = "no .npz support in this build";
  return false;
}
#endif

} // namespace npy
