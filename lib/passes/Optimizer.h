// Appends an optimizer update to a joint forward+backward graph, so one
// compiled program is a whole train step. It runs on the global graph before
// propagation: the update is pointwise in each parameter, so it follows the
// parameter's placement, and each gradient is redistributed to it
// (all-reduce for replicated parameters, reduce-scatter for fsdp shards).
//
//   output %grad_w gradient_to_parameter w              (joint graph)
// with --optimizer sgd --lr 0.1 becomes
//   input %optim_w_momentum_buffer: f32[...] buffer optim.w.momentum_buffer
//   %... = aten.mul.Tensor(%optim_w_momentum_buffer, 0.9)
//   %... = aten.add.Tensor(%..., %grad_w)
//   %w_updated = aten.add.Tensor(%p_w, %..., alpha=-0.1)
//   output %w_updated parameter_mutation w
//   output %... buffer_mutation optim.w.momentum_buffer
#pragma once

#include <string>

#include <map>
#include <vector>

#include "ir/Graph.h"
#include "program/Program.h"
#include "program/WeightSource.h"
#include "schema/Resolve.h"

namespace spmd::passes {

/// Optimizer hyper-parameters (PyTorch's defaults).
struct OptimizerOptions {
  std::string kind;  ///< "sgd" or "adamw"; empty: none
  double lr = 1e-3;
  double momentum = 0.0;     ///< sgd
  double beta1 = 0.9;        ///< adamw
  double beta2 = 0.999;      ///< adamw
  double eps = 1e-8;         ///< adamw
  double weightDecay = 0.0;  ///< sgd: L2 added to the gradient; adamw: decoupled
};

/// The FQN prefix of optimizer state buffers ("optim.<param fqn>.exp_avg",
/// "optim.step").
inline constexpr const char* kOptimizerPrefix = "optim.";

/// Appends the update of every parameter that has a gradient output. Error
/// when the program has no gradients (not a train step) or the kind is
/// unknown.
Status appendOptimizer(ir::ExportedProgram& program, const OptimizerOptions& options);

/// Weight bytes for a program with optimizer states: the archive's tensors,
/// and zeros for the states (which the archive does not have).
class OptimizerWeightSource : public program::WeightSource {
 public:
  /// `base` and `program` must outlive this source.
  OptimizerWeightSource(const program::WeightSource& base, const program::Program& program);
  Expected<std::span<const std::byte>> globalBytes(const std::string& fqn) const override;

 private:
  const program::WeightSource& base_;
  std::map<std::string, std::vector<std::byte>, std::less<>> zeros_;
};

/// Lays each optimizer state out like its parameter (ZeRO-style under fsdp),
/// inputs and their mutation outputs alike.
void alignOptimizerStates(const ir::ExportedProgram& program, schema::ResolvedPlacements& placements);

}  // namespace spmd::passes
