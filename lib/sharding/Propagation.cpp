// Sharding propagation (see Propagation.h for the worked example and the
// invariants). One pass over the nodes in graph order; per node, per mesh
// axis, the cheapest candidate of the node's rule.
#include "sharding/Propagation.h"

#include <algorithm>
#include <map>
#include <optional>

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
// `out` is overwritten (a buffer the caller reuses).
void subsplitsOf(int f, const OpShardingRule& rule, const std::vector<Placement>& current,
                 std::vector<int64_t>& out) {
  out.assign(1, 1);
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
}

bool isSumLike(const Placement& p) {
  return p.isPartial() && (p.reduce == ReduceOp::Sum || p.reduce == ReduceOp::Avg);
}

// Per-node state while the axes are decided one after the other.
class NodePlanner {
 public:
  // `operands` and `results` are tensorOperands / tensorResults of the node.
  NodePlanner(const std::vector<ir::Value*>& operands, const std::vector<ir::Value*>& results,
              const OpShardingRule& rule, const std::vector<ShardingSpec>& current,
              const std::vector<const std::vector<ShardingSpec>*>& available, const Mesh& mesh,
              const CostModel& cm, bool resultsSink)
      : rule_(rule),
        current_(current),
        available_(available),
        mesh_(mesh),
        cm_(cm),
        resultsSink_(resultsSink),
        operands_(operands),
        results_(results) {
    size_t axes = static_cast<size_t>(mesh.numAxes());
    out_.operands.assign(operands_.size(), ShardingSpec{std::vector<Placement>(axes)});
    out_.results.assign(results_.size(), ShardingSpec{std::vector<Placement>(axes)});
    axisFactor_.assign(axes, -1);
    operandBytes_.reserve(operands_.size());
    for (size_t i = 0; i < operands_.size(); ++i)
      operandBytes_.push_back(localBytes(*operands_[i], current_[i], mesh_));
    resultBytes_.resize(results_.size());
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
    return std::move(out_);  // the rule text is added by propagate(), for the chosen pass only
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
      if (!materialized(i, a, c.operands[i]))
        c.cost += transitionCost(cur(i, a), c.operands[i], a, n, operandBytes_[i], cm_);
      inherited |= c.operands[i].isShard() && cur(i, a) == c.operands[i];
    }
    // A sharding no operand had must later be gathered: count that now.
    if (c.factor >= 0 && !inherited && !results_.empty())
      c.cost += cm_.cost(CollectiveKind::AllGather, a, n, resultBytes_[0] / n, resultBytes_[0]);
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
      int64_t bytes = resultBytes_[i];
      sameSize = sameSize && bytes == operandBytes_[0];
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
    // Results as the axes before `a` left them, for score().
    for (size_t i = 0; i < results_.size(); ++i)
      resultBytes_[i] = localBytes(*results_[i], out_.results[i], mesh_);
    std::vector<Candidate> out;
    out.reserve(2 + rule_.factors.size() + operands_.size());
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
    curOnAxis.reserve(operands_.size());
    for (size_t i = 0; i < operands_.size(); ++i) curOnAxis.push_back(cur(i, a));
    std::vector<int64_t> subsplits;
    for (size_t f = 0; f < rule_.factors.size(); ++f) {
      subsplitsOf(static_cast<int>(f), rule_, curOnAxis, subsplits);
      for (int64_t s : subsplits) addFactorCandidate(a, static_cast<int>(f), s, out);
    }
  }

  // Whether factor f may split unevenly (torch.chunk): every dim it spans is
  // its alone, or a static one where it is the minor-most factor (a view
  // merged it under others: each of their rows splits as torch.chunk, an
  // uneven strided shard), and it is no average but a one-operand mean's
  // over static dims (expansion rescales that sum by the global count).
  // Symbolic dims split unevenly at their trace-time size too: the program
  // computes each rank's size from the symbol.
  bool unevenOk(int f) const {
    const Factor& fac = rule_.factors[static_cast<size_t>(f)];
    bool avg = fac.kind == FactorKind::Reduction && fac.reduce == ReduceOp::Avg;
    if (avg && operands_.size() != 1) return false;
    auto alone = [&](const DimFactors& dims, const ir::Value& v) {
      for (size_t d = 0; d < dims.size(); ++d) {
        bool has = std::find(dims[d].begin(), dims[d].end(), f) != dims[d].end();
        if (!has) continue;
        if (d >= v.type().sizes.size()) return false;
        bool isStatic = v.type().sizes[d].isStatic();
        if (dims[d].size() != 1 && (dims[d].back() != f || avg || !isStatic)) return false;
        if (avg && !isStatic) return false;
      }
      return true;
    };
    for (size_t i = 0; i < operands_.size(); ++i)
      if (!alone(rule_.operands[i], *operands_[i])) return false;
    for (size_t i = 0; i < results_.size(); ++i)
      if (!alone(rule_.results[i], *results_[i])) return false;
    return true;
  }

  // Whether every tensor of an uneven candidate on axis `a` can be laid out
  // (sharding::checkShardable: no uneven split of strided runs).
  bool shardable(const Candidate& c, int64_t a) const {
    auto fits = [&](const ir::Value& v, ShardingSpec spec, const Placement& p) {
      std::vector<int64_t> shape;
      for (const auto& d : v.type().sizes) shape.push_back(d.value());
      spec.placements[static_cast<size_t>(a)] = p;
      return checkShardable(shape, spec, mesh_).isOk();
    };
    for (size_t i = 0; i < operands_.size(); ++i)
      if (!fits(*operands_[i], out_.operands[i], c.operands[i])) return false;
    for (size_t i = 0; i < results_.size(); ++i)
      if (!fits(*results_[i], out_.results[i], c.results[i])) return false;
    return true;
  }

  void addFactorCandidate(int64_t a, int f, int64_t subsplit, std::vector<Candidate>& out) {
    int64_t n = mesh_.size(a);
    {
      const Factor& fac = rule_.factors[static_cast<size_t>(f)];
      if (fac.kind == FactorKind::NeedReplication || n == 1) return;
      int64_t already = 1;
      for (int64_t e = 0; e < a; ++e)
        if (axisFactor_[static_cast<size_t>(e)] == f) already *= mesh_.size(e);
      bool even = fac.size % (already * n * subsplit) == 0;
      // Uneven: torch.chunk of the factor, or of each of its subsplit rows.
      if (!even && (fac.size % subsplit != 0 || !unevenOk(f))) return;
      if (subsplit != 1 && already != 1) return;  // nested strided shards are not supported
      bool reduction = fac.kind == FactorKind::Reduction;
      Candidate c;
      c.operands.reserve(operands_.size());
      c.results.reserve(results_.size());
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
      if (ok && (even || shardable(c, a))) out.push_back(std::move(c));
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
  const std::vector<ir::Value*>& operands_;
  const std::vector<ir::Value*>& results_;
  NodeSharding out_;
  std::vector<int> axisFactor_;
  // localBytes of each operand in its current layout, and of each result
  // in the layout the axes decided so far give it.
  std::vector<int64_t> operandBytes_, resultBytes_;
};

std::string describe(const ir::Node& n) {
  std::string loc = ir::userSourceLine(n.metadata().stackTrace);
  return n.target() + " (node %" + n.name() + (loc.empty() ? "" : ", " + loc) + ")";
}

// What propagation reads of one node, gathered once for both passes and
// the checks after them (the operand lists, the metadata lookups and the
// rule are the same every time).
struct NodeInfo {
  std::vector<ir::Value*> operands;       // tensorOperands
  std::vector<ir::Value*> results;        // tensorResults
  const std::string* layout = nullptr;    // kLayoutKey's value, if any
  const std::string* layoutAs = nullptr;  // kLayoutAsKey's value, if any
  const RuleFn* fn = nullptr;             // the registry's rule, if any
  std::optional<OpShardingRule> rule;     // built by the first pass that needs it
};

std::vector<NodeInfo> nodeInfos(const ir::Graph& g, const RuleRegistry& registry) {
  std::vector<NodeInfo> infos(g.nodes().size());
  const std::string layoutKey(kLayoutKey), layoutAsKey(kLayoutAsKey);
  for (const auto& n : g.nodes()) {
    NodeInfo& info = infos[static_cast<size_t>(n->index())];
    info.operands = tensorOperands(*n);
    info.results = tensorResults(*n);
    info.fn = registry.find(n->target());
    const auto& other = n->metadata().other;
    if (auto it = other.find(layoutKey); it != other.end()) info.layout = &it->second;
    if (auto it = other.find(layoutAsKey); it != other.end()) info.layoutAs = &it->second;
  }
  return infos;
}

// True for a layout anchor (kLayoutKey or kLayoutAsKey): its layout is
// asked for, not chosen by a rule.
bool isLayoutAnchor(const NodeInfo& n) { return n.layout != nullptr || n.layoutAs != nullptr; }

// By value id: true when the value reaches nothing but graph outputs and
// layout anchors, directly or through one-operand nodes, so a pending sum
// in it is resolved where the output's or anchor's layout says.
std::vector<bool> sinkBoundValues(const ir::Graph& g, const std::vector<NodeInfo>& infos) {
  std::vector<bool> sink(g.numValues(), false);
  for (const auto& out : g.outputs())
    for (ir::Value* v : out.values) sink[static_cast<size_t>(v->id())] = true;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const ir::Node& n = **it;
    const NodeInfo& info = infos[static_cast<size_t>(n.index())];
    if (info.operands.size() != 1) continue;
    bool allSink = isLayoutAnchor(info) || !info.results.empty();
    for (ir::Value* r : info.results) allSink = allSink && sink[static_cast<size_t>(r->id())];
    if (!allSink) continue;
    ir::Value* v = info.operands[0];
    bool onlyHere = true;
    for (ir::Node* u : v->users()) onlyHere = onlyHere && u == &n;
    bool isOutput = sink[static_cast<size_t>(v->id())];
    if (onlyHere || isOutput) sink[static_cast<size_t>(v->id())] = true;
  }
  return sink;
}

// What every propagation pass reads; `infos` gains each node's rule the
// first time a pass builds it.
struct PassInputs {
  const ir::Graph& g;
  const std::vector<ShardingSpec>& inputSpecs;
  const Mesh& mesh;
  const RuleRegistry& registry;
  const PropagationOptions& options;
  std::vector<NodeInfo>& infos;
  std::vector<bool> sink;
};

// Layouts each value has been redistributed into so far (by value id).
using Available = std::vector<std::vector<ShardingSpec>>;

// The layouts of a node with a rule: its cheapest candidate per mesh axis.
Status planNode(const PassInputs& in, const ir::Node& n, const RuleFn& fn,
                const std::vector<ShardingSpec>& current,
                const std::vector<const std::vector<ShardingSpec>*>& avail, NodeSharding& ns) {
  NodeInfo& info = in.infos[static_cast<size_t>(n.index())];
  if (!info.rule) {
    auto rule = fn(n);
    if (!rule) return rule.status().withContext("node %" + n.name() + " (" + n.target() + ")");
    if (rule->operands.size() != current.size() || rule->results.size() != info.results.size())
      return Status::error("node %" + n.name() + " (" + n.target() + "): sharding rule describes " +
                           std::to_string(rule->operands.size()) + " operands, the node has " +
                           std::to_string(current.size()));
    info.rule.emplace(std::move(*rule));
  }
  bool resultsSink = true;
  for (ir::Value* r : info.results) resultsSink = resultsSink && in.sink[static_cast<size_t>(r->id())];
  ns = NodePlanner(info.operands, info.results, *info.rule, current, avail, in.mesh, in.options.cost,
                   resultsSink)
           .plan();
  return Status::ok();
}

// One greedy pass over the nodes in graph order; `available` starts with
// what an earlier pass redistributed and gains this pass's layouts.
Expected<Propagation> runPass(const PassInputs& in, Available& available) {
  const ir::Graph& g = in.g;
  const Mesh& mesh = in.mesh;
  Propagation p;
  ShardingSpec replicated = ShardingSpec::replicated(mesh.numAxes());
  p.values.assign(g.numValues(), ShardingSpec{});
  for (size_t i = 0; i < g.inputs().size(); ++i)
    p.values[static_cast<size_t>(g.inputs()[i]->id())] = in.inputSpecs[i];
  p.nodes.resize(g.nodes().size());
  std::vector<ShardingSpec> current;
  std::vector<const std::vector<ShardingSpec>*> avail;
  for (const auto& n : g.nodes()) {
    NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    const NodeInfo& info = in.infos[static_cast<size_t>(n->index())];
    const auto& operandValues = info.operands;
    current.resize(operandValues.size());  // assigned in place: their placement lists are reused
    avail.clear();
    for (size_t i = 0; i < operandValues.size(); ++i) {
      ir::Value* v = operandValues[i];
      current[i] = p.values[static_cast<size_t>(v->id())];
      avail.push_back(&available[static_cast<size_t>(v->id())]);
    }
    const RuleFn* fn = info.fn;
    const ir::Value* like = info.layoutAs == nullptr ? nullptr : g.findValue(*info.layoutAs);
    if (info.layoutAs != nullptr && (like == nullptr || current.size() != 1))
      return Status::error("node %" + n->name() + ": layout anchor names no value, or has several operands");
    if (info.layout != nullptr) {
      Expected<ShardingSpec> spec = ShardingSpec::parse(*info.layout);
      if (!spec || current.size() != 1 || static_cast<int64_t>(spec->placements.size()) != mesh.numAxes())
        return Status::error("node %" + n->name() + ": layout anchor '" + *info.layout +
                             "' is not a layout of the mesh, or the node has several operands");
      ns.operands.assign(1, *spec);
      ns.results.assign(info.results.size(), *spec);
    } else if (like != nullptr) {
      const ShardingSpec& spec = p.values[static_cast<size_t>(like->id())];
      ns.operands.assign(1, spec);
      ns.results.assign(info.results.size(), spec);
    } else if (isSymbolicOp(n->target()) || !fn) {
      if (!fn && !isSymbolicOp(n->target()))
        p.warnings.push_back("no sharding rule for " + describe(*n) + ": running it replicated");
      ns.operands =
          fn || !isSymbolicOp(n->target()) ? std::vector<ShardingSpec>(current.size(), replicated) : current;
      ns.results.assign(info.results.size(), replicated);
    } else {
      SPMD_RETURN_IF_ERROR(planNode(in, *n, *fn, current, avail, ns));
    }
    for (size_t i = 0; i < operandValues.size(); ++i) {
      auto& list = available[static_cast<size_t>(operandValues[i]->id())];
      if (ns.operands[i] != current[i] && std::find(list.begin(), list.end(), ns.operands[i]) == list.end())
        list.push_back(ns.operands[i]);
    }
    for (size_t i = 0; i < info.results.size(); ++i)
      p.values[static_cast<size_t>(info.results[i]->id())] = ns.results[i];
  }
  return p;
}

// A warning for each operand an op's rule makes gather (a shard on some
// axis the op takes whole): the user sharded it, and from here it is not.
// Layout anchors (FSDP's gathers, gradients) are asked for, not forced.
void addGatherWarnings(const ir::Graph& g, const std::vector<NodeInfo>& infos, const Mesh& mesh,
                       Propagation& p) {
  for (const auto& n : g.nodes()) {
    const NodeInfo& info = infos[static_cast<size_t>(n->index())];
    if (isSymbolicOp(n->target()) || isLayoutAnchor(info)) continue;
    const NodeSharding& ns = p.nodes[static_cast<size_t>(n->index())];
    const auto& operands = info.operands;
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
    const auto& operands = in.infos[static_cast<size_t>(n->index())].operands;
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
  std::vector<ir::Value*> operands = tensorOperands(node), results = tensorResults(node);
  NodePlanner planner(operands, results, rule, current, avail, mesh, cost, /*resultsSink=*/true);
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
  std::vector<NodeInfo> infos = nodeInfos(g, registry);
  std::vector<std::string> missing;
  for (const auto& n : g.nodes()) {
    if (!isSymbolicOp(n->target()) && !infos[static_cast<size_t>(n->index())].fn)
      missing.push_back(describe(*n));
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
  PassInputs in{g, inputSpecs, mesh, registry, options, infos, sinkBoundValues(g, infos)};
  Available first(g.numValues());
  SPMD_ASSIGN_OR_RETURN(Propagation p1, runPass(in, first));
  Available second = first;
  SPMD_ASSIGN_OR_RETURN(Propagation p2, runPass(in, second));
  Propagation& p = planCost(in, p2) <= planCost(in, p1) + 1e-15 ? p2 : p1;
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].rule) p.nodes[i].rule = infos[i].rule->str();
  addGatherWarnings(g, infos, mesh, p);
  return std::move(p);
}

}  // namespace spmd::sharding
