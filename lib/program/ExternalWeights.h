// Weights by reference: a program's weights read from the safetensors
// checkpoint they were exported from, each rank reading only its region.
//
//   compile:  describeSource("/ckpt", "model-00001-of-00002.safetensors",
//                            "model.layers.0.mlp.up_proj.weight")
//             -> {dtype bf16, shape [5632, 2048], file_bytes 4,965,..,
//                 header_xxh3 .., sample_xxh3 ..}        (header + 64 KiB read)
//   run:      SourceFiles files("/ckpt");
//             files.verify(w)            // size, header and samples as at compile
//             files.readShard(w, mesh, 3, out)   // rank 3's rows, nothing else
//
// The integrity record is taken at compile time from what is cheap to read
// (docs/DECISIONS.md, "Weights by reference"): the file's size, XXH3 of its
// header (every tensor's name, dtype, shape and offsets), and XXH3 of up to
// 16 evenly spaced 4 KiB blocks of each tensor (the first and last
// included). A truncated, renamed, re-saved or regenerated checkpoint fails
// it; an in-place edit of bytes between the samples does not.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "io/Safetensors.h"
#include "program/Program.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::program {

/// A tensor of a checkpoint file with its integrity record.
struct DescribedSource {
  WeightSourceRef ref;
  std::vector<int64_t> shape;
};

/// XXH3 of up to 16 evenly spaced 4 KiB blocks of `bytes` (all of it when
/// it is at most 64 KiB).
uint64_t sampleChecksum(std::span<const std::byte> bytes);

/// `file` joined to `root` unless absolute.
std::string sourcePath(const std::string& root, const std::string& file);

/// Opened source files of one program, by path; safe to share between the
/// threads of in-process ranks.
class SourceFiles {
 public:
  /// Relative source files are found under `root`.
  explicit SourceFiles(std::string root) : root_(std::move(root)) {}

  /// The record of `tensor` in `file`: its dtype, shape, the file's size and
  /// checksums. Error naming the file (cannot open, not safetensors) or the
  /// tensor (not in the file).
  Expected<DescribedSource> describe(const std::string& file, const std::string& tensor);

  /// The entry of `tensor` in `file`: its dtype, shape and bytes (a view of
  /// the mapped file, valid while this object lives).
  Expected<const io::SafetensorsEntry*> entry(const std::string& file, const std::string& tensor);

  /// Checks `w`'s source against its record and its dtype and shape against
  /// the entry; a no-op for weights in the program. Errors are one line
  /// naming the file, the tensor and the weight, and say what to do.
  Status verify(const WeightEntry& w);

  /// After verify(w), reads `rank`'s region of `w` (row-major, local shape,
  /// in the source's dtype) into `out` with pread, one read per contiguous
  /// run, nothing else of the file; zeros for a
  /// zeros source. `out` must hold exactly the region's bytes.
  Status readShard(const WeightEntry& w, const sharding::Mesh& mesh, int64_t rank, std::span<std::byte> out);

 private:
  // One source file: its header (mapped) and a descriptor its bytes are
  // read through.
  struct Open {
    explicit Open(io::SafetensorsFile f) : file(std::move(f)) {}
    ~Open();
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;
    uint64_t offsetOf(const io::SafetensorsEntry& e) const;          // in the file
    Expected<uint64_t> sample(const io::SafetensorsEntry& e) const;  // sampleChecksum, by pread
    io::SafetensorsFile file;
    uint64_t headerChecksum = 0;  // XXH3 of file.headerBytes(), once per file
    int fd = -1;
  };
  Expected<const Open*> open(const std::string& file);
  std::string root_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Open>> files_;
};

/// Fills the integrity record (SourceFiles::describe) of every weight of
/// `program` that names a checkpoint file and tensor, files under
/// program.weightsRoot. Errors, one line naming the file, tensor and weight:
/// a file that cannot be opened or is not safetensors, a missing tensor, a
/// shape other than the weight's global shape, a dtype that does not convert
/// to the weight's (floating types convert among themselves).
Status recordSources(Program& program);

}  // namespace spmd::program
