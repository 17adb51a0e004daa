// Scaled dot-product attention and its fused backends. With q[..., L, E],
// k[..., S, E], v[..., S, Ev]: batch and head dims and the query length L
// pass through; S and E stay whole (softmax over S, E inside it), and so
// does Ev in the fused kernels (they want Ev == E), not in the composite
// op. The backward ops sum over L (grad_key, grad_value lack it): it is a
// reduction factor there, as are the batch dims a broadcast attention bias
// lacks.
//
//   aten._scaled_dot_product_flash_attention_for_cpu.default(q[2, 4, 16, 8], k[2, 4, 16, 8], v[2, 4, 16, 8])
//     -> ([i, j, k, l], [i, j, m, l], [i, j, m, n]) -> ([i, j, k, n], [i, j, k])
//        {i=2, j=4, k=16, l=8 replicated, m=16 replicated, n=8}
//
// Causal attention keeps L whole (the mask counts global positions), and so
// does a log-sum-exp padded past L; grouped-query attention keeps the heads
// whole; dropout keeps everything whole (a shard's mask could not match).
#include <algorithm>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// The tensors of an attention node, as operand / result indices (-1: absent).
struct Roles {
  int q = -1, k = -1, v = -1, mask = -1, gradOut = -1, out = -1, lse = -1;
  int resOut = -1, resLse = -1;                           // forward results
  int gradQ = -1, gradK = -1, gradV = -1, gradMask = -1;  // backward results
};

Roles rolesOf(const ir::Node& node, bool backward) {
  using rules::operandIndex;
  using rules::resultIndex;
  Roles r;
  r.q = operandIndex(node, "query");
  r.k = operandIndex(node, "key");
  r.v = operandIndex(node, "value");
  r.mask = std::max(operandIndex(node, "attn_mask"), operandIndex(node, "attn_bias"));
  if (backward) {
    r.gradOut = std::max(operandIndex(node, "grad_out"), operandIndex(node, "grad_out_"));
    r.out = operandIndex(node, "out");
    r.lse = operandIndex(node, "logsumexp");
    r.gradQ = resultIndex(node, 0), r.gradK = resultIndex(node, 1), r.gradV = resultIndex(node, 2);
    r.gradMask = resultIndex(node, 3);
    return r;
  }
  r.resOut = resultIndex(node, 0);
  r.resLse = resultIndex(node, 1);
  return r;
}

// Places factor `f` at `dim` (counted from the end when negative) of each
// listed operand / result index >= 0 whose size there is `n`.
void place(RuleBuilder& b, int f, int64_t n, int64_t dim, std::initializer_list<int> operands,
           std::initializer_list<int> results) {
  auto at = [&](const std::vector<int64_t>& s) {
    return dim < 0 ? static_cast<int64_t>(s.size()) + dim : dim;
  };
  for (int i : operands) {
    if (i < 0) continue;
    int64_t d = at(b.operandShape(i));
    if (d >= 0 && d < static_cast<int64_t>(b.operandShape(i).size()) && b.operandShape(i)[sz(d)] == n)
      b.operand(i, d, f);
  }
  for (int i : results) {
    if (i < 0) continue;
    int64_t d = at(b.resultShape(i));
    if (d >= 0 && d < static_cast<int64_t>(b.resultShape(i).size()) && b.resultShape(i)[sz(d)] == n)
      b.result(i, d, f);
  }
}

// True when tensor `shape` has size `n` at `dim` (from the end when < 0).
bool hasSize(const std::vector<int64_t>& shape, int64_t dim, int64_t n) {
  int64_t d = dim < 0 ? static_cast<int64_t>(shape.size()) + dim : dim;
  return d >= 0 && d < static_cast<int64_t>(shape.size()) && shape[sz(d)] == n;
}

// `valueDims`: Ev may be split (the fused kernels want it equal to E).
Expected<OpShardingRule> attentionRule(const ir::Node& node, bool backward, bool valueDims) {
  RuleBuilder b(node);
  Roles r = rolesOf(node, backward);
  if (r.q < 0 || r.k < 0 || r.v < 0) return Status::error("attention rule: expected query, key and value");
  const auto& q = b.operandShape(r.q);
  const auto& k = b.operandShape(r.k);
  const auto& v = b.operandShape(r.v);
  auto rank = static_cast<int64_t>(q.size());
  if (rank < 2 || k.size() != q.size() || v.size() != q.size())
    return Status::error("attention rule: expected query, key and value of one rank >= 2");
  bool random =
      rules::scalarArg(node, "dropout_p", 0) != 0 || rules::boolArg(node, "return_debug_mask", false);
  if (random) return b.replicateRest().build();
  bool causal = rules::boolArg(node, "is_causal", false);
  // Backward: every passed-through factor is a sum for the gradients lacking it.
  FactorKind pass = backward ? FactorKind::Reduction : FactorKind::PassThrough;
  std::initializer_list<int> like = {r.q, r.out, r.gradOut};  // [..., L, *] operands
  std::initializer_list<int> likeRes = {r.resOut, r.gradQ};
  int mask = r.mask, gmask = r.gradMask;
  for (int64_t d = 0; d + 2 < rank; ++d) {  // batch and heads
    int64_t n = q[sz(d)];
    if (n == 1) continue;
    bool shared = k[sz(d)] == n && v[sz(d)] == n;  // not grouped-query heads
    int f = b.factor(n, shared ? pass : FactorKind::NeedReplication);
    place(b, f, n, d, {r.q, r.k, r.v, r.out, r.gradOut, r.lse},
          {r.resOut, r.resLse, r.gradQ, r.gradK, r.gradV});
    place(b, f, n, d - rank, {mask}, {gmask});
  }
  int64_t l = q[sz(rank - 2)], s = k[sz(rank - 2)], e = q[sz(rank - 1)], ev = v[sz(rank - 1)];
  // A log-sum-exp not computed ([..., 0]) fits any L.
  bool lseFits =
      (r.lse < 0 || hasSize(b.operandShape(r.lse), -1, l)) &&
      (r.resLse < 0 || hasSize(b.resultShape(r.resLse), -1, l) || hasSize(b.resultShape(r.resLse), -1, 0));
  if (l != 1) {
    int f = b.factor(l, causal || !lseFits ? FactorKind::NeedReplication : pass);
    place(b, f, l, -2, like, likeRes);
    place(b, f, l, -1, {r.lse}, {r.resLse});
    place(b, f, l, -2, {mask}, {gmask});
  }
  if (s != 1) {
    int f = b.factor(s, FactorKind::NeedReplication);
    place(b, f, s, -2, {r.k, r.v}, {r.gradK, r.gradV});
    place(b, f, s, -1, {mask}, {gmask});
  }
  if (e != 1) place(b, b.factor(e, FactorKind::NeedReplication), e, -1, {r.q, r.k}, {r.gradQ, r.gradK});
  if (ev != 1) {
    int f = b.factor(ev, valueDims ? pass : FactorKind::NeedReplication);
    place(b, f, ev, -1, {r.v, r.out, r.gradOut}, {r.resOut, r.gradV});
  }
  return b.replicateRest().build();
}

}  // namespace

void registerAttentionRules(RuleRegistry& r) {
  const RuleFn forward = [](const ir::Node& n) { return attentionRule(n, false, false); };
  const RuleFn backward = [](const ir::Node& n) { return attentionRule(n, true, false); };
  r.add("aten._scaled_dot_product_efficient_attention.default", forward);
  r.add("aten._scaled_dot_product_efficient_attention_backward.default", backward);
  r.add("aten._scaled_dot_product_flash_attention.default", forward);
  r.add("aten._scaled_dot_product_flash_attention_backward.default", backward);
  r.add("aten._scaled_dot_product_flash_attention_for_cpu.default", forward);
  r.add("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", backward);
  r.add("aten.scaled_dot_product_attention.default",
        [](const ir::Node& n) { return attentionRule(n, false, true); });
}

}  // namespace spmd::sharding
