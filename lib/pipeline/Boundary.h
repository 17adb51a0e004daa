// Where the stages meet: the forward nodes that read no parameter between
// two stages (a norm's pow, mean and rsqrt before the next layer's weight)
// go to whichever side makes the bytes crossing the boundary least, as a
// split at module boundaries sends only the residual stream.
//
//   stage 0 ... %add_6 = add(%add_4, %view_25)        F0 (layer 0's output)
//               %pow = pow(%add_6, 2) ... %rsqrt_2     F0 -> F1
//               %mul_14 = mul(%add_6, %rsqrt_2)        F0 -> F1
//   stage 1     %mul_15 = mul(%mul_14, %norm_weight)   F1
//   sends per microbatch: %add_6, %rsqrt_2, %mul_14 (8,256 B) -> %add_6 (4,096 B)
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "program/Program.h"

namespace spmd::pipeline {

/// The backward nodes that read no gradient (none of the nodes seeded by
/// reading a loss, `isLoss`, comes before them), only forward values (a
/// saved value's alias, a norm's rsqrt cubed), indexed by node: they go with
/// the forward when a boundary moves, and keep their place after it.
std::vector<bool> gradientFree(const ir::Graph& g, const std::vector<program::PipelinePlace>& places,
                               const std::function<bool(const ir::Value&)>& isLoss);

/// For each boundary s -> s + 1 (s < chunks - 1), in order: the forward
/// nodes of stage s that `canMove` allows (they read no parameter) and
/// whose forward readers are all on stage s or s + 1 move to stage s + 1
/// when that lowers the bytes stage s sends s + 1 (global types); among
/// cuts of the least bytes, the one moving the fewest nodes (a tie keeps
/// what the stage computed). Backward readers are not looked at: the
/// caller places the backward after.
void cutForward(const ir::Graph& g, const std::function<bool(const ir::Node&)>& canMove,
                std::vector<program::PipelinePlace>& places, int64_t chunks);

/// The same for the backward, boundary t -> t - 1 from the last: backward
/// nodes of stage t that `canMove` allows (no parameter, and every forward
/// value they read is on stage t - 1 too) and whose readers are all
/// backward nodes of stage t or t - 1 move to t - 1 when that lowers the
/// gradient bytes crossing.
void cutBackward(const ir::Graph& g, const std::function<bool(const ir::Node&)>& canMove,
                 std::vector<program::PipelinePlace>& places, int64_t chunks);

}  // namespace spmd::pipeline
