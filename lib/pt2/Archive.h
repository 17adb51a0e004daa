// Reading torch.export archives (.pt2, export schema 8.x).
//
//   SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive("mlp.pt2"));
//   a.program.graph.nodes().size();          // 5
//   a.payload("fc1.weight")->sizes;          // {256, 64}
//
// The archive is a zip whose single top folder is the file's stem;
// `models/<m>.json` is the serialized ExportedProgram and
// `data/weights/<m>_weights_config.json` / `data/constants/...` describe raw
// little-endian payload files. Tied weights share one payload file and here
// share one Storage. An archive exported by reference also holds
// `extra/spmdc_weights.json`:
//
//   {"format": 1, "root": "/ckpt",
//    "tensors": {"lm_head.weight": {"file": "model.safetensors",
//                                   "tensor": "model.embed_tokens.weight"}}}
//
// and those parameters' payloads are empty (TensorPayload::external).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::pt2 {

/// A 64-byte aligned, immutable byte buffer holding one payload file.
class Storage {
 public:
  /// Allocates `size` bytes (uninitialized).
  explicit Storage(size_t size);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// A parameter whose bytes the archive does not hold (exported by
/// reference): the tensor `tensor` of safetensors file `file` under the
/// archive's weightsRoot. The archive's own payload is then empty.
struct ExternalTensor {
  std::string file;
  std::string tensor;
};

/// One stored tensor: parameter, buffer or tensor constant.
struct TensorPayload {
  std::string fqn;
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storageOffset = 0;  ///< in elements
  bool isParam = false;
  /// Archive member holding the bytes ("model/data/weights/weight_0").
  std::string member;
  /// The bytes (shared by tied weights); null when weights were not loaded.
  std::shared_ptr<const Storage> storage;
  /// Set when the bytes live in a checkpoint outside the archive.
  std::optional<ExternalTensor> external;
};

/// Phase timings of one read, in milliseconds.
struct ReadStats {
  double openMs = 0;     ///< opening the zip and reading the model JSON
  double parseMs = 0;    ///< JSON parse
  double buildMs = 0;    ///< building the IR
  double weightsMs = 0;  ///< reading payloads
};

/// What to read.
struct ReadOptions {
  /// Read weight and constant bytes (metadata is always read).
  bool loadWeights = true;
};

/// A whole .pt2 archive.
struct Archive {
  std::string path;
  ir::ExportedProgram program;
  /// Parameters and buffers by FQN.
  std::map<std::string, TensorPayload, std::less<>> weights;
  /// Tensor constants by FQN.
  std::map<std::string, TensorPayload, std::less<>> constants;
  /// The checkpoint folder of external tensors (the archive's
  /// extra/spmdc_weights.json, written by `spmdc_export --hf DIR`); empty
  /// when every payload is in the archive.
  std::string weightsRoot;
  ReadStats stats;

  /// The payload of a parameter, buffer or constant FQN; null if none.
  const TensorPayload* payload(std::string_view fqn) const;
};

/// A copy of `a` whose program is its own (ir::ExportedProgram::clone):
/// for a compile, which changes its archive, on a model read once.
Archive cloneArchive(const Archive& a);

/// Reads `path` and verifies it: the program passes ir::verifyProgram and
/// every payload's metadata fits its member and matches the graph input
/// reading it (pt2/VerifyArchive.h), with or without loadWeights. Errors
/// are one line starting with "<path>: " (the path once; the caller adds
/// "error: "): not a zip, empty file, missing model JSON, JSON that does
/// not parse, unknown schema major version, unknown argument kind, dangling
/// value names, a malformed node or value, a payload shorter than its
/// metadata, a member escaping the archive.
Expected<Archive> readArchive(const std::string& path, const ReadOptions& options = {});

/// Reads a model written as IR text (serialize::printProgram's form, a `.ir`
/// file) as an archive without weight bytes: each stored input has a
/// payload entry (FQN, dtype, sizes, strides) and no storage, as with
/// loadWeights = false. Errors name the file and line.
Expected<Archive> readIrArchive(const std::string& path);

/// readIrArchive for a path ending in ".ir", readArchive otherwise.
Expected<Archive> readModel(const std::string& path, const ReadOptions& options = {});

}  // namespace spmd::pt2
