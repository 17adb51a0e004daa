// Layout and recomputation chosen together (AutoShard.h, "Recomputation
// chosen with the layout"): which layouts the search saw are priced for the
// budget, in which order, and what is said when none fits.
//
//   seen:   dp 1.0 ms 9 MB, tp 1.2 ms 6 MB, fsdp 1.4 ms 5 MB, x 1.5 ms 7 MB
//   front:  dp, tp, fsdp   (x is slower and fatter than tp)
//   budget 8 MB: dp + recompute 1.1 ms fits; tp (plain 1.2 ms) is not priced
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autoshard/AutoShard.h"
#include "ir/Graph.h"
#include "passes/Pipeline.h"
#include "pt2/Archive.h"

namespace spmd::autoshard {

/// The module glob the joint search checkpoints: "<stack>.*" for the
/// largest stack of layers among the stored inputs (Fold.h), when
/// `program` is a train step (a loss output) and some op names a module
/// of that stack in its nn_module_stack; nullopt otherwise.
std::optional<std::string> recomputeGlob(const ir::ExportedProgram& program);

/// `s` with "recompute": {glob: "auto"} (its own recompute rules dropped).
schema::PlacementSchema withRecompute(const schema::PlacementSchema& s, const std::string& glob);

/// A layout the search saw: its assignment and its (quick or compiled)
/// cost without recomputation.
struct JointCandidate {
  std::vector<size_t> choice;
  Evaluated seen;
};

/// The candidates no other one beats on both step and peak, fastest first
/// (on ties of step, the leaner one only).
std::vector<JointCandidate> paretoFront(std::vector<JointCandidate> all);

/// At most `k` of `front` (k >= 2), evenly spaced from its first to its
/// last.
std::vector<JointCandidate> spreadOut(std::vector<JointCandidate> front, size_t k);

/// The model read once, without weights (read when first asked); the
/// caller's, which RecomputePricer copies and never changes.
using SharedArchive = std::function<Expected<const pt2::Archive*>()>;

/// Prices layouts with "recompute": {glob: "auto"} for a budget, in this
/// process and each once: one compile on a copy of the archive read once,
/// whose "auto" search (passes::chooseRecompute) gives the plan; the plan
/// and the search's words come back with the cost, for the final compile.
class RecomputePricer {
 public:
  /// `options`: the compile options of the search's evaluations, with
  /// memoryBudget set (recomputeLeanestWhenNoFit: a layout no plan fits is
  /// priced with the leanest, over the budget).
  RecomputePricer(SharedArchive archive, passes::CompileOptions options,
                  const sharding::DeviceProfile& profile);
  /// `s` (its "auto" entries) compiled for the budget: the cost with the
  /// plan chosen, Evaluated::recomputePlan and recomputeChoice set, `fits`
  /// against the budget. `plainPeak`: the layout's peak without
  /// recomputation, over the budget (passes::RecomputeHints::peakWithout);
  /// the search starts at the level that frees what is over the budget at the
  /// bytes per level the last layout that fit freed (RecomputeHints). Errors:
  /// the model does not read, `s` does not compile.
  Expected<Evaluated> price(const std::string& name, const schema::PlacementSchema& s, int64_t plainPeak);
  /// price()'s answer for `s` when it was priced before; nullopt otherwise.
  std::optional<Evaluated> priced(const std::string& name, const schema::PlacementSchema& s) const;
  int64_t count() const { return static_cast<int64_t>(cache_.size()); }

 private:
  SharedArchive archive_;
  passes::CompileOptions options_;
  const sharding::DeviceProfile& profile_;
  std::map<std::string, Expected<Evaluated>> cache_;
  std::optional<size_t> lastLevel_;   ///< the level the last layout that fit took
  std::optional<int64_t> lastSaved_;  ///< and the bytes it freed there
};

/// Prices one layout for the budget: without recomputation when that fits
/// or when its weights and optimizer states alone (LayoutCost::paramBytes,
/// part of every peak) exceed it, else with "auto" recomputation
/// (Evaluated::plain set); an error when it does not compile.
using JointPrice = std::function<Expected<Evaluated>(const JointCandidate&)>;

/// What the joint search found.
struct JointOutcome {
  std::optional<Evaluated> best, second;
  std::vector<size_t> bestChoice;
  std::vector<Evaluated> tried;  ///< every layout priced, in order
};

/// Prices `order` (fastest first) with `price` until a candidate's step
/// without recomputation is no faster than the best fitting step found
/// (recomputation only adds time), or `limit` were priced and one fits;
/// when none fits by then, the leanest candidate (`order.back()`) too.
JointOutcome chooseJointly(const std::vector<JointCandidate>& order, const JointPrice& price, size_t limit);

/// The one-line error when no layout fits even with recomputation: the
/// smallest peak found and every layout tried with its peak (and, where
/// they exceed `budget`, its weights and optimizer states).
Status noJointFit(int64_t budget, const std::string& glob, const std::vector<Evaluated>& tried);

}  // namespace spmd::autoshard
