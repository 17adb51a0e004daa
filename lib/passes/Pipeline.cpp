// compile(): the phases in order, each timed.
#include "passes/Pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <unordered_set>

#include "passes/ContextParallelCost.h"
#include "passes/Expand.h"
#include "passes/ExpandLossParallel.h"
#include "passes/ExpertParallel.h"
#include "passes/GraphPass.h"
#include "passes/LayoutCost.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"
#include "passes/Report.h"
#include "pipeline/Verify.h"
#include "program/ProgramJson.h"
#include "schema/ForeignOps.h"
#include "schema/Resolve.h"
#include "sharding/Propagation.h"
#include "sharding/RuleText.h"
#include "support/Log.h"
#include "support/Strings.h"
#include "support/Version.h"

namespace spmd::passes {
namespace {

using Clock = std::chrono::steady_clock;

class PhaseTimer {
 public:
  explicit PhaseTimer(std::vector<std::pair<std::string, double>>& out) : out_(out) {}
  void done(const std::string& phase) {
    auto now = Clock::now();
    out_.emplace_back(phase, std::chrono::duration<double, std::milli>(now - start_).count());
    start_ = now;
  }

 private:
  std::vector<std::pair<std::string, double>>& out_;
  Clock::time_point start_ = Clock::now();
};

// Weight entries of every stored input. By reference (an archive exported
// with `--hf DIR`, unless --embed-weights): parameters point at their
// checkpoint tensor and optimizer states start as zeros the runtime makes.
void fillWeights(const pt2::Archive& archive, program::Program& p, bool embed) {
  bool byReference = !embed && !archive.weightsRoot.empty();
  if (byReference) p.weightsRoot = archive.weightsRoot;
  for (size_t i = 0; i < p.graph.signature.inputs.size(); ++i) {
    const ir::InputSpec& in = p.graph.signature.inputs[i];
    bool stored = ir::isStored(in.kind);
    if (!stored || !in.value) continue;
    const pt2::TensorPayload* t = archive.payload(in.target);
    program::WeightEntry w;
    w.fqn = in.target;
    w.dtype = t ? t->dtype : in.value->type().dtype;
    for (const auto& d : p.inputs[i].globalType.sizes) w.globalShape.push_back(d.value());
    for (const auto& d : in.value->type().sizes) w.localShape.push_back(d.value());
    w.spec = p.inputs[i].spec;
    if (byReference && t && t->external) {
      w.source.emplace();
      w.source->file = t->external->file;
      w.source->tensor = t->external->tensor;
    } else if (byReference && !t && w.fqn.rfind(kOptimizerPrefix, 0) == 0) {
      w.source.emplace();
      w.source->zeros = true;
    }
    p.weights.push_back(std::move(w));
  }
}

// A plan the "auto" search tried that fits, with its program after the
// passes and what recompute did: the lowest fitting level of one way of
// treating collectives.
struct TriedPlan {
  RecomputePlan plan;
  program::Program program;
  RecomputeSummary summary;
};

// The schema's recompute entries with "auto" ones chosen for the budget:
// each plan is tried on a copy of `p` through the passes, then
// estimateMemory (RecomputeAuto.cpp); or the plan chosen before
// (CompileOptions::recomputePlan). `kept[way]`: the lowest fitting plan
// tried of each way (RecomputeCollectives), whose program the compile takes
// instead of running the passes again when it is the plan chosen.
Expected<RecomputePlan> resolveRecompute(const program::Program& p,
                                         const std::vector<schema::RecomputeRule>& rules,
                                         const CompileOptions& options, bool reshard, std::string& choice,
                                         std::optional<TriedPlan> (&kept)[2]) {
  if (!schema::hasAutoRecompute(rules))
    return RecomputePlan{rules, options.recomputeCollectives.value_or(RecomputeCollectives::Save),
                         std::nullopt};
  if (!options.memoryBudget)
    return Status::error(
        "recompute: \"auto\" chooses what to recompute for a per-rank memory budget: give --memory-budget "
        "(e.g. 2GiB)");
  if (options.recomputePlan) {
    choice = options.recomputeChoice;
    return *options.recomputePlan;
  }
  // The program before recomputation is the same on every try: its figures
  // once (none without notes).
  RecomputeFigures figures;
  if (!options.recomputeNotes) figures = {std::make_pair(int64_t{0}, 0.0), false};
  PlanPeak peakOf = [&](const RecomputePlan& plan) -> Expected<PlanCost> {
    program::Program copy = program::copyProgram(p);
    RecomputeSummary summary;
    for (auto& pass : defaultPasses(options.async, options.bucketBytes, plan.rules,
                                    plan.collectives == RecomputeCollectives::Reissue, reshard)) {
      auto* rc = dynamic_cast<Recompute*>(pass.get());
      if (rc) rc->setFigures(figures);
      SPMD_RETURN_IF_ERROR(pass->run(copy));
      if (!rc) continue;
      summary = rc->summary();
      if (!figures.before && !plan.rules.empty())
        figures.before = std::make_pair(summary.savedBytesBefore, summary.stepFlops);
    }
    const LayoutCost cost = modelLayout(copy, sharding::defaultDeviceProfile());
    logging::debug("recompute auto: tried ", plan.rules.size(), " rules",
                   plan.collectives == RecomputeCollectives::Reissue ? " re-issued" : "", ": peak ",
                   cost.peakBytes);
    auto& slot = kept[plan.collectives == RecomputeCollectives::Reissue ? 1 : 0];
    if (cost.peakBytes <= *options.memoryBudget && plan.level &&
        (!slot || *plan.level < slot->plan.level.value_or(0)))
      slot = TriedPlan{plan, std::move(copy), summary};
    return PlanCost{cost.peakBytes, cost.stepSeconds(), summary.collectives, summary.collectiveBytes};
  };
  return chooseRecompute(p, rules, *options.memoryBudget, options.recomputeCollectives, peakOf, choice,
                         options.recomputeLeanestWhenNoFit, options.recomputeHints);
}

// Every --print-after name must be a pass (with --no-async too, the async
// pass's name is known: asking for it then prints nothing, as documented;
// so is append-optimizer's without --optimizer).
Status checkPrintAfter(const CompileOptions& options) {
  std::vector<std::string> known;
  for (auto& pass : defaultGraphPasses()) known.emplace_back(pass->name());
  for (auto& pass : defaultPasses(true, options.bucketBytes)) known.emplace_back(pass->name());
  for (const auto& name : options.printAfter) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return Status::error("--print-after " + name + ": no such pass; the passes are " + list +
                         " (spmdc --list-passes)");
  }
  return Status::ok();
}

// Runs the graph passes in order, resolving the schema's placements (and
// laying optimizer states out like their parameters) before the first pass
// that reads them; returns the placements. Each pass is a phase of its own.
Expected<schema::ResolvedPlacements> runGraphPasses(pt2::Archive& archive,
                                                    const schema::PlacementSchema& schema,
                                                    const CompileOptions& options, PhaseTimer& timer,
                                                    const PipelineSetup* pipeline) {
  std::optional<schema::ResolvedPlacements> placements;
  GraphPassContext context{schema, options};
  auto place = [&]() -> Status {
    SPMD_ASSIGN_OR_RETURN(placements, schema::resolvePlacements(schema, archive.program, options.mesh));
    if (pipeline)
      SPMD_RETURN_IF_ERROR(addMicrobatchAxis(*placements, archive.program, pipeline->request,
                                             pipeline->microbatches, pipeline->microbatchIndex)
                               .withContext(schema.source));
    alignOptimizerStates(archive.program, *placements);
    context.placements = &*placements;
    timer.done("placement");
    return Status::ok();
  };
  for (auto& pass : defaultGraphPasses(!options.optimizer.kind.empty())) {
    if (pass->needsPlacements() && !placements) SPMD_RETURN_IF_ERROR(place());
    if (Status st = pass->run(archive.program, context); !st.isOk()) return st.withContext(archive.path);
    timer.done(std::string(pass->name()));
    for (const auto& name : options.printAfter)
      if (name == pass->name() && options.onPrintGraphAfter) options.onPrintGraphAfter(name, archive.program);
  }
  if (!placements) SPMD_RETURN_IF_ERROR(place());
  return std::move(*placements);
}

}  // namespace

std::string passListing() {
  std::string out;
  for (const auto& pass : defaultGraphPasses())
    out.append(pass->name()).append(" (before propagation): ").append(pass->description()).append("\n");
  for (const auto& pass : defaultPasses())
    out.append(pass->name()).append(": ").append(pass->description()).append("\n");
  return out;
}

namespace {
Expected<CompileResult> compileOne(pt2::Archive& archive, const schema::PlacementSchema& schema,
                                   const CompileOptions& options, const PipelineSetup* pipeline);
}  // namespace

namespace {

// bucket-collectives on a pipelined program: the all-reduces of each
// stage's optimizer step (the gradients' reductions over dp after their
// accumulation over the microbatches), one stage's per bucket; not those
// over the microbatch axis (the accumulations themselves), nor the loss's
// (the pipeline finds its forward from the loss).
Status bucketStepReductions(program::Program& p, const program::PipelinePlan& plan, int64_t bucketBytes) {
  std::unordered_set<const ir::Value*> losses;
  for (const auto& o : p.graph.signature.outputs)
    if (o.kind == ir::OutputKind::LossOutput && o.arg.value()) losses.insert(o.arg.value());
  BucketCollectives pass(bucketBytes, [&](const ir::Node& n) -> std::optional<std::string> {
    const program::PipelinePlace& place = plan.places[static_cast<size_t>(n.index())];
    const ir::Argument* axis = n.input("axis");
    if (place.phase != program::PipelinePlace::Phase::Step || !axis || axis->strings.empty() ||
        axis->strings[0] == plan.microbatchAxis || losses.count(n.outputValues()[0]))
      return std::nullopt;
    return std::to_string(place.stage);
  });
  return pass.run(p).withContext("pass bucket-collectives");
}

}  // namespace

Expected<CompileResult> compile(pt2::Archive& archive, const schema::PlacementSchema& schema,
                                const CompileOptions& options) {
  if (schema.contextParallel && schema.contextParallel->rotate == "auto")
    return compileAutoRotate(archive, schema, options);
  if (!schema.pipeline) return compileOne(archive, schema, options, nullptr);
  SPMD_ASSIGN_OR_RETURN(PipelineSetup setup, pipelineSetup(schema, options.mesh));
  CompileOptions inner = options;
  inner.mesh = setup.innerMesh;
  // Accumulated gradients are reduced once per step, by each stage alone:
  // no buckets spanning stages, no collectives moved across microbatches.
  inner.bucketBytes = 0;
  inner.async = false;
  // Moving data across microbatches is not possible (they run at different
  // times): only the accumulations the outputs force may cross that axis,
  // and they come first (a gradient is accumulated, then reduced over dp
  // once per step, as DDP and FSDP2 under torch.distributed.pipelining).
  inner.cost.setAxisLink(setup.microbatchIndex, {1e3, 1e3, true});
  SPMD_ASSIGN_OR_RETURN(CompileResult r, compileOne(archive, setup.inner, inner, &setup));
  auto plan = pipeline::planPipeline(r.program, setup.request);
  if (!plan) return plan.status().withContext(archive.path);
  if (options.bucketBytes > 0) {  // each stage's step reduces its gradients in buckets, once per step
    SPMD_RETURN_IF_ERROR(
        bucketStepReductions(r.program, *plan, options.bucketBytes).withContext(archive.path));
    plan = pipeline::planPipeline(r.program, setup.request);
    if (!plan) return plan.status().withContext(archive.path);
  }
  r.program.pipeline = std::move(*plan);
  SPMD_RETURN_IF_ERROR(pipeline::verifyPipeline(r.program).withContext(archive.path));
  r.notes.push_back(pipelineNote(r.program));
  r.program.provenance.emplace_back("schema", schema.source.substr(schema.source.rfind('/') + 1));
  return r;
}

namespace {

Expected<CompileResult> compileOne(pt2::Archive& archive, const schema::PlacementSchema& schema,
                                   const CompileOptions& options, const PipelineSetup* pipeline) {
  CompileResult r;
  SPMD_RETURN_IF_ERROR(checkPrintAfter(options));
  // An op the runtime has no kernel for would fail on every rank: refused here.
  SPMD_RETURN_IF_ERROR(schema::checkForeignOps(archive.program, schema).withContext(archive.path));
  PhaseTimer timer(r.timingsMs);
  SPMD_ASSIGN_OR_RETURN(schema::ResolvedPlacements placements,
                        runGraphPasses(archive, schema, options, timer, pipeline));
  const ir::ExportedProgram& source = archive.program;
  r.notes = placements.notes;
  SPMD_RETURN_IF_ERROR(checkExpertPlacements(source, placements).withContext(archive.path));

  sharding::PropagationOptions popts;
  popts.cost = options.cost;
  popts.replicateUnknown = options.replicateUnknown;
  // The schema's own op rules (custom ops) join the built-in ones.
  sharding::RuleRegistry registry = sharding::defaultRuleRegistry();
  for (const auto& [target, rule] : schema.opRules) registry.set(target, sharding::ruleFromTemplate(rule));
  auto prop = sharding::propagate(source, placements.inputs, placements.mesh, registry, popts);
  if (!prop) return prop.status().withContext(archive.path);
  r.warnings = placements.warnings;
  r.warnings.insert(r.warnings.end(), prop->warnings.begin(), prop->warnings.end());
  auto lossNotes = lossParallelNotes(source, *prop, placements.mesh);  // loss parallelism
  r.notes.insert(r.notes.end(), lossNotes.begin(), lossNotes.end());
  timer.done("propagation");

  ExpandInput in;
  in.source = &source;
  in.propagation = &*prop;
  in.mesh = placements.mesh;
  in.inputSpecs = placements.inputs;
  in.outputSpecs = placements.outputs;
  in.cost = options.cost;
  in.notes = &r.notes;
  auto expanded = expand(in);
  if (!expanded) return expanded.status().withContext(archive.path);
  r.program = std::move(*expanded);
  timer.done("expansion");

  fillWeights(archive, r.program, options.embedWeights);  // before the passes: recompute's "auto" counts them
  std::string choice;
  std::optional<TriedPlan> kept[2];
  // FSDP2's default; under a pipeline a stage keeps its gathered parameters
  // across microbatches (torchtitan's default with pp).
  const bool reshard = schema.reshardAfterForward.value_or(pipeline == nullptr);
  auto recompute = resolveRecompute(r.program, schema.recompute, options, reshard, choice, kept);
  if (!recompute) return recompute.status().withContext(archive.path);
  if (schema::hasAutoRecompute(schema.recompute)) {
    r.recomputePlan = *recompute;
    r.recomputeChoice = choice;
  }
  // The search ran the passes with the plan chosen: its program is taken.
  auto& tried = kept[recompute->collectives == RecomputeCollectives::Reissue ? 1 : 0];
  const bool reuse =
      tried && recompute->level && tried->plan.level == recompute->level && options.printAfter.empty();
  if (reuse) {
    r.program = std::move(tried->program);
    r.notes.push_back(recomputeNote(tried->summary, choice));
    timer.done("passes (as the recompute search ran them)");
  }
  for (auto& pass : reuse ? std::vector<std::unique_ptr<Pass>>{}
                          : defaultPasses(options.async, options.bucketBytes, recompute->rules,
                                          recompute->collectives == RecomputeCollectives::Reissue, reshard)) {
    Status st = pass->run(r.program);
    if (!st.isOk()) return st.withContext(archive.path + ": pass " + std::string(pass->name()));
    if (const auto* rc = dynamic_cast<const Recompute*>(pass.get()); rc && !schema.recompute.empty())
      r.notes.push_back(recomputeNote(rc->summary(), choice));
    if (const auto* rf = dynamic_cast<const ReshardAfterForward*>(pass.get());
        rf && rf->summary().gathers > 0)
      r.notes.push_back(reshardNote(rf->summary()));
    timer.done(std::string(pass->name()));
    for (const auto& name : options.printAfter)
      if (name == pass->name() && options.onPrintAfter) options.onPrintAfter(name, r.program);
  }
  // File names only: provenance must not depend on where the files live.
  auto base = [](const std::string& path) { return path.substr(path.rfind('/') + 1); };
  r.program.provenance = {{"source", base(archive.path)}, {"compiler", "spmdc " + std::string(kVersion)}};
  if (!pipeline)
    r.program.provenance.insert(r.program.provenance.begin() + 1, {"schema", base(schema.source)});
  return r;
}

}  // namespace
}  // namespace spmd::passes
