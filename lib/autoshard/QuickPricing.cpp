// The quick model's pricing of one graph (QuickModelImpl.h; the model:
// QuickModel.h).
//
// Invariants: the graph is prepared once and never changes after the
// Propagator reads it; a parameter's anchor takes its gathered layout when
// the schema gathers it and its stored layout otherwise (then it moves
// nothing, as reading the parameter directly would); everything a node
// costs that does not depend on the layout (FLOPs on global shapes, operand
// lists, live ranges) is computed once.
#include "autoshard/QuickModelImpl.h"

#include "autoshard/Variables.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/GatherParams.h"
#include "passes/Optimizer.h"
#include "passes/Passes.h"
#include "passes/Report.h"
#include "pt2/Archive.h"
#include "support/Log.h"

namespace spmd::autoshard {

using quick::Move;
using quick::NodeFacts;
using quick::PlannedStep;
using quick::Range;
using quick::ValueComm;

namespace {

std::vector<int64_t> hintShape(const ir::Value& v) {
  std::vector<int64_t> s;
  for (const auto& d : v.type().sizes) s.push_back(d.value());
  return s;
}

}  // namespace

Status QuickModel::Impl::prepare(const AutoOptions& o) {
  mesh = o.mesh;
  meshShape = o.mesh.shape();
  profile = o.profile ? *o.profile : sharding::defaultDeviceProfile();
  cost = o.profile ? sharding::costModelFor(*o.profile, o.mesh) : o.compile.cost;
  linkCost = sharding::costModelFor(profile, o.mesh);
  replicateUnknown = o.compile.replicateUnknown;
  bucketBytes = o.compile.bucketBytes;
  registry = sharding::defaultRuleRegistry();
  if (o.pins)
    for (const auto& [target, rule] : o.pins->opRules) registry.set(target, sharding::ruleFromTemplate(rule));
  if (!o.compile.optimizer.kind.empty()) {
    Status st = passes::appendOptimizer(archive.program, o.compile.optimizer);
    if (!st.isOk()) return st.withContext(archive.path);
  }
  addAnchors();
  readFacts();
  const auto& ins = archive.program.signature.inputs;
  for (const auto& [node, input] : anchors)
    nodes[static_cast<size_t>(node)].bucket = "param:" + passes::moduleGroup(ins[input].target);
  std::map<std::string, int> groups;
  bucketOf.assign(nodes.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    if (!nodes[n].bucket.empty())
      bucketOf[n] = groups.emplace(nodes[n].bucket, static_cast<int>(groups.size())).first->second;
  propagator = std::make_unique<sharding::Propagator>(archive.program, registry);
  return Status::ok();
}

// A gather anchor before every parameter (passes::insertParameterGathers,
// placeholder layout: evaluate() overrides each).
void QuickModel::Impl::addAnchors() {
  const auto& ins = archive.program.signature.inputs;
  schema::ResolvedPlacements all;
  all.gathered.assign(ins.size(), std::nullopt);
  std::unordered_map<const ir::Value*, size_t> inputOf;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].kind == ir::InputKind::Parameter && ins[i].value) {
      all.gathered[i] = sharding::ShardingSpec::replicated(mesh.numAxes());
      inputOf[ins[i].value] = i;
    }
  if (!passes::insertParameterGathers(archive.program, all).isOk()) return;  // priced without anchors
  const std::string key(sharding::kLayoutKey);
  for (const auto& n : archive.program.graph.nodes()) {
    if (!n->metadata().other.count(key)) continue;
    std::vector<ir::Value*> in = sharding::tensorOperands(*n);
    if (auto it = in.size() == 1 ? inputOf.find(in[0]) : inputOf.end(); it != inputOf.end())
      anchors.emplace_back(n->index(), it->second);
  }
}

void QuickModel::Impl::readFacts() {
  const ir::Graph& g = archive.program.graph;
  nodes.resize(g.nodes().size());
  elements.assign(g.numValues(), 1);
  elementBytes.assign(g.numValues(), 1);
  comm.assign(g.numValues(), {});
  rangeOf.assign(g.numValues(), -1);
  computeOf.assign(g.nodes().size(), 0);
  valueClass.assign(g.numValues(), -1);
  std::map<std::pair<int, std::vector<int64_t>>, int> classes;
  for (size_t id = 0; id < g.numValues(); ++id) {
    const ir::Value* v = g.valueById(static_cast<int>(id));
    if (!v || !v->isTensor()) continue;
    auto cls = std::make_pair(static_cast<int>(v->type().dtype), hintShape(*v));
    valueClass[id] = classes.emplace(std::move(cls), static_cast<int>(classes.size())).first->second;
    for (const auto& d : v->type().sizes) elements[id] *= std::max<int64_t>(d.value(), 1);
    elementBytes[id] = std::max<int64_t>(ir::elementSize(v->type().dtype), 1);
  }
  const std::string key(sharding::kLayoutKey), layoutAsKey(sharding::kLayoutAsKey);
  for (const auto& n : g.nodes()) {
    NodeFacts& f = nodes[static_cast<size_t>(n->index())];
    f.operands = sharding::tensorOperands(*n);
    f.results = sharding::tensorResults(*n);
    const std::string& t = n->target();
    f.priced = !sharding::isSymbolicOp(t) && !passes::isViewOp(t) && !n->metadata().other.count(key);
    if (n->metadata().other.count(layoutAsKey)) f.bucket = "grad";
    f.flops = f.priced ? passes::nodeFlops(*n) : 0;
    if (!f.results.empty()) f.dtype = f.results[0]->type().dtype;
  }
  for (const NodeFacts& f : nodes)
    for (const ir::Value* v : f.operands) usedValues.push_back(static_cast<size_t>(v->id()));
  std::sort(usedValues.begin(), usedValues.end());
  usedValues.erase(std::unique(usedValues.begin(), usedValues.end()), usedValues.end());
  // The runtime's live ranges (storages; views cost nothing), user inputs first.
  for (const passes::LiveRange& r : passes::liveRanges(archive.program)) {
    if (r.value->producer() == nullptr) ++inputRanges;
    ranges.push_back({r.value, r.first, r.last});
  }
  for (size_t r = 0; r < ranges.size(); ++r)
    rangeOf[static_cast<size_t>(ranges[r].value->id())] = static_cast<int>(r);
  rangeBytes.assign(ranges.size(), 0);
  delta.assign(g.nodes().size() + 1, 0);
}

// Where no direct plan exists (strided shards the expansion gathers
// first), through replicated: gather, then slice.
Expected<sharding::ReshardPlan> QuickModel::Impl::planFor(const ir::Value& v,
                                                          const sharding::ShardingSpec& cur,
                                                          const sharding::ShardingSpec& req) const {
  std::vector<int64_t> shape = hintShape(v);
  int64_t elem = ir::elementSize(v.type().dtype);
  auto direct = sharding::planReshard(shape, elem, cur, req, mesh, linkCost);
  if (direct) return direct;
  auto rep = sharding::ShardingSpec::replicated(mesh.numAxes());
  auto a = sharding::planReshard(shape, elem, cur, rep, mesh, linkCost);
  if (!a) a = gatherEachAxis(v, cur);  // as the expansion does for strided runs
  SPMD_ASSIGN_OR_RETURN(sharding::ReshardPlan b,
                        sharding::planReshard(shape, elem, rep, req, mesh, linkCost));
  a->steps.insert(a->steps.end(), b.steps.begin(), b.steps.end());
  a->cost += b.cost;
  return a;
}

// One all-gather per sharded axis, last axis first (one reduce for a
// pending one), on flat local shapes.
sharding::ReshardPlan QuickModel::Impl::gatherEachAxis(const ir::Value& v,
                                                       sharding::ShardingSpec spec) const {
  sharding::ReshardPlan plan;
  for (int64_t a = mesh.numAxes() - 1; a >= 0; --a) {
    sharding::Placement& p = spec.placements[static_cast<size_t>(a)];
    if (p.isReplicate()) continue;
    sharding::ReshardStep step;
    step.kind = p.isShard() ? sharding::CollectiveKind::AllGather : sharding::CollectiveKind::AllReduce;
    step.axis = a;
    int64_t before = localBytes(v, spec);
    p = sharding::Placement::replicate();
    int64_t after = localBytes(v, spec), elem = std::max<int64_t>(ir::elementSize(v.type().dtype), 1);
    step.localShapeBefore = {before / elem};
    step.localShapeAfter = {after / elem};
    step.cost = linkCost.cost(step.kind, a, mesh.size(a), before, after);
    plan.steps.push_back(step);
    plan.cost += step.cost;
  }
  return plan;
}

namespace {
double numel(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(std::max<int64_t>(d, 1));
  return n;
}
}  // namespace

// The steps of redistributing `v` from `cur` into `req`, asked for by a
// node of bucket group `bucket`: local steps count as bytes-bound compute
// (as modelLayout counts them); a bucketed collective pays its alpha per
// bucket (closed in sumComm) and a packing copy of its input.
Status QuickModel::Impl::addMoves(const ir::Value& v, const sharding::ShardingSpec& cur,
                                  const sharding::ShardingSpec& req, int bucket, ValueComm& out) const {
  key.assign({static_cast<uint64_t>(valueClass[static_cast<size_t>(v.id())])});
  for (const auto& p : cur.placements) key.push_back(p.key());
  for (const auto& p : req.placements) key.push_back(p.key());
  auto it = plans.find(key);
  if (it == plans.end()) {  // alike values (same type, layouts) plan alike
    SPMD_ASSIGN_OR_RETURN(sharding::ReshardPlan plan, planFor(v, cur, req));
    double elem = static_cast<double>(ir::elementSize(v.type().dtype));
    std::vector<PlannedStep> steps;
    for (const auto& step : plan.steps)
      steps.push_back({step.axis, step.kind, step.cost, numel(step.localShapeBefore) * elem,
                       numel(step.localShapeAfter) * elem});
    it = plans.emplace(key, std::move(steps)).first;
  }
  for (const PlannedStep& step : it->second) {
    if (sharding::isLocalStep(step.kind)) {
      out.computeSeconds += (step.in + step.out) / profile.memoryBytesPerSecond;
      continue;
    }
    Move m{step.axis, step.kind, step.cost, bucket, step.in};
    if (bucket >= 0) {
      m.seconds -= linkCost.axisLink(step.axis).alphaSeconds;
      out.computeSeconds += 2 * step.in / profile.memoryBytesPerSecond;
    }
    out.moves.push_back(m);
  }
  return Status::ok();
}

// Every layout the uses of `v` ask for, once each, in node order (the first
// asker's bucket); `asked` gets those layouts (only them, without `price`).
Status QuickModel::Impl::priceValue(const sharding::Propagation& p, const ir::Value& v, ValueComm& out,
                                    std::vector<const sharding::ShardingSpec*>& asked, bool price) const {
  out.moves.clear();
  out.computeSeconds = 0;
  asked.clear();
  const sharding::ShardingSpec& cur = p.values[static_cast<size_t>(v.id())];
  for (const auto& [node, slot] : propagator->uses(v)) {
    const auto& ops = p.nodes[static_cast<size_t>(node)].operands;
    if (slot >= ops.size()) continue;
    const sharding::ShardingSpec& req = ops[slot];
    if (req == cur || cur.placements.size() != req.placements.size() ||
        std::any_of(asked.begin(), asked.end(), [&](const auto* s) { return *s == req; }))
      continue;
    asked.push_back(&req);
    if (!price) continue;
    Status st = addMoves(v, cur, req, bucketOf[static_cast<size_t>(node)], out);
    if (!st.isOk())
      return st.withContext("operand " + std::to_string(slot) + " of node " + std::to_string(node));
  }
  return Status::ok();
}

// The outputs' layouts, where no use asked for them already.
Status QuickModel::Impl::priceOutputs(const sharding::Propagation& p, const schema::ResolvedPlacements& pl) {
  outputComm.moves.clear();
  outputComm.computeSeconds = 0;
  const auto& outs = archive.program.graph.outputs();
  ValueComm ignored;
  for (size_t k = 0; k < outs.size() && k < pl.outputs.size(); ++k) {
    if (!pl.outputs[k] || outs[k].values.size() != 1 || !outs[k].values[0] || !outs[k].values[0]->isTensor())
      continue;
    const ir::Value& v = *outs[k].values[0];
    const sharding::ShardingSpec& cur = p.values[static_cast<size_t>(v.id())];
    const sharding::ShardingSpec& req = *pl.outputs[k];
    SPMD_RETURN_IF_ERROR(priceValue(p, v, ignored, asked, /*price=*/false));
    if (req == cur || cur.placements.size() != req.placements.size() ||
        std::any_of(asked.begin(), asked.end(), [&](const auto* s) { return *s == req; }))
      continue;
    SPMD_RETURN_IF_ERROR(addMoves(v, cur, req, -1, outputComm));
  }
  return Status::ok();
}

namespace {
void countKind(passes::AxisComm& ac, sharding::CollectiveKind k, int64_t n) {
  std::string kind(sharding::collectiveKindName(k));
  ac.collectives += n;
  auto it = std::find_if(ac.byKind.begin(), ac.byKind.end(), [&](const auto& e) { return e.first == kind; });
  if (it == ac.byKind.end())
    ac.byKind.emplace_back(kind, n);
  else
    it->second += n;
}
}  // namespace

// The values' moves added up, by value id then the outputs; one alpha and
// one collective per bucket (kind, axis, group) of bucketBytes.
void QuickModel::Impl::sumComm(passes::LayoutCost& c) const {
  std::map<std::tuple<int, int64_t, int>, double> buckets;  // (kind, axis, group) -> bytes
  auto add = [&](const ValueComm& vc) {
    c.computeSeconds += vc.computeSeconds;
    for (const Move& m : vc.moves) {
      passes::AxisComm& ac = c.axes[static_cast<size_t>(m.axis)];
      ac.seconds += m.seconds;
      c.commSeconds += m.seconds;
      if (m.bucket >= 0)
        buckets[{static_cast<int>(m.kind), m.axis, m.bucket}] += m.bytes;
      else
        countKind(ac, m.kind, 1);
    }
  };
  for (size_t id : usedValues) add(comm[id]);
  add(outputComm);
  double limit = static_cast<double>(std::max<int64_t>(bucketBytes, 1));
  for (const auto& [key, bytes] : buckets) {
    auto [kind, axis, group] = key;
    int64_t n = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(bytes / limit)));
    double seconds = static_cast<double>(n) * linkCost.axisLink(axis).alphaSeconds;
    c.axes[static_cast<size_t>(axis)].seconds += seconds;
    c.commSeconds += seconds;
    countKind(c.axes[static_cast<size_t>(axis)], static_cast<sharding::CollectiveKind>(kind), n);
  }
}

// Bytes at the local layouts; FLOPs divided by the axes the node shards
// (a pending sum passed on is computed whole on every rank).
double QuickModel::Impl::nodeSeconds(const sharding::Propagation& p, size_t n) const {
  const NodeFacts& f = nodes[n];
  if (!f.priced) return 0;
  const sharding::NodeSharding& ns = p.nodes[n];
  double bytes = 0;
  uint64_t sharded = 0;  // bit a: some tensor is sharded on mesh axis a
  auto add = [&](const ir::Value* v, const sharding::ShardingSpec& s) {
    bytes += static_cast<double>(localBytes(*v, s));
    for (size_t a = 0; a < s.placements.size() && a < 64; ++a)
      if (s.placements[a].isShard()) sharded |= uint64_t{1} << a;
  };
  for (size_t i = 0; i < f.operands.size() && i < ns.operands.size(); ++i) add(f.operands[i], ns.operands[i]);
  for (size_t i = 0; i < f.results.size() && i < ns.results.size(); ++i) add(f.results[i], ns.results[i]);
  double flops = f.flops;
  for (int64_t a = 0; a < mesh.numAxes() && a < 64; ++a)
    if (sharded >> a & 1) flops /= static_cast<double>(mesh.size(a));
  return passes::opSeconds(bytes, flops, f.dtype, profile);
}

// A live range's bytes at its value's layout, into the per-node deltas.
void QuickModel::Impl::setRangeBytes(const sharding::Propagation& p, size_t r) {
  const Range& range = ranges[r];
  int64_t b = localBytes(*range.value, p.values[static_cast<size_t>(range.value->id())]);
  delta[static_cast<size_t>(range.first)] += b - rangeBytes[r];
  delta[static_cast<size_t>(range.last) + 1] -= b - rangeBytes[r];
  if (!grows.empty() && grows[r]) {
    growDelta[static_cast<size_t>(range.first)] += b - rangeBytes[r];
    growDelta[static_cast<size_t>(range.last) + 1] -= b - rangeBytes[r];
  }
  rangeBytes[r] = b;
}

// The figures of every node, value and live range, or (`replanned`, the
// propagator's) only of what the last propagation changed.
Status QuickModel::Impl::update(const sharding::Propagation& p, const std::vector<int>* replanned) {
  const size_t numValues = comm.size();
  if (!replanned) {
    for (size_t n = 0; n < nodes.size(); ++n) computeOf[n] = nodeSeconds(p, n);
    for (size_t id = 0; id < numValues; ++id)
      if (const ir::Value* v = archive.program.graph.valueById(static_cast<int>(id)); v && v->isTensor())
        SPMD_RETURN_IF_ERROR(priceValue(p, *v, comm[id], asked));
    for (size_t r = 0; r < ranges.size(); ++r) setRangeBytes(p, r);
    return Status::ok();
  }
  dirty.clear();
  for (int n : *replanned) {
    auto idx = static_cast<size_t>(n);
    computeOf[idx] = nodeSeconds(p, idx);
    for (const ir::Value* v : nodes[idx].operands) dirty.push_back(static_cast<size_t>(v->id()));
    for (const ir::Value* v : nodes[idx].results)
      if (int r = rangeOf[static_cast<size_t>(v->id())]; r >= 0) setRangeBytes(p, static_cast<size_t>(r));
  }
  std::sort(dirty.begin(), dirty.end());
  dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
  for (size_t id : dirty)
    SPMD_RETURN_IF_ERROR(
        priceValue(p, *archive.program.graph.valueById(static_cast<int>(id)), comm[id], asked));
  for (size_t r = 0; r < inputRanges; ++r) setRangeBytes(p, r);
  return Status::ok();
}

// Weights (parameters, buffers, constants, optimizer states) at their stored
// layout, plus the peak of live values at the layout they are produced in.
void QuickModel::Impl::sumMemory(const schema::ResolvedPlacements& pl, passes::LayoutCost& c) const {
  const auto& ins = archive.program.signature.inputs;
  for (size_t i = 0; i < ins.size() && i < pl.inputs.size(); ++i)
    if (ir::isStored(ins[i].kind) && ins[i].value && ins[i].value->isTensor())
      c.paramBytes += localBytes(*ins[i].value, pl.inputs[i]);
  c.peakBytes = c.paramBytes + peakLive(0);
}

// Outside the extra layer's nodes, that layer is wholly behind or ahead of
// the node, as each folded layer is: its live bytes there count `times`
// more. Inside them, each folded layer is behind or ahead of the one
// running: the larger of what the layer leaves live just before and just
// after its nodes (its saved activations, its gradients) counts `times` more.
int64_t QuickModel::Impl::peakLive(int64_t times) const {
  const size_t n = delta.size() - 1;
  int64_t peak = 0, live = 0, grown = 0;
  for (size_t i = 0; i < n; ++i) {
    live += delta[i];
    if (growDelta.empty()) {
      peak = std::max(peak, live);
      continue;
    }
    grown += growDelta[i];
    liveAt[i] = live;
    grownAt[i] = grown;
  }
  if (growDelta.empty()) return peak;
  for (size_t i = 0; i < n;) {
    if (!extraNode[i]) {
      peak = std::max(peak, liveAt[i] + times * grownAt[i]);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && extraNode[j]) ++j;
    int64_t around = std::max(i > 0 ? grownAt[i - 1] : 0, j < n ? grownAt[j] : 0);
    for (; i < j; ++i) peak = std::max(peak, liveAt[i] + times * around);
  }
  return peak;
}

Expected<passes::LayoutCost> QuickModel::Impl::evaluate(const schema::PlacementSchema& s) {
  Impl& m = *this;
  const ir::ExportedProgram& prog = m.archive.program;
  if (!m.resolve) m.resolve = std::make_unique<schema::ResolveCache>(prog);
  SPMD_ASSIGN_OR_RETURN(schema::ResolvedPlacements pl,
                        schema::resolvePlacements(s, prog, m.meshShape, m.resolve.get()));
  passes::alignOptimizerStates(prog, pl);
  sharding::PropagationOptions po;
  po.cost = m.cost;
  po.replicateUnknown = m.replicateUnknown;
  po.details = false;
  po.secondPass = false;
  po.incremental = true;
  for (const auto& [node, input] : m.anchors)
    po.layoutOverrides[node] =
        input < pl.gathered.size() && pl.gathered[input] ? *pl.gathered[input] : pl.inputs[input];
  const bool cached = m.cached;
  m.cached = false;  // until the figures are brought up to this layout
  SPMD_RETURN_IF_ERROR(m.propagator->runInto(pl.inputs, pl.mesh, po, m.scratch));
  const sharding::Propagation& p = m.scratch;
  SPMD_RETURN_IF_ERROR(m.update(p, cached ? m.propagator->replanned() : nullptr));
  SPMD_RETURN_IF_ERROR(m.priceOutputs(p, pl));
  m.cached = true;
  passes::LayoutCost c;
  for (int64_t a = 0; a < pl.mesh.numAxes(); ++a)
    c.axes.push_back({pl.mesh.axisNames()[static_cast<size_t>(a)], 0, 0, {}});
  for (double s : m.computeOf) c.computeSeconds += s;
  m.sumComm(c);
  m.sumMemory(pl, c);
  return c;
}

}  // namespace spmd::autoshard
