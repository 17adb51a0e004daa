// Whole-file helpers with the project's no-partial-output rule.
//
//   SPMD_RETURN_IF_ERROR(writeFileAtomic("report.json", text));  // temp + fsync + rename
//
//   AtomicFile f("big.spmd");                 // streamed: the same guarantee
//   SPMD_RETURN_IF_ERROR(f.open());
//   SPMD_RETURN_IF_ERROR(f.write(data, n));   // ... skipTo, writeAt
//   SPMD_RETURN_IF_ERROR(f.commit());         // fsync, rename, fsync the folder
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "support/Status.h"

namespace spmd {

/// A file written under a temporary name beside `path` and renamed onto it
/// by commit(), the project's one way to write an output file: readers never
/// see a partial file, and a failed write leaves the old file (or none).
/// Durable (the default): after commit() returns OK the contents survive a
/// crash or power loss (file and folder are fsynced). Not durable: the same
/// atomicity without the fsyncs, for outputs a rerun recreates (a compiled
/// program: the fsync would be a third of a 9,000-node compile). Destroyed
/// uncommitted, it removes the temporary. Errors say what failed, without
/// the path (callers add it with withContext).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, bool durable = true);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Creates the temporary (mode 0644).
  Status open();
  /// Appends `n` bytes.
  Status write(const void* data, uint64_t n);
  /// Appends zeros up to file offset `offset` (at or past the end).
  Status padTo(uint64_t offset);
  /// Continues at file offset `offset` (at or past the end), leaving a hole
  /// that writeAt fills.
  Status skipTo(uint64_t offset);
  /// Writes `data` at file offset `offset`, before the end.
  Status writeAt(uint64_t offset, std::string_view data);
  /// Bytes up to the current end.
  uint64_t written() const { return written_; }
  /// (fsync,) close, rename onto the path(, fsync the folder).
  Status commit();

 private:
  Status sysError(const char* what) const;
  std::string path_;
  std::string tmp_;
  bool durable_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

/// Writes `contents` to `path` through "<path>.tmp.<pid>", an fsync and a
/// rename, then fsyncs the folder: readers never see a partial file, and
/// once it returns OK the new contents survive a crash or power loss. The
/// temporary is removed on failure.
Status writeFileAtomic(const std::string& path, std::string_view contents);

/// Flushes folder `dir`'s entries (files created, renamed or removed in it)
/// to disk. Errors name the folder.
Status syncDirectory(const std::string& dir);

/// Reads a whole file; the error names the path.
Expected<std::string> readFile(const std::string& path);

}  // namespace spmd
