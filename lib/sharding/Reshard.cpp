// The redistribution planner: a cheapest-path search over layouts.
//
//   [S(0), S(0)] -> [R, S(0)] on a 2x2 mesh, global {8, 4}:
//     all_gather(axis=1, dim=0)   [S(0), S(0)] -> [S(0), R]   (inner axis first)
//     all_gather(axis=0, dim=0)   [S(0), R]    -> [R, R]
//     local_slice(axis=1, dim=0)  [R, R]       -> [R, S(0)]
//   Gathering axis 0 first would concatenate rows {0,1} with {4,5}: not a
//   layout any spec describes, so that step is never offered.
//
// Invariants of the search (Dijkstra over specs; edges = one-axis steps):
//   - A step on axis a that gathers, scatters or slices dim d (all-gather,
//     reduce-scatter, all-to-all on either dim, local slice) is offered only
//     when no later axis b > a shards d: the later axis split a's chunk, so
//     a's group does not hold adjacent pieces until b is undone.
//   - A reduction (all-reduce, reduce-scatter) of P(op) on axis a is offered
//     only when op commutes with every later partial axis: partial axes
//     reduce last-axis-first, so reducing a earlier must give the same value.
//   - Making a partial (zero, relabel) and sum<->avg scaling are always valid:
//     zeros reduce to zero and equal copies reduce to themselves under every
//     op, and positive scaling commutes with sum, max and min.
//   - Between layouts that divide evenly, every state does too; otherwise
//     states may split unevenly (torch.chunk: the leading ranks hold the
//     full chunk, trailing ones less or nothing); a state's bytes are the
//     largest rank's, which is what padded collectives move. from -> R...R
//     -> to is always a valid path, so a plan always exists.
//   - Per axis the search considers R, from[a], to[a] and S(d) for every dim
//     some axis of from or to shards, plus the largest dim (the "spare" dim):
//     enough for every path above and for the cheaper detours through a
//     shard, e.g. [P, P] -> [R, R] as reduce-scatter, all-reduce on the
//     smaller piece, all-gather (hierarchical all-reduce), while small
//     enough to stay fast on 3-D and 4-D meshes.
//   - A* with h = the sum, over the axes whose placement can only change
//     through a collective (S -> anything else, P -> anything but a linear
//     P), of the cheapest collective on that axis (alpha plus the bytes of
//     the smallest possible local tensor, total / ranks): admissible and
//     consistent, since one step changes one axis, a local step never
//     lowers h, and a collective costs at least its axis's bound.
//   - Ties in cost go to fewer steps, then to the first path found
//     (deterministic: states are expanded in a fixed order).
//   - States are strings of one-byte placement codes; only the final path is
//     turned into ReshardSteps, so the search itself allocates little.
#include "sharding/Reshard.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "support/Strings.h"

namespace spmd::sharding {
namespace {

/// One placement in one byte: R, P(op) for the four ops, then S(0), S(1), ...
using Code = uint8_t;
constexpr Code kReplicate = 0;
constexpr Code kFirstShard = 5;
/// A layout: one Code per mesh axis.
using State = std::string;

Code encode(const Placement& p) {
  if (p.isReplicate()) return kReplicate;
  if (p.isPartial()) return static_cast<Code>(1 + static_cast<int>(p.reduce));
  return static_cast<Code>(kFirstShard + p.dim);
}

Placement decode(Code c) {
  if (c == kReplicate) return Placement::replicate();
  if (c < kFirstShard) return Placement::partial(static_cast<ReduceOp>(c - 1));
  return Placement::shard(c - kFirstShard);
}

State encode(const ShardingSpec& spec) {
  State s;
  for (const Placement& p : spec.placements) s.push_back(static_cast<char>(encode(p)));
  return s;
}

ShardingSpec decode(const State& s) {
  ShardingSpec spec;
  for (char c : s) spec.placements.push_back(decode(static_cast<Code>(c)));
  return spec;
}

Code codeAt(const State& s, size_t axis) { return static_cast<Code>(s[axis]); }

/// 0 for sum and avg (linear: they commute), 1 for max, 2 for min.
int commuteClass(ReduceOp op) { return op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? 2 : 0; }

/// The step kind that turns p into q on one axis, if there is a direct one.
std::optional<CollectiveKind> directKind(const Placement& p, const Placement& q) {
  using K = CollectiveKind;
  if (p.isShard()) {
    if (q.isReplicate()) return K::AllGather;
    if (q.isShard()) return K::AllToAll;
    return std::nullopt;
  }
  if (p.isReplicate()) {
    if (q.isShard()) return K::LocalSlice;
    if (q.isPartial()) return q.reduce == ReduceOp::Sum ? K::ZeroPartial : K::MarkPartial;
    return std::nullopt;
  }
  if (q.isReplicate()) return K::AllReduce;
  if (q.isShard()) return K::ReduceScatter;
  if (commuteClass(p.reduce) == 0 && commuteClass(q.reduce) == 0) return K::ScalePartial;
  return std::nullopt;
}

/// Whether axis a's placement p can only become q through a collective on a.
bool needsCollective(const Placement& p, const Placement& q) {
  if (p == q || p.isReplicate()) return false;
  if (p.isShard()) return true;
  return !(q.isPartial() && commuteClass(p.reduce) == 0 && commuteClass(q.reduce) == 0);
}

/// Whether the step on `axis` is valid in `s` (see the invariants).
bool isValidStep(const State& s, size_t axis, CollectiveKind kind, const Placement& p, const Placement& q) {
  auto laterShards = [&](int64_t d) {
    for (size_t b = axis + 1; b < s.size(); ++b)
      if (codeAt(s, b) == kFirstShard + d) return true;
    return false;
  };
  auto commutesWithLater = [&](ReduceOp op) {
    for (size_t b = axis + 1; b < s.size(); ++b) {
      Placement later = decode(codeAt(s, b));
      if (later.isPartial() && commuteClass(later.reduce) != commuteClass(op)) return false;
    }
    return true;
  };
  switch (kind) {
    case CollectiveKind::AllGather:
      return !laterShards(p.dim);
    case CollectiveKind::AllToAll:
      return !laterShards(p.dim) && !laterShards(q.dim);
    case CollectiveKind::LocalSlice:
      return !laterShards(q.dim);
    case CollectiveKind::AllReduce:
      return commutesWithLater(p.reduce);
    case CollectiveKind::ReduceScatter:
      return commutesWithLater(p.reduce) && !laterShards(q.dim);
    default:
      return true;
  }
}

/// Cheapest-path search over layouts for one planReshard call.
class Planner {
 public:
  Planner(const std::vector<int64_t>& shape, int64_t elementBytes, const Mesh& mesh, const CostModel& cost,
          const ShardingSpec& from, const ShardingSpec& to);
  /// The cheapest plan; `from` and `to` must be normalized. With `ordered`,
  /// only plans that reduce every reduceFirst axis before stepping on any
  /// other (none when there are no such plans).
  std::optional<ReshardPlan> run(bool ordered);

 private:
  struct Node {
    State state;
    double cost;
    int64_t steps;
    int64_t parent;  // -1 for the start
    bool done;
  };
  /// The kind and cost of setting `axis` of `s` to `q`, when one valid step does.
  std::optional<std::pair<CollectiveKind, double>> edge(const State& s, size_t axis, Code q) const;
  /// Whether a reduceFirst axis other than `axis` still waits for its reduction in `s`.
  bool waitsForReduction(const State& s, size_t axis) const;
  bool dividesEvenly(const State& s) const;
  /// Bytes of the largest rank's tensor in layout `s` (rank 0's: torch.chunk
  /// gives the leading ranks the full chunks), which collectives pad to.
  int64_t localBytes(const State& s) const;
  double heuristic(const State& s) const;
  /// The (in, out) bytes a step's collective carries: uneven shards travel
  /// padded to the largest (an all-gather's output is n of them, a
  /// reduce-scatter's input n of its outputs).
  std::pair<int64_t, int64_t> paddedBytes(CollectiveKind kind, int64_t n, int64_t in, int64_t out) const {
    if (evenOnly_) return {in, out};
    if (kind == CollectiveKind::AllGather) out = std::max(out, in * n);
    if (kind == CollectiveKind::ReduceScatter) in = std::max(in, out * n);
    if (kind == CollectiveKind::AllToAll) in = std::max(in, out);
    return {in, out};
  }
  ReshardStep makeStep(const State& before, const State& after) const;

  const std::vector<int64_t>& shape_;
  int64_t elementBytes_;
  const Mesh& mesh_;
  const CostModel& cost_;
  State from_, to_;
  bool evenOnly_ = true;                    // from and to divide evenly: so must every state between
  bool ordered_ = false;                    // run(true): reduceFirst axes reduce before the others
  std::vector<std::vector<Code>> options_;  // candidate codes per axis
  std::vector<double> cheapest_;            // lower bound of a collective per axis
};

Planner::Planner(const std::vector<int64_t>& shape, int64_t elementBytes, const Mesh& mesh,
                 const CostModel& cost, const ShardingSpec& from, const ShardingSpec& to)
    : shape_(shape),
      elementBytes_(elementBytes),
      mesh_(mesh),
      cost_(cost),
      from_(encode(from)),
      to_(encode(to)) {
  evenOnly_ = dividesEvenly(from_) && dividesEvenly(to_);
  std::vector<int64_t> dims;
  if (!shape.empty())  // the spare dim
    dims.push_back(std::max_element(shape.begin(), shape.end()) - shape.begin());
  for (const ShardingSpec* spec : {&from, &to})
    for (const Placement& p : spec->placements)
      if (p.isShard()) dims.push_back(p.dim);
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  int64_t minLocal = localBytes(State(from_.size(), static_cast<char>(kReplicate))) / mesh.numRanks();
  for (int64_t a = 0; a < mesh.numAxes(); ++a) {
    int64_t n = mesh.size(a);
    cheapest_.push_back(n == 1 ? 0.0 : cost.cost(CollectiveKind::AllGather, a, n, minLocal, minLocal));
  }
  options_.resize(from_.size());
  for (size_t a = 0; a < options_.size(); ++a) {
    std::vector<Code>& opts = options_[a];
    opts.push_back(kReplicate);
    for (int64_t d : dims) opts.push_back(static_cast<Code>(kFirstShard + d));
    for (Code c : {codeAt(from_, a), codeAt(to_, a)})
      if (std::find(opts.begin(), opts.end(), c) == opts.end()) opts.push_back(c);
  }
}

bool Planner::dividesEvenly(const State& s) const {
  for (size_t d = 0; d < shape_.size(); ++d) {
    int64_t parts = 1;
    for (size_t a = 0; a < s.size(); ++a)
      if (codeAt(s, a) == kFirstShard + d) parts *= mesh_.size(static_cast<int64_t>(a));
    if (shape_[d] % parts != 0) return false;
  }
  return true;
}

int64_t Planner::localBytes(const State& s) const {
  if (!dividesEvenly(s)) {
    std::vector<int64_t> origin(static_cast<size_t>(mesh_.numAxes()), 0);
    int64_t bytes = elementBytes_;
    for (int64_t size : localShape(shape_, decode(s), mesh_, origin)) bytes *= size;
    return bytes;
  }
  int64_t bytes = elementBytes_;
  for (int64_t size : shape_) bytes *= size;
  for (size_t a = 0; a < s.size(); ++a)
    if (codeAt(s, a) >= kFirstShard) bytes /= mesh_.size(static_cast<int64_t>(a));
  return bytes;
}

double Planner::heuristic(const State& s) const {
  double h = 0;
  for (size_t a = 0; a < s.size(); ++a)
    if (needsCollective(decode(codeAt(s, a)), decode(codeAt(to_, a)))) h += cheapest_[a];
  return h;
}

std::optional<std::pair<CollectiveKind, double>> Planner::edge(const State& s, size_t axis, Code q) const {
  Placement from = decode(codeAt(s, axis));
  Placement to = decode(q);
  std::optional<CollectiveKind> kind = directKind(from, to);
  if (!kind || !isValidStep(s, axis, *kind, from, to)) return std::nullopt;
  State after = s;
  after[axis] = static_cast<char>(q);
  if (evenOnly_ && to.isShard() && !dividesEvenly(after)) return std::nullopt;
  auto a = static_cast<int64_t>(axis);
  auto [in, out] = paddedBytes(*kind, mesh_.size(a), localBytes(s), localBytes(after));
  return std::pair{*kind, cost_.cost(*kind, a, mesh_.size(a), in, out)};
}

bool Planner::waitsForReduction(const State& s, size_t axis) const {
  for (size_t b = 0; b < s.size(); ++b)
    if (b != axis && cost_.axisLink(static_cast<int64_t>(b)).reduceFirst &&
        decode(codeAt(s, b)).isPartial() && !decode(codeAt(to_, b)).isPartial())
      return true;
  return false;
}

std::optional<ReshardPlan> Planner::run(bool ordered) {
  ordered_ = ordered;
  std::vector<Node> nodes{{from_, 0.0, 0, -1, false}};
  std::unordered_map<State, size_t> index{{from_, 0}};
  using Entry = std::tuple<double, int64_t, size_t>;  // (cost + heuristic, steps, node)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  queue.emplace(heuristic(from_), 0, 0);
  size_t goal = 0;
  bool found = false;
  while (!queue.empty() && !found) {
    size_t cur = std::get<2>(queue.top());
    queue.pop();
    if (nodes[cur].done) continue;
    nodes[cur].done = true;
    if (nodes[cur].state == to_) {
      goal = cur;
      found = true;
      break;
    }
    State state = nodes[cur].state;
    for (size_t a = 0; a < options_.size(); ++a)
      for (Code q : options_[a]) {
        if (q == codeAt(state, a) || (ordered_ && waitsForReduction(state, a))) continue;
        auto e = edge(state, a, q);
        if (!e) continue;
        State next = state;
        next[a] = static_cast<char>(q);
        double cost = nodes[cur].cost + e->second;
        int64_t steps = nodes[cur].steps + 1;
        auto [it, fresh] = index.emplace(next, nodes.size());
        if (fresh) {
          nodes.push_back({next, cost, steps, static_cast<int64_t>(cur), false});
        } else {
          Node& old = nodes[it->second];
          if (old.done || std::tie(cost, steps) >= std::tie(old.cost, old.steps)) continue;
          old = {next, cost, steps, static_cast<int64_t>(cur), false};
        }
        queue.emplace(cost + heuristic(next), steps, it->second);
      }
  }
  if (!found) return std::nullopt;
  ReshardPlan plan;
  for (auto n = static_cast<int64_t>(goal); nodes[static_cast<size_t>(n)].parent >= 0;
       n = nodes[static_cast<size_t>(n)].parent) {
    const Node& node = nodes[static_cast<size_t>(n)];
    plan.steps.push_back(makeStep(nodes[static_cast<size_t>(node.parent)].state, node.state));
  }
  std::reverse(plan.steps.begin(), plan.steps.end());
  for (const ReshardStep& step : plan.steps) plan.cost += step.cost;
  return plan;
}

ReshardStep Planner::makeStep(const State& before, const State& after) const {
  size_t axis = 0;
  while (before[axis] == after[axis]) ++axis;
  auto e = edge(before, axis, codeAt(after, axis));
  SPMD_CHECK(e.has_value());
  ReshardStep step;
  step.kind = e->first;
  step.cost = e->second;
  step.axis = static_cast<int64_t>(axis);
  step.from = decode(codeAt(before, axis));
  step.to = decode(codeAt(after, axis));
  step.before = decode(before);
  step.after = decode(after);
  int64_t n = mesh_.size(step.axis);
  switch (step.kind) {
    case CollectiveKind::AllGather:
      step.dim = step.from.dim;
      break;
    case CollectiveKind::AllToAll:
      step.dim = step.to.dim;
      step.dim2 = step.from.dim;
      break;
    case CollectiveKind::LocalSlice:
      step.dim = step.to.dim;
      break;
    case CollectiveKind::AllReduce:
      step.op = step.from.reduce;
      break;
    case CollectiveKind::ReduceScatter:
      step.op = step.from.reduce;
      step.dim = step.to.dim;
      break;
    case CollectiveKind::ScalePartial:
      step.op = step.to.reduce;
      step.scale = step.to.reduce == ReduceOp::Avg ? static_cast<double>(n) : 1.0 / static_cast<double>(n);
      break;
    case CollectiveKind::ZeroPartial:
    case CollectiveKind::MarkPartial:
      step.op = step.to.reduce;
      break;
  }
  std::vector<int64_t> origin(static_cast<size_t>(mesh_.numAxes()), 0);
  step.localShapeBefore = localShape(shape_, step.before, mesh_, origin);
  step.localShapeAfter = localShape(shape_, step.after, mesh_, origin);
  auto [in, out] = paddedBytes(step.kind, n, localBytes(before), localBytes(after));
  step.bytesPerRank = n == 1 ? 0 : CostModel::bytesMoved(step.kind, n, in, out);
  return step;
}

}  // namespace

std::string ReshardStep::str() const {
  std::string args = "axis=" + std::to_string(axis);
  switch (kind) {
    case CollectiveKind::AllGather:
    case CollectiveKind::LocalSlice:
      args += ", dim=" + std::to_string(dim);
      break;
    case CollectiveKind::AllToAll:
      args += ", split=" + std::to_string(dim) + ", concat=" + std::to_string(dim2);
      break;
    case CollectiveKind::ReduceScatter:
      args += ", op=" + std::string(reduceOpName(op)) + ", dim=" + std::to_string(dim);
      break;
    case CollectiveKind::ScalePartial:
      args += ", scale=" + std::to_string(scale);
      break;
    case CollectiveKind::AllReduce:
    case CollectiveKind::ZeroPartial:
    case CollectiveKind::MarkPartial:
      args += ", op=" + std::string(reduceOpName(op));
      break;
  }
  return std::string(collectiveKindName(kind)) + "(" + args + ") " + before.str() + " -> " + after.str();
}

std::string ReshardPlan::str() const {
  std::string out;
  for (const ReshardStep& step : steps) out += (out.empty() ? "" : "\n") + step.str();
  return out;
}

Expected<ReshardPlan> planReshard(const std::vector<int64_t>& globalShape, int64_t elementBytes,
                                  const ShardingSpec& from, const ShardingSpec& to, const Mesh& mesh,
                                  const CostModel& cost) {
  std::string what = "reshard " + from.str() + " -> " + to.str() + " of shape " + formatShape(globalShape);
  if (elementBytes < 1) return Status::error(what + ": element size must be >= 1 byte");
  for (int64_t s : globalShape)
    if (s < 0) return Status::error(what + ": sizes must be >= 0");
  auto rank = static_cast<int64_t>(globalShape.size());
  if (rank > 250) return Status::error(what + ": tensors of rank above 250 are not supported");
  auto fromNorm = normalizeSpec(from, rank, mesh);
  if (!fromNorm) return fromNorm.status().withContext(what);
  auto toNorm = normalizeSpec(to, rank, mesh);
  if (!toNorm) return toNorm.status().withContext(what);
  SPMD_RETURN_IF_ERROR(checkShardable(globalShape, *fromNorm, mesh).withContext(what));
  SPMD_RETURN_IF_ERROR(checkShardable(globalShape, *toNorm, mesh).withContext(what));
  if (*fromNorm == *toNorm) return ReshardPlan{};
  Planner planner(globalShape, elementBytes, mesh, cost, *fromNorm, *toNorm);
  // A reduceFirst axis's reduction comes first where some plan allows it.
  if (auto plan = planner.run(true)) return std::move(*plan);
  std::optional<ReshardPlan> plan = planner.run(false);
  SPMD_CHECK(plan.has_value());
  return std::move(*plan);
}

}  // namespace spmd::sharding
