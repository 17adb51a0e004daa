// Sharding propagation (see Propagation.h for the worked example and the
// invariants). One pass over the nodes in graph order; per node, per mesh
// axis, the cheapest candidate of the node's rule.
#include "sharding/Propagation.h"

#include <algorithm>
#include <map>

namespace spmd::sharding {
namespace {

// One way to lay a node out along one mesh axis.
struct Candidate {
  std::vector<Placement> operands;
  std::vector<Placement> results;
  int factor = -1;  // the sharded factor, -1 for none
  double cost = 0;
  bool passThrough = false;  // a pending sum passed on, not reduced here
};

int64_t localBytes(const ir::Value& v, const ShardingSpec& s, const Mesh& mesh) {
  int64_t n = 1;
  for (const auto& d : v.type().sizes) n *= std::max<int64_t>(d.value(), 1);
  for (size_t a = 0; a < s.placements.size(); ++a)
    if (s.placements[a].isShard()) n = std::max<int64_t>(n / mesh.size(static_cast<int64_t>(a)), 1);
  return n * std::max<int64_t>(ir::elementSize(v.type().dtype), 1);
}

// Estimated cost of turning placement `cur` into `req` along one axis.
double transitionCost(const Placement& cur, const Placement& req, int64_t axis, int64_t n, int64_t bytes,
                      const CostModel& cm) {
  if (cur == req) return 0;
  using K = CollectiveKind;
  auto c = [&](K k, int64_t in, int64_t out) { return cm.cost(k, axis, n, in, out); };
  if (cur.isReplicate())
    return req.isShard() ? c(K::LocalSlice, bytes, bytes / n) : c(K::ZeroPartial, bytes, bytes);
  if (cur.isShard()) {
    if (req.isReplicate()) return c(K::AllGather, bytes, bytes * n);
    if (req.isShard()) return c(K::AllToAll, bytes, bytes);
    return c(K::AllGather, bytes, bytes * n) + c(K::ZeroPartial, bytes * n, bytes * n);
  }
  if (req.isReplicate()) return c(K::AllReduce, bytes, bytes);
  if (req.isShard()) return c(K::ReduceScatter, bytes, bytes / n);
  return c(K::AllReduce, bytes, bytes) + c(K::ZeroPartial, bytes, bytes);
}

// Where factor `f` sits in a tensor: S(d) with the split factor of the
// factors major to it in that dim (times `subsplit`, when the factor itself
// is split strided); nullopt when the tensor lacks it.
std::optional<Placement> placementOf(const DimFactors& dims, int f, const OpShardingRule& rule,
                                     int64_t subsplit = 1) {
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t sf = 1;
    for (int g : dims[d]) {
      if (g == f) return Placement::stridedShard(static_cast<int64_t>(d), sf * subsplit);
      sf *= rule.factors[static_cast<size_t>(g)].size;
    }
  }
  return std::nullopt;
}

// Split factors `f` would need to keep operands' strided shards: an operand
// laid out S(d, sf) where f sits in dim d with major product p asks for f
// itself split strided by sf / p.
std::vector<int64_t> subsplitsOf(int f, const OpShardingRule& rule, const std::vector<Placement>& current) {
  std::vector<int64_t> out = {1};
  for (size_t i = 0; i < current.size(); ++i) {
    const Placement& c = current[i];
    if (!c.isStrided()) continue;
    auto p = placementOf(rule.operands[i], f, rule);
    if (!p || p->dim != c.dim || c.splitFactor % p->splitFactor != 0) continue;
    int64_t s = c.splitFactor / p->splitFactor;
    if (s > 1 && rule.factors[static_cast<size_t>(f)].size % s == 0 &&
        std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  }
  return out;
}

bool isSumLike(const Placement& p) {
  return p.isPartial() && (p.reduce == ReduceOp::Sum || p.reduce == ReduceOp::Avg);
}

// Per-node state while the axes are decided one after the other.
class NodePlanner {
 public:
  NodePlanner(const ir::Node& node, const OpShardingRule& rule, const std::vector<ShardingSpec>& current,
              const std::vector<const std::vector<ShardingSpec>*>& available, const Mesh& mesh,
              const CostModel& cm, bool resultsSink)
      : rule_(rule),
        current_(current),
        available_(available),
        mesh_(mesh),
        cm_(cm),
        resultsSink_(resultsSink) {
    operands_ = tensorOperands(node);
    results_ = tensorResults(node);
    size_t axes = static_cast<size_t>(mesh.numAxes());
    out_.operands.assign(operands_.size(), ShardingSpec{std::vector<Placement>(axes)});
    out_.results.assign(results_.size(), ShardingSpec{std::vector<Placement>(axes)});
    axisFactor_.assign(axes, -1);
  }

  NodeSharding plan() {
    for (int64_t a = 0; a < mesh_.numAxes(); ++a) {
      std::vector<Candidate> cands = candidates(a);
      const Candidate* best = &cands[0];
      for (const Candidate& c : cands)
        if (c.cost < best->cost - 1e-15) best = &c;
      for (size_t i = 0; i < operands_.size(); ++i)
        out_.operands[i].placements[static_cast<size_t>(a)] = best->operands[i];
      for (size_t i = 0; i < results_.size(); ++i)
        out_.results[i].placements[static_cast<size_t>(a)] = best->results[i];
      axisFactor_[static_cast<size_t>(a)] = best->factor;
    }
    out_.rule = rule_.str();
    return out_;
  }

  // Every candidate of a 1-D mesh, whatever its cost.
  std::vector<NodeSharding> all() {
    std::vector<NodeSharding> out;
    for (const Candidate& c : candidates(0)) {
      NodeSharding ns;
      for (const Placement& p : c.operands) ns.operands.push_back(ShardingSpec{{p}});
      for (const Placement& p : c.results) ns.results.push_back(ShardingSpec{{p}});
      ns.rule = rule_.str();
      out.push_back(std::move(ns));
    }
    return out;
  }

 private:
  const Placement& cur(size_t i, int64_t a) const { return current_[i].placements[static_cast<size_t>(a)]; }

  // Fits `p` (factor f's placement in a tensor with factor lists `dims`)
  // to the axes decided before `a`: an earlier axis may shard the same dim
  // only by f itself or by a factor major to f. Such a major split is
  // already applied to the local dim, so p's split factor shrinks by that
  // axis' size. False when p does not fit.
  bool fitEarlierAxes(const ShardingSpec& decided, const DimFactors& dims, Placement& p, int f,
                      int64_t a) const {
    if (!p.isShard()) return true;
    const auto& list = dims[static_cast<size_t>(p.dim)];
    auto pos = [&](int g) {
      auto it = std::find(list.begin(), list.end(), g);
      return it == list.end() ? -1 : static_cast<int>(it - list.begin());
    };
    int pf = pos(f);
    int64_t k = 1;
    for (int64_t e = 0; e < a; ++e) {
      const Placement& q = decided.placements[static_cast<size_t>(e)];
      int g = axisFactor_[static_cast<size_t>(e)];
      if (!q.isShard() || q.dim != p.dim || g == f) continue;
      int pg = pos(g);
      if (pg < 0 || pg > pf) return false;
      k *= mesh_.size(e);
    }
    if (p.splitFactor % k != 0) return false;
    p.splitFactor /= k;
    return true;
  }

  void score(Candidate& c, int64_t a) const {
    int64_t n = mesh_.size(a);
    bool inherited = false;
    for (size_t i = 0; i < operands_.size(); ++i) {
      int64_t bytes = localBytes(*operands_[i], current_[i], mesh_);
      if (!materialized(i, a, c.operands[i]))
        c.cost += transitionCost(cur(i, a), c.operands[i], a, n, bytes, cm_);
      inherited |= c.operands[i].isShard() && cur(i, a) == c.operands[i];
    }
    // A sharding no operand had must later be gathered: count that now.
    if (c.factor >= 0 && !inherited && !results_.empty())
      c.cost +=
          cm_.cost(CollectiveKind::AllGather, a, n, localBytes(*results_[0], out_.results[0], mesh_) / n,
                   localBytes(*results_[0], out_.results[0], mesh_));
    // A pending sum passed on must still be reduced later, unless it only
    // flows to an output or anchor that takes it as it is: count that
    // reduction now, so sums are reduced where they are smallest and, on a
    // tie at an op that combines operands, at once (Megatron's backward: one
    // all-reduce of the activation gradient, not one per weight gradient
    // computed from it). One-operand ops that keep the size (views) pass a
    // sum on for free: the choice is made where it matters.
    if (!c.passThrough || resultsSink_) return;
    double penalty = 0;
    bool sameSize = operands_.size() == 1;
    for (size_t i = 0; i < results_.size(); ++i) {
      int64_t bytes = localBytes(*results_[i], out_.results[i], mesh_);
      sameSize = sameSize && bytes == localBytes(*operands_[0], current_[0], mesh_);
      penalty += transitionCost(c.results[i], Placement::replicate(), a, n, bytes, cm_);
    }
    if (!sameSize) c.cost += penalty;
  }

  // True when an earlier node already redistributed operand `i` into a
  // layout that agrees with the decided axes and has `p` on axis `a`: using
  // it again costs nothing.
  bool materialized(size_t i, int64_t a, const Placement& p) const {
    if (!available_[i]) return false;
    for (const ShardingSpec& s : *available_[i]) {
      bool same = s.placements[static_cast<size_t>(a)] == p;
      for (int64_t e = 0; e < a && same; ++e)
        same = s.placements[static_cast<size_t>(e)] == out_.operands[i].placements[static_cast<size_t>(e)];
      if (same) return true;
    }
    return false;
  }

  std::vector<Candidate> candidates(int64_t a) {
    std::vector<Candidate> out;
    Candidate rep;
    rep.operands.assign(operands_.size(), Placement::replicate());
    rep.results.assign(results_.size(), Placement::replicate());
    out.push_back(rep);
    addFactorCandidates(a, out);
    addPartialCandidates(a, rep, out);
    for (Candidate& c : out) score(c, a);
    return out;
  }

  void addFactorCandidates(int64_t a, std::vector<Candidate>& out) {
    std::vector<Placement> curOnAxis;
    for (size_t i = 0; i < operands_.size(); ++i) curOnAxis.push_back(cur(i, a));
    for (size_t f = 0; f < rule_.factors.size(); ++f)
      for (int64_t s : subsplitsOf(static_cast<int>(f), rule_, curOnAxis))
        addFactorCandidate(a, static_cast<int>(f), s, out);
  }

  void addFactorCandidate(int64_t a, int f, int64_t subsplit, std::vector<Candidate>& out) {
    int64_t n = mesh_.size(a);
    {
      const Factor& fac = rule_.factors[static_cast<size_t>(f)];
      if (fac.kind == FactorKind::NeedReplication || n == 1) return;
      int64_t already = 1;
      for (int64_t e = 0; e < a; ++e)
        if (axisFactor_[static_cast<size_t>(e)] == f) already *= mesh_.size(e);
      if (fac.size % (already * n * subsplit) != 0) return;
      if (subsplit != 1 && already != 1) return;  // nested strided shards are not supported
      bool reduction = fac.kind == FactorKind::Reduction;
      Candidate c;
      c.factor = f;
      bool ok = true;
      for (size_t i = 0; i < operands_.size() && ok; ++i) {
        auto p = placementOf(rule_.operands[i], c.factor, rule_, subsplit);
        Placement q = p                                          ? *p
                      : (reduction && rule_.additiveOperands[i]) ? Placement::partial(fac.reduce)
                                                                 : Placement::replicate();
        ok = fitEarlierAxes(out_.operands[i], rule_.operands[i], q, c.factor, a);
        c.operands.push_back(q);
      }
      for (size_t i = 0; i < results_.size() && ok; ++i) {
        auto p = placementOf(rule_.results[i], c.factor, rule_, subsplit);
        Placement q = p ? *p : reduction ? Placement::partial(fac.reduce) : Placement::replicate();
        ok = fitEarlierAxes(out_.results[i], rule_.results[i], q, c.factor, a);
        c.results.push_back(q);
      }
      if (ok) out.push_back(std::move(c));
    }
  }

  void addPartialCandidates(int64_t a, const Candidate& rep, std::vector<Candidate>& out) {
    const auto& lin = rule_.linearOperands;
    switch (rule_.linearity) {
      case Linearity::None:
        return;
      case Linearity::Each:
        for (size_t i = 0; i < operands_.size(); ++i) {
          if (!lin[i] || !isSumLike(cur(i, a))) continue;
          Candidate c = rep;
          c.operands[i] = cur(i, a);
          c.results.assign(results_.size(), cur(i, a));
          c.passThrough = true;
          out.push_back(std::move(c));
        }
        return;
      case Linearity::Joint: {
        std::optional<Placement> p;
        for (size_t i = 0; i < operands_.size(); ++i)
          if (lin[i] && isSumLike(cur(i, a))) p = cur(i, a);
        if (!p) return;
        Candidate c = rep;
        for (size_t i = 0; i < operands_.size(); ++i)
          if (lin[i]) c.operands[i] = *p;
        c.results.assign(results_.size(), *p);
        c.passThrough = true;
        out.push_back(std::move(c));
        return;
      }
      case Linearity::ValueIndependent: {
        Candidate c = rep;
        for (size_t i = 0; i < operands_.size(); ++i) {
          if (lin[i] && cur(i, a).isPartial()) c.operands[i] = cur(i, a);
          if (cur(i, a).isShard()) return;
        }
        out.push_back(std::move(c));
        return;
      }
    }
  }

  const OpShardingRule& rule_;
  const std::vector<ShardingSpec>& current_;
  const std::vector<const std::vector<ShardingSpec>*>& available_;
  const Mesh& mesh_;
  const CostModel& cm_;
  bool resultsSink_;
  std::vector<ir::Value*> operands_, results_;
  NodeSharding out_;
  std::vector<int> axisFactor_;
};

std::string describe(const ir::Node& n) {
  std::string loc = ir::userSourceLine(n.metadata().stackTrace);
  return n.target() + " (node %" + n.name() + (loc.empty() ? "" : ", " + loc) + ")";
}

// True for a layout anchor (kLayoutKey or kLayoutAsKey): its layout is
// asked for, not chosen by a rule.
bool isLayoutAnchor(const ir::Node& n) {
  const auto& other = n.metadata().other;
  return other.count(std::string(kLayoutKey)) != 0 || other.count(std::string(kLayoutAsKey)) != 0;
}

// By value id: true when the value reaches nothing but graph outputs and
// layout anchors, directly or through one-operand nodes, so a pending sum
// in it is resolved where the output's or anchor's layout says.
std::vector<bool> sinkBoundValues(const ir::Graph& g) {
  std::vector<bool> sink(g.numValues(), false);
  for (const auto& out : g.outputs())
    for (ir::Value* v : out.values) sink[static_cast<size_t>(v->id())] = true;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const ir::Node& n = **it;
    auto operands = tensorOperands(n);
    if (operands.size() != 1) continue;
    bool anchor = isLayoutAnchor(n);
    auto results = tensorResults(n);
    bool allSink = anchor || !results.empty();
    for (ir::Value* r : results) allSink = allSink && sink[static_cast<size_t>(r->id())];
    if (!allSink) continue;
    ir::Value* v = operands[0];
    bool onlyHere = true;
    for (ir::Node* u : v->users()) onlyHere = onlyHere && u == &n;
    bool isOutput = sink[static_cast<size_t>(v->id())];
    if (onlyHere || isOutput) sink[static_cast<size_t>(v->id())] = true;
  }
  return sink;
}

// What every propagation pass reads.
struct PassInputs {
  const ir::Graph& g;
  const std::vector<ShardingSpec>& inputSpecs;
  const Mesh& mesh;
  const RuleRegistry& registry;
  const PropagationOptions& options;
  std::vector<bool> sink;
};

// Layouts each value has been redistributed into so far (by value id).
using Available = std::vector<std::vector<ShardingSpec>>;

// One greedy pass over the nodes in graph order; `available` starts with
// what an earlier pass redistributed and gains this pass's layouts.
Expected<Propagation> runPass(const PassInputs& in, Available& available) {
  const ir::Graph& g = in.g;
  const Mesh& mesh = in.mesh;
  const PropagationOptions& options = in.options;
  const std::vector<bool>& sink = in.sink;
  Propagation p;
  ShardingSpec replicated = ShardingSpec::replicated(mesh.numAxes());
  p.values.assign(g.numValues(), ShardingSpec{});
  for (size_t i = 0; i < g.inputs().size(); ++i)
    p.values[static_cast<size_t>(g.inputs()[i]->id())] = in.inputSpecs[i];
  p.nodes.resize(g.nodes().size());
  for (const auto& n : g.nodes()) {
    NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    std::vector<ShardingSpec> current;
    std::vector<const std::vector<ShardingSpec>*> avail;
    auto operandValues = tensorOperands(*n);
    for (ir::Value* v : operandValues) {
      current.push_back(p.values[static_cast<size_t>(v->id())]);
      avail.push_back(&available[static_cast<size_t>(v->id())]);
    }
    const RuleFn* fn = in.registry.find(n->target());
    auto anchor = n->metadata().other.find(std::string(kLayoutAsKey));
    const ir::Value* like = anchor == n->metadata().other.end() ? nullptr : g.findValue(anchor->second);
    if (anchor != n->metadata().other.end() && (like == nullptr || current.size() != 1))
      return Status::error("node %" + n->name() + ": layout anchor names no value, or has several operands");
    auto fixed = n->metadata().other.find(std::string(kLayoutKey));
    if (fixed != n->metadata().other.end()) {
      Expected<ShardingSpec> spec = ShardingSpec::parse(fixed->second);
      if (!spec || current.size() != 1 || static_cast<int64_t>(spec->placements.size()) != mesh.numAxes())
        return Status::error("node %" + n->name() + ": layout anchor '" + fixed->second +
                             "' is not a layout of the mesh, or the node has several operands");
      ns.operands.assign(1, *spec);
      ns.results.assign(tensorResults(*n).size(), *spec);
    } else if (like != nullptr) {
      const ShardingSpec& spec = p.values[static_cast<size_t>(like->id())];
      ns.operands.assign(1, spec);
      ns.results.assign(tensorResults(*n).size(), spec);
    } else if (isSymbolicOp(n->target()) || !fn) {
      if (!fn && !isSymbolicOp(n->target()))
        p.warnings.push_back("no sharding rule for " + describe(*n) + ": running it replicated");
      ns.operands =
          fn || !isSymbolicOp(n->target()) ? std::vector<ShardingSpec>(current.size(), replicated) : current;
      ns.results.assign(tensorResults(*n).size(), replicated);
    } else {
      auto rule = (*fn)(*n);
      if (!rule) return rule.status().withContext("node %" + n->name() + " (" + n->target() + ")");
      if (rule->operands.size() != current.size() || rule->results.size() != tensorResults(*n).size())
        return Status::error("node %" + n->name() + " (" + n->target() + "): sharding rule describes " +
                             std::to_string(rule->operands.size()) + " operands, the node has " +
                             std::to_string(current.size()));
      bool resultsSink = true;
      for (ir::Value* r : tensorResults(*n)) resultsSink = resultsSink && sink[static_cast<size_t>(r->id())];
      ns = NodePlanner(*n, *rule, current, avail, mesh, options.cost, resultsSink).plan();
    }
    for (size_t i = 0; i < operandValues.size(); ++i) {
      auto& list = available[static_cast<size_t>(operandValues[i]->id())];
      if (ns.operands[i] != current[i] && std::find(list.begin(), list.end(), ns.operands[i]) == list.end())
        list.push_back(ns.operands[i]);
    }
    auto results = tensorResults(*n);
    for (size_t i = 0; i < results.size(); ++i)
      p.values[static_cast<size_t>(results[i]->id())] = ns.results[i];
  }
  return p;
}

// A warning for each operand an op's rule makes gather (a shard on some
// axis the op takes whole): the user sharded it, and from here it is not.
// Layout anchors (FSDP's gathers, gradients) are asked for, not forced.
void addGatherWarnings(const ir::Graph& g, const Mesh& mesh, Propagation& p) {
  for (const auto& n : g.nodes()) {
    if (isSymbolicOp(n->target()) || isLayoutAnchor(*n)) continue;
    const NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    auto operands = tensorOperands(*n);
    for (size_t i = 0; i < operands.size() && i < ns.operands.size(); ++i) {
      const ShardingSpec& cur = p.values[static_cast<size_t>(operands[i]->id())];
      const ShardingSpec& want = ns.operands[i];
      std::string axes;
      for (size_t a = 0; a < cur.placements.size() && a < want.placements.size(); ++a)
        if (cur.placements[a].isShard() && !want.placements[a].isShard() &&
            mesh.size(static_cast<int64_t>(a)) > 1)
          axes += (axes.empty() ? "'" : ", '") + mesh.axisNames()[a] + "'";
      if (axes.empty()) continue;
      p.warnings.push_back(describe(*n) + " gathers %" + operands[i]->name() + " " + cur.str() + " -> " +
                           want.str() + " on " + axes + ": its rule cannot keep that sharding here");
    }
  }
}

// The modeled cost of every redistribution a plan implies (each value into
// each layout once).
double planCost(const PassInputs& in, const Propagation& p) {
  double total = 0;
  std::vector<std::vector<ShardingSpec>> seen(in.g.numValues());
  for (const auto& n : in.g.nodes()) {
    const NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    auto operands = tensorOperands(*n);
    for (size_t i = 0; i < operands.size() && i < ns.operands.size(); ++i) {
      const ShardingSpec& cur = p.values[static_cast<size_t>(operands[i]->id())];
      const ShardingSpec& req = ns.operands[i];
      auto& list = seen[static_cast<size_t>(operands[i]->id())];
      if (cur == req || cur.placements.size() != req.placements.size() ||
          std::find(list.begin(), list.end(), req) != list.end())
        continue;
      list.push_back(req);
      int64_t bytes = localBytes(*operands[i], cur, in.mesh);
      for (size_t a = 0; a < req.placements.size(); ++a)
        total += transitionCost(cur.placements[a], req.placements[a], static_cast<int64_t>(a),
                                in.mesh.size(static_cast<int64_t>(a)), bytes, in.options.cost);
    }
  }
  return total;
}

}  // namespace

Expected<std::vector<NodeSharding>> enumerateStrategies(const ir::Node& node, const RuleRegistry& registry,
                                                        const Mesh& mesh) {
  if (mesh.numAxes() != 1) return Status::error("enumerateStrategies: needs a 1-D mesh");
  const RuleFn* fn = registry.find(node.target());
  if (!fn) return Status::error("no sharding rule for " + node.target());
  SPMD_ASSIGN_OR_RETURN(OpShardingRule rule, (*fn)(node));
  // Operands start pending where the rule lets pending sums through, so the
  // pass-through candidates appear too.
  std::vector<ShardingSpec> current;
  for (size_t i = 0; i < rule.operands.size(); ++i) {
    bool linear = rule.linearity != Linearity::None && rule.linearOperands[i];
    current.push_back(ShardingSpec{{linear ? Placement::partial() : Placement::replicate()}});
  }
  std::vector<std::vector<ShardingSpec>> none(current.size());
  std::vector<const std::vector<ShardingSpec>*> avail;
  avail.reserve(none.size());
  for (auto& v : none) avail.push_back(&v);
  CostModel cost;
  NodePlanner planner(node, rule, current, avail, mesh, cost, /*resultsSink=*/true);
  std::vector<NodeSharding> out = planner.all();
  return out;
}

bool isSymbolicOp(std::string_view target) {
  return target == "aten.sym_size.int" || target == "aten.sym_numel.default" ||
         target == "aten.sym_stride.int" || target.substr(0, 10) == "_operator." ||
         target == "aten._assert_scalar.default" || target == "aten.sym_constrain_range_for_size.default" ||
         target == "aten._assert_tensor_metadata.default";
}

Expected<Propagation> propagate(const ir::ExportedProgram& program,
                                const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                                const RuleRegistry& registry, const PropagationOptions& options) {
  const ir::Graph& g = program.graph;
  if (inputSpecs.size() != g.inputs().size())
    return Status::error("propagation: " + std::to_string(inputSpecs.size()) + " input layouts for " +
                         std::to_string(g.inputs().size()) + " graph inputs");
  std::vector<std::string> missing;
  for (const auto& n : g.nodes()) {
    if (!isSymbolicOp(n->target()) && !registry.find(n->target())) missing.push_back(describe(*n));
  }
  if (!missing.empty() && !options.replicateUnknown) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
    return Status::error(
        "no sharding rule for " + std::to_string(missing.size()) + " op" + (missing.size() == 1 ? "" : "s") +
        ": " + list +
        "; give them rules (a schema's \"rules\": {\"<op>\": \"([i, j]) -> ([i, j])\"}), or pass "
        "--replicate-unknown to run them replicated");
  }
  // The second pass knows which layouts the first one redistributed values
  // into, so an early consumer can use the all-reduced value a later one
  // needs anyway instead of passing its pending sum on; it wins unless it
  // costs more.
  PassInputs in{g, inputSpecs, mesh, registry, options, sinkBoundValues(g)};
  Available first(g.numValues());
  SPMD_ASSIGN_OR_RETURN(Propagation p1, runPass(in, first));
  Available second = first;
  SPMD_ASSIGN_OR_RETURN(Propagation p2, runPass(in, second));
  Propagation& p = planCost(in, p2) <= planCost(in, p1) + 1e-15 ? p2 : p1;
  addGatherWarnings(g, mesh, p);
  return std::move(p);
}

}  // namespace spmd::sharding
