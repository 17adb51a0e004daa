// recompute: activation checkpointing of a train step, as
// torch.utils.checkpoint does it, per module glob of the schema's
// "recompute" field. Inside a checkpointed module only what crosses its
// boundary is kept from the forward; whatever else the backward reads is
// recomputed from those values just before the first backward op that
// needs it.
//
//   "recompute": {"layers.*": "full"}
//   forward  %mm   = aten.mm.default(%x, %w)              {layers.0}  %x: the module's input, kept
//            %relu = aten.relu.default(%mm)               {layers.0}
//            %out  = aten.mm.default(%relu, %w2)          {layers.0}  read by layers.1: kept
//   backward %g    = aten.threshold_backward.default(%d, %relu)
// becomes
//   backward %mm_rc   = aten.mm.default(%x, %w)
//            %relu_rc = aten.relu.default(%mm_rc)
//            %g       = aten.threshold_backward.default(%d, %relu_rc)
// and %relu dies at its last forward reader instead of living until the
// backward. Random ops are never recomputed (their outputs are kept, so a
// recomputed dropout mask equals the forward's), and neither are
// collectives of activations (a recomputed tensor-parallel region reuses the
// forward's all-reduced value instead of re-issuing the all-reduce); an
// FSDP parameter gather is recomputed (gathered again, as FSDP2 does with
// reshard_after_forward).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "passes/Pass.h"
#include "schema/PlacementSchema.h"

namespace spmd::passes {

/// What recompute did, for the compile's notes.
struct RecomputeSummary {
  int64_t modules = 0;           ///< checkpointed modules the backward reads from
  int64_t recomputedOps = 0;     ///< nodes cloned into the backward
  double recomputedFlops = 0;    ///< their FLOPs (nodeFlops), per rank
  double stepFlops = 0;          ///< the whole step's before recomputation
  int64_t savedBytesBefore = 0;  ///< saved activations per rank before
  int64_t savedBytesAfter = 0;   ///< and after
};

/// One checkpoint region: a module and the rule that made it one.
struct RecomputeRegion {
  std::string path;
  const schema::RecomputeRule* rule = nullptr;
};

/// The regions `rules` make in `program`, in the order their forward runs.
/// Errors as Recompute::run's.
Expected<std::vector<RecomputeRegion>> recomputeRegions(const program::Program& program,
                                                        const std::vector<schema::RecomputeRule>& rules);

/// Applies `rules` (no Auto among them) to `program`; fills `summary`.
Status applyRecompute(program::Program& program, const std::vector<schema::RecomputeRule>& rules,
                      RecomputeSummary& summary);

/// Applies a plan (rules without Auto) and the passes after it to a copy
/// of the program; returns the copy's estimated per-rank peak.
using PlanPeak = std::function<Expected<int64_t>(const std::vector<schema::RecomputeRule>&)>;

/// Replaces each Auto entry of `rules` by one rule per module it matches,
/// "none", selective (matmuls and attention saved) or "full": the plan
/// with the least recomputation whose `peakOf` is at most `budget` bytes
/// per rank. Modules are checkpointed in forward order, first selectively,
/// then fully. `choice` says what was chosen. Error when even full
/// recomputation of every module does not fit, with the smallest peak found.
Expected<std::vector<schema::RecomputeRule>> chooseRecompute(const program::Program& program,
                                                             const std::vector<schema::RecomputeRule>& rules,
                                                             int64_t budget, const PlanPeak& peakOf,
                                                             std::string& choice);

class Recompute : public Pass {
 public:
  /// `rules`: the schema's "recompute" entries, "auto" ones resolved
  /// (chooseRecompute); none: the pass does nothing.
  explicit Recompute(std::vector<schema::RecomputeRule> rules = {}) : rules_(std::move(rules)) {}
  std::string_view name() const override { return "recompute"; }
  std::string_view description() const override {
    return "activation checkpointing: recompute what a checkpointed module's backward reads";
  }
  /// Errors: rules on a program without a loss output, on a train step whose
  /// ops carry no module paths, or with a glob that matches no module.
  Status run(program::Program& program) override;
  /// What the last run() did.
  const RecomputeSummary& summary() const { return summary_; }

 private:
  std::vector<schema::RecomputeRule> rules_;
  RecomputeSummary summary_;
};

}  // namespace spmd::passes
