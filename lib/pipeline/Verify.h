// The pipeline verifier: a plan whose places, actions or sends and
// receives do not fit together is refused, naming the stages and actions.
//
//   stage 0: F0 B0 F1 B1      stage 1: F0 F1 B0 B1
//   -> "pipeline: the schedule deadlocks: stage 0 waits at B0 for B0 of
//       stage 1, stage 1 waits at F1 for F1 of stage 0"
//   interleaved (virtual stages): "rank 0 waits at 2F0 for 1F0 of stage 1
//       (rank 1); ..."
//   zero-bubble: "stage 0 waits at W0 for I0 of stage 1; ...", "stage 1
//       action W0 comes before the input gradients of its microbatch (I0)"
#pragma once

#include "program/Program.h"
#include "support/Status.h"

namespace spmd::pipeline {

/// Checks `p.pipeline` against `p`: one place per node, stages in range,
/// each rank runs the forward and the backward of every microbatch exactly
/// once (forward first; under zero-bubble the backward as I then W, never
/// B) on each of its (virtual) stages and on no other rank's, and the
/// ranks' action lists, run with asynchronous sends and blocking receives,
/// finish (no deadlock; a split backward sends in its I, and receives in
/// its I when I reads the value, else in its W). Ok when `p` has no
/// pipeline.
Status verifyPipeline(const program::Program& p);

}  // namespace spmd::pipeline
