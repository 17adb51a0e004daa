// The index of a sharded checkpoint (format 2): what every rank file holds,
// where each shard sits in its global tensor, and a checksum per shard.
//
//   ckpt/latest                    "step-5\n", replaced atomically after a save completes
//   ckpt/step-5/index.json         {"format": 2, "step": 5, "mesh": {"shape": [2], "axes": ["x"]},
//                                   "weights": [{"fqn": "fc1.weight", "spec": ["S(0)"],
//                                     "global_shape": [64, 32], "dtype": "f32",
//                                     "shards": [{"rank": 0, "file": "rank0.safetensors",
//                                                 "checksum": "9a3c...", "region": [[0, 32], [0, 32]]},
//                                                ...]}]}
//   ckpt/step-5/rank0.safetensors  rank 0's local weights and optimizer states, by FQN
//
// A region lists, per dim, [offset, size] of the global indices the shard
// holds, or [offset, size, runs, stride] for a strided shard (sharding::Chunk).
// The checksum is XXH3-64 of the shard's bytes, 16 lowercase hex digits.
// parseCheckpointIndex verifies everything that can be verified without the
// rank files, so later code may trust the index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Types.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::runtime {

/// One rank's piece of a checkpointed tensor.
struct ShardRecord {
  int64_t rank = 0;
  std::string file;      ///< the rank file's name inside the step folder ("rank3.safetensors")
  std::string checksum;  ///< XXH3-64 of the shard's bytes, 16 hex digits
  std::vector<sharding::Chunk> region;
};

/// One checkpointed tensor (parameter, buffer or optimizer state).
struct WeightRecord {
  std::string fqn;
  sharding::ShardingSpec spec;  ///< normalized (non-negative dims)
  std::vector<int64_t> globalShape;
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<ShardRecord> shards;  ///< one per rank, in rank order
};

/// A parsed and verified index.json.
struct CheckpointIndex {
  int64_t step = 0;
  sharding::Mesh mesh;
  std::vector<WeightRecord> weights;
};

/// The checksum of `bytes` bytes at `data`: XXH3-64 as 16 lowercase hex digits.
std::string shardChecksum(const void* data, size_t bytes);

/// The file name of rank `rank`'s shards ("rank3.safetensors"), or of those
/// stage `stage` of a pipelined run saved ("rank3-stage1.safetensors").
std::string rankFileName(int64_t rank, int64_t stage = -1);

/// The region (per-dim chunks) rank `rank` holds of a tensor laid out as `w`.
std::vector<sharding::Chunk> shardRegion(const WeightRecord& w, const sharding::Mesh& mesh, int64_t rank);

/// Parses `text` (the contents of `path`) and verifies it: format 2, an
/// integer step >= 0, a valid mesh, and per weight a unique FQN, a known
/// dtype, a spec that fits mesh and shape, and exactly one shard per rank
/// with its rank file's name (either form of rankFileName), a 16-digit checksum and the region its spec
/// gives. Errors read "<path>: <what>" and name the weight.
Expected<CheckpointIndex> parseCheckpointIndex(const std::string& text, const std::string& path);

/// The JSON text of `index` (what parseCheckpointIndex reads).
std::string formatCheckpointIndex(const CheckpointIndex& index);

/// The step folder of checkpoint `dir`: `dir` itself when it holds an
/// index.json, else the folder its `latest` file names. Errors name `dir`
/// and say what is missing.
Expected<std::string> resolveCheckpoint(const std::string& dir);

/// Reads and verifies the index of checkpoint `dir` (a root or a step folder).
Expected<CheckpointIndex> readCheckpointIndex(const std::string& dir, std::string* stepDir = nullptr);

}  // namespace spmd::runtime
