// Ring attention (passes/ContextParallel.cpp, runtime/RingAttentionOps.cpp):
// the attention of context parallelism as one op pair, whose kernels rotate
// keys and values around the ranks of the axis the sequence is split over.
// The query length L and the key length S split together over one axis, an
// exchange factor asked for by the queries (their context-parallel anchor);
// batch and head dims pass through (dp, fsdp, tp); head dims E, Ev and the
// mask's key columns stay whole (each rank reads the columns of every key
// block as it arrives).
//
//   spmdc.ring_attention.default(q[2, 4, 16, 8], k[2, 4, 16, 8], v[2, 4, 16, 8], mask[16, 16])
//     -> ([i, j, k, l], [i, j, k, m], [i, j, k, n], [k, o]) -> ([i, j, k, n], [i, j, k])
//        {i=2, j=4, k=16 exchange, l=8 replicated, ...}
//
// With k split on cp (2 ranks): every tensor S(2) there (the mask S(0):
// each rank its query rows), the log-sum-exp S(2).
#include <numeric>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// Operand / result indices of the op's tensors (-1: absent).
struct RingRoles {
  int q = -1, k = -1, v = -1, mask = -1, gradOut = -1, out = -1, lse = -1;
};

// Appends factor `f` at `dim` (from the end when < 0) of operand `i` (or
// result, when `result`) if its size there is `n`.
void put(RuleBuilder& b, bool result, int i, int64_t dim, int64_t n, int f) {
  if (i < 0) return;
  const auto& s = result ? b.resultShape(i) : b.operandShape(i);
  int64_t d = dim < 0 ? static_cast<int64_t>(s.size()) + dim : dim;
  if (d < 0 || d >= static_cast<int64_t>(s.size()) || s[static_cast<size_t>(d)] != n) return;
  if (result)
    b.result(i, d, f);
  else
    b.operand(i, d, f);
}

Expected<OpShardingRule> ringRule(const ir::Node& node, bool backward) {
  using rules::operandIndex;
  RuleBuilder b(node);
  RingRoles r{operandIndex(node, "query"), operandIndex(node, "key"),      operandIndex(node, "value"),
              operandIndex(node, "mask"),  operandIndex(node, "grad_out"), operandIndex(node, "out"),
              operandIndex(node, "lse")};
  if (r.q < 0 || r.k < 0 || r.v < 0)
    return Status::error("ring attention rule: expected query, key and value");
  const auto& q = b.operandShape(r.q);
  const auto& k = b.operandShape(r.k);
  auto rank = static_cast<int64_t>(q.size());
  if (rank != 4 || k.size() != 4 || b.operandShape(r.v).size() != 4)
    return Status::error("ring attention rule: expected 4-d query, key and value");
  int results = b.numResults();
  // Results: (out, lse) forward; (dq, dk, dv) backward.
  auto onEach = [&](int64_t dim, int64_t n, int f, bool lseDim) {
    for (int i : {r.q, r.k, r.v, r.out, r.gradOut}) put(b, false, i, dim, n, f);
    put(b, false, r.lse, lseDim ? -1 : dim, n, f);
    for (int i = 0; i < results; ++i) put(b, true, i, (!backward && i == 1 && lseDim) ? -1 : dim, n, f);
  };
  for (int64_t d = 0; d < 2; ++d) {  // batch and heads
    int64_t n = q[static_cast<size_t>(d)];
    if (n == 1) continue;
    int f = b.factor(n);
    onEach(d, n, f, false);
    put(b, false, r.mask, d - 4, n, f);
  }
  int64_t l = q[2], s = k[2];
  if (l != 1) {
    int g = b.exchangeFactor(std::gcd(l, s), r.q);
    for (int i : {r.q, r.out, r.gradOut}) put(b, false, i, -2, l, g);
    for (int i : {r.k, r.v}) put(b, false, i, -2, s, g);
    put(b, false, r.lse, -1, l, g);
    put(b, false, r.mask, -2, l, g);
    for (int i = 0; i < results; ++i)
      put(b, true, i, (!backward && i == 1) ? -1 : -2, (backward && i > 0) ? s : l, g);
  }
  return b.replicateRest().build();
}

}  // namespace

void registerRingAttentionRules(RuleRegistry& r) {
  r.add("spmdc.ring_attention.default", [](const ir::Node& n) { return ringRule(n, false); });
  r.add("spmdc.ring_attention_backward.default", [](const ir::Node& n) { return ringRule(n, true); });
}

}  // namespace spmd::sharding
