// Views and data movement. A reshape maps dims through common factors,
// major first; permutes move factors; slicing, selecting, splitting and
// concatenating need their dim whole.
//
//   aten.view.default(x[2, 16, 64], [32, 64])   -> ([i, j, k]) -> ([i j, k]) {i=2, j=16, k=64} linear-each(0)
//   aten.view.default(x[2, 16, 64], [2, 16, -1, 8]) -> ([i, j, k l]) -> ([i, j, k, l])
//   aten.permute.default(w[256, 64], [1, 0])    -> ([i, j]) -> ([j, i])
//   aten.cat.default([a[2, 4], b[2, 4]], -1)     -> ([i, j], [i, k]) -> ([i, l]) {j, k, l replicated}
//   aten.stack.default([a[2, 4], b[2, 4]], 1)    -> ([i, j], [i, j]) -> ([i, k, j]) {k=2 replicated}
#include <numeric>
#include <string>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// Argument checks of their own, so a malformed node (the IR verifier is the
// first line) gets an error, never an out-of-range read. Propagation names
// the node: "node %n0 (aten.split.Tensor): split rule: dim 3 is out of
// range for a rank-3 tensor (expected -3 to 2)".

// `dim` (as given) normalized against `rank`; an error naming `rule` and
// the argument `arg` when it is out of range.
Expected<int64_t> checkDim(const char* rule, const char* arg, int64_t dim, int64_t rank) {
  int64_t d = normalizeDim(dim, rank);
  if (d >= 0 && d < rank) return d;
  std::string expected =
      rank > 0 ? "expected " + std::to_string(-rank) + " to " + std::to_string(rank - 1) : "it has no dims";
  return Status::error(std::string(rule) + " rule: " + arg + " " + std::to_string(dim) +
                       " is out of range for a rank-" + std::to_string(rank) + " tensor (" + expected + ")");
}

// An error unless the node has exactly `operands` tensor operands and at
// least one tensor result, each of rank `rank` (any rank when -1).
Status checkTensors(const RuleBuilder& b, const char* rule, int operands, int64_t rank = -1) {
  if (b.numOperands() != operands || b.numResults() < 1)
    return Status::error(std::string(rule) + " rule: expected " + std::to_string(operands) +
                         " tensor operand(s) and a tensor result, got " + std::to_string(b.numOperands()) +
                         " and " + std::to_string(b.numResults()));
  for (int i = 0; rank >= 0 && i < b.numResults(); ++i)
    if (static_cast<int64_t>(b.resultShape(i).size()) != rank)
      return Status::error(std::string(rule) + " rule: result " + std::to_string(i) + " has rank " +
                           std::to_string(b.resultShape(i).size()) + ", the input " + std::to_string(rank));
  return Status::ok();
}

// Factors of a row-major reshape from `in` to `out` (operand 0 -> result 0;
// also to operand `like` >= 0, shaped like the result: view_as' other).
void addReshapeFactors(RuleBuilder& b, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                       int like = -1) {
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == 1) {
      ++j;
      continue;
    }
    if (i >= in.size() || j >= out.size()) break;
    // One group: dims [i, i2) and [j, j2) with equal products.
    size_t i2 = i + 1, j2 = j + 1;
    int64_t pa = in[i], pb = out[j];
    while (pa != pb) {
      if (pa < pb && i2 < in.size())
        pa *= in[i2++];
      else if (pb < pa && j2 < out.size())
        pb *= out[j2++];
      else
        break;
    }
    // Common refinement, major first; give up (replicate) when sizes interleave.
    std::vector<std::pair<int, std::pair<size_t, size_t>>> factors;  // factor, (in dim, out dim)
    size_t a = i, c = j;
    int64_t ra = in[a], rc = out[c];
    bool ok = pa == pb;
    while (ok && a < i2 && c < j2) {
      int64_t f = std::min(ra, rc);
      if (f == 0 || (ra % f) || (rc % f)) {  // a size-0 dim: the group stays whole
        ok = false;
        break;
      }
      factors.push_back({b.factor(f), {a, c}});
      ra /= f;
      rc /= f;
      if (ra == 1 && ++a < i2) ra = in[a];
      if (rc == 1 && ++c < j2) rc = out[c];
      while (a < i2 && ra == 1 && ++a < i2) ra = in[a];
      while (c < j2 && rc == 1 && ++c < j2) rc = out[c];
    }
    if (ok) {
      for (auto& [f, dims] : factors) {
        b.operand(0, static_cast<int64_t>(dims.first), f);
        b.result(0, static_cast<int64_t>(dims.second), f);
        if (like >= 0) b.operand(like, static_cast<int64_t>(dims.second), f);
      }
    }
    // (when not ok, replicateRest covers the group's dims)
    i = i2;
    j = j2;
  }
}

Expected<OpShardingRule> reshapeRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 1 || b.numResults() != 1) return Status::error("view rule: expected one tensor");
  // view_as(self, other): other has the result's shape (its values do not matter).
  bool like = b.numOperands() == 2 && b.operandShape(1) == b.resultShape(0);
  addReshapeFactors(b, b.operandShape(0), b.resultShape(0), like ? 1 : -1);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// `perm` must be a permutation of the input's dims (the verifier checks
// permute's; a malformed one here is an error, never an out-of-range read).
Expected<OpShardingRule> permuteRule(const ir::Node& node, std::vector<int64_t> perm) {
  RuleBuilder b(node);
  if (b.numOperands() != 1 || b.numResults() != 1) return Status::error("permute rule: expected one tensor");
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  if (static_cast<int64_t>(perm.size()) != rank || static_cast<int64_t>(b.resultShape(0).size()) != rank)
    return Status::error("permute rule: " + std::to_string(perm.size()) + " dims for a rank-" +
                         std::to_string(rank) + " input");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t src = normalizeDim(perm[static_cast<size_t>(d)], rank);
    if (src < 0 || src >= rank) return Status::error("permute rule: dim out of range");
    if (in[static_cast<size_t>(src)] == 1) continue;
    b.addFactor({src}, {d}, in[static_cast<size_t>(src)]);
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

std::vector<int64_t> identity(int64_t rank) {
  std::vector<int64_t> p(static_cast<size_t>(rank));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// Every dim except `dim` shared by all operands and results (which have the
// same rank); `dim` stays whole. Used by cat, split, slice, select-free ops.
// `rule` names it in errors (`dim` out of range, no result).
Expected<OpShardingRule> allButDim(const ir::Node& node, int64_t dim, Linearity lin, const char* rule) {
  RuleBuilder b(node);
  if (b.numResults() < 1) return Status::error(std::string(rule) + " rule: expected a tensor result");
  int64_t rank = static_cast<int64_t>(b.resultShape(0).size());
  SPMD_ASSIGN_OR_RETURN(dim, checkDim(rule, "dim", dim, rank));
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim || b.resultShape(0)[static_cast<size_t>(d)] == 1) continue;
    int f = b.factor(b.resultShape(0)[static_cast<size_t>(d)]);
    for (int i = 0; i < b.numOperands(); ++i)
      if (static_cast<int64_t>(b.operandShape(i).size()) == rank) b.operand(i, d, f);
    for (int i = 0; i < b.numResults(); ++i) b.result(i, d, f);
  }
  if (lin != Linearity::None) b.linear(lin);
  return b.replicateRest().build();
}

// A split of `dim` into k equal parts of c: the dim is [k, c] with k whole
// (which part) and c shared with every part, so a strided shard S(dim, sf=k)
// of the input (a fused QKV projection's output) gives each part as S(dim):
//
//   aten.split_with_sizes.default(x[4, 16, 192], [64, 64, 64], -1)
//     -> ([b, s, k c]) -> ([b, s, c], [b, s, c], [b, s, c]) {k=3 replicated, c=64}
// Unequal parts keep the dim whole (allButDim).
Expected<OpShardingRule> splitRule(const ir::Node& node) {
  RuleBuilder probe(node);
  SPMD_RETURN_IF_ERROR(checkTensors(probe, "split", 1));
  int64_t rank = static_cast<int64_t>(probe.operandShape(0).size());
  SPMD_RETURN_IF_ERROR(checkTensors(probe, "split", 1, rank));
  SPMD_ASSIGN_OR_RETURN(int64_t dim, checkDim("split", "dim", rules::intArg(node, "dim", 0), rank));
  int64_t k = probe.numResults(), size = probe.operandShape(0)[static_cast<size_t>(dim)];
  bool equal = k > 1 && static_cast<int64_t>(tensorResults(node).size()) == k;
  for (int i = 0; equal && i < k; ++i)
    equal = static_cast<int64_t>(probe.resultShape(i).size()) == rank &&
            probe.resultShape(i)[static_cast<size_t>(dim)] * k == size;
  if (!equal || size / k == 1) return allButDim(node, dim, Linearity::Each, "split");
  RuleBuilder b(node);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = b.resultShape(0)[static_cast<size_t>(d)];
    if (n == 1) continue;
    if (d == dim) {
      b.operand(0, d, b.factor(k, FactorKind::NeedReplication));
      int c = b.factor(n);
      b.operand(0, d, c);
      for (int i = 0; i < k; ++i) b.result(i, d, c);
      continue;
    }
    int f = b.factor(n);
    b.operand(0, d, f);
    for (int i = 0; i < k; ++i) b.result(i, d, f);
  }
  return b.linear(Linearity::Each).replicateRest().build();
}

// A cat of k equal parts of c along `dim` (the mirror of splitRule): the
// result's dim is [k, c] with k whole (which part), so parts laid out S(dim)
// give the result S(dim, sf=k) (the gradient of a fused QKV projection):
//
//   aten.cat.default([q[2, 3, 8], k[2, 3, 8], v[2, 3, 8]], 2)
//     -> ([b, s, c], [b, s, c], [b, s, c]) -> ([b, s, k c]) {k=3 replicated}
// Unequal parts keep the dim whole (allButDim).
Expected<OpShardingRule> catRule(const ir::Node& node) {
  RuleBuilder probe(node);
  if (probe.numResults() < 1) return Status::error("cat rule: expected a tensor result");
  int64_t rank = static_cast<int64_t>(probe.resultShape(0).size());
  SPMD_ASSIGN_OR_RETURN(int64_t dim, checkDim("cat", "dim", rules::intArg(node, "dim", 0), rank));
  int k = probe.numOperands();
  bool equal = k > 1;
  for (int i = 0; equal && i < k; ++i)
    equal = probe.operandShape(i) == probe.operandShape(0) &&
            static_cast<int64_t>(probe.operandShape(i).size()) == rank;
  int64_t c = equal ? probe.operandShape(0)[static_cast<size_t>(dim)] : 0;
  if (!equal || c <= 1 || c * k != probe.resultShape(0)[static_cast<size_t>(dim)])
    return allButDim(node, dim, Linearity::Joint, "cat");
  RuleBuilder b(node);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = b.resultShape(0)[static_cast<size_t>(d)];
    if (d == dim) {
      b.result(0, d, b.factor(k, FactorKind::NeedReplication));
      n = c;
    } else if (n == 1) {
      continue;
    }
    int f = b.factor(n);
    for (int i = 0; i < k; ++i) b.operand(i, d, f);
    b.result(0, d, f);
  }
  return b.linear(Linearity::Joint).replicateRest().build();
}

// start, end: absent, None or one int (a symbolic bound is not full).
bool isFullSlice(const ir::Node& node, int64_t size) {
  const ir::Argument* start = node.input("start");
  const ir::Argument* end = node.input("end");
  bool startAbsent = !start || start->kind == ir::Argument::Kind::None;
  if (!startAbsent && start->kind != ir::Argument::Kind::Int) return false;  // symbolic: tensor_split's
  int64_t s = startAbsent ? 0 : start->ints[0];
  bool endFull = !end || end->kind == ir::Argument::Kind::None ||
                 (end->kind == ir::Argument::Kind::Int && end->ints[0] >= size);
  return s == 0 && endFull && rules::intArg(node, "step", 1) == 1;
}

Expected<OpShardingRule> sliceRule(const ir::Node& node) {
  RuleBuilder probe(node);
  SPMD_RETURN_IF_ERROR(checkTensors(probe, "slice", 1));
  int64_t rank = static_cast<int64_t>(probe.operandShape(0).size());
  SPMD_RETURN_IF_ERROR(checkTensors(probe, "slice", 1, rank));
  if (probe.numResults() != 1) return Status::error("slice rule: expected one result");
  SPMD_ASSIGN_OR_RETURN(int64_t dim, checkDim("slice", "dim", rules::intArg(node, "dim", 0), rank));
  for (const char* bound : {"start", "end", "step"}) {
    const ir::Argument* a = node.input(bound);
    if (a && a->kind == ir::Argument::Kind::Int && a->ints.size() != 1)
      return Status::error(std::string("slice rule: ") + bound + " has " + std::to_string(a->ints.size()) +
                           " values, expected one int");
  }
  if (int64_t step = rules::intArg(node, "step", 1); step < 1)
    return Status::error("slice rule: step " + std::to_string(step) + " is not positive");
  if (isFullSlice(node, probe.operandShape(0)[static_cast<size_t>(dim)]))
    return permuteRule(node, identity(rank));
  return allButDim(node, dim, Linearity::Each, "slice");
}

Expected<OpShardingRule> selectRule(const ir::Node& node) {
  RuleBuilder b(node);
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  int64_t out = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim) continue;
    if (in[static_cast<size_t>(d)] != 1) b.addFactor({d}, {out}, in[static_cast<size_t>(d)]);
    ++out;
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

Expected<OpShardingRule> expandRule(const ir::Node& node) {
  RuleBuilder b(node);
  rules::addBroadcastFactors(b);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// unbind(self, dim) -> one result per index of `dim`: select for each.
Expected<OpShardingRule> unbindRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 1) return Status::error("unbind rule: expected one tensor");
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  for (int64_t d = 0, out = 0; d < rank; ++d) {
    if (d == dim) continue;
    if (in[static_cast<size_t>(d)] != 1) {
      int f = b.factor(in[static_cast<size_t>(d)]);
      b.operand(0, d, f);
      for (int i = 0; i < b.numResults(); ++i) b.result(i, out, f);
    }
    ++out;
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// unflatten(self, dim, sizes): `sizes` are global (the expansion does not
// make them local), so the unflattened dim stays whole.
Expected<OpShardingRule> unflattenRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 1 || b.numResults() != 1)
    return Status::error("unflatten rule: expected one tensor");
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  int64_t added = static_cast<int64_t>(b.resultShape(0).size()) - rank;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && in[static_cast<size_t>(d)] != 1)
      b.addFactor({d}, {d < dim ? d : d + added}, in[static_cast<size_t>(d)]);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// stack(tensors, dim): the new dim stays whole, the others pass through.
Expected<OpShardingRule> stackRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numResults() != 1) return Status::error("stack rule: expected one result");
  const auto& out = b.resultShape(0);
  int64_t rank = static_cast<int64_t>(out.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim || out[static_cast<size_t>(d)] == 1) continue;
    int f = b.factor(out[static_cast<size_t>(d)]);
    b.result(0, d, f);
    for (int i = 0; i < b.numOperands(); ++i) b.operand(i, d < dim ? d : d - 1, f);
  }
  return b.linear(Linearity::Joint).replicateRest().build();
}

// diagonal(self, offset, dim1, dim2): the other dims, then the diagonal.
Expected<OpShardingRule> diagonalRule(const ir::Node& node) {
  RuleBuilder b(node);
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t d1 = normalizeDim(rules::intArg(node, "dim1", 0), rank);
  int64_t d2 = normalizeDim(rules::intArg(node, "dim2", 1), rank);
  for (int64_t d = 0, out = 0; d < rank; ++d) {
    if (d == d1 || d == d2) continue;
    if (in[static_cast<size_t>(d)] != 1) b.addFactor({d}, {out}, in[static_cast<size_t>(d)]);
    ++out;
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// diagonal_scatter(self, src, offset, dim1, dim2): src is self's diagonal
// (self without dim1 and dim2, the diagonal appended last); the other dims
// pass through, the two matrix dims and the diagonal stay whole.
Expected<OpShardingRule> diagonalScatterRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1 || b.operandShape(0).size() < 2 ||
      b.operandShape(1).size() + 1 != b.operandShape(0).size())
    return Status::error("diagonal_scatter rule: expected self and src of one rank less");
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t d1 = normalizeDim(rules::intArg(node, "dim1", 0), rank);
  int64_t d2 = normalizeDim(rules::intArg(node, "dim2", 1), rank);
  for (int64_t d = 0, s = 0; d < rank; ++d) {
    if (d == d1 || d == d2) continue;
    if (in[static_cast<size_t>(d)] != 1) b.addFactor({d, s}, {d}, in[static_cast<size_t>(d)]);
    ++s;
  }
  return b.linear(Linearity::Joint).replicateRest().build();
}

// unfold(self, dimension, size, step): `dimension` cut into windows, each
// window's elements a new last dim; both stay whole, the other dims pass
// through.
Expected<OpShardingRule> unfoldRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 1 || b.numResults() != 1 || b.resultShape(0).size() != b.operandShape(0).size() + 1)
    return Status::error("unfold rule: expected one tensor and a result of one more dim");
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = rank == 0 ? 0 : normalizeDim(rules::intArg(node, "dimension", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && in[static_cast<size_t>(d)] != 1) b.addFactor({d}, {d}, in[static_cast<size_t>(d)]);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// select_scatter(self, src, dim, index): src is self without `dim`.
Expected<OpShardingRule> selectScatterRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1)
    return Status::error("select_scatter rule: expected self, src");
  const auto& self = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(self.size());
  int64_t dim = normalizeDim(rules::intArg(node, "dim", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && self[static_cast<size_t>(d)] != 1)
      b.addFactor({d, d < dim ? d : d - 1}, {d}, self[static_cast<size_t>(d)]);
  return b.linear(Linearity::Joint).replicateRest().build();
}

// Complex views: view_as_real adds the (real, imaginary) pair as a last
// dim of 2; view_as_complex takes it away, so that dim stays whole. The
// other dims pass through (both views are linear):
//   aten.view_as_real.default(x c64[4, 6])       -> ([i, j]) -> ([i, j, k]) {i=4, j=6, k=2 replicated}
//   aten.view_as_complex.default(x f32[4, 6, 2]) -> ([i, j, k]) -> ([i, j]) {i=4, j=6, k=2 replicated}
Expected<OpShardingRule> complexViewRule(const ir::Node& n) {
  RuleBuilder b(n);
  SPMD_RETURN_IF_ERROR(checkTensors(b, "complex view", 1));
  const auto& in = b.operandShape(0);
  const auto& out = b.resultShape(0);
  bool toReal = out.size() == in.size() + 1;
  if (!toReal && in.size() != out.size() + 1)
    return Status::error("complex view rule: expected ranks that differ by one, got " +
                         std::to_string(in.size()) + " and " + std::to_string(out.size()));
  const auto& shorter = toReal ? in : out;
  for (int64_t d = 0; d < static_cast<int64_t>(shorter.size()); ++d)
    if (shorter[static_cast<size_t>(d)] != 1) b.addFactor({d}, {d}, shorter[static_cast<size_t>(d)]);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

}  // namespace

void registerViewRules(RuleRegistry& r) {
  r.add("aten._unsafe_view.default", reshapeRule);
  // Arbitrary strides over the storage: only the whole tensor means the same.
  r.add({"aten.as_strided.default", "aten.as_strided_copy.default", "aten.as_strided_scatter.default"},
        [](const ir::Node& n) { return RuleBuilder(n).replicateRest().build(); });
  r.add("aten.cat.default", catRule);
  r.add("aten.chunk.default", splitRule);
  r.add("aten.diagonal.default", diagonalRule);
  r.add("aten.diagonal_scatter.default", diagonalScatterRule);
  r.add({"aten.expand.default", "aten.expand_as.default"}, expandRule);
  r.add("aten.flatten.using_ints", reshapeRule);
  // The _copy ops are their views' functional twins (same layouts).
  r.add("aten.narrow_copy.default", [](const ir::Node& n) {
    return allButDim(n, rules::intArg(n, "dim", 0), Linearity::Each, "narrow_copy");
  });
  r.add({"aten.permute.default", "aten.permute_copy.default"},
        [](const ir::Node& n) -> Expected<OpShardingRule> {
          const ir::Argument* dims = n.input("dims");
          if (!dims) return Status::error("permute rule: no dims");
          return permuteRule(n, dims->ints);
        });
  r.add("aten.reshape.default", reshapeRule);
  r.add("aten.select.int", selectRule);
  r.add("aten.select_scatter.default", selectScatterRule);
  r.add("aten.slice.Tensor", sliceRule);
  r.add("aten.slice_scatter.default", [](const ir::Node& n) {
    return allButDim(n, rules::intArg(n, "dim", 0), Linearity::Joint, "slice_scatter");
  });
  r.add("aten.split.Tensor", splitRule);
  r.add("aten.split_with_sizes.default", splitRule);
  r.add({"aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.unsqueeze.default",
         "aten.view.default"},
        reshapeRule);
  r.add("aten.stack.default", stackRule);
  r.add("aten.t.default", [](const ir::Node& n) {
    int64_t rank = tensorOperands(n)[0]->type().rank();
    return permuteRule(n, rank == 2 ? std::vector<int64_t>{1, 0} : identity(rank));
  });
  r.add("aten.transpose.int", [](const ir::Node& n) {
    int64_t rank = tensorOperands(n)[0]->type().rank();
    std::vector<int64_t> p = identity(rank);
    int64_t d0 = normalizeDim(rules::intArg(n, "dim0", 0), rank);
    int64_t d1 = normalizeDim(rules::intArg(n, "dim1", 0), rank);
    if (rank > 0 && (d0 < 0 || d0 >= rank || d1 < 0 || d1 >= rank))
      return Expected<OpShardingRule>(Status::error("transpose rule: dim out of range"));
    if (rank > 0) std::swap(p[static_cast<size_t>(d0)], p[static_cast<size_t>(d1)]);
    return permuteRule(n, p);
  });
  r.add({"aten.unbind.int", "aten.unbind_copy.int"}, unbindRule);
  r.add({"aten.unfold.default", "aten.unfold_copy.default"}, unfoldRule);
  r.add("aten.unflatten.int", unflattenRule);
  r.add("aten.view_as.default", reshapeRule);
  r.add({"aten.view_as_complex.default", "aten.view_as_real.default"},
        complexViewRule);  // other: the result's shape
}

}  // namespace spmd::sharding
