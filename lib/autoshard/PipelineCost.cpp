// pipelinedCost and compilePriced (PipelineSearch.h): the modeled step and
// peak of a pipelined program, per pipeline rank.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autoshard/PipelineSearch.h"
#include "ir/Collectives.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "pipeline/StageGraphs.h"
#include "support/Log.h"

namespace spmd::autoshard {
namespace {

using Phase = program::PipelinePlace::Phase;

// What one pipeline rank does and holds (seconds per microbatch, per
// step; bytes).
struct RankLoad {
  double mbCompute = 0, mbComm = 0;      // forward + backward of one microbatch
  double stepCompute = 0, stepComm = 0;  // the optimizer step, once
  double weights = 0, accumulated = 0, saved = 0, transient = 0, stepPeak = 0;
  // Per axis (the pipeline axis: the sends): seconds and collectives, per
  // microbatch and per step; mbComm and stepComm are their sums.
  std::map<std::string, std::pair<double, int64_t>> mbAxes, stepAxes;
};

// The bytes of weight `w` on one rank.
double weightBytes(const program::WeightEntry& w) {
  double n = 1;
  for (int64_t d : w.localShape) n *= static_cast<double>(d);
  return n * static_cast<double>(ir::elementSize(w.dtype));
}

// Microbatches whose activations rank `r` holds at once.
int64_t inFlight(const program::PipelinePlan& plan, int64_t m, int64_t r) {
  if (plan.schedule == "gpipe") return m * plan.virtualStages;
  if (plan.virtualStages == 1) return std::min(m, plan.stages - r);
  return m * plan.virtualStages;  // interleaved: bounded by all of them
}

// Adds node `n`'s time to its rank, per microbatch or per step.
void addTime(const program::Program& p, const ir::Node& n, const sharding::DeviceProfile& profile,
             const sharding::CostModel& cm, RankLoad& load) {
  const program::PipelinePlace& pl = p.pipeline->places[static_cast<size_t>(n.index())];
  const bool perMicrobatch = pl.phase != Phase::Step;
  if (ir::isCommunicating(n.target())) {
    const ir::Argument* a = n.input("axis");
    int64_t axis = a && !a->strings.empty() ? p.mesh.axisIndex(a->strings[0]) : -1;
    if (axis < 0 || a->strings[0] == p.pipeline->microbatchAxis) return;  // a local sum over microbatches
    double s = passes::collectiveSeconds(n, p.mesh, cm);
    (perMicrobatch ? load.mbComm : load.stepComm) += s;
    auto& [seconds, count] = (perMicrobatch ? load.mbAxes : load.stepAxes)[a->strings[0]];
    seconds += s;
    count += 1;
    return;
  }
  (perMicrobatch ? load.mbCompute : load.stepCompute) += passes::nodeComputeSeconds(n, profile);
}

// Adds each rank's bytes from the live ranges of one microbatch's step
// (passes::liveRanges): accumulated gradients (held all step); the
// activations a forward saves for its stage's backward (held per
// microbatch in flight); the largest sum of the other values live at a
// forward or backward node of the rank, and at an optimizer-step node
// (new weights coexist with the old there).
void addBytes(const program::Program& p, std::vector<RankLoad>& ranks) {
  const program::PipelinePlan& plan = *p.pipeline;
  auto placeOf = [&](const ir::Node* n) -> const program::PipelinePlace& {
    return plan.places[static_cast<size_t>(n->index())];
  };
  const size_t nodes = plan.places.size();
  if (nodes == 0) return;
  std::vector<std::vector<double>> delta(ranks.size(), std::vector<double>(nodes + 1, 0.0));
  for (const passes::LiveRange& lr : passes::liveRanges(p)) {
    const ir::Node* n = lr.value->producer();
    if (!n || placeOf(n).phase == Phase::Free || placeOf(n).stage < 0) continue;  // the batch; masks
    const size_t r = static_cast<size_t>(plan.rankOf(placeOf(n).stage));
    const double b = static_cast<double>(lr.bytes);
    if (pipeline::isAccumulation(p, *n)) {
      ranks[r].accumulated += b;
      continue;
    }
    const size_t first = static_cast<size_t>(std::max(lr.first, 0));
    const size_t last = std::min(static_cast<size_t>(std::max(lr.last, lr.first)), nodes - 1);
    // Held by its producer's rank and by each rank that receives it: as a
    // stash when a forward value is read by that rank's backward.
    std::set<size_t> holders = {r};
    for (const ir::Node* u : lr.value->users())
      if (placeOf(u).stage >= 0 && placeOf(u).phase != Phase::Free)
        holders.insert(static_cast<size_t>(plan.rankOf(placeOf(u).stage)));
    for (size_t h : holders) {
      bool stash = placeOf(n).phase == Phase::Forward &&
                   std::any_of(lr.value->users().begin(), lr.value->users().end(), [&](const ir::Node* u) {
                     return placeOf(u).phase == Phase::Backward &&
                            static_cast<size_t>(plan.rankOf(placeOf(u).stage)) == h;
                   });
      if (!stash && h == r) {  // through views: the storage's last reader
        const program::PipelinePlace& end = plan.places[last];
        stash = placeOf(n).phase == Phase::Forward && end.phase == Phase::Backward &&
                static_cast<size_t>(plan.rankOf(end.stage)) == r;
      }
      if (stash) {
        ranks[h].saved += b;
        continue;
      }
      delta[h][first] += b;
      delta[h][last + 1] -= b;
    }
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    double live = 0;
    for (size_t t = 0; t < nodes; ++t) {
      live += delta[r][t];
      const program::PipelinePlace& at = plan.places[t];
      if (at.stage < 0 || plan.rankOf(at.stage) != static_cast<int64_t>(r)) continue;
      double& peak = at.phase == Phase::Step ? ranks[r].stepPeak : ranks[r].transient;
      peak = std::max(peak, live);
    }
  }
}

// Seconds and bytes of the sends between pipeline ranks, per microbatch:
// added to the sending rank; returns the bytes sent per step.
int64_t addSends(const program::Program& p, const sharding::LinkCost& link, int64_t m,
                 std::vector<RankLoad>& ranks) {
  const program::PipelinePlan& plan = *p.pipeline;
  std::map<std::string, const ir::Value*> values;
  for (const auto& n : p.graph.graph.nodes())
    for (const ir::Value* v : n->outputValues()) values.emplace(v->name(), v);
  double bytes = 0;
  for (const pipeline::Transfer& t : pipeline::stageTransfers(p)) {
    int64_t from = plan.rankOf(t.from), to = plan.rankOf(t.to);
    auto it = values.find(t.value);
    if (from == to || it == values.end()) continue;
    double b = passes::valueBytes(it->second);
    const double s = link.alphaSeconds + b / link.bytesPerSecond;
    ranks[static_cast<size_t>(from)].mbComm += s;
    auto& [seconds, count] = ranks[static_cast<size_t>(from)].mbAxes[plan.axis];
    seconds += s;
    count += 1;
    bytes += b * static_cast<double>(m);
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace

PipelinedCost pipelinedCost(const program::Program& p, const sharding::DeviceProfile& profile,
                            const sharding::Mesh& fullMesh) {
  const program::PipelinePlan& plan = *p.pipeline;
  const int64_t m = p.mesh.size(p.mesh.axisIndex(plan.microbatchAxis));
  const int64_t ppAxis = fullMesh.axisIndex(plan.axis);
  PipelinedCost out;
  passes::LayoutCost& c = out.cost;
  for (const std::string& a : fullMesh.axisNames()) c.axes.push_back({a, 0, 0, {}});
  sharding::CostModel cm = sharding::costModelFor(profile, p.mesh);
  std::vector<RankLoad> ranks(static_cast<size_t>(plan.stages));
  for (const auto& n : p.graph.graph.nodes()) {
    const program::PipelinePlace& pl = plan.places[static_cast<size_t>(n->index())];
    if (pl.stage < 0 || pl.phase == Phase::Free) continue;  // free nodes: masks, tables
    RankLoad& load = ranks[static_cast<size_t>(plan.rankOf(pl.stage))];
    addTime(p, *n, profile, cm, load);
  }
  addBytes(p, ranks);
  out.p2pBytes = addSends(p, sharding::axisLinkFor(profile, fullMesh, ppAxis), m, ranks);
  double batch = 0;  // the worker holds its whole batch: m microbatches
  for (const auto& in : p.graph.signature.inputs)
    if (in.kind == ir::InputKind::UserInput && in.value) batch += passes::valueBytes(in.value);
  batch *= static_cast<double>(m);
  if (auto weights = pipeline::stageWeights(p)) {
    std::map<std::string, double> bytes;
    for (const auto& w : p.weights) bytes[w.fqn] = weightBytes(w);
    for (size_t r = 0; r < weights->size(); ++r)
      for (const std::string& fqn : (*weights)[r]) ranks[r].weights += bytes[fqn];
  }
  // The slowest rank's microbatch sets the pace: m of them, plus the
  // bubble's (p - 1) / v.
  const double slots =
      static_cast<double>(m) + static_cast<double>(plan.stages - 1) / static_cast<double>(plan.virtualStages);
  out.bubble = (slots - static_cast<double>(m)) / slots;
  const RankLoad* slowest = &ranks[0];
  const RankLoad* slowestStep = &ranks[0];
  double peak = 0, params = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankLoad& l = ranks[r];
    if (l.mbCompute + l.mbComm > slowest->mbCompute + slowest->mbComm) slowest = &l;
    if (l.stepCompute + l.stepComm > slowestStep->stepCompute + slowestStep->stepComm) slowestStep = &l;
    double stash = static_cast<double>(inFlight(plan, m, static_cast<int64_t>(r))) * l.saved;
    double held = l.weights + l.accumulated + batch + std::max(stash + l.transient, l.stepPeak);
    logging::debug("pipeline cost: rank ", r, " weights ", l.weights, " accumulated ", l.accumulated,
                   " batch ", batch, " stash ", stash, " transient ", l.transient, " step ", l.stepPeak, ": ",
                   held);
    peak = std::max(peak, held);
    params = std::max(params, l.weights);
  }
  c.computeSeconds = slots * slowest->mbCompute + slowestStep->stepCompute;
  c.commSeconds = slots * slowest->mbComm + slowestStep->stepComm;
  // Per axis, the ranks that set the step's comm time: the slowest's m + p - 1
  // microbatch slots (its collectives counted for its m microbatches) and
  // the slowest step's, so that the axes add up to commSeconds.
  for (passes::AxisComm& ac : c.axes) {
    auto [mbSeconds, mbCount] =
        slowest->mbAxes.count(ac.axis) ? slowest->mbAxes.at(ac.axis) : std::pair{0.0, 0L};
    auto [stepSeconds, stepCount] =
        slowestStep->stepAxes.count(ac.axis) ? slowestStep->stepAxes.at(ac.axis) : std::pair{0.0, 0L};
    ac.seconds = slots * mbSeconds + stepSeconds;
    ac.collectives = m * mbCount + stepCount;
  }
  passes::AxisComm& pp = c.axes[static_cast<size_t>(ppAxis)];
  pp.byKind.emplace_back("send", pp.collectives);
  c.peakBytes = static_cast<int64_t>(peak);
  c.paramBytes = static_cast<int64_t>(params);
  return out;
}

PipelinedCost pipelinedCost(const program::Program& p, const sharding::DeviceProfile& profile) {
  const program::PipelinePlan& plan = *p.pipeline;
  std::vector<int64_t> shape = p.mesh.shape();
  std::vector<std::string> axes = p.mesh.axisNames();
  const auto mb = static_cast<size_t>(p.mesh.axisIndex(plan.microbatchAxis));
  shape[mb] = plan.stages;
  axes[mb] = plan.axis;
  auto full = sharding::Mesh::create(shape, axes);
  SPMD_CHECK(full.hasValue());  // a valid mesh with one axis renamed
  return pipelinedCost(p, profile, *full);
}

Expected<passes::LayoutCost> compilePriced(pt2::Archive& archive, const schema::PlacementSchema& s,
                                           const AutoOptions& o, const passes::CompileOptions& compile,
                                           const sharding::DeviceProfile& profile) {
  if (!o.pipeline) {
    SPMD_ASSIGN_OR_RETURN(passes::CompileResult r, passes::compile(archive, s, compile));
    return passes::modelLayout(r.program, profile);
  }
  passes::CompileOptions whole = compile;
  whole.mesh = o.pipeline->mesh.shape();
  if (o.profile) whole.cost = sharding::costModelFor(*o.profile, o.pipeline->mesh);
  SPMD_ASSIGN_OR_RETURN(passes::CompileResult r,
                        passes::compile(archive, withPipeline(s, *o.pipeline), whole));
  return pipelinedCost(r.program, profile, o.pipeline->mesh).cost;
}

schema::PlacementSchema withPipeline(schema::PlacementSchema s, const PipelineSetting& setting) {
  s.pipeline = setting.request;
  s.meshShape = setting.mesh.shape();
  s.meshAxes = setting.mesh.axisNames();
  return s;
}

}  // namespace spmd::autoshard
