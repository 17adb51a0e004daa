// The activations a compiled train step keeps from its forward for its
// backward, per rank: what Korthikanti et al. (2022) count per layer, and
// what sequence parallelism divides by the tp degree outside the attention
// and MLP (docs/SEQUENCE_PARALLEL.md).
//
//   forward  %mul_1 = mul(%x, %rsqrt)        read by the backward: saved
//            %view  = view(%mul_1, [32, 64]) a view: %mul_1's storage, once
//   backward %mm_9  = mm(%grad, %view)
#pragma once

#include <cstdint>
#include <unordered_set>

#include "program/Program.h"

namespace spmd::passes {

/// Saved activations of a train step (a program with a loss output).
struct ActivationEstimate {
  /// False when the program has no loss output: nothing is counted.
  bool trainStep = false;
  /// Distinct storages a forward node produced (views counted as the tensor
  /// they view) that a backward node reads, and their local bytes.
  int64_t savedTensors = 0;
  int64_t savedBytes = 0;
};

/// Bytes of tensor `v` on one rank (its local shape; symbolic sizes at
/// their hint).
int64_t localBytes(const ir::Value& v);

/// The forward of a train step: every node a loss output depends on; the
/// backward (and an optimizer update) is the rest. Empty without a loss.
/// A gradient bucket that carries the loss's all-reduce (BucketCollectives)
/// is seen through: the loss depends on its own member, not the gradients.
std::unordered_set<const ir::Node*> forwardNodes(const program::Program& program);

/// The forward is every node the loss depends on; the backward (and an
/// optimizer update) the rest. Sizes are local, symbolic ones at their hint.
ActivationEstimate estimateSavedActivations(const program::Program& program);

}  // namespace spmd::passes
