// The distributed program: what `spmdc compile` writes and `spmd-run`
// executes. One SPMD graph for all ranks (ATen ops on local shapes plus
// collective ops naming a mesh axis), the mesh, the placement of every input
// and output, and the weights, sharded.
//
//   program mlp on mesh 8 (x)
//   input %p_fc1_weight: f32[32, 64] parameter fc1.weight  [S(0)] global f32[256, 64]
//   %all_reduce: f32[32, 64] = spmd.all_reduce(%addmm_1, "x", "sum")  # for output addmm_1: [P(sum)] -> [R]
//
// Collective nodes have targets in the "spmd." namespace (see Collectives.h
// for their arguments); everything else is an ATen op as in torch.export.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/Graph.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::program {

/// The .spmd format major version this build writes; readers accept an
/// equal major (and any minor). 2: a checksum on the JSON and on every blob.
constexpr int kFormatVersion = 2;
/// The .spmd format minor version this build writes.
constexpr int kFormatMinor = 0;

/// Placement and global type of one graph input or output.
struct BoundaryInfo {
  sharding::ShardingSpec spec;
  /// Global type (the local type is the graph value's type).
  ir::TensorType globalType;
};

/// Why a collective was inserted (for reports and `spmdc explain`).
struct CollectiveRecord {
  std::string node;  ///< the collective node's name
  std::string kind;  ///< all_reduce, all_gather, reduce_scatter, all_to_all
  std::string axis;  ///< mesh axis name
  int64_t bytesPerRank = 0;
  std::string consumer;    ///< node (or "output <name>") that needed it
  std::string value;       ///< the value redistributed
  std::string from;        ///< placements before, e.g. "[P(sum)]"
  std::string to;          ///< placements after
  std::string sourceLine;  ///< user's Python line of the consumer, if known
};

/// Where one shard of a weight lies in the file's data section.
struct ShardBlob {
  /// Chunk index per mesh axis along which the weight is sharded; -1 for
  /// axes it is replicated over (all ranks on that axis share the blob).
  std::vector<int64_t> index;
  uint64_t offset = 0;  ///< from the start of the data section
  uint64_t bytes = 0;
  uint64_t checksum = 0;  ///< XXH3-64 of the blob's bytes (see Format.h)
};

/// A parameter, buffer or constant, stored sharded.
struct WeightEntry {
  std::string fqn;
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  sharding::ShardingSpec spec;
  /// One blob per distinct shard (contiguous, row-major local tensor).
  std::vector<ShardBlob> shards;
};

/// A compiled distributed program.
struct Program {
  /// Format major version (the writer always writes kFormatVersion).
  int formatVersion = kFormatVersion;
  /// Format minor version (the writer always writes kFormatMinor).
  int formatMinor = kFormatMinor;
  sharding::Mesh mesh;
  /// The SPMD graph with local shapes; its signature is the source's.
  ir::ExportedProgram graph;
  /// One per signature input / output (same order).
  std::vector<BoundaryInfo> inputs;
  std::vector<BoundaryInfo> outputs;
  std::vector<WeightEntry> weights;
  std::vector<CollectiveRecord> collectives;
  /// Free-form provenance: source file, schema, compiler version, options
  /// (keys unique; `spmdc dump` leaves out machine-specific entries).
  std::vector<std::pair<std::string, std::string>> provenance;
};

}  // namespace spmd::program
