// autoShardPipelined (PipelineSearch.h): the layout without a pipeline
// against 1F1B pipelines over the "pp" axis at a few microbatch counts.
#include "autoshard/PipelineSearch.h"

#include <optional>
#include <utility>
#include <vector>

namespace spmd::autoshard {
namespace {

// `mesh` without axis `axis`; a mesh of one "dp" rank when nothing is left
// (as passes::pipelineSetup compiles the stages).
sharding::Mesh without(const sharding::Mesh& mesh, int64_t axis) {
  std::vector<int64_t> shape = mesh.shape();
  std::vector<std::string> names = mesh.axisNames();
  shape.erase(shape.begin() + axis);
  names.erase(names.begin() + axis);
  if (shape.empty()) shape = {1}, names = {mesh.axisIndex("dp") < 0 ? "dp" : "pp_dp"};
  return *sharding::Mesh::create(shape, names);
}

// Rows of the batch: dim 0 of the first user input with one; 0 if none.
int64_t batchRows(const std::string& modelPath) {
  auto a = pt2::readArchive(modelPath, {.loadWeights = false});
  if (!a) return 0;
  for (const auto& in : a->program.signature.inputs)
    if (in.kind == ir::InputKind::UserInput && in.value && in.value->isTensor() &&
        !in.value->type().sizes.empty() && in.value->type().sizes[0].isStatic())
      return in.value->type().sizes[0].value();
  return 0;
}

// The pipelines to try on an axis of `p` ranks: the pins' own, or 1F1B at
// p, 2p and 4p microbatches (those dividing the batch's `rows`).
std::vector<schema::PipelineRequest> requests(const AutoOptions& o, const std::string& axis, int64_t p,
                                              int64_t rows) {
  if (o.pins && o.pins->pipeline) return {*o.pins->pipeline};
  std::vector<schema::PipelineRequest> out;
  for (int64_t m : {p, 2 * p, 4 * p}) {
    if (rows > 0 && (m > rows || rows % m != 0)) continue;
    schema::PipelineRequest r;
    r.axis = axis;
    r.stageCount = p;
    r.schedule = "1f1b";
    r.microbatches = m;
    out.push_back(r);
  }
  return out;
}

// The best layout of the other axes under `setting`, as the schema of the
// whole mesh (the result's chosen and alternatives), with the pipeline's
// figures; `tried.error` set when none compiled.
std::pair<PipelineTried, std::optional<AutoResult>> tryPipeline(const std::string& modelPath,
                                                                const AutoOptions& options,
                                                                const PipelineSetting& setting) {
  PipelineTried tried;
  tried.microbatches = setting.request.microbatches;
  AutoOptions sub = options;
  sub.mesh = without(setting.mesh, setting.mesh.axisIndex(setting.request.axis));
  sub.pipeline = setting;
  sub.finalists = 0;           // the quick model knows no pipeline: compile each layout
  sub.jointRecompute = false;  // recomputation is not chosen with a pipeline
  auto r = searchLayout(modelPath, sub);
  if (!r) {
    tried.error = r.status().message();
    return {tried, std::nullopt};
  }
  r->chosen.schema = withPipeline(r->chosen.schema, setting);
  for (auto& a : r->alternatives) a.schema = withPipeline(a.schema, setting);
  tried.best = r->chosen;
  // The chosen pipeline's figures for the report: compiled once more.
  passes::CompileOptions whole = options.compile;
  whole.mesh = setting.mesh.shape();
  if (options.profile) whole.cost = sharding::costModelFor(*options.profile, setting.mesh);
  if (auto a = pt2::readArchive(modelPath, {.loadWeights = false}))
    if (auto c = passes::compile(*a, r->chosen.schema, whole)) {
      const auto& profile = options.profile ? *options.profile : sharding::defaultDeviceProfile();
      PipelinedCost pc = pipelinedCost(c->program, profile, setting.mesh);
      tried.bubble = pc.bubble;
      tried.p2pBytesPerStep = pc.p2pBytes;
    }
  return {tried, std::move(*r)};
}

}  // namespace

int64_t pipelineAxisToSearch(const AutoOptions& o) {
  if (o.pipeline) return -1;
  int64_t a = o.mesh.axisIndex(o.pins && o.pins->pipeline ? o.pins->pipeline->axis : "pp");
  return a >= 0 && o.mesh.size(a) > 1 ? a : -1;
}

Expected<AutoResult> autoShardPipelined(const std::string& modelPath, const AutoOptions& options) {
  const int64_t axis = pipelineAxisToSearch(options);
  const std::string axisName = options.mesh.axisNames()[static_cast<size_t>(axis)];
  std::vector<PipelineTried> tried;
  std::optional<AutoResult> best;
  std::string errors;
  auto consider = [&](PipelineTried t, std::optional<AutoResult> r) {
    if (!t.error.empty())
      errors += (errors.empty() ? "" : "; ") +
                (t.microbatches ? std::to_string(t.microbatches) + " microbatches: " : "no pipeline: ") +
                t.error;
    if (r && (!best || betterLayout(r->chosen, best->chosen))) best = std::move(r);
    tried.push_back(std::move(t));
  };
  const int64_t p = options.mesh.size(axis);
  const bool flatToo = !options.pins || !options.pins->pipeline;
  const auto pipelines = requests(options, axisName, p, batchRows(modelPath));
  // The searches share the time limit.
  AutoOptions each = options;
  each.timeLimitSeconds /= static_cast<double>(pipelines.size() + (flatToo ? 1 : 0));
  if (flatToo) {  // the axis as any other
    auto flat = searchLayout(modelPath, each);
    PipelineTried t;
    if (flat)
      t.best = flat->chosen;
    else
      t.error = flat.status().message();
    consider(std::move(t), flat ? std::optional<AutoResult>(std::move(*flat)) : std::nullopt);
  }
  for (const auto& request : pipelines) {
    auto [t, r] = tryPipeline(modelPath, each, {request, options.mesh});
    consider(std::move(t), std::move(r));
  }
  if (!best)
    return Status::error("--schema auto: no layout compiles or fits, with or without a pipeline: " + errors);
  best->pipelineTried = std::move(tried);
  if (best->chosen.schema.pipeline)
    best->method = "pipeline over '" + axisName + "' (" +
                   std::to_string(best->chosen.schema.pipeline->microbatches) + " microbatches, 1f1b), " +
                   best->method;
  return std::move(*best);
}

}  // namespace spmd::autoshard
