// The per-node planner of propagation (see NodePlanner.h).
#include "sharding/NodePlanner.h"

#include <algorithm>
#include <optional>

namespace spmd::sharding {

int64_t localBytes(const ir::Value& v, const ShardingSpec& s, const Mesh& mesh) {
  int64_t n = 1;
  for (const auto& d : v.type().sizes) n *= std::max<int64_t>(d.value(), 1);
  for (size_t a = 0; a < s.placements.size(); ++a)
    if (s.placements[a].isShard()) n = std::max<int64_t>(n / mesh.size(static_cast<int64_t>(a)), 1);
  return n * std::max<int64_t>(ir::elementSize(v.type().dtype), 1);
}

namespace detail {

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

namespace {

// One way to lay a node out along one mesh axis.
struct Candidate {
  std::vector<Placement> operands;
  std::vector<Placement> results;
  int factor = -1;       // the sharded factor, -1 for none
  int64_t subsplit = 1;  // factor's strided split (its rows) on this axis
  double cost = 0;
  bool passThrough = false;  // a pending sum passed on, not reduced here
};

// is split strided); nullopt when the tensor lacks it.
std::optional<Placement> placementOf(const DimFactors& dims, int f, const OpShardingRule& rule,
                                     int64_t subsplit = 1) {
  // An exchange factor's kernel takes whichever rows a rank holds: a plain
  // shard whatever factors are major to it (see Factor::exchange).
  bool exchange = rule.factors[static_cast<size_t>(f)].exchange;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t sf = 1;
    for (int g : dims[d]) {
      if (g == f) return Placement::stridedShard(static_cast<int64_t>(d), exchange ? 1 : sf * subsplit);
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
    axisSubsplit_.assign(axes, 1);
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
      axisSubsplit_[static_cast<size_t>(a)] = best->subsplit;
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
    if (rule_.factors[static_cast<size_t>(f)].exchange) return true;  // plain S(d) under the earlier splits
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

  // Whether the operand that asks for exchange factor f's split arrives
  // split by it on axis `a` (see Factor::exchangeOperand).
  bool exchangeAsked(int f, int64_t a) const {
    int i = rule_.factors[static_cast<size_t>(f)].exchangeOperand;
    if (i < 0 || static_cast<size_t>(i) >= operands_.size()) return false;
    auto p = placementOf(rule_.operands[static_cast<size_t>(i)], f, rule_);
    return p && cur(static_cast<size_t>(i), a) == *p;
  }

  void addFactorCandidate(int64_t a, int f, int64_t subsplit, std::vector<Candidate>& out) {
    int64_t n = mesh_.size(a);
    {
      const Factor& fac = rule_.factors[static_cast<size_t>(f)];
      if (fac.kind == FactorKind::NeedReplication || n == 1) return;
      int64_t already = 1;
      bool plainBefore = true;  // earlier axes took contiguous blocks of f
      for (int64_t e = 0; e < a; ++e)
        if (axisFactor_[static_cast<size_t>(e)] == f) {
          already *= mesh_.size(e);
          plainBefore = plainBefore && axisSubsplit_[static_cast<size_t>(e)] == 1;
        }
      bool even = fac.size % (already * n * subsplit) == 0;
      // Uneven: torch.chunk of the factor, or of each of its subsplit rows.
      // An exchange factor's dims differ in size: only even splits.
      if (!even && (fac.exchange || fac.size % subsplit != 0 || !unevenOk(f))) return;
      // A strided split nested under earlier axes' contiguous split of f
      // (batch on dp, heads on tp, the two merged for a bmm): the local
      // factor is f / already, split in its subsplit rows as a fresh one
      // would be. Only even splits, and not under an earlier strided one.
      if (subsplit != 1 && already != 1 && (!even || !plainBefore)) return;
      if (fac.exchange && (already != 1 || !exchangeAsked(f, a))) return;
      bool reduction = fac.kind == FactorKind::Reduction;
      Candidate c;
      c.operands.reserve(operands_.size());
      c.results.reserve(results_.size());
      c.factor = f;
      c.subsplit = subsplit;
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
  std::vector<int64_t> axisSubsplit_;  // the chosen candidate's subsplit per decided axis
  // localBytes of each operand in its current layout, and of each result
  // in the layout the axes decided so far give it.
  std::vector<int64_t> operandBytes_, resultBytes_;
};

}  // namespace

NodeSharding planNodeLayouts(const std::vector<ir::Value*>& operands, const std::vector<ir::Value*>& results,
                             const OpShardingRule& rule, const std::vector<ShardingSpec>& current,
                             const std::vector<const std::vector<ShardingSpec>*>& available, const Mesh& mesh,
                             const CostModel& cm, bool resultsSink) {
  return NodePlanner(operands, results, rule, current, available, mesh, cm, resultsSink).plan();
}

std::vector<NodeSharding> allNodeLayouts(const std::vector<ir::Value*>& operands,
                                         const std::vector<ir::Value*>& results, const OpShardingRule& rule,
                                         const std::vector<ShardingSpec>& current,
                                         const std::vector<const std::vector<ShardingSpec>*>& available,
                                         const Mesh& mesh, const CostModel& cm) {
  return NodePlanner(operands, results, rule, current, available, mesh, cm, /*resultsSink=*/true).all();
}

namespace {

void appendType(std::string& s, const ir::Value& v) {
  s += std::to_string(static_cast<int>(v.type().dtype));
  for (const auto& d : v.type().sizes) {
    s += d.isStatic() ? ',' : '~';
    s += std::to_string(d.value());
  }
  s += ';';
}

}  // namespace

int PlanMemo::classOf(const std::string& ruleText, const OpShardingRule& rule,
                      const std::vector<ir::Value*>& operands, const std::vector<ir::Value*>& results) {
  std::string k = ruleText;
  k += '|';
  for (bool a : rule.additiveOperands) k += a ? '1' : '0';
  k += '|';
  for (const ir::Value* v : operands) appendType(k, *v);
  k += '>';
  for (const ir::Value* v : results) appendType(k, *v);
  return classes_.emplace(std::move(k), static_cast<int>(classes_.size())).first->second;
}

const NodeSharding& PlanMemo::plan(int cls, const std::vector<ir::Value*>& operands,
                                   const std::vector<ir::Value*>& results, const OpShardingRule& rule,
                                   const std::vector<ShardingSpec>& current,
                                   const std::vector<const std::vector<ShardingSpec>*>& available,
                                   const Mesh& mesh, const CostModel& cm, bool resultsSink) {
  key_.assign({static_cast<uint64_t>(cls), resultsSink ? 1U : 0U});
  for (const ShardingSpec& s : current)
    for (const Placement& p : s.placements) key_.push_back(p.key());
  for (const auto* list : available) {
    key_.push_back(list ? list->size() : 0);
    if (list)
      for (const ShardingSpec& s : *list)
        for (const Placement& p : s.placements) key_.push_back(p.key());
  }
  auto it = plans_.find(key_);
  if (it == plans_.end())
    it = plans_
             .emplace(key_,
                      planNodeLayouts(operands, results, rule, current, available, mesh, cm, resultsSink))
             .first;
  return it->second;
}

}  // namespace detail
}  // namespace spmd::sharding
