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
// shards. Every blob is checked against the file at load time, so
// shardFor only fails for a rank outside the mesh.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "io/MappedFile.h"
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
  /// outside the mesh or `entry` has no blob for the rank's coordinates.
  Expected<std::span<const std::byte>> shardFor(const WeightEntry& entry, int64_t rank) const;

 private:
  friend Expected<LoadedProgram> readProgram(const std::string& path);
  LoadedProgram() = default;  // only readProgram makes one
  io::MappedFile file_;
  std::unique_ptr<Program> program_;
  uint64_t dataStart_ = 0;
};

/// Opens `path`. Errors are one line starting with "<path>: ": not an spmd
/// program (bad magic), truncated file, unsupported format major version
/// (newer minors are accepted), corrupt JSON, a weight blob outside the
/// data section or not matching its shape, dtype and spec.
Expected<LoadedProgram> readProgram(const std::string& path);

}  // namespace spmd::program
