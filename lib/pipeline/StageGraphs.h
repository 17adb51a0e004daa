// What one pipeline stage runs: its forward, backward and optimizer-step
// subgraphs cut from the microbatch's step by the plan's places, and the
// values that cross between stages.
//
//   stage 1 of llama_train (pp 2):
//     forward  inputs (add_3 <- stage 0, tokens, ...) outputs (div_2 -> accumulate, mm_7 -> backward, ...)
//     backward inputs (mm_7 <- forward, ...)           outputs (add_21 -> stage 0, permute_90 -> accumulate)
//     step     inputs (permute_90_acc, p_lm_head_weight, ...) outputs (the stage's graph outputs)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pipeline/Subgraph.h"
#include "program/Program.h"

namespace spmd::pipeline {

/// A value one stage sends another for every microbatch.
struct Transfer {
  std::string value;
  int64_t from = 0, to = 0;
  program::PipelinePlace::Phase fromPhase{}, toPhase{};
};

/// Every value that crosses stages, in node order then consumer order (each
/// (value, destination stage) once).
std::vector<Transfer> stageTransfers(const program::Program& p);

/// True for an all-reduce over the plan's microbatch axis whose input
/// depends on parameters: summed over the microbatches by the runtime.
bool isAccumulation(const program::Program& p, const ir::Node& n);

/// Whether `plan`'s schedule runs each backward as two actions, I and W.
bool splitsBackward(const program::PipelinePlan& plan);

/// The backward nodes of `stage` in its I action, indexed by node: those
/// whose values another stage reads, and their ancestors among the stage's
/// backward nodes (the input gradients); the others are W's.
std::vector<bool> inputGradientNodes(const program::Program& p, int64_t stage);

/// The subgraphs of one stage. Free nodes (no parameter behind them) are
/// copied into every subgraph that reads them.
struct StageGraphs {
  Subgraph forward, backward, step;
  /// Under a zero-bubble schedule (splitsBackward) the backward again, in
  /// two: its I action (the gradients sent to other stages and what they
  /// need) and its W action (the rest: the weights' gradients); W reads
  /// what it needs of I's values. Empty otherwise.
  Subgraph backwardInput, backwardWeight;
  /// One per prologue node (a sum over the microbatches before the first):
  /// the subgraph computing its input for one microbatch, and the node.
  std::vector<std::pair<Subgraph, const ir::Node*>> prologue;
};

/// Cuts `stage`'s subgraphs out of `p` (which has a pipeline plan; a
/// virtual stage under an interleaved schedule).
/// Outputs of the forward and backward: every value they define that is
/// read elsewhere; of the step: the graph outputs it computes, plus the
/// free ones every stage computes (buffer updates such as a step count).
Expected<StageGraphs> stageGraphs(const program::Program& p, int64_t stage);

/// The stored inputs (parameters, buffers, optimizer states, constants)
/// `g`'s subgraphs read, by FQN (the program's weight names).
std::set<std::string> stageWeightNames(const program::Program& p, const StageGraphs& g);

/// The weights each pipeline rank loads, one set per rank: what the
/// subgraphs of its (virtual) stages read; a weight no stage reads goes to
/// rank 0 (so that it is loaded and checkpointed somewhere). A weight
/// several ranks read (a step count every stage updates alike) is in each
/// of their sets.
Expected<std::vector<std::set<std::string>>> stageWeights(const program::Program& p);

/// What a pipelined run's checkpoint describes (docs/PIPELINE.md): `p`'s
/// mesh with the microbatch axis at size 1 (the ranks of one stage) and
/// `p`'s weights, without the graph (a run without pipeline reads it
/// resharded, as any checkpoint of another mesh). Error when a weight is
/// not replicated over the microbatch axis.
Expected<program::Program> checkpointView(const program::Program& p);

/// The pipeline rank that checkpoints each weight: the lowest whose set
/// holds it.
std::map<std::string, int64_t> weightOwners(const std::vector<std::set<std::string>>& stageWeights);

}  // namespace spmd::pipeline
