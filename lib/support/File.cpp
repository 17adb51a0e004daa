// Whole-file helpers (see File.h).
#include "support/File.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace spmd {
namespace {

// The folder holding `path` ("." for a bare name).
std::string parentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, bool durable) : path_(std::move(path)), durable_(durable) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status AtomicFile::sysError(const char* what) const {
  return Status::error(std::string(what) + ": " + std::strerror(errno));
}

Status AtomicFile::open() {
  std::string templ = path_ + ".tmp.XXXXXX";
  fd_ = ::mkstemp(templ.data());
  if (fd_ < 0) return sysError("cannot create a temporary file beside it");
  tmp_ = templ;
  if (::fchmod(fd_, 0644) != 0) return sysError("cannot set the file mode");
  return Status::ok();
}

Status AtomicFile::write(const void* data, uint64_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return sysError("cannot write");
    p += w;
    n -= static_cast<uint64_t>(w);
    written_ += static_cast<uint64_t>(w);
  }
  return Status::ok();
}

Status AtomicFile::padTo(uint64_t offset) {
  static const char kZeros[4096] = {};
  SPMD_CHECK(offset >= written_);
  while (written_ < offset)
    SPMD_RETURN_IF_ERROR(write(kZeros, std::min<uint64_t>(offset - written_, sizeof kZeros)));
  return Status::ok();
}

Status AtomicFile::skipTo(uint64_t offset) {
  SPMD_CHECK(offset >= written_);
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) return sysError("cannot seek");
  written_ = offset;
  return Status::ok();
}

Status AtomicFile::writeAt(uint64_t offset, std::string_view data) {
  SPMD_CHECK(offset + data.size() <= written_);
  while (!data.empty()) {
    ssize_t w = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return sysError("cannot write");
    data.remove_prefix(static_cast<size_t>(w));
    offset += static_cast<uint64_t>(w);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  // A hole left by skipTo must become the file's real length.
  if (::ftruncate(fd_, static_cast<off_t>(written_)) != 0) return sysError("cannot size the file");
  if (durable_ && ::fsync(fd_) != 0) return sysError("cannot sync");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return sysError("cannot close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return sysError("cannot rename the temporary file into place");
  tmp_.clear();
  return durable_ ? syncDirectory(parentOf(path_)) : Status::ok();
}

Status writeFileAtomic(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  Status st = f.open();
  if (st.isOk()) st = f.write(contents.data(), contents.size());
  if (st.isOk()) st = f.commit();
  return st.withContext(path);
}

Status syncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::error(dir + ": cannot open the folder to sync it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems cannot sync a folder (EINVAL); their renames are durable anyway.
  if (rc != 0 && err != EINVAL) return Status::error(dir + ": cannot sync the folder: " + std::strerror(err));
  return Status::ok();
}

Expected<std::string> readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::error(path + ": cannot open: " + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace spmd
