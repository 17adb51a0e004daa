// MappedFile: open + fstat + mmap(PROT_READ, MAP_PRIVATE).
//
//   auto f = MappedFile::open("/no/such");   // error: "/no/such: cannot open: No such file or directory"
//   auto g = MappedFile::open("empty.bin");  // ok: g->size() == 0, g->data() == nullptr
#include "io/MappedFile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace spmd::io {
namespace {

Status sysError(const std::string& path, const char* what, int err) {
  return Status::error(path + ": " + what + ": " + std::strerror(err));
}

/// Closes a file descriptor when it goes out of scope.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;

 private:
  int fd_;
};

}  // namespace

Expected<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sysError(path, "cannot open", errno);
  FdGuard guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return sysError(path, "cannot stat", errno);
  if (S_ISDIR(st.st_mode)) return sysError(path, "cannot map", EISDIR);
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": cannot map: not a regular file");

  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ == 0) return file;
  void* p = ::mmap(nullptr, static_cast<size_t>(file.size_), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return sysError(path, "cannot map", errno);
  file.data_ = static_cast<const uint8_t*>(p);
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

}  // namespace spmd::io
