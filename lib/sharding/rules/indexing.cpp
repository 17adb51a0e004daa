// Indexing: gathers read, and scatters write, along indexed dims, which must
// stay whole in the tensor being indexed; the index tensors' own dims pass
// through to the result; other dims pass through when every tensor has them
// at the same size. Accumulating scatters are sums: sharding the
// contributions (index and source dims) leaves the result pending, and the
// destination must then be pending too.
//
//   aten.embedding.default(w[256, 64], tokens[2, 16])
//     -> ([l, k], [i, j]) -> ([i, j, k]) {i=2, j=16, k=64, l=256 reduction(sum)} linear-each(0)
//   aten.gather.default(x[8, 10], 1, idx[8, 1])
//     -> ([i, j], [i, 1]) -> ([i, 1]) {i=8, j=10 reduction(sum)} linear-each(0)
//   aten.index_put.default(z[256, 64], [t[2, 16]], v[2, 16, 64], true)
//     -> ([i, j], [k, l], [k, l, j]) -> ([i, j]) {i=256 replicated, j=64, k=2 reduction(sum),
//        l=16 reduction(sum)} linear-joint(0, 2), z additive
//   aten.topk.default(x[32, 4], 2)
//     -> ([i, j]) -> ([i, k], [i, k]) {i=32, j=4 replicated, k=2 replicated}
//   aten.scatter_reduce.two(x[4, 10], 1, idx[4, 6], src[4, 6], "amax")
//     -> ([i, j], [i, k], [i, k]) -> ([i, j]) {i=4, j=10 replicated, k=6 reduction(max)}, x additive
//
// Embedding with the vocabulary sharded is Megatron's vocab-parallel
// embedding: each rank looks up the rows it holds and gives zeros for the
// others (spmd.vocab_embedding), so the vocabulary is a summed factor.
// Non-accumulating scatters are not marked linear: with duplicate indices,
// ranks may keep different writes.
#include <algorithm>
#include <optional>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

using rules::operandIndex;
using rules::resultIndex;

// Per-operand dims for RuleBuilder::addFactor: dim `d` of each listed
// operand `op` (entries with op -1 are skipped), -1 (absent) elsewhere.
std::vector<int64_t> at(int numOperands, std::initializer_list<std::pair<int, int64_t>> dims) {
  std::vector<int64_t> out(static_cast<size_t>(numOperands), -1);
  for (auto [op, d] : dims)
    if (op >= 0) out[static_cast<size_t>(op)] = d;
  return out;
}

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// embedding(weight[V, D], indices[...]) -> [..., D].
Expected<OpShardingRule> embeddingRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1 || b.operandShape(0).size() != 2 ||
      b.resultShape(0).size() != b.operandShape(1).size() + 1)
    return Status::error("embedding rule: expected weight [V, D], indices [...] and a result [..., D]");
  const auto& w = b.operandShape(0);
  const auto& idx = b.operandShape(1);
  auto rank = static_cast<int64_t>(idx.size());
  for (int64_t d = 0; d < rank; ++d)
    if (idx[sz(d)] != 1) b.addFactor({-1, d}, {d}, idx[sz(d)]);
  if (w[1] != 1) b.addFactor({1, -1}, {rank}, w[1]);
  if (w[0] != 1) b.addFactor({0, -1}, {-1}, w[0], FactorKind::Reduction);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// embedding_dense_backward(grad[..., D], indices[...]) -> [V, D]: rows of
// grad are summed into the rows the indices name.
Expected<OpShardingRule> embeddingBackwardRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1 || b.resultShape(0).size() != 2)
    return Status::error("embedding backward rule: expected grad_output, indices and a result [V, D]");
  const auto& idx = b.operandShape(1);
  auto rank = static_cast<int64_t>(idx.size());
  // Scaling by frequency counts occurrences over the whole batch.
  FactorKind batch =
      rules::boolArg(node, "scale_grad_by_freq", false) ? FactorKind::NeedReplication : FactorKind::Reduction;
  for (int64_t d = 0; d < rank; ++d)
    if (idx[sz(d)] != 1) b.addFactor({d, d}, {-1}, idx[sz(d)], batch);
  const auto& grad = b.operandShape(0);
  if (static_cast<int64_t>(grad.size()) == rank + 1 && grad[sz(rank)] != 1)
    b.addFactor({rank, -1}, {1}, grad[sz(rank)]);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// Loss parallelism: a floating `self` indexed with one index per row along
// `dim` (index shaped like self but 1 at `dim`), as cross-entropy picks the
// target's log-probability and its backward writes the target's gradient.
// Then `dim` of self may be sharded: passes/ExpandLossParallel.cpp compares
// the index with the global positions this rank holds (docs/LOSS_PARALLEL.md).
bool oneIndexPerRow(const ir::Node& node, const std::vector<int64_t>& self, const std::vector<int64_t>& index,
                    int64_t dim) {
  auto ops = tensorOperands(node);
  if (ops.empty() || !rules::isFloatingType(ops[0]->type().dtype) || self.size() != index.size())
    return false;
  for (size_t d = 0; d < self.size(); ++d)
    if (index[d] != (static_cast<int64_t>(d) == dim ? 1 : self[d])) return false;
  return self[sz(dim)] != 1;
}

// gather(self, dim, index) -> [index's shape]. With one index per row, self's
// `dim` is a summed factor: each rank picks what it holds, zeros elsewhere
// (like the vocab-parallel embedding).
Expected<OpShardingRule> gatherRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1 || b.resultShape(0).size() != b.operandShape(1).size())
    return Status::error("gather rule: expected self, index and a result shaped like index");
  const auto& self = b.operandShape(0);
  const auto& index = b.operandShape(1);
  if (self.size() == index.size()) {
    auto rank = static_cast<int64_t>(self.size());
    int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = index[sz(d)];
      if (n == 1) continue;
      if (d == dim)  // rows of the index pick from a whole self
        b.addFactor({-1, d}, {d}, n);
      else if (self[sz(d)] == n)
        b.addFactor({d, d}, {d}, n);
    }
    if (oneIndexPerRow(node, self, index, dim))
      b.addFactor({dim, -1}, {-1}, self[sz(dim)], FactorKind::Reduction);
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// Src/Value: plain writes; Add/Max/Min: accumulating scatters (scatter_add,
// scatter_reduce with include_self) whose sharded contributions leave the
// result pending.
enum class ScatterKind : uint8_t { Src, Value, Add, Max, Min };

// scatter(self, dim, index, src | value) and scatter_add -> [self's shape].
Expected<OpShardingRule> scatterRule(const ir::Node& node, ScatterKind kind) {
  RuleBuilder b(node);
  bool hasSrc = kind != ScatterKind::Value;
  if (b.numOperands() != (hasSrc ? 3 : 2) || b.numResults() != 1 || b.resultShape(0) != b.operandShape(0))
    return Status::error("scatter rule: expected self, index" + std::string(hasSrc ? ", src" : "") +
                         " and a result shaped like self");
  const auto& self = b.operandShape(0);
  const auto& index = b.operandShape(1);
  const auto& src = hasSrc ? b.operandShape(2) : index;
  int n = b.numOperands();
  if (self.size() == index.size() && src.size() == index.size()) {
    auto rank = static_cast<int64_t>(self.size());
    int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
    int s = hasSrc ? 2 : -1;
    // Plain writes of one value per row: each rank writes the rows' targets
    // it holds (see oneIndexPerRow).
    bool perRow = (kind == ScatterKind::Src || kind == ScatterKind::Value) && src == index &&
                  oneIndexPerRow(node, self, index, dim);
    for (int64_t d = 0; d < rank; ++d) {
      bool same = self[sz(d)] == index[sz(d)] && src[sz(d)] == index[sz(d)];
      if (d != dim && same) {
        if (self[sz(d)] != 1) b.addFactor(at(n, {{0, d}, {1, d}, {s, d}}), {d}, self[sz(d)]);
        continue;
      }
      if (d == dim && perRow) {
        b.addFactor({d}, {d}, self[sz(d)]);
        continue;
      }
      if (self[sz(d)] != 1) b.addFactor({d}, {d}, self[sz(d)], FactorKind::NeedReplication);
      if (d != dim || index[sz(d)] != src[sz(d)] || index[sz(d)] == 1) continue;
      // scatter_add: each rank adds its share of the contributions, the sum
      // is pending (a maximum for amax). Plain scatters would write
      // different rows per rank.
      bool accumulates = kind == ScatterKind::Add || kind == ScatterKind::Max || kind == ScatterKind::Min;
      ReduceOp op = kind == ScatterKind::Max   ? ReduceOp::Max
                    : kind == ScatterKind::Min ? ReduceOp::Min
                                               : ReduceOp::Sum;
      b.addFactor(at(n, {{1, d}, {s, d}}), {-1}, index[sz(d)],
                  accumulates ? FactorKind::Reduction : FactorKind::NeedReplication, op);
    }
  }
  if (kind == ScatterKind::Add) b.additive(0).linear(Linearity::Joint, {0, 2});
  if (kind == ScatterKind::Max || kind == ScatterKind::Min) b.additive(0);
  return b.replicateRest().build();
}

// Where advanced indexing puts things: self[indices] has self's dims before
// the first indexed dim, the indices' broadcast dims, then self's dims after
// the last indexed dim (broadcast dims first when indexed dims are not
// adjacent).
struct IndexLayout {
  std::vector<int> indexOperands;  ///< operand of each index tensor
  std::vector<int64_t> selfToOut;  ///< per self dim: its dim in self[indices], -1 when indexed
  std::vector<int64_t> broadcast;  ///< broadcast shape of the index tensors
  int64_t broadcastStart = 0;      ///< first broadcast dim in self[indices]
  /// Rank of self[indices].
  int64_t rank() const {
    int64_t kept = std::count_if(selfToOut.begin(), selfToOut.end(), [](int64_t d) { return d >= 0; });
    return kept + static_cast<int64_t>(broadcast.size());
  }
};

// Computes the layout; nullopt for boolean masks (data-dependent shapes).
std::optional<IndexLayout> indexLayout(const ir::Node& node, const RuleBuilder& b) {
  const ir::Argument* indices = node.input("indices");
  if (!indices) return std::nullopt;
  IndexLayout l;
  auto selfRank = static_cast<int64_t>(b.operandShape(0).size());
  std::vector<int64_t> indexed;
  int op = 1;
  for (size_t k = 0; k < indices->values.size(); ++k) {
    const ir::Value* v = indices->values[k];
    if (!v) continue;
    if (v->type().dtype == ir::ScalarType::Bool || v->type().dtype == ir::ScalarType::Byte)
      return std::nullopt;
    indexed.push_back(static_cast<int64_t>(k));
    l.indexOperands.push_back(op);
    const auto& shape = b.operandShape(op++);
    if (shape.size() > l.broadcast.size())
      l.broadcast.insert(l.broadcast.begin(), shape.size() - l.broadcast.size(), 1);
    size_t off = l.broadcast.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != 1) l.broadcast[off + d] = shape[d];
  }
  if (indexed.empty() || indexed.back() >= selfRank) return std::nullopt;
  bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  l.broadcastStart = adjacent ? indexed.front() : 0;
  int64_t out = adjacent ? 0 : static_cast<int64_t>(l.broadcast.size());
  for (int64_t d = 0; d < selfRank; ++d) {
    bool isIndexed = std::find(indexed.begin(), indexed.end(), d) != indexed.end();
    if (adjacent && d == indexed.front()) out += static_cast<int64_t>(l.broadcast.size());
    l.selfToOut.push_back(isIndexed ? -1 : out++);
  }
  return l;
}

// Adds one factor (of `kind`) per broadcast dim of the index tensors,
// spanning the index tensors that have that dim at full size; returns the
// factor of each broadcast dim (-1 for size-1 dims) for the caller to place
// at broadcastStart + k of self[indices].
std::vector<int> addBroadcastIndexFactors(RuleBuilder& b, const IndexLayout& l, FactorKind kind) {
  std::vector<int> factors;
  auto rank = static_cast<int64_t>(l.broadcast.size());
  for (int64_t k = 0; k < rank; ++k) {
    int64_t size = l.broadcast[sz(k)];
    if (size == 1) {
      factors.push_back(-1);
      continue;
    }
    int f = b.factor(size, kind);
    for (int op : l.indexOperands) {
      const auto& shape = b.operandShape(op);
      int64_t d = k - (rank - static_cast<int64_t>(shape.size()));
      if (d >= 0 && shape[sz(d)] == size) b.operand(op, d, f);
    }
    factors.push_back(f);
  }
  return factors;
}

// index.Tensor(self, indices) -> self[indices].
Expected<OpShardingRule> indexRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() != 1)
    return Status::error("index rule: expected self and indices");
  auto l = indexLayout(node, b);
  const auto& out = b.resultShape(0);
  if (!l || l->rank() != static_cast<int64_t>(out.size())) return b.replicateRest().build();
  const auto& self = b.operandShape(0);
  for (size_t d = 0; d < self.size(); ++d)
    if (l->selfToOut[d] >= 0 && self[d] != 1)
      b.addFactor({static_cast<int64_t>(d)}, {l->selfToOut[d]}, self[d]);
  std::vector<int> fs = addBroadcastIndexFactors(b, *l, FactorKind::PassThrough);
  for (size_t k = 0; k < fs.size(); ++k)
    if (fs[k] >= 0) b.result(0, l->broadcastStart + static_cast<int64_t>(k), fs[k]);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// index_put(self, indices, values, accumulate) -> [self's shape]; values
// broadcast against self[indices].
Expected<OpShardingRule> indexPutRule(const ir::Node& node) {
  RuleBuilder b(node);
  int values = operandIndex(node, "values");
  if (values < 1 || b.numResults() != 1 || b.resultShape(0) != b.operandShape(0))
    return Status::error("index_put rule: expected self, indices, values and a result shaped like self");
  auto l = indexLayout(node, b);
  if (!l) return b.replicateRest().build();
  bool accumulate = rules::boolArg(node, "accumulate", false);
  const auto& self = b.operandShape(0);
  const auto& vals = b.operandShape(values);
  // Dim of `values` aligned with dim `d` of self[indices], when sizes match.
  auto valuesDim = [&](int64_t d, int64_t size) -> int64_t {
    int64_t vd = d - (l->rank() - static_cast<int64_t>(vals.size()));
    return vd >= 0 && vals[sz(vd)] == size ? vd : -1;
  };
  for (size_t d = 0; d < self.size(); ++d) {
    if (self[d] == 1) continue;
    auto sd = static_cast<int64_t>(d);
    if (l->selfToOut[d] < 0) {
      b.addFactor({sd}, {sd}, self[d], FactorKind::NeedReplication);
      continue;
    }
    int f = b.addFactor({sd}, {sd}, self[d]);
    int64_t vd = valuesDim(l->selfToOut[d], self[d]);
    if (vd >= 0) b.operand(values, vd, f);
  }
  // Accumulated contributions of disjoint index shards add up: pending sum.
  std::vector<int> fs =
      addBroadcastIndexFactors(b, *l, accumulate ? FactorKind::Reduction : FactorKind::NeedReplication);
  for (size_t k = 0; k < fs.size(); ++k) {
    if (fs[k] < 0) continue;
    int64_t vd = valuesDim(l->broadcastStart + static_cast<int64_t>(k), l->broadcast[k]);
    if (vd >= 0) b.operand(values, vd, fs[k]);
  }
  if (accumulate) b.additive(0).linear(Linearity::Joint, {0, values});
  return b.replicateRest().build();
}

// index_select(self, dim, index[n]) -> self with dim `dim` of size n.
Expected<OpShardingRule> indexSelectRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1 || b.resultShape(0).size() != b.operandShape(0).size())
    return Status::error("index_select rule: expected self, index and a result of self's rank");
  const auto& self = b.operandShape(0);
  auto rank = static_cast<int64_t>(self.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  const auto& index = b.operandShape(1);
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim && self[sz(d)] != 1) b.addFactor({d}, {d}, self[sz(d)]);
    if (d == dim && index.size() == 1 && index[0] != 1) b.addFactor({-1, 0}, {d}, index[0]);
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// topk / sort(self, dim) -> (values, indices): the dim stays whole.
Expected<OpShardingRule> alongDimRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 1 || b.numResults() != 2 || b.resultShape(0).size() != b.operandShape(0).size() ||
      b.resultShape(1).size() != b.operandShape(0).size())
    return Status::error("topk/sort rule: expected one tensor and two results of its rank");
  const auto& self = b.operandShape(0);
  const auto& out = b.resultShape(0);
  auto rank = static_cast<int64_t>(self.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", -1), rank);
  for (int64_t d = 0; d < rank; ++d) {
    bool whole = d == dim;
    if (whole && self[sz(d)] != out[sz(d)]) {  // topk: k of n
      if (self[sz(d)] != 1) b.addFactor({d}, {-1, -1}, self[sz(d)], FactorKind::NeedReplication);
      if (out[sz(d)] != 1) b.addFactor({-1}, {d, d}, out[sz(d)], FactorKind::NeedReplication);
      continue;
    }
    if (self[sz(d)] != 1)
      b.addFactor({d}, {d, d}, self[sz(d)], whole ? FactorKind::NeedReplication : FactorKind::PassThrough);
  }
  return b.replicateRest().build();
}

// searchsorted(sorted_sequence[..., M], self[..., N], sorter?) -> [..., N]:
// the sequences stay whole along M; the batch dims and the values' own
// last dim pass through. A 1-D sequence is searched by every value:
//   aten.searchsorted.Tensor(s[4, 6], x[4, 3]) -> ([i, j], [i, k]) -> ([i, k]) {i=4, j=6 replicated, k=3}
// bucketize(self, boundaries[M]) is the 1-D case with the operands swapped.
Expected<OpShardingRule> searchRule(const ir::Node& node, int seq, int values) {
  RuleBuilder b(node);
  if (b.numOperands() < 2 || b.numResults() != 1 || b.resultShape(0) != b.operandShape(values))
    return Status::error("searchsorted rule: expected a sorted sequence and values shaped like the result");
  const auto& s = b.operandShape(seq);
  const auto& x = b.operandShape(values);
  auto rank = static_cast<int64_t>(x.size());
  bool batched = s.size() > 1;
  if (batched && static_cast<int64_t>(s.size()) != rank)
    return Status::error("searchsorted rule: sequence and values of different ranks");
  int sorter = rules::operandIndex(node, "sorter");
  for (int64_t d = 0; d < rank; ++d) {
    if (x[sz(d)] == 1) continue;
    bool shared = batched && d + 1 < rank && s[sz(d)] == x[sz(d)];
    if (batched && d + 1 < rank && !shared) continue;  // replicateRest
    int f = b.factor(x[sz(d)]);
    b.operand(values, d, f).result(0, d, f);
    if (shared) {
      b.operand(seq, d, f);
      if (sorter >= 0) b.operand(sorter, d, f);
    }
  }
  return b.replicateRest().build();
}

// index_reduce(self, dim, index[K], source, reduce, include_self) ->
// [self's shape]: source's rows reduced (prod, mean, amax, amin) into the
// rows of self that index names; `dim` stays whole, the other dims pass
// through self, source and the result.
Expected<OpShardingRule> indexReduceRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 3 || b.numResults() != 1 || b.operandShape(2).size() != b.operandShape(0).size())
    return Status::error("index_reduce rule: expected self, index and source of self's rank");
  const auto& self = b.operandShape(0);
  const auto& src = b.operandShape(2);
  auto rank = static_cast<int64_t>(self.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && self[sz(d)] != 1 && src[sz(d)] == self[sz(d)]) b.addFactor({d, -1, d}, {d}, self[sz(d)]);
  return b.replicateRest().build();
}

// scatter_reduce(self, dim, index, src, reduce, include_self): sum, amax
// and amin including self accumulate; prod, mean and the rest write.
Expected<OpShardingRule> scatterReduceRule(const ir::Node& node) {
  const ir::Argument* reduce = node.input("reduce");
  std::string op = reduce && !reduce->strings.empty() ? reduce->strings[0] : "";
  bool includeSelf = rules::boolArg(node, "include_self", true);
  ScatterKind kind = !includeSelf   ? ScatterKind::Src
                     : op == "sum"  ? ScatterKind::Add
                     : op == "amax" ? ScatterKind::Max
                     : op == "amin" ? ScatterKind::Min
                                    : ScatterKind::Src;
  return scatterRule(node, kind);
}

// _embedding_bag(weight[V, D], indices, offsets, ..., mode, ...) ->
// (output[B, D], offset2bag, bag_size, max_indices): only D passes through
// (every result of rank 2 and D columns has it); bags read any rows.
Expected<OpShardingRule> embeddingBagRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 2 || b.numResults() < 1 || b.operandShape(0).size() != 2)
    return Status::error("_embedding_bag rule: expected weight [V, D] and indices");
  int64_t dcols = b.operandShape(0)[1];
  if (dcols != 1) {
    int f = b.factor(dcols);
    b.operand(0, 1, f);
    for (int i = 0; i < b.numResults(); ++i)
      if (b.resultShape(i).size() == 2 && b.resultShape(i)[1] == dcols) b.result(i, 1, f);
  }
  return b.replicateRest().build();
}

}  // namespace

void registerIndexingRules(RuleRegistry& r) {
  // Data-dependent: where the masked elements land, which elements are
  // nonzero, selected or unique (results sized by the values); put's
  // indices address the flattened self.
  const RuleFn whole = [](const ir::Node& n) { return RuleBuilder(n).replicateRest().build(); };
  r.add({"aten._embedding_bag.default", "aten._embedding_bag_forward_only.default"}, embeddingBagRule);
  r.add({"aten._unique2.default", "aten.unique_consecutive.default"}, whole);
  r.add({"aten.argsort.default", "aten.argsort.stable"},
        rules::pointwiseExceptDims("dim", Linearity::None, {}, {-1}));
  r.add("aten.bucketize.Tensor", [](const ir::Node& n) { return searchRule(n, 1, 0); });
  r.add("aten.embedding.default", embeddingRule);
  r.add("aten.embedding_dense_backward.default", embeddingBackwardRule);
  r.add("aten.gather.default", gatherRule);
  r.add("aten.index.Tensor", indexRule);
  r.add("aten.index_put.default", indexPutRule);
  r.add("aten.index_reduce.default", indexReduceRule);
  r.add("aten.index_select.default", indexSelectRule);
  r.add("aten.masked_scatter.default", whole);
  r.add("aten.masked_select.default", whole);
  r.add({"aten.nonzero.default", "aten.nonzero_static.default"}, whole);
  r.add("aten.put.default", whole);
  r.add("aten.scatter.src", [](const ir::Node& n) { return scatterRule(n, ScatterKind::Src); });
  r.add("aten.scatter.value", [](const ir::Node& n) { return scatterRule(n, ScatterKind::Value); });
  r.add("aten.scatter_add.default", [](const ir::Node& n) { return scatterRule(n, ScatterKind::Add); });
  r.add("aten.scatter_reduce.two", scatterReduceRule);
  r.add("aten.searchsorted.Tensor", [](const ir::Node& n) { return searchRule(n, 0, 1); });
  r.add("aten.sort.default", alongDimRule);
  r.add("aten.sort.stable", alongDimRule);
  r.add("aten.topk.default", alongDimRule);
}

}  // namespace spmd::sharding
