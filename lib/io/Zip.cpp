// ZipArchive over libzip: the central directory is read once at open() into a
// hash map name -> (index, size); each read opens the member by index and
// zip_fread()s straight into the caller's buffer, then reads once more to hit
// end-of-member so libzip checks the CRC.
//
//   auto z = ZipArchive::open("bad.pt2");   // a member "../evil"
//   // error: "bad.pt2: member ../evil escapes the archive (absolute path or '..' component)"
//
// Sizes come from the file, so they are bounded at open() before anyone
// allocates for them: a member's compressed size fits in the archive, a
// stored member's size equals it, a compressed one's is at most kMaxRatio
// times it (deflate's limit is 1032) and kMaxMemberBytes. A read that libzip
// refuses (a header that disagrees, a bad offset, a CRC) says "the archive is
// damaged", naming the archive and the member.
#include "io/Zip.h"

#include <sys/stat.h>
#include <zip.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

namespace spmd::io {
namespace {

constexpr uint64_t kMaxRatio = 1100;
constexpr uint64_t kMaxMemberBytes = uint64_t{1} << 40;  // 1 TiB
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;  // readString: 1 GiB

std::string libzipErrorString(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string text = zip_error_strerror(&err);
  zip_error_fini(&err);
  return text;
}

/// True when `name` is absolute or has a ".." component (either separator).
bool escapesArchive(std::string_view name) {
  if (name.empty() || name[0] == '/' || name[0] == '\\') return true;
  if (name.size() >= 2 && std::isalpha(static_cast<unsigned char>(name[0])) && name[1] == ':')
    return true;  // "C:..." drive path
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find_first_of("/\\", start);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

/// "<where>: the archive is damaged (<libzip's reason>)" for a read libzip refused.
Status damaged(const std::string& where, const std::string& reason) {
  return Status::error(where + ": the archive is damaged (" + reason + "); re-create or re-download it");
}

/// Errors for a member whose declared sizes cannot be true of an archive of
/// `archiveBytes` bytes.
Status checkMemberSizes(const std::string& where, const zip_stat_t& st, uint64_t archiveBytes) {
  const uint64_t size = st.size;
  if ((st.valid & ZIP_STAT_COMP_SIZE) == 0 || (st.valid & ZIP_STAT_COMP_METHOD) == 0)
    return damaged(where, "its directory entry has no compressed size or method");
  const uint64_t packed = st.comp_size;
  if (packed > archiveBytes)
    return damaged(where, "it declares " + std::to_string(packed) +
                              " compressed bytes, more than the whole archive (" +
                              std::to_string(archiveBytes) + " bytes)");
  if (st.comp_method == ZIP_CM_STORE && size != packed)
    return damaged(where, "it is stored uncompressed but declares " + std::to_string(size) + " bytes in " +
                              std::to_string(packed));
  if (size > kMaxMemberBytes || (packed > 0 ? size / packed : size) > kMaxRatio)
    return damaged(where, "it declares " + std::to_string(size) + " bytes from " + std::to_string(packed) +
                              " compressed bytes, beyond any compression ratio");
  return Status::ok();
}

/// Closes a zip_file_t when it goes out of scope (unless released).
class ZipFileGuard {
 public:
  explicit ZipFileGuard(zip_file_t* f) : f_(f) {}
  ~ZipFileGuard() {
    if (f_ != nullptr) zip_fclose(f_);
  }
  ZipFileGuard(const ZipFileGuard&) = delete;
  ZipFileGuard& operator=(const ZipFileGuard&) = delete;
  /// Closes now and returns libzip's result (0 on success).
  int close() {
    int rc = zip_fclose(f_);
    f_ = nullptr;
    return rc;
  }

 private:
  zip_file_t* f_;
};

}  // namespace

Expected<std::unique_ptr<ZipArchive>> ZipArchive::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return Status::error(path + ": cannot open: " + std::strerror(EISDIR));
  if (st.st_size == 0) return Status::error(path + ": empty file, not a zip archive");

  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (archive == nullptr) {
    if (code == ZIP_ER_NOZIP) return Status::error(path + ": not a zip archive");
    return Status::error(path + ": cannot open as a zip archive: " + libzipErrorString(code));
  }
  std::unique_ptr<ZipArchive> result;
  try {
    result.reset(new ZipArchive(path, archive));
  } catch (const std::bad_alloc&) {
    zip_discard(archive);
    return Status::error(path + ": out of memory");
  }
  SPMD_RETURN_IF_ERROR(result->indexMembers(static_cast<uint64_t>(st.st_size)));
  return result;
}

ZipArchive::ZipArchive(std::string path, zip_t* archive) : path_(std::move(path)), zip_(archive) {}

ZipArchive::~ZipArchive() {
  if (zip_ != nullptr) zip_discard(zip_);  // read-only: nothing to write back
}

Status ZipArchive::indexMembers(uint64_t archiveBytes) {
  zip_int64_t count = zip_get_num_entries(zip_, 0);
  if (count < 0) return Status::error(path_ + ": cannot read the zip directory");
  try {
    names_.reserve(static_cast<size_t>(count));
    members_.reserve(static_cast<size_t>(count));
    for (zip_int64_t i = 0; i < count; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(zip_, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW, &st) != 0 ||
          (st.valid & ZIP_STAT_NAME) == 0 || (st.valid & ZIP_STAT_SIZE) == 0)
        return Status::error(path_ + ": cannot read zip entry " + std::to_string(i) + ": " +
                             zip_strerror(zip_));
      std::string name = st.name;
      if (escapesArchive(name))
        return Status::error(path_ + ": member " + name +
                             " escapes the archive (absolute path or '..' component)");
      if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) != 0 && st.encryption_method != ZIP_EM_NONE)
        return Status::error(path_ + ": member " + name + " is encrypted");
      if (name.back() == '/') continue;  // a directory entry
      SPMD_RETURN_IF_ERROR(checkMemberSizes(path_ + ": member " + name, st, archiveBytes));
      Member m{static_cast<uint64_t>(i), static_cast<uint64_t>(st.size)};
      if (!members_.emplace(name, m).second)
        return Status::error(path_ + ": member " + name + " appears more than once");
      names_.push_back(std::move(name));
    }
  } catch (const std::bad_alloc&) {
    return Status::error(path_ + ": out of memory reading the zip directory");
  }
  return Status::ok();
}

Expected<ZipArchive::Member> ZipArchive::find(std::string_view name) const {
  auto it = members_.find(name);
  if (it == members_.end())
    return Status::error(path_ + ": no member " + std::string(name) + " in the archive");
  return it->second;
}

bool ZipArchive::contains(std::string_view name) const { return members_.find(name) != members_.end(); }

Expected<uint64_t> ZipArchive::size(std::string_view name) const {
  SPMD_ASSIGN_OR_RETURN(Member m, find(name));
  return m.size;
}

Status ZipArchive::readInto(std::string_view name, void* dst, uint64_t size) const {
  SPMD_ASSIGN_OR_RETURN(Member m, find(name));
  const std::string where = path_ + ": member " + std::string(name);
  if (m.size != size)
    return Status::error(where + " has " + std::to_string(m.size) + " bytes, expected " +
                         std::to_string(size));
  std::lock_guard<std::mutex> lock(mutex_);
  zip_file_t* file = zip_fopen_index(zip_, m.index, 0);
  if (file == nullptr) return damaged(where, zip_strerror(zip_));
  ZipFileGuard guard(file);
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < size) {
    zip_int64_t n = zip_fread(file, out + done, size - done);
    if (n < 0) return damaged(where, zip_file_strerror(file));
    if (n == 0)
      return damaged(where,
                     "it ends after " + std::to_string(done) + " of " + std::to_string(size) + " bytes");
    done += static_cast<uint64_t>(n);
  }
  // Read past the end: libzip checks the CRC when it reaches end-of-member.
  uint8_t extra = 0;
  zip_int64_t n = zip_fread(file, &extra, 1);
  if (n < 0) return damaged(where, zip_file_strerror(file));
  if (n > 0) return damaged(where, "it holds more bytes than its recorded size");
  if (int rc = guard.close(); rc != 0) return damaged(where, libzipErrorString(rc));
  return Status::ok();
}

Expected<std::string> ZipArchive::readString(std::string_view name, size_t padding) const {
  SPMD_ASSIGN_OR_RETURN(Member m, find(name));
  if (m.size > kMaxStringBytes)
    return Status::error(path_ + ": member " + std::string(name) + " has " + std::to_string(m.size) +
                         " bytes; a text member may have at most " + std::to_string(kMaxStringBytes));
  std::string text;
  try {
    text.resize(static_cast<size_t>(m.size) + padding);  // the padding zeroed
  } catch (const std::exception&) {
    return Status::error(path_ + ": member " + std::string(name) + " (" + std::to_string(m.size) +
                         " bytes) does not fit in memory");
  }
  SPMD_RETURN_IF_ERROR(readInto(name, text.data(), m.size));
  text.resize(static_cast<size_t>(m.size));  // keeps the capacity, and the zeros past the end
  return text;
}

}  // namespace spmd::io
