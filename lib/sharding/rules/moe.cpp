// MoE experts (python/spmdc_export/experts.py): the routed tokens' expert
// FFNs as one op, its backward as another. Tokens and experts split
// together over one mesh axis, expert parallelism: an exchange factor spans
// the token dim of every token tensor and the expert dim of every stacked
// weight (a second factor splits the tokens alone: dp, fsdp); the kernel
// sends each token to the rank holding its expert and its result back
// (all-to-all with run-time splits, docs/EXPERT_PARALLEL.md). A third
// factor spans the experts' FFN (intermediate) dim, w1's and w3's dim 1 and
// w2's dim 2: splitting it is tensor parallelism inside the experts
// (torchtitan's expert TP: w1, w3 column-wise, w2 row-wise); the kernels
// run on the local FFN slice unchanged and their token results are pending
// sums over that axis (the experts' weight gradients stay split by it).
// Hidden and top-k dims stay whole.
//
//   spmdc.moe_experts.default(x[16, 8], idx[16, 2], wts[16, 2], w1[4, 12, 8], w2[4, 8, 12], w3[4, 12, 8])
//     -> ([i j, k], [i j, l], [i j, m], [j, n, o], [j, p, n], [j, n, q]) -> ([i j, r])
//        {i=16, j=4 exchange, n=12 reduction(sum), k=8 replicated, ...}
//
// With j sharded on ep (4 ranks): x, idx, wts and the result S(0) (each
// rank's tokens), w1, w2, w3 S(0) (each rank's experts); i on dp: the
// tokens S(0) there, the experts whole. j's shard is a plain S(0) under
// i's (the kernel takes whichever tokens a rank holds). The factor is
// split only over an axis where w1 arrives split by its expert dim: the
// schema's placement of the experts asks for expert parallelism. With n
// sharded on tp (w1, w3 S(1), w2 S(2) there): x, idx, wts R on tp, the
// result P(sum) on tp (Megatron's row-parallel output, all-reduced or
// reduce-scattered where it is used).
#include <numeric>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// Operands 0..numTokens-1 are token tensors ([T, ...]); the next three the
// stacked expert weights ([E, ...]). Results: the token tensors (the
// output; the backward's input and routing-weight gradients), then the
// experts' gradients.
Expected<OpShardingRule> expertsRule(const ir::Node& node, int numTokens) {
  RuleBuilder b(node);
  if (b.numOperands() != numTokens + 3 || b.numResults() < 1)
    return Status::error("moe experts rule: expected " + std::to_string(numTokens) +
                         " token tensors and w1, w2, w3");
  for (int i = 0; i < b.numOperands(); ++i)
    if (b.operandShape(i).empty()) return Status::error("moe experts rule: a scalar operand");
  for (int i = 0; i < b.numResults(); ++i)
    if (b.resultShape(i).empty()) return Status::error("moe experts rule: a scalar result");
  int64_t tokens = b.operandShape(0)[0], experts = b.operandShape(numTokens)[0];
  // Token tensors' dim 0 is [t, g]: t splits tokens alone (dp, fsdp), g
  // tokens and experts together; expert tensors' dim 0 is [g].
  // In the backward, the experts' gradients sum over the tokens: t is a
  // reduction there (those gradients are pending sums where t is split).
  int t = b.factor(tokens, numTokens == 4 ? FactorKind::Reduction : FactorKind::PassThrough);
  int g = b.exchangeFactor(std::gcd(tokens, experts), numTokens);
  for (int i = 0; i < b.numOperands(); ++i) {
    if (i < numTokens) b.operand(i, 0, t);
    b.operand(i, 0, g);
  }
  int tokenResults = b.numResults() == 1 ? 1 : 2;
  for (int i = 0; i < b.numResults(); ++i) {
    if (i < tokenResults) b.result(i, 0, t);
    b.result(i, 0, g);
  }
  // The FFN dim: w1, w3 [E, H, D] dim 1, w2 [E, D, H] dim 2, and the same
  // dims of their gradients (results tokenResults..). A reduction: the
  // token results (no H) are pending sums where it is split.
  int w1 = numTokens;
  if (b.operandShape(w1).size() == 3 && b.operandShape(w1 + 1).size() == 3 &&
      b.operandShape(w1 + 2).size() == 3) {
    int h = b.factor(b.operandShape(w1)[1], FactorKind::Reduction);
    b.operand(w1, 1, h).operand(w1 + 1, 2, h).operand(w1 + 2, 1, h);
    if (b.numResults() == tokenResults + 3)
      b.result(tokenResults, 1, h).result(tokenResults + 1, 2, h).result(tokenResults + 2, 1, h);
  }
  return b.replicateRest().build();
}

}  // namespace

void registerMoeRules(RuleRegistry& r) {
  // (x, indices, weights, w1, w2, w3) -> out
  r.add("spmdc.moe_experts.default", [](const ir::Node& n) { return expertsRule(n, 3); });
  // (grad, x, indices, weights, w1, w2, w3) -> (grad_x, grad_weights, grad_w1, grad_w2, grad_w3)
  r.add("spmdc.moe_experts_backward.default", [](const ir::Node& n) { return expertsRule(n, 4); });
}

}  // namespace spmd::sharding
