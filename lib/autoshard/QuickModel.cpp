// The quick cost model (see QuickModel.h).
//
// Invariants: the graph is prepared once and never changes after the
// Propagator reads it; a parameter's anchor takes its gathered layout when
// the schema gathers it and its stored layout otherwise (then it moves
// nothing, as reading the parameter directly would); everything a node
// costs that does not depend on the layout (FLOPs on global shapes, operand
// lists, live ranges) is computed once.
#include "autoshard/QuickModel.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "passes/GatherParams.h"
#include "passes/Optimizer.h"
#include "passes/Passes.h"
#include "pt2/Archive.h"
#include "schema/Resolve.h"
#include "sharding/Propagation.h"
#include "sharding/Reshard.h"
#include "sharding/RuleText.h"

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

// A tensor's live range over node indices (passes::liveRanges' rule).
struct Range {
  const ir::Value* value;
  int first, last;
};

std::vector<int64_t> hintShape(const ir::Value& v) {
  std::vector<int64_t> s;
  for (const auto& d : v.type().sizes) s.push_back(d.value());
  return s;
}

bool isStored(ir::InputKind k) {
  return k == ir::InputKind::Parameter || k == ir::InputKind::Buffer || k == ir::InputKind::TensorConstant;
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
  // By value id: the layouts priceComm() redistributed it into (emptied after each evaluation).
  mutable std::vector<std::vector<const sharding::ShardingSpec*>> done;

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
  Status priceComm(const sharding::Propagation& p, const schema::ResolvedPlacements& pl,
                   passes::LayoutCost& c) const;
  void priceCompute(const sharding::Propagation& p, passes::LayoutCost& c) const;
  void priceMemory(const sharding::Propagation& p, const schema::ResolvedPlacements& pl,
                   passes::LayoutCost& c) const;
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
  std::vector<int> lastUse(g.numValues(), -1);
  elements.assign(g.numValues(), 1);
  elementBytes.assign(g.numValues(), 1);
  done.resize(g.numValues());
  for (size_t id = 0; id < g.numValues(); ++id) {
    const ir::Value* v = g.valueById(static_cast<int>(id));
    if (!v || !v->isTensor()) continue;
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
    for (ir::Value* v : n->inputValues()) lastUse[static_cast<size_t>(v->id())] = n->index();
  }
  const int lastNode = std::max(0, static_cast<int>(g.nodes().size()) - 1);
  for (const auto& o : g.outputs())
    for (ir::Value* v : o.values)
      if (v) lastUse[static_cast<size_t>(v->id())] = lastNode;
  for (const auto& in : archive.program.signature.inputs)
    if (in.kind == ir::InputKind::UserInput && in.value && in.value->isTensor())
      ranges.push_back({in.value, 0, lastNode});
  for (const auto& n : g.nodes())
    for (ir::Value* v : n->outputValues()) {
      if (!v->isTensor()) continue;
      int last = lastUse[static_cast<size_t>(v->id())];
      ranges.push_back({v, n->index(), last < 0 ? n->index() : last});
    }
}

// A bucket of the collectives the bucket passes fuse: those of one kind on
// one axis that layout anchors (parameter gathers, gradients) issue, per
// module group; one alpha per bucketBytes of buffer.
struct Bucket {
  int64_t axis = 0;
  double bytes = 0;
};

// Every redistribution an operand or output needs, once per (value, layout),
// priced step by step as the expansion issues it; local steps count as
// bytes-bound compute, as modelLayout counts them.
class CommPricer {
 public:
  CommPricer(const QuickModel::Impl& m, const sharding::Propagation& p, passes::LayoutCost& c)
      : m_(m), p_(p), c_(c) {}
  ~CommPricer() {
    for (size_t id : touched_) m_.done[id].clear();
  }

  Status need(const ir::Value* v, const sharding::ShardingSpec& req, const std::string& bucket) {
    const sharding::ShardingSpec& cur = p_.values[static_cast<size_t>(v->id())];
    if (cur == req || cur.placements.size() != req.placements.size()) return Status::ok();
    auto& list = m_.done[static_cast<size_t>(v->id())];
    if (list.empty()) touched_.push_back(static_cast<size_t>(v->id()));
    for (const auto* s : list)
      if (*s == req) return Status::ok();
    list.push_back(&req);
    SPMD_ASSIGN_OR_RETURN(sharding::ReshardPlan plan, planFor(*v, cur, req));
    double elem = static_cast<double>(ir::elementSize(v->type().dtype));
    for (const auto& step : plan.steps) {
      double in = numel(step.localShapeBefore) * elem, out = numel(step.localShapeAfter) * elem;
      if (sharding::isLocalStep(step.kind)) {
        c_.computeSeconds += (in + out) / m_.profile.memoryBytesPerSecond;
        continue;
      }
      std::string kind(sharding::collectiveKindName(step.kind));
      double seconds = step.cost;
      if (!bucket.empty()) {  // its alpha is paid per bucket; packing copies its input
        seconds -= m_.linkCost.axisLink(step.axis).alphaSeconds;
        c_.computeSeconds += 2 * in / m_.profile.memoryBytesPerSecond;
        Bucket& b = buckets_[kind + "@" + std::to_string(step.axis) + "@" + bucket];
        b.axis = step.axis;
        b.bytes += in;
      } else {
        count(step.axis, kind, 1);
      }
      c_.axes[static_cast<size_t>(step.axis)].seconds += seconds;
      c_.commSeconds += seconds;
    }
    return Status::ok();
  }

  // One alpha and one collective per bucket.
  void closeBuckets(int64_t bucketBytes) {
    for (const auto& [key, b] : buckets_) {
      double limit = static_cast<double>(std::max<int64_t>(bucketBytes, 1));
      int64_t n = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(b.bytes / limit)));
      double seconds = static_cast<double>(n) * m_.linkCost.axisLink(b.axis).alphaSeconds;
      c_.axes[static_cast<size_t>(b.axis)].seconds += seconds;
      c_.commSeconds += seconds;
      count(b.axis, key.substr(0, key.find('@')), n);
    }
  }

 private:
  // planReshard's plan; where it knows no direct one (strided shards the
  // expansion gathers first), through replicated: gather, then slice.
  Expected<sharding::ReshardPlan> planFor(const ir::Value& v, const sharding::ShardingSpec& cur,
                                          const sharding::ShardingSpec& req) const {
    std::vector<int64_t> shape = hintShape(v);
    int64_t elem = ir::elementSize(v.type().dtype);
    auto direct = sharding::planReshard(shape, elem, cur, req, m_.mesh, m_.linkCost);
    if (direct) return direct;
    auto rep = sharding::ShardingSpec::replicated(m_.mesh.numAxes());
    auto a = sharding::planReshard(shape, elem, cur, rep, m_.mesh, m_.linkCost);
    if (!a) a = gatherEachAxis(v, cur);  // as the expansion does for strided runs
    SPMD_ASSIGN_OR_RETURN(sharding::ReshardPlan b,
                          sharding::planReshard(shape, elem, rep, req, m_.mesh, m_.linkCost));
    a->steps.insert(a->steps.end(), b.steps.begin(), b.steps.end());
    a->cost += b.cost;
    return a;
  }
  // One all-gather per sharded axis, last axis first (one reduce for a
  // pending one), on flat local shapes.
  sharding::ReshardPlan gatherEachAxis(const ir::Value& v, sharding::ShardingSpec spec) const {
    sharding::ReshardPlan plan;
    for (int64_t a = m_.mesh.numAxes() - 1; a >= 0; --a) {
      sharding::Placement& p = spec.placements[static_cast<size_t>(a)];
      if (p.isReplicate()) continue;
      sharding::ReshardStep step;
      step.kind = p.isShard() ? sharding::CollectiveKind::AllGather : sharding::CollectiveKind::AllReduce;
      step.axis = a;
      int64_t before = m_.localBytes(v, spec);
      p = sharding::Placement::replicate();
      int64_t after = m_.localBytes(v, spec), elem = std::max<int64_t>(ir::elementSize(v.type().dtype), 1);
      step.localShapeBefore = {before / elem};
      step.localShapeAfter = {after / elem};
      step.cost = m_.linkCost.cost(step.kind, a, m_.mesh.size(a), before, after);
      plan.steps.push_back(step);
      plan.cost += step.cost;
    }
    return plan;
  }
  static double numel(const std::vector<int64_t>& shape) {
    double n = 1;
    for (int64_t d : shape) n *= static_cast<double>(std::max<int64_t>(d, 1));
    return n;
  }
  void count(int64_t axis, const std::string& kind, int64_t n) {
    passes::AxisComm& ac = c_.axes[static_cast<size_t>(axis)];
    ac.collectives += n;
    auto it =
        std::find_if(ac.byKind.begin(), ac.byKind.end(), [&](const auto& e) { return e.first == kind; });
    if (it == ac.byKind.end())
      ac.byKind.emplace_back(kind, n);
    else
      it->second += n;
  }

  const QuickModel::Impl& m_;
  const sharding::Propagation& p_;
  passes::LayoutCost& c_;
  std::vector<size_t> touched_;
  std::map<std::string, Bucket> buckets_;
};

Status QuickModel::Impl::priceComm(const sharding::Propagation& p, const schema::ResolvedPlacements& pl,
                                   passes::LayoutCost& c) const {
  CommPricer pricer(*this, p, c);
  static const std::string kNone;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const auto& ops = nodes[n].operands;
    const auto& req = p.nodes[n].operands;
    for (size_t i = 0; i < ops.size() && i < req.size(); ++i) {
      Status st = pricer.need(ops[i], req[i], nodes[n].bucket);
      if (!st.isOk()) return st.withContext("operand " + std::to_string(i) + " of node " + std::to_string(n));
    }
  }
  const auto& outs = archive.program.graph.outputs();
  for (size_t k = 0; k < outs.size() && k < pl.outputs.size(); ++k)
    if (pl.outputs[k] && outs[k].values.size() == 1 && outs[k].values[0] && outs[k].values[0]->isTensor())
      SPMD_RETURN_IF_ERROR(pricer.need(outs[k].values[0], *pl.outputs[k], kNone));
  pricer.closeBuckets(bucketBytes);
  return Status::ok();
}

// Bytes at the local layouts; FLOPs divided by the axes the node shards
// (a pending sum passed on is computed whole on every rank).
void QuickModel::Impl::priceCompute(const sharding::Propagation& p, passes::LayoutCost& c) const {
  for (size_t n = 0; n < nodes.size(); ++n) {
    const NodeFacts& f = nodes[n];
    if (!f.priced) continue;
    const sharding::NodeSharding& ns = p.nodes[n];
    double bytes = 0;
    uint64_t sharded = 0;  // bit a: some tensor is sharded on mesh axis a
    auto add = [&](const ir::Value* v, const sharding::ShardingSpec& s) {
      bytes += static_cast<double>(localBytes(*v, s));
      for (size_t a = 0; a < s.placements.size() && a < 64; ++a)
        if (s.placements[a].isShard()) sharded |= uint64_t{1} << a;
    };
    for (size_t i = 0; i < f.operands.size() && i < ns.operands.size(); ++i)
      add(f.operands[i], ns.operands[i]);
    for (size_t i = 0; i < f.results.size() && i < ns.results.size(); ++i) add(f.results[i], ns.results[i]);
    double flops = f.flops;
    for (int64_t a = 0; a < mesh.numAxes() && a < 64; ++a)
      if (sharded >> a & 1) flops /= static_cast<double>(mesh.size(a));
    c.computeSeconds += passes::opSeconds(bytes, flops, f.dtype, profile);
  }
}

// Weights (parameters, buffers, constants, optimizer states) at their stored
// layout, plus the peak of live values at the layout they are produced in.
void QuickModel::Impl::priceMemory(const sharding::Propagation& p, const schema::ResolvedPlacements& pl,
                                   passes::LayoutCost& c) const {
  const auto& ins = archive.program.signature.inputs;
  for (size_t i = 0; i < ins.size() && i < pl.inputs.size(); ++i)
    if (isStored(ins[i].kind) && ins[i].value && ins[i].value->isTensor())
      c.paramBytes += localBytes(*ins[i].value, pl.inputs[i]);
  std::vector<int64_t> delta(nodes.size() + 1, 0);
  for (const Range& r : ranges) {
    int64_t b = localBytes(*r.value, p.values[static_cast<size_t>(r.value->id())]);
    delta[static_cast<size_t>(r.first)] += b;
    delta[static_cast<size_t>(r.last) + 1] -= b;
  }
  int64_t peak = 0, live = 0;
  for (size_t i = 0; i + 1 < delta.size(); ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  c.peakBytes = c.paramBytes + peak;
}

QuickModel::QuickModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QuickModel::~QuickModel() = default;

Expected<std::unique_ptr<QuickModel>> QuickModel::create(const std::string& modelPath, const AutoOptions& o) {
  SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive(modelPath, {.loadWeights = false}));
  return create(std::move(a), o);
}

Expected<std::unique_ptr<QuickModel>> QuickModel::create(pt2::Archive a, const AutoOptions& o) {
  auto impl = std::make_unique<Impl>(Impl(std::move(a), o.mesh));
  SPMD_RETURN_IF_ERROR(impl->prepare(o));
  return std::unique_ptr<QuickModel>(new QuickModel(std::move(impl)));
}

bool QuickModel::covers(const schema::PlacementSchema& s) { return !s.sequenceParallel && s.tpPlan.empty(); }

Expected<passes::LayoutCost> QuickModel::evaluate(const schema::PlacementSchema& s) {
  Impl& m = *impl_;
  const ir::ExportedProgram& prog = m.archive.program;
  SPMD_ASSIGN_OR_RETURN(schema::ResolvedPlacements pl, schema::resolvePlacements(s, prog, m.meshShape));
  passes::alignOptimizerStates(prog, pl);
  sharding::PropagationOptions po;
  po.cost = m.cost;
  po.replicateUnknown = m.replicateUnknown;
  po.details = false;
  po.secondPass = false;
  for (const auto& [node, input] : m.anchors)
    po.layoutOverrides[node] =
        input < pl.gathered.size() && pl.gathered[input] ? *pl.gathered[input] : pl.inputs[input];
  SPMD_RETURN_IF_ERROR(m.propagator->runInto(pl.inputs, pl.mesh, po, m.scratch));
  const sharding::Propagation& p = m.scratch;
  passes::LayoutCost c;
  for (int64_t a = 0; a < pl.mesh.numAxes(); ++a)
    c.axes.push_back({pl.mesh.axisNames()[static_cast<size_t>(a)], 0, 0, {}});
  SPMD_RETURN_IF_ERROR(m.priceComm(p, pl, c));
  m.priceCompute(p, c);
  m.priceMemory(p, pl, c);
  return c;
}

}  // namespace spmd::autoshard
