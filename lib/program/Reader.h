// Reading .spmd files: the program, and each rank's weight bytes in place.
//
//   SPMD_ASSIGN_OR_RETURN(LoadedProgram lp, readProgram("mlp.spmd"));
//   const Program& p = lp.program();                     // graph, mesh, specs
//   for (const WeightEntry& w : p.weights) {
//     SPMD_ASSIGN_OR_RETURN(auto bytes, lp.shardFor(w, rank));  // this rank's blob
//     ...                                                // w.localShape, w.dtype
//   }
//
// The file is memory-mapped: a rank touches only the pages of its own
// shards. The whole program passes verifyProgram at load time (every blob
// inside the file, no two overlapping); a blob's checksum is checked when
// shardFor hands it out, so shardFor fails for a rank outside the mesh and
// for damaged bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "io/MappedFile.h"
#include "program/ExternalWeights.h"
#include "program/Program.h"
#include "support/Status.h"

namespace spmd::program {

/// An opened .spmd file: its program and its mapped data section.
class LoadedProgram {
 public:
  /// The program (valid, at the same address, while this object lives,
  /// also across moves).
  const Program& program() const { return *program_; }
  Program& program() { return *program_; }
  /// The path the file was read from.
  const std::string& path() const { return file_.path(); }
  /// The weight entry of `fqn`, or null.
  const WeightEntry* weight(std::string_view fqn) const;
  /// The bytes `rank` holds of `entry` (a row-major tensor of the rank's
  /// local shape), a view into the mapped file valid while this object
  /// lives. Ranks on a replicated axis share one blob. Error when `rank` is
  /// outside the mesh, `entry` has no blob for the rank's coordinates, or
  /// the blob does not match its checksum ("<path>: weight 'w' blob [0]
  /// does not match its checksum: the file is damaged: ...").
  Expected<std::span<const std::byte>> shardFor(const WeightEntry& entry, int64_t rank) const;
  /// Checks every blob of every weight against its checksum (reads the
  /// whole data section), and every weight by reference against its
  /// source's record (ExternalWeights.h); the first mismatch as shardFor or
  /// SourceFiles::verify words it.
  Status verifyWeights() const;
  /// The dtype readShard writes for `entry`: its source file's for a weight
  /// by reference, else the entry's.
  static ir::ScalarType storedDtype(const WeightEntry& entry);
  /// Copies what `rank` holds of `entry` into `out` (row-major, its local
  /// shape, storedDtype): its blob (checksum checked), its region of the
  /// source file (nothing else of the file is read), or zeros. Errors as
  /// shardFor's and SourceFiles::readShard's.
  Status readShard(const WeightEntry& entry, int64_t rank, std::span<std::byte> out) const;
  /// Finds relative weight source files under `root` instead of the folder
  /// recorded at compile time (spmd-run --weights-root).
  void setWeightsRoot(const std::string& root);

 private:
  friend Expected<LoadedProgram> readProgram(const std::string& path);
  LoadedProgram() = default;  // only readProgram makes one
  // Blob `b` of `entry` after its checksum matched.
  Expected<std::span<const std::byte>> blob(const WeightEntry& entry, const ShardBlob& b) const;
  io::MappedFile file_;
  std::unique_ptr<Program> program_;
  std::unique_ptr<SourceFiles> sources_;
  uint64_t dataStart_ = 0;
};

/// Opens `path` and verifies the program (see Verifier.h) before returning
/// it. Errors are one line starting with "<path>: ": not an spmd program
/// (bad magic), truncated file, unsupported format major version (newer
/// minors are accepted; the message names the version found and the one
/// read), a JSON that fails its checksum or does not parse, a mesh over
/// kMaxRanks ranks, and whatever verifyProgram refuses.
Expected<LoadedProgram> readProgram(const std::string& path);

}  // namespace spmd::program
