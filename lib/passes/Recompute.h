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
// recomputed dropout mask equals the forward's). A collective of
// activations (a tensor-parallel all-reduce) is either saved (the
// recomputed region reads the forward's all-reduced value: memory) or
// re-issued (cloned with the ops around it: communication time), per
// RecomputeCollectives; an FSDP parameter gather is always recomputed
// (gathered again, as FSDP2 does with reshard_after_forward).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "passes/Pass.h"
#include "schema/PlacementSchema.h"

namespace spmd::passes {

/// What a checkpointed module does with a collective of activations inside
/// it (a tensor-parallel all-reduce) that its recomputation reads.
enum class RecomputeCollectives {
  Save,     ///< keep the forward's result until the backward (costs its bytes)
  Reissue,  ///< run the collective again in the backward (costs its time)
};

/// A resolved recompute plan: the rules (no Auto among them) and what to do
/// with collectives of activations.
struct RecomputePlan {
  std::vector<schema::RecomputeRule> rules;
  RecomputeCollectives collectives = RecomputeCollectives::Save;
  /// chooseRecompute's: the level of its ladder taken (RecomputeAuto.cpp);
  /// nullopt for rules given as they are.
  std::optional<size_t> level;
};

/// What the caller of chooseRecompute knows before it searches (the joint
/// search of --schema auto, pricing layouts of one program one after
/// another); neither changes the plan chosen when the peak falls as the
/// level rises, only how many levels are tried.
struct RecomputeHints {
  /// The program's peak without recomputation (compiled as it is before):
  /// when over the budget, level 0 is not tried again.
  std::optional<int64_t> peakWithout;
  /// A level to try first, and the one below it when it fits (above it
  /// when not): the level a layout alike took (RecomputePlan::level).
  std::optional<size_t> level;
  /// What that layout's plan freed at `level` (its peak without less its
  /// peak with): with peakWithout, the level tried first is the one that
  /// frees the bytes over the budget at the same bytes per level (alike
  /// layers free alike bytes), not `level` itself.
  std::optional<int64_t> savedAtLevel;
};

/// What recompute did, for the compile's notes.
struct RecomputeSummary {
  int64_t modules = 0;           ///< checkpointed modules the backward reads from
  int64_t recomputedOps = 0;     ///< nodes cloned into the backward
  double recomputedFlops = 0;    ///< their FLOPs (nodeFlops), per rank
  double stepFlops = 0;          ///< the whole step's before recomputation
  int64_t savedBytesBefore = 0;  ///< saved activations per rank before
  int64_t savedBytesAfter = 0;   ///< and after
  /// Collectives of activations the recomputation reads (saved) or runs
  /// again (re-issued); both ways are counted whichever was taken.
  RecomputeCollectives collectivesTaken = RecomputeCollectives::Save;
  int64_t collectives = 0;
  int64_t collectiveBytes = 0;   ///< their results per rank: what saving keeps
  double collectiveSeconds = 0;  ///< their modeled time: what re-issuing adds
};

/// One line for the compile's notes: the recomputed ops and FLOPs, the
/// saved activations before and after, and the collectives of activations
/// both ways; `choice` (what "auto" chose) is appended when not empty.
std::string recomputeNote(const RecomputeSummary& summary, const std::string& choice);

/// One checkpoint region: a module and the rule that made it one.
struct RecomputeRegion {
  std::string path;
  const schema::RecomputeRule* rule = nullptr;
};

/// The regions `rules` make in `program`, in the order their forward runs.
/// Errors as Recompute::run's.
Expected<std::vector<RecomputeRegion>> recomputeRegions(const program::Program& program,
                                                        const std::vector<schema::RecomputeRule>& rules);

/// The figures of RecomputeSummary that recomputation changes or compares
/// with, costly on a large step (a walk of every value and node): the "auto"
/// search's tries, of one program, figure the "before" ones once, and the
/// "after" one only where a note will read it.
struct RecomputeFigures {
  /// savedBytesBefore and stepFlops, when known (every plan of one program
  /// has the same); nullopt: figured.
  std::optional<std::pair<int64_t, double>> before;
  /// False: savedBytesAfter is left at savedBytesBefore (no note reads it).
  bool after = true;
};

/// Applies `plan` to `program`; fills `summary` (its estimates as `figures`
/// asks).
Status applyRecompute(program::Program& program, const RecomputePlan& plan, RecomputeSummary& summary,
                      const RecomputeFigures& figures = {});

/// A plan's estimated per-rank peak and modeled step time.
struct PlanCost {
  int64_t peakBytes = 0;
  double stepSeconds = 0;
  /// Collectives of activations the plan's recomputation reads (-1: not
  /// counted). chooseRecompute skips re-issuing when full recomputation
  /// of every module reads none: it would change nothing.
  int64_t activationCollectives = -1;
  /// Their results' bytes per rank, what saving them keeps (-1: not
  /// counted): re-issuing lowers the peak by at most this much, so
  /// chooseRecompute does not search re-issuing below a level whose peak
  /// minus these bytes is still over the budget.
  int64_t collectiveBytes = -1;
};

/// A level of chooseRecompute's ladder (see RecomputeAuto.cpp) with its cost.
struct PlanRung {
  size_t level = 0;
  PlanCost cost;
};

/// The lowest level whose peak (`costOf`, non-increasing in the level) is
/// within `budget`, between `over` (over it) and `fits` (within it), and
/// the highest level known over it: each level tried is where the line
/// between the bracket's peaks crosses the budget (alike layers free alike
/// bytes: it lands on the answer or next to it), clamped inside the
/// bracket; after two moves of the same end in a row, the midpoint
/// instead, until the other end moves (at most about twice bisection's
/// tries).
Expected<std::pair<PlanRung, PlanRung>> lowestFitting(const std::function<Expected<PlanCost>(size_t)>& costOf,
                                                      PlanRung over, PlanRung fits, int64_t budget);

/// Applies a plan and the passes after it to a copy of the program;
/// returns the copy's estimated per-rank peak and modeled step time.
using PlanPeak = std::function<Expected<PlanCost>(const RecomputePlan&)>;

/// Replaces each Auto entry of `rules` by one rule per module it matches,
/// "none", selective (matmuls and attention saved) or "full": the plan
/// with the least recomputation whose `peakOf` is at most `budget` bytes
/// per rank. Modules are checkpointed in forward order, first selectively,
/// then fully; the lowest fitting level is found by interpolating the peak
/// between levels known to fit and not to fit (safeguarded by bisection),
/// in 4 to 6 tries when the layers are alike. Collectives of activations:
/// `collectives` when given; else both ways are tried (unless
/// PlanCost::collectiveBytes shows re-issuing cannot fit a lower level),
/// and re-issuing is taken only when it lets a plan with less
/// recomputation fit and that plan's modeled step is faster (or when only
/// re-issuing fits). `choice` says what was chosen. A plan
/// without recomputation that fits is taken after one try. Error when even
/// full recomputation of every module does not fit, with the smallest peak
/// found; with `leanestWhenNoFit` that leanest plan is returned instead
/// (--schema auto prices the layout with it, over the budget). `hints`
/// spare tries (RecomputeHints).
Expected<RecomputePlan> chooseRecompute(const program::Program& program,
                                        const std::vector<schema::RecomputeRule>& rules, int64_t budget,
                                        std::optional<RecomputeCollectives> collectives,
                                        const PlanPeak& peakOf, std::string& choice,
                                        bool leanestWhenNoFit = false, const RecomputeHints& hints = {});

class Recompute : public Pass {
 public:
  /// `plan`: the schema's "recompute" entries, "auto" ones resolved
  /// (chooseRecompute); no rules: the pass does nothing.
  explicit Recompute(RecomputePlan plan = {}) : plan_(std::move(plan)) {}
  std::string_view name() const override { return "recompute"; }
  std::string_view description() const override {
    return "activation checkpointing: recompute what a checkpointed module's backward reads";
  }
  /// Errors: rules on a program without a loss output, on a train step whose
  /// ops carry no module paths, or with a glob that matches no module.
  Status run(program::Program& program) override;
  /// What the last run() did.
  const RecomputeSummary& summary() const { return summary_; }
  /// Which estimates the next run() figures (RecomputeFigures).
  void setFigures(RecomputeFigures figures) { figures_ = std::move(figures); }

 private:
  RecomputePlan plan_;
  RecomputeSummary summary_;
  RecomputeFigures figures_;
};

}  // namespace spmd::passes
