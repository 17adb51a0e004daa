// The whole compilation: graph passes (GraphPass.h) -> placement schema ->
// propagation -> expansion -> passes, with phase timings.
//
//   auto schema = *schema::loadSchemaOrPreset("schemas/examples/mlp_tp.json");
//   auto result = *compile(archive, schema, {.mesh = {{8}}});
//   result.program.collectives.size();   // 1: the all-reduce of fc2's output
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "passes/Optimizer.h"
#include "passes/Pass.h"
#include "passes/Recompute.h"
#include "program/Program.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"
#include "sharding/CostModel.h"
#include "sharding/DeviceProfile.h"

namespace spmd::passes {

/// Options of compile().
struct CompileOptions {
  /// --mesh: overrides or supplies the schema's mesh shape.
  std::optional<std::vector<int64_t>> mesh;
  /// Run ops without a sharding rule replicated instead of refusing.
  bool replicateUnknown = false;
  /// Run the async-collectives pass.
  bool async = true;
  /// Gradient bucket size for bucket-collectives (0: no bucketing).
  int64_t bucketBytes = kDefaultBucketBytes;
  /// Pass names after which `onPrintAfter` (a pass after expansion) or
  /// `onPrintGraphAfter` (a graph pass, before propagation) is called.
  std::vector<std::string> printAfter;
  std::function<void(const std::string& pass, const program::Program&)> onPrintAfter;
  std::function<void(const std::string& pass, const ir::ExportedProgram&)> onPrintGraphAfter;
  sharding::CostModel cost = sharding::CostModel();
  /// --profile: the device profile "rotate": "auto" prices both forms on
  /// (null: sharding::defaultDeviceProfile()).
  const sharding::DeviceProfile* profile = nullptr;
  /// Append this optimizer's update (train-step graphs).
  OptimizerOptions optimizer;
  /// --memory-budget: per-rank bytes a "recompute": "auto" plan must fit.
  std::optional<int64_t> memoryBudget;
  /// --recompute-collectives: what a recomputed module does with its
  /// collectives of activations; nullopt: save them, except that "auto"
  /// under memoryBudget tries both (chooseRecompute).
  std::optional<RecomputeCollectives> recomputeCollectives;
  /// --schema auto's joint search: when no "auto" plan fits memoryBudget,
  /// apply the leanest (every module fully recomputed) instead of refusing,
  /// so that the layout is priced, over the budget.
  bool recomputeLeanestWhenNoFit = false;
  /// The plan of the schema's "auto" recompute entries, chosen before for
  /// this schema and memoryBudget (--schema auto's joint search hands its
  /// winner's, CompileResult::recomputePlan): applied as it is, without
  /// searching again; `recomputeChoice` is what that search said (the note).
  std::optional<RecomputePlan> recomputePlan;
  std::string recomputeChoice;
  /// What the caller knows that spares the "auto" search tries (the joint
  /// search pricing layouts one after another); the plan chosen is the same.
  RecomputeHints recomputeHints;
  /// False: the "auto" search's tries figure no saved activations or FLOPs
  /// for the recompute note (RecomputeFigures): a caller that reads only
  /// the plan, its choice and the program's cost (--schema auto pricing
  /// layouts; its final compile writes the note).
  bool recomputeNotes = true;
  /// --mixed-precision: the policy the train step must have been exported
  /// with (passes/MixedPrecision.h); nullopt: the schema's, or the archive's.
  std::optional<schema::MixedPrecisionRequest> mixedPrecision;
  /// --embed-weights: copy an archive's by-reference weights into the
  /// program instead of pointing at their checkpoint files.
  bool embedWeights = false;
};

/// What compile() produced besides the program.
struct CompileResult {
  program::Program program;
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
  /// Milliseconds per phase, in phase order.
  std::vector<std::pair<std::string, double>> timingsMs;
  /// When the schema has "auto" recompute entries: the plan applied (every
  /// module's rule, the collectives' way) and what the search said of it.
  std::optional<RecomputePlan> recomputePlan;
  std::string recomputeChoice;
};

/// Compiles `archive` under `schema`. Weight entries (FQN, placement,
/// shapes) are filled; their bytes are written by program::writeProgram
/// (through an OptimizerWeightSource when an optimizer was appended). With
/// an optimizer, the archive's program gets its update appended.
Expected<CompileResult> compile(pt2::Archive& archive, const schema::PlacementSchema& schema,
                                const CompileOptions& options);

/// Every pass compile() can run, in order, one line each (`spmdc
/// --list-passes`): "append-optimizer (before propagation): append ...",
/// then the passes after expansion as "dedup-collectives: merge ...".
std::string passListing();

}  // namespace spmd::passes
