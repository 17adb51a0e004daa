// Where the program writer gets each weight's global bytes.
//
//   MemoryWeightSource src;
//   src.add("fc1.weight", bytesOf(tensor));            // row-major, contiguous
//   SPMD_RETURN_IF_ERROR(writeProgram("mlp.spmd", program, src));
//
//   SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive("mlp.pt2"));
//   ArchiveWeightSource fromArchive(a);                // parameters, buffers, constants
//
// The writer asks once per weight and slices the bytes into shards itself.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "program/ExternalWeights.h"
#include "pt2/Archive.h"
#include "support/Status.h"

namespace spmd::program {

/// Supplies the global tensor of each weight FQN.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  /// The whole global tensor `fqn`: row-major, contiguous bytes in the dtype
  /// of its WeightEntry. The span stays valid while the source lives.
  /// Error naming the FQN when the source does not have it.
  virtual Expected<std::span<const std::byte>> globalBytes(const std::string& fqn) const = 0;
};

/// A WeightSource over byte buffers held in memory.
class MemoryWeightSource : public WeightSource {
 public:
  /// Adds (or replaces) the global bytes of `fqn`.
  void add(const std::string& fqn, std::vector<std::byte> bytes) { bytes_[fqn] = std::move(bytes); }
  /// The bytes added for `fqn`.
  Expected<std::span<const std::byte>> globalBytes(const std::string& fqn) const override;

 private:
  std::map<std::string, std::vector<std::byte>, std::less<>> bytes_;
};

/// A WeightSource over a .pt2 archive's parameters, buffers and constants
/// (read with loadWeights). Payloads stored with non-contiguous strides or
/// an offset into shared storage are copied into contiguous form once. A
/// parameter exported by reference is read from its checkpoint file
/// (`spmdc compile --embed-weights`), which must store the model's dtype.
class ArchiveWeightSource : public WeightSource {
 public:
  /// Reads from `archive`, which must outlive this source.
  explicit ArchiveWeightSource(const pt2::Archive& archive) : archive_(archive) {}
  /// The contiguous global bytes of `fqn`; error when the archive lacks it,
  /// was read without weights, or its payload is shorter than its sizes.
  Expected<std::span<const std::byte>> globalBytes(const std::string& fqn) const override;

 private:
  const pt2::Archive& archive_;
  mutable std::map<std::string, std::vector<std::byte>, std::less<>> copies_;
  mutable std::unique_ptr<SourceFiles> files_;
};

}  // namespace spmd::program
