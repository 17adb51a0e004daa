// The quick cost model (see QuickModel.h).
//
// Invariants: the graph is prepared once and never changes after the
// Propagator reads it; a parameter's anchor takes its gathered layout when
// the schema gathers it and its stored layout otherwise (then it moves
// nothing, as reading the parameter directly would); everything a node
// costs that does not depend on the layout (FLOPs on global shapes, operand
// lists, live ranges) is computed once.
#include "autoshard/QuickModel.h"

#include "autoshard/Fold.h"
#include "autoshard/Variables.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/GatherParams.h"
#include "passes/Optimizer.h"
#include "passes/Passes.h"
#include "passes/Report.h"
#include "pt2/Archive.h"
#include "schema/Resolve.h"
#include "sharding/Propagation.h"
#include "sharding/Reshard.h"
#include "sharding/RuleText.h"
#include "support/Hash.h"
#include "support/Log.h"

namespace spmd::autoshard {
namespace {

// What pricing reads of one node, whatever the layout.
struct NodeFacts {
  bool priced = false;  // computes (not a view, symbolic op or anchor)
  double flops = 0;     // on global shapes
  ir::ScalarType dtype = ir::ScalarType::Float;
  std::vector<ir::Value*> operands, results;  // tensorOperands / tensorResults
  /// Layout anchors: the bucket group their collectives are fused in
  /// ("param:" and a parameter's passes::moduleGroup, "grad" for
  /// gradients); else empty.
  std::string bucket;
};

// A storage's live range over node indices (from passes::liveRanges).
struct Range {
  const ir::Value* value;
  int first, last;
};

// One step of planReshard's plan, in bytes per rank.
struct PlannedStep {
  int64_t axis = 0;
  sharding::CollectiveKind kind = sharding::CollectiveKind::AllGather;
  double cost = 0, in = 0, out = 0;
};

// One collective step of a redistribution.
struct Move {
  int64_t axis = 0;
  sharding::CollectiveKind kind = sharding::CollectiveKind::AllGather;
  double seconds = 0;  // without the alpha when bucketed
  int bucket = -1;     // bucket group of the node that asked for it; -1: none
  double bytes = 0;    // its input, per rank
};

// What the redistributions of one value cost.
struct ValueComm {
  std::vector<Move> moves;
  double computeSeconds = 0;  // local steps, bucket packing
};

std::vector<int64_t> hintShape(const ir::Value& v) {
  std::vector<int64_t> s;
  for (const auto& d : v.type().sizes) s.push_back(d.value());
  return s;
}

}  // namespace

struct QuickModel::Impl {
  Impl(pt2::Archive a, sharding::Mesh m) : archive(std::move(a)), mesh(std::move(m)) {}
  pt2::Archive archive;
  sharding::Mesh mesh;
  std::vector<int64_t> meshShape;
  sharding::DeviceProfile profile;
  sharding::CostModel cost;      // propagation's (as compile() is given it)
  sharding::CostModel linkCost;  // pricing's: the profile's links (as passes::modelLayout)
  bool replicateUnknown = false;
  int64_t bucketBytes = 0;
  sharding::RuleRegistry registry;
  std::unique_ptr<sharding::Propagator> propagator;
  std::vector<std::pair<int, size_t>> anchors;  // (node index, signature input index)
  std::vector<NodeFacts> nodes;
  std::vector<Range> ranges;
  sharding::Propagation scratch;                // reused by every evaluation
  std::vector<int64_t> elements, elementBytes;  // by value id, symbolic sizes at their hint
  std::vector<int> bucketOf;                    // by node: index of its bucket group, -1: none
  std::vector<int> valueClass;                  // by value id: values of one type share a class
  // Reshard plans by (value class, current layout, asked layout).
  mutable std::unordered_map<std::vector<uint64_t>, std::vector<PlannedStep>, WordsHash> plans;
  mutable std::vector<uint64_t> key;  // scratch of addMoves()

  // The last evaluation's figures (update() brings them to the next one):
  std::vector<double> computeOf;                     // by node
  std::vector<ValueComm> comm;                       // by value id: its redistributions
  ValueComm outputComm;                              // the outputs' redistributions
  std::vector<int64_t> rangeBytes, delta;            // by range; by node: live bytes starting - ending there
  std::vector<char> grows;                           // by range: counted per folded layer (QuickModel())
  std::vector<int64_t> growDelta;                    // delta of the ranges that grow
  std::vector<char> extraNode;                       // by node, folded: a node of the extra layer
  mutable std::vector<int64_t> liveAt, grownAt;      // scratch of peakLive()
  std::vector<int> rangeOf;                          // by value id: its range, -1: none
  std::vector<size_t> usedValues;                    // ids of the values some node reads, in order
  size_t inputRanges = 0;                            // ranges[0, inputRanges): user inputs
  bool cached = false;                               // the figures are the last propagation's
  std::unique_ptr<schema::ResolveCache> resolve;     // the program's glob matches (first evaluation on)
  std::vector<const sharding::ShardingSpec*> asked;  // scratch of priceValue()
  std::vector<size_t> dirty;                         // scratch of update()

  /// sharding::localBytes, from the element counts read once.
  int64_t localBytes(const ir::Value& v, const sharding::ShardingSpec& s) const {
    auto id = static_cast<size_t>(v.id());
    int64_t n = elements[id];
    for (size_t a = 0; a < s.placements.size(); ++a)
      if (s.placements[a].isShard()) n = std::max<int64_t>(n / mesh.size(static_cast<int64_t>(a)), 1);
    return n * elementBytes[id];
  }

  Status prepare(const AutoOptions& o);
  void addAnchors();
  void readFacts();
  Expected<sharding::ReshardPlan> planFor(const ir::Value& v, const sharding::ShardingSpec& cur,
                                          const sharding::ShardingSpec& req) const;
  sharding::ReshardPlan gatherEachAxis(const ir::Value& v, sharding::ShardingSpec spec) const;
  Status addMoves(const ir::Value& v, const sharding::ShardingSpec& cur, const sharding::ShardingSpec& req,
                  int bucket, ValueComm& out) const;
  Status priceValue(const sharding::Propagation& p, const ir::Value& v, ValueComm& out,
                    std::vector<const sharding::ShardingSpec*>& asked, bool price = true) const;
  Status priceOutputs(const sharding::Propagation& p, const schema::ResolvedPlacements& pl);
  double nodeSeconds(const sharding::Propagation& p, size_t n) const;
  void setRangeBytes(const sharding::Propagation& p, size_t r);
  Status update(const sharding::Propagation& p, const std::vector<int>* replanned);
  Expected<passes::LayoutCost> evaluate(const schema::PlacementSchema& s);
  void sumComm(passes::LayoutCost& c) const;
  void sumMemory(const schema::ResolvedPlacements& pl, passes::LayoutCost& c) const;
  /// The peak over nodes of the live bytes after each (the last
  /// evaluation's), with the ranges marked in `grows` counted 1 + `times`
  /// times.
  int64_t peakLive(int64_t times) const;
};

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

namespace {

// c0 + n * (c1 - c0), field by field (counts at least 0), but for the peak:
// a maximum does not extrapolate (QuickModel::evaluate sets it).
passes::LayoutCost extrapolate(const passes::LayoutCost& c0, const passes::LayoutCost& c1, int64_t n) {
  auto lin = [n](auto a, auto b) { return a + static_cast<decltype(a)>(n) * (b - a); };
  auto count = [&](int64_t a, int64_t b) { return std::max<int64_t>(0, lin(a, b)); };
  passes::LayoutCost c = c0;
  c.computeSeconds = lin(c0.computeSeconds, c1.computeSeconds);
  c.commSeconds = lin(c0.commSeconds, c1.commSeconds);
  c.paramBytes = count(c0.paramBytes, c1.paramBytes);
  for (size_t a = 0; a < c.axes.size() && a < c1.axes.size(); ++a) {
    passes::AxisComm& ac = c.axes[a];
    const passes::AxisComm& b = c1.axes[a];
    ac.seconds = lin(ac.seconds, b.seconds);
    ac.collectives = count(ac.collectives, b.collectives);
    auto find = [](auto& kinds, const std::string& kind) {
      return std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == kind; });
    };
    for (const auto& e : b.byKind)
      if (find(ac.byKind, e.first) == ac.byKind.end()) ac.byKind.emplace_back(e.first, 0);
    for (auto& e : ac.byKind) {
      auto it = find(b.byKind, e.first);
      e.second = count(e.second, it == b.byKind.end() ? 0 : it->second);
    }
    ac.byKind.erase(
        std::remove_if(ac.byKind.begin(), ac.byKind.end(), [](const auto& e) { return e.second == 0; }),
        ac.byKind.end());
  }
  return c;
}

// The error of a layout whose layers plan unalike: the step extrapolated
// from the first two cuts is `a`, from the next two `b` (nullopt: `a` is
// negative).
Status unalikeError(const passes::LayoutCost& a, const std::optional<passes::LayoutCost>& b,
                    const std::string& folding) {
  auto ms = [](const passes::LayoutCost& c) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.4g + %.4g ms", c.computeSeconds * 1e3, c.commSeconds * 1e3);
    return std::string(buf);
  };
  return Status::error("the layers plan unalike under this layout (" + folding + "): the step is " + ms(a) +
                       (b ? ", but " + ms(*b) + " from one layer more" : std::string(", below 0")) +
                       " (not priced folded)");
}

// OK when `a` and `b`, the step extrapolated from two pairs of cuts, agree
// within 1e-4 of the step in compute and in communication (bucketing moves
// the communication by ~3e-5 of it); else unalikeError.
Status sameStep(const passes::LayoutCost& a, const passes::LayoutCost& b, const std::string& folding) {
  const double step = std::max(std::abs(a.stepSeconds()), std::abs(b.stepSeconds()));
  if (std::abs(a.computeSeconds - b.computeSeconds) <= 1e-4 * step &&
      std::abs(a.commSeconds - b.commSeconds) <= 1e-4 * step && a.computeSeconds >= 0 && a.commSeconds >= 0)
    return Status::ok();
  return unalikeError(a, b, folding);
}

// True when the rules of `pins` lay out an input of the stack `prefix`
// (its layers would then differ: not folded).
bool pinsStack(const ir::ExportedProgram& p, const schema::PlacementSchema* pins, const std::string& prefix) {
  for (const auto& name : pinnedNames(p, pins))
    if (name.starts_with(prefix + ".")) return true;
  return false;
}

Expected<std::unique_ptr<QuickModel::Impl>> prepared(pt2::Archive a, const AutoOptions& o) {
  auto impl = std::make_unique<QuickModel::Impl>(std::move(a), o.mesh);
  SPMD_RETURN_IF_ERROR(impl->prepare(o));
  return impl;
}

}  // namespace

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

QuickModel::QuickModel(std::unique_ptr<Impl> impl, std::unique_ptr<Impl> next, std::unique_ptr<Impl> check)
    : impl_(std::move(impl)), next_(std::move(next)), check_(std::move(check)) {
  if (!next_) return;
  // The second cut's own values (its extra layer's, and their optimizer's
  // and anchors'): the whole stack has L - kept - 1 more of each.
  // (The first cut's graph keeps the values of the nodes it removed, without
  // a producer: only its inputs and node results count.)
  std::unordered_set<std::string_view> firstHas;
  for (const ir::Value* v : impl_->archive.program.graph.inputs()) firstHas.insert(v->name());
  for (const auto& n : impl_->archive.program.graph.nodes())
    for (const ir::Value* v : n->outputValues()) firstHas.insert(v->name());
  std::unordered_set<std::string_view> firstNodes;
  for (const auto& n : impl_->archive.program.graph.nodes()) firstNodes.insert(n->name());
  // A value the rest reads (the chain's exit: the layer's output, the
  // gradient it hands down) is one value however many layers there are.
  next_->grows.resize(next_->ranges.size());
  for (size_t r = 0; r < next_->ranges.size(); ++r) {
    const ir::Value& v = *next_->ranges[r].value;
    next_->grows[r] = !firstHas.count(v.name()) &&
                      std::none_of(v.users().begin(), v.users().end(),
                                   [&](const ir::Node* u) { return firstNodes.count(u->name()) > 0; });
  }
  for (const auto& n : next_->archive.program.graph.nodes())
    next_->extraNode.push_back(!firstNodes.count(n->name()));
  next_->liveAt.assign(next_->extraNode.size(), 0);
  next_->grownAt.assign(next_->extraNode.size(), 0);
  next_->growDelta.assign(next_->delta.size(), 0);
}

QuickModel::~QuickModel() = default;

Expected<std::unique_ptr<QuickModel>> QuickModel::create(const std::string& modelPath, const AutoOptions& o) {
  SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive(modelPath, {.loadWeights = false}));
  return create(std::move(a), o);
}

// Three cuts: `a` to o.foldKeep + 1 layers, then two more readings of it to
// o.foldKeep and o.foldKeep + 2 (the check evaluate() makes).
Expected<std::unique_ptr<QuickModel>> QuickModel::folded(pt2::Archive& a, const AutoOptions& o) {
  const int keep = o.foldKeep;
  SPMD_ASSIGN_OR_RETURN(FoldedStack cut, foldLayers(a.program, keep + 1));
  SPMD_ASSIGN_OR_RETURN(pt2::Archive first, pt2::readArchive(a.path, {.loadWeights = false}));
  if (pinsStack(first.program, o.pins, cut.prefix))
    return Status::error("the pins lay out inputs of " + cut.prefix);
  std::unordered_set<std::string> cutAway;
  for (const auto& in : first.program.signature.inputs) cutAway.insert(in.target);
  SPMD_RETURN_IF_ERROR(foldLayers(first.program, keep).status());
  for (const auto& in : first.program.signature.inputs) cutAway.erase(in.target);
  SPMD_ASSIGN_OR_RETURN(pt2::Archive third, pt2::readArchive(a.path, {.loadWeights = false}));
  SPMD_RETURN_IF_ERROR(foldLayers(third.program, keep + 2).status());
  SPMD_ASSIGN_OR_RETURN(auto impl, prepared(std::move(first), o));
  SPMD_ASSIGN_OR_RETURN(auto check, prepared(std::move(third), o));
  SPMD_ASSIGN_OR_RETURN(auto next, prepared(std::move(a), o));
  std::unique_ptr<QuickModel> q(new QuickModel(std::move(impl), std::move(next), std::move(check)));
  q->extra_ = cut.layers - keep;
  q->cutAway_ = std::move(cutAway);
  q->folding_ = cut.prefix + " priced at " + std::to_string(keep) + " and " + std::to_string(keep + 1) +
                " of " + std::to_string(cut.layers) + " layers";
  return q;
}

// Folded where it folds (a cut that failed after changing `a`, or moved it:
// read again), else the whole program.
Expected<std::unique_ptr<QuickModel>> QuickModel::create(pt2::Archive a, const AutoOptions& o) {
  if (o.foldKeep > 0 && !o.memoryBudget) {  // folded peaks are estimates (QuickModelTest: within 6%)
    const size_t nodes = a.program.graph.nodes().size();
    const std::string path = a.path;
    auto q = folded(a, o);
    if (q) return q;
    if (a.program.graph.nodes().size() != nodes) {
      SPMD_ASSIGN_OR_RETURN(a, pt2::readArchive(path, {.loadWeights = false}));
    }
    logging::debug("auto: not folded: ", q.status().message());
  }
  SPMD_ASSIGN_OR_RETURN(auto impl, prepared(std::move(a), o));
  return std::unique_ptr<QuickModel>(new QuickModel(std::move(impl), nullptr, nullptr));
}

bool QuickModel::covers(const schema::PlacementSchema& s) { return !s.sequenceParallel && s.tpPlan.empty(); }

Expected<passes::LayoutCost> QuickModel::evaluate(const schema::PlacementSchema& s) {
  if (!next_) return impl_->evaluate(s);
  // A rule naming one tensor of a layer the cuts removed (a group written
  // member by member) matches nothing there, and must not fail.
  std::optional<schema::PlacementSchema> lenient;
  for (size_t r = 0; r < s.params.size(); ++r)
    if (!s.params[r].optional && cutAway_.count(s.params[r].match)) {
      if (!lenient) lenient = s;
      lenient->params[r].optional = true;
    }
  const schema::PlacementSchema& cutSchema = lenient ? *lenient : s;
  SPMD_ASSIGN_OR_RETURN(passes::LayoutCost c, impl_->evaluate(cutSchema));
  SPMD_ASSIGN_OR_RETURN(passes::LayoutCost c1, next_->evaluate(cutSchema));
  passes::LayoutCost out = extrapolate(c, c1, extra_);
  if (out.computeSeconds < 0 || out.commSeconds < 0) {  // no need for the third cut to tell
    ++unalike_;
    return unalikeError(out, std::nullopt, folding_);
  }
  if (checkAll_) {
    SPMD_ASSIGN_OR_RETURN(passes::LayoutCost c2, check_->evaluate(cutSchema));
    if (Status st = sameStep(out, extrapolate(c1, c2, extra_ - 1), folding_); !st.isOk()) {
      ++unalike_;
      return st;
    }
  }
  // The peak of live values on the second cut, each value of its extra
  // layer counted once per layer it stands for (a value both cuts have,
  // like a RoPE table every layer reads, once).
  out.peakBytes = out.paramBytes + next_->peakLive(extra_ - 1);
  return out;
}

Status QuickModel::check(const schema::PlacementSchema& s) {
  if (!next_ || checkAll_) return Status::ok();
  checkAll_ = true;
  auto c = evaluate(s);
  checkAll_ = false;
  return c.status();
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
