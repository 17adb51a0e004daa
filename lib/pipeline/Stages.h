// Cutting a microbatch's train step into pipeline stages: where each node
// runs (program::PipelinePlace) and each stage's schedule.
//
//   llama_train, stages ["model.layers.1"], mesh (mb=4):
//     %embedding   F0   (reads model.tok.weight, stage 0)
//     %mm_4        F1   (reads model.layers.1.wq.weight)
//     %div_2       F1   (the loss, on the last stage)
//     %div_2_acc   S1   (spmd.all_reduce over mb: summed over microbatches)
//     %mm_40       B1   (grad of layers.1, after the loss)
//     %full        -    (no parameter: computed where it is read)
//
// Forward nodes are the loss's ancestors that read a parameter (directly or
// not); each runs on the highest stage among the parameters and forward
// values it reads. A backward node runs on the stage of the parameters it
// reads, else on the highest stage among the forward values it reads and
// the lowest of the gradients it reads (a weight's gradient lands on its
// weight's stage).
// An all-reduce over the microbatch axis is an accumulation (S) when its
// input depends on parameters, else a prologue sum (P) over every
// microbatch before the first (a loss's token count). What follows an
// accumulation is the optimizer step (S).
#pragma once

#include <string>
#include <vector>

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::pipeline {

/// What the schema asks for (schema::PipelineRequest, resolved).
struct StageRequest {
  std::string axis = "pp";
  /// Pipeline ranks (the axis's size).
  int64_t stages = 2;
  /// Virtual stages per rank (interleaved-1f1b); the model is cut into
  /// chunks() = stages * virtualStages stages.
  int64_t virtualStages = 1;
  /// Module boundaries ("model.layers.4"), chunks() - 1 of them; empty: the
  /// repeated layers split evenly.
  std::vector<std::string> boundaries;
  std::string schedule = "1f1b";
  std::string microbatchAxis = "mb";
  int64_t chunks() const { return stages * virtualStages; }
};

/// The (virtual) stage of every parameter, by first use: a parameter is on
/// the stage of the number of boundaries at or before its module. Errors:
/// a boundary no parameter lies under, boundaries out of order, more stages
/// than layers.
Expected<std::vector<int64_t>> parameterStages(const ir::ExportedProgram& g, const StageRequest& req);

/// Places every node of `p` (an expanded train step whose mesh has the
/// microbatch axis) and builds the schedule. Errors name the node and say
/// what to change: a collective over the microbatch axis that mixes rows of
/// microbatches, a parameter read on two stages (tied weights), an output
/// of one microbatch, a step reading two stages.
Expected<program::PipelinePlan> planPipeline(const program::Program& p, const StageRequest& req);

/// The action lists of `schedule` ("gpipe", "1f1b", "interleaved-1f1b",
/// "zero-bubble": PyTorch's ScheduleInterleavedZeroBubble, F, I and W),
/// one per pipeline rank, for `stages` ranks of `virtualStages` stages each
/// and `microbatches` microbatches. interleaved-1f1b's lists are the order
/// of PyTorch's ScheduleInterleaved1F1B (torch.distributed.pipelining,
/// _get_1f1b_rank_ops without its idle slots); like it, refuses a count of
/// microbatches that is not a multiple of its rounds (max(1, m / stages)).
Expected<std::vector<std::vector<program::PipelineAction>>> scheduleActions(const std::string& schedule,
                                                                            int64_t stages,
                                                                            int64_t microbatches,
                                                                            int64_t virtualStages = 1);

}  // namespace spmd::pipeline
