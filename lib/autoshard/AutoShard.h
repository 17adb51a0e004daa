// Automatic sharding (`spmdc compile --schema auto`): the cheapest boundary
// layout (parameters, user inputs; optimizer states follow their parameter)
// under a per-rank memory budget, by the modeled cost of the whole compiled
// program (passes::modelLayout). Propagation lays out every intermediate
// value from the chosen boundary, as for a hand-written schema.
//
//   AutoOptions o;
//   o.mesh = *sharding::Mesh::create({2, 2}, {"dp", "tp"});
//   o.memoryBudget = 40LL << 30;
//   auto r = autoShard("llama_train/model.pt2", o);
//   r->schema;                    // an ordinary PlacementSchema
//   schemaJson(r->schema, "...")  // what --write-schema writes
//
// Search: the groups of Variables.h; when the product of their option counts
// is at most exhaustiveLimit, every assignment is compiled and modeled (the
// exact optimum of the model); otherwise seeds (replicated, dp, fsdp, hsdp
// as assignments) followed by local search: each group in turn moves to its
// best option until no move improves or the time limit passes. Layouts over
// the budget lose to any layout within it; when none fits, the error says
// how much memory the leanest layout needs.
//
// Recomputation chosen with the layout (--memory-budget, a train step whose
// ops name their modules): the search ranks layouts by step time alone;
// then the (step, peak) Pareto front of what it saw, fastest first, is
// compiled for the budget: a layout that fits as it is costs its step; one
// that does not gets "recompute": {"model.layers.*": "auto"}
// (passes::chooseRecompute: the least recomputation that fits), and costs
// the step with that recomputation, or is over the budget when even full
// recomputation does not fit (not priced when its weights and optimizer
// states alone exceed the budget). Fastest fitting wins (replicate + recompute
// against shard + save); a layout whose plain step is already slower than
// the best so far is not priced. Error when none fits: the smallest peak
// found and the layouts tried.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoshard/Variables.h"
#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "schema/PlacementSchema.h"
#include "sharding/DeviceProfile.h"

namespace spmd::autoshard {

/// A pipeline the search lays the stages out for (PipelineSearch.h): each
/// layout over the other axes is compiled under `request` on `mesh` (the
/// whole mesh, the pipeline axis included) and priced by pipelinedCost.
struct PipelineSetting {
  schema::PipelineRequest request;
  sharding::Mesh mesh = *sharding::Mesh::create({1});
};

/// Options of autoShard().
struct AutoOptions {
  sharding::Mesh mesh = *sharding::Mesh::create({1});
  /// Null: sharding::defaultDeviceProfile().
  const sharding::DeviceProfile* profile = nullptr;
  /// Per-rank peak bytes; nullopt: unlimited.
  std::optional<int64_t> memoryBudget;
  /// The user's schema: its rules pin what they match (first rule wins).
  const schema::PlacementSchema* pins = nullptr;
  /// Compile options of each evaluation (optimizer, buckets, ...); its mesh
  /// is set from `mesh`, and its propagation cost model from `profile` when
  /// one is given (as spmdc compile --device-profile does).
  passes::CompileOptions compile;
  /// Consider parameters stored sharded and gathered before use (FSDP).
  bool allowGather = true;
  /// Evaluate each layout in a child process (Isolate.h), so that one that
  /// trips an internal error of the compiler is skipped, not fatal.
  bool isolate = true;
  /// Exhaustive search up to this many assignments.
  int64_t exhaustiveLimit = 4096;
  /// Local search stops after this many seconds (the seeds are always
  /// evaluated).
  double timeLimitSeconds = 20;
  /// When the search is not exhaustive: rank layouts with the quick model
  /// (QuickModel.h) and compile this many of its best; 0 compiles every
  /// layout the search visits.
  int64_t finalists = 4;
  /// The quick model prices a stack of repeated layers (Fold.h) from the
  /// program cut to this many layers and to one more, extrapolated to the
  /// whole stack (compute and communication exactly when the layers plan
  /// alike, peak memory within a few percent); 0, or a memory budget,
  /// prices the whole program.
  int foldKeep = 2;
  /// With a memoryBudget, choose recomputation with the layout (the
  /// bottom of this file's comment): a train step whose ops name the
  /// modules of its stack of layers gets "recompute": {"<stack>.*":
  /// "auto"} where the layout alone does not fit.
  bool jointRecompute = true;
  /// Set by the pipeline search (a mesh axis named "pp", PipelineSearch.h):
  /// `mesh` is then the mesh without that axis, and each layout the stages'.
  std::optional<PipelineSetting> pipeline;
};

/// One evaluated layout.
struct Evaluated {
  std::string name;  ///< "dp", "fsdp", "auto", "runner-up", ...
  schema::PlacementSchema schema;
  passes::LayoutCost cost;
  bool fits = true;  ///< peak within the budget
  /// Set when `schema` recomputes for the budget (joint search): the cost
  /// of the same layout without recomputation, which did not fit. `cost`
  /// is then the compiled program's with the recomputation chosen (its
  /// extra compute included).
  std::optional<passes::LayoutCost> plain;
  /// With `plain`: the recompute plan chosen for the budget and what its
  /// search said; spmdc compile applies it to `schema`
  /// (passes::CompileOptions::recomputePlan) instead of searching again.
  std::optional<passes::RecomputePlan> recomputePlan;
  std::string recomputeChoice;
};

/// Within the budget first, then the faster step (over it: the leaner).
bool betterLayout(const Evaluated& a, const Evaluated& b);

/// One pipeline the search priced (or the layout without one).
struct PipelineTried {
  Evaluated best;               ///< the best layout of the other axes under it
  int64_t microbatches = 0;     ///< 0: no pipeline
  double bubble = 0;            ///< (p - 1) / (m + p - 1)
  int64_t p2pBytesPerStep = 0;  ///< bytes each step sends between stages
  std::string error;            ///< set when nothing compiled under it
};

/// What autoShard() chose, and the layouts it compared it with.
struct AutoResult {
  Evaluated chosen;
  /// The presets that compile on this mesh, then the best other layout.
  std::vector<Evaluated> alternatives;
  /// The option each group got: (group match, option text).
  std::vector<std::pair<std::string, std::string>> choices;
  /// "exhaustive", "local search", or "local search on the quick model, N
  /// best compiled".
  std::string method;
  int64_t evaluations = 0;       ///< layouts compiled
  int64_t quickEvaluations = 0;  ///< layouts priced by the quick model
  /// Of those, the layouts it refused because the folded layers plan
  /// unalike under them (QuickModel::unalike).
  int64_t quickUnalike = 0;
  int64_t groups = 0;
  double buildMs = 0;   ///< reading the model, building the groups
  double solveMs = 0;   ///< evaluating layouts
  double searchMs = 0;  ///< of solveMs: the search (the rest: compiling the best and the presets)
  bool timedOut = false;
  /// Layouts skipped because compiling them stopped on an internal error.
  int64_t crashedLayouts = 0;
  /// The joint search's module glob ("model.layers.*"); empty when
  /// recomputation was not chosen with the layout.
  std::string recomputeGlob;
  /// The layouts the joint search priced for the budget, in that order
  /// (with recomputation where they did not fit alone).
  std::vector<Evaluated> recomputeTried;
  /// With a mesh axis named "pp" (PipelineSearch.h): the best layout
  /// without a pipeline (the axis as any other; absent when none
  /// compiles), then the best under each microbatch count tried, in order.
  std::vector<PipelineTried> pipelineTried;
};

/// Chooses the layout of the model at `modelPath` (see the top). Errors: the
/// model does not read, no layout compiles, none fits the budget ("no layout
/// fits the memory budget of X B/rank: the leanest needs Y B/rank (<name>)").
Expected<AutoResult> autoShard(const std::string& modelPath, const AutoOptions& options);

/// The "auto" section of --report: chosen layout and cost, choices,
/// alternatives with their cost ratio, search statistics (JSON text).
std::string autoReportJson(const AutoResult& r, const std::optional<int64_t>& budget);

/// Summary lines: what was chosen and why, alternatives ("fsdp would cost
/// 1.31x: 14 more all_gather").
std::vector<std::string> autoSummaryLines(const AutoResult& r, const std::optional<int64_t>& budget);

}  // namespace spmd::autoshard
