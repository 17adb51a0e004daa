// Pipelining in --schema auto: on a mesh with an axis named "pp" (--axes
// pp,dp or pp,dp,tp), autoShard compares the best layout without a
// pipeline (the axis used as any other) with a 1F1B pipeline over that
// axis (stages cut evenly over the repeated layers, each boundary moved to
// its minimum cut, lib/pipeline/Boundary.h) at p, 2p and 4p microbatches
// (those that divide the batch), each with the best layout of the other
// axes inside the stages. Fits the budget first, then the faster step.
// The searches share AutoOptions::timeLimitSeconds equally.
//
// A pipelined layout is priced per pipeline rank from the compiled program
// (pipelinedCost): its forward and backward per microbatch (compute, the
// collectives of the other axes, and the sends of what crosses a stage
// boundary on the pp link), times m + (p - 1) / v (the bubble:
// (p - 1) / (m + p - 1) of the step under 1F1B), on the slowest rank, plus
// its optimizer step; its peak: its stages' weights and accumulated
// gradients, the batch, the activations the forward saves for the
// backward times the microbatches in flight (1F1B: min(m, p - r) on rank
// r; GPipe: m), and the largest node's operands.
//
// Without an axis named "pp" nothing changes; a --pin schema with a
// "pipeline" fixes it (only the other axes are searched).
#pragma once

#include <cstdint>
#include <string>

#include "autoshard/AutoShard.h"
#include "passes/LayoutCost.h"
#include "program/Program.h"
#include "pt2/Archive.h"
#include "sharding/DeviceProfile.h"

namespace spmd::autoshard {

/// The modeled figures of a pipelined program.
struct PipelinedCost {
  passes::LayoutCost cost;  ///< step time and peak of the slowest / fullest rank
  double bubble = 0;        ///< (p - 1) / v / (m + (p - 1) / v)
  int64_t p2pBytes = 0;     ///< bytes sent between pipeline ranks per step
};

/// Prices `p` (compiled with a pipeline plan) on `profile`; `fullMesh` is
/// the mesh with the pipeline axis (whose link prices the sends).
PipelinedCost pipelinedCost(const program::Program& p, const sharding::DeviceProfile& profile,
                            const sharding::Mesh& fullMesh);

/// The same, on the mesh the program runs on (its microbatch axis
/// replaced by the pipeline axis): what `spmdc compile` reports as the
/// cost of a pipelined program.
PipelinedCost pipelinedCost(const program::Program& p, const sharding::DeviceProfile& profile);

/// Compiles `s` and models it: under `o.pipeline`, `s` is the stages'
/// layout on `o.mesh` and is compiled as that pipeline on its whole mesh,
/// priced by pipelinedCost; otherwise passes::modelLayout.
Expected<passes::LayoutCost> compilePriced(pt2::Archive& archive, const schema::PlacementSchema& s,
                                           const AutoOptions& o, const passes::CompileOptions& compile,
                                           const sharding::DeviceProfile& profile);

/// `s` (the stages' layout) as the schema of the whole pipelined mesh.
schema::PlacementSchema withPipeline(schema::PlacementSchema s, const PipelineSetting& setting);

/// The index of the axis autoShard pipelines over ("pp", size > 1), or -1
/// when it searches as before (no such axis, or already `o.pipeline`).
int64_t pipelineAxisToSearch(const AutoOptions& o);

/// The search of the top of this file (autoShard calls it when
/// pipelineAxisToSearch >= 0).
Expected<AutoResult> autoShardPipelined(const std::string& modelPath, const AutoOptions& options);

/// autoShard without the pipeline search (AutoShard.cpp).
Expected<AutoResult> searchLayout(const std::string& modelPath, const AutoOptions& options);

}  // namespace spmd::autoshard
