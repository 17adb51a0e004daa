// Sharded checkpoints of a distributed train step.
//
//   ckpt/index.json            {"format": 1, "step": 5, "mesh": {...}, "weights": [{fqn, spec, global_shape,
//   dtype}]} ckpt/rank0.safetensors     rank 0's local weights and optimizer states, by FQN
//   ckpt/rank1.safetensors     ...
//
// Saving is atomic for the folder: every rank writes into "<dir>.partial",
// the ranks meet at the store, and rank 0 writes the index and renames the
// folder into place, so a run killed while saving leaves the last complete
// checkpoint intact.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "program/Program.h"
#include "runtime/TensorIO.h"

namespace spmd::runtime {

/// Writes rank `rank`'s `weights` (every rank calls it; collective over the
/// store) as checkpoint `dir` taken after `step` steps.
Status saveCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                      const TensorMap& weights, int64_t step, c10d::Store& store);

/// Copies rank `rank`'s tensors of checkpoint `dir` into `weights`; returns
/// the checkpoint's step. Errors: missing files, another mesh, a missing
/// tensor or one of another shape.
Expected<int64_t> loadCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                                 TensorMap& weights);

/// Writes one safetensors file of global tensors named by FQN.
Status consolidateCheckpoint(const std::string& dir, const std::string& output);

}  // namespace spmd::runtime
