// The text forms of a pipeline plan's places and actions, shared by the
// program JSON, `spmdc dump` and error messages:
//
//   place  "F0" (forward on stage 0), "B1", "S1" (the optimizer step after
//          the microbatches), "P" (prologue: over every microbatch before
//          the first), "-" (free: wherever a phase reads it)
//   action "F3" (forward of microbatch 3), "B0"; with virtual stages
//          (interleaved schedules) PyTorch's form "2F3" (virtual stage 2's
//          forward of microbatch 3); zero-bubble's split backward "I0"
//          (the input gradients) and "W0" (the weight gradients)
#pragma once

#include <string>
#include <string_view>

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::program {

/// "F0", "B1", "S1", "P" or "-".
std::string placeText(const PipelinePlace& p);
/// The inverse of placeText; error names the text.
Expected<PipelinePlace> parsePlace(std::string_view text);
/// "F3", "B0", "I0", "W0"; "2F3" when the action names its virtual stage.
std::string actionText(const PipelineAction& a);
/// The inverse of actionText; error names the text.
Expected<PipelineAction> parseAction(std::string_view text);
/// The schedule as a table of stages against time slots, one line a stage:
///   stage 0: F0 F1 B0 F2 B1 B2
/// (with virtual stages one line a pipeline rank: "rank 0: 0F0 0F1 2F0 ...").
std::string scheduleTable(const PipelinePlan& plan);

}  // namespace spmd::program
