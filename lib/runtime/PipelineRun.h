// Running one rank of a pipelined train step (program::PipelinePlan): the
// rank's stage runs its schedule's actions, each the forward or backward
// subgraph of one microbatch, receiving and sending the values that cross
// stages over c10d point-to-point operations, summing gradients over the
// microbatches, then the optimizer step.
//
//   stage 1 of 2, 1f1b, 2 microbatches:
//     F0: recv add_3 from stage 0; run forward(mb 0); loss += div_2
//     B0: run backward(mb 0); send add_21 to stage 0; grads += ...
//     F1, B1 likewise; then step(grads); outputs to rank 0
//
// Under interleaved 1F1B a rank runs several virtual stages, each action
// naming its own ("2F0"); a value one of them hands another on the same
// rank goes through memory, not a send, and every stage's step runs before
// any update is applied.
#pragma once

#include <vector>

#include "runtime/Worker.h"

namespace spmd::runtime {

/// runRank for a program with a pipeline plan (runRank calls it). Errors
/// name the rank, stage and action.
Expected<RankResult> runPipelineRank(const program::LoadedProgram& program, int64_t rank,
                                     const c10::intrusive_ptr<c10d::Store>& store, const TensorMap& inputs,
                                     const RankOptions& options);

/// This rank's shards of the global user inputs at mesh coordinates
/// `coords`, keyed "input.<i>" (Worker.cpp).
Expected<TensorMap> shardInputs(const program::Program& p, const TensorMap& inputs,
                                const std::vector<int64_t>& coords);
/// Makes a local output whole on every rank of `comm`'s axes: gathers
/// shards (padded where uneven), reduces partials (Worker.cpp).
at::Tensor toGlobal(at::Tensor t, const sharding::ShardingSpec& spec, const ir::TensorType& global,
                    MeshComm& comm);
/// The median of step times, the first (warm-up) left out when there are more.
double medianStepSeconds(std::vector<double> s);

}  // namespace spmd::runtime
