// Matrix products: batch, row and column factors pass through, the
// contracted factor is a reduction (sharding it leaves the result pending).
//
//   aten.mm.default(a[32, 64], b[64, 256])
//     -> ([i, j], [j, k]) -> ([i, k]) {i=32, j=64 reduction(sum), k=256}
//   aten.addmm.default(bias[256], a, b)  -> ([k], [i, j], [j, k]) -> ([i, k]) ..., bias additive
//   aten.bmm.default(a[8, 16, 8], b[8, 8, 16]) -> ([h, i, j], [h, j, k]) -> ([h, i, k])
//   aten.einsum.default("bhqd,bhkd->bhqk", [q, k]) -> ([i, j, k, l], [i, j, m, l]) -> ([i, j, k, m])
//     {..., l reduction(sum)} linear-each(0, 1)
#include <algorithm>
#include <map>
#include <string>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// Each rule checks the ranks it indexes by itself, so a malformed node (the
// IR verifier is the first line) gets an error, never an out-of-range read.
// Propagation names the node: "node %mm (aten.mm.default): mm rule: expected
// self[M, K], mat2[K, N] -> [M, N]; got ranks (1, 2) -> (2)".

// "(r0, r1) -> (r)": the ranks of the node's tensor operands and results.
std::string ranksOf(const RuleBuilder& b) {
  auto list = [](int n, const auto& shape) {
    std::string s = "(";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(shape(i).size());
    return s + ")";
  };
  return list(b.numOperands(), [&](int i) { return b.operandShape(i); }) + " -> " +
         list(b.numResults(), [&](int i) { return b.resultShape(i); });
}

// An error naming `rule` and what it expects (`shapes`) unless the node has
// tensor operands of ranks `ranks` (-1: any) and one result of rank
// `resultRank` (-1: any).
Status checkRanks(const RuleBuilder& b, const char* rule, const char* shapes,
                  const std::vector<int64_t>& ranks, int64_t resultRank) {
  bool ok = b.numOperands() == static_cast<int>(ranks.size()) && b.numResults() == 1 &&
            (resultRank < 0 || static_cast<int64_t>(b.resultShape(0).size()) == resultRank);
  for (int i = 0; ok && i < b.numOperands(); ++i)
    ok = ranks[static_cast<size_t>(i)] < 0 ||
         static_cast<int64_t>(b.operandShape(i).size()) == ranks[static_cast<size_t>(i)];
  if (ok) return Status::ok();
  return Status::error(std::string(rule) + " rule: expected " + shapes + "; got ranks " + ranksOf(b));
}

// mm/bmm with operands at `a`, `b`; `batch` leading dims shared.
void addProductFactors(RuleBuilder& b, int a, int bo, int64_t batch) {
  const auto& as = b.operandShape(a);
  const auto& bs = b.operandShape(bo);
  std::vector<int64_t> none(static_cast<size_t>(b.numOperands()), -1);
  auto dims = [&](std::initializer_list<std::pair<int, int64_t>> entries) {
    std::vector<int64_t> d = none;
    for (auto [op, dim] : entries) d[static_cast<size_t>(op)] = dim;
    return d;
  };
  for (int64_t d = 0; d < batch; ++d) b.addFactor(dims({{a, d}, {bo, d}}), {d}, as[static_cast<size_t>(d)]);
  b.addFactor(dims({{a, batch}}), {batch}, as[static_cast<size_t>(batch)]);
  b.addFactor(dims({{a, batch + 1}, {bo, batch}}), {-1}, as[static_cast<size_t>(batch + 1)],
              FactorKind::Reduction);
  b.addFactor(dims({{bo, batch + 1}}), {batch + 1}, bs[static_cast<size_t>(batch + 1)]);
}

Expected<OpShardingRule> productRule(const ir::Node& node, int64_t batch) {
  RuleBuilder b(node);
  SPMD_RETURN_IF_ERROR(batch == 0
                           ? checkRanks(b, "mm", "self[M, K], mat2[K, N] -> [M, N]", {2, 2}, 2)
                           : checkRanks(b, "bmm", "self[B, M, K], mat2[B, K, N] -> [B, M, N]", {3, 3}, 3));
  addProductFactors(b, 0, 1, batch);
  return b.linear(Linearity::Each, {0, 1}).replicateRest().build();
}

// addmm(bias, a, b): the bias broadcasts against the [m, n] result.
Expected<OpShardingRule> addmmRule(const ir::Node& node) {
  RuleBuilder b(node);
  const char* shapes = "self (broadcast to [M, N]), mat1[M, K], mat2[K, N] -> [M, N]";
  SPMD_RETURN_IF_ERROR(checkRanks(b, "addmm", shapes, {-1, 2, 2}, 2));
  if (b.operandShape(0).size() > 2)
    return Status::error(std::string("addmm rule: expected ") + shapes + "; got ranks " + ranksOf(b));
  addProductFactors(b, 1, 2, 0);
  const auto& bias = b.operandShape(0);
  const auto& out = b.resultShape(0);
  // Factor ids from addProductFactors: 0 = m, 1 = k (reduction), 2 = n.
  for (int64_t d = 0; d < static_cast<int64_t>(bias.size()); ++d) {
    int64_t od = d + static_cast<int64_t>(out.size() - bias.size());
    if (bias[static_cast<size_t>(d)] == out[static_cast<size_t>(od)] && out[static_cast<size_t>(od)] != 1)
      b.operand(0, d, od == 0 ? 0 : 2);
  }
  return b.additive(0).linear(Linearity::Joint, {0, 1}).replicateRest().build();
}

// Broadcast-aligns self (the bias of addmm-like ops) against the result and
// places factor ids[d] (d: a result dim) on each of its dims of full size.
void placeBias(RuleBuilder& b, const std::vector<int>& ids) {
  const auto& bias = b.operandShape(0);
  const auto& out = b.resultShape(0);
  for (int64_t d = 0; d < static_cast<int64_t>(bias.size()); ++d) {
    int64_t od = d + static_cast<int64_t>(out.size()) - static_cast<int64_t>(bias.size());
    if (od >= 0 && bias[static_cast<size_t>(d)] == out[static_cast<size_t>(od)] &&
        out[static_cast<size_t>(od)] != 1)
      b.operand(0, d, ids[static_cast<size_t>(od)]);
  }
}

// addmv(self (broadcast to [N]), mat[N, M], vec[M]) -> [N]: addmm with one
// column; self is added once to the summed product.
Expected<OpShardingRule> addmvRule(const ir::Node& node) {
  RuleBuilder b(node);
  const char* shapes = "self (broadcast to [N]), mat[N, M], vec[M] -> [N]";
  SPMD_RETURN_IF_ERROR(checkRanks(b, "addmv", shapes, {-1, 2, 1}, 1));
  if (b.operandShape(0).size() > 1)
    return Status::error(std::string("addmv rule: expected ") + shapes + "; got ranks " + ranksOf(b));
  const auto& mat = b.operandShape(1);
  int n = b.addFactor({-1, 0, -1}, {0}, mat[0]);
  b.addFactor({-1, 1, 0}, {-1}, mat[1], FactorKind::Reduction);
  placeBias(b, {n});
  return b.additive(0).linear(Linearity::Joint, {0, 1}).replicateRest().build();
}

// addbmm(self (broadcast to [N, P]), batch1[B, N, M], batch2[B, M, P]) ->
// [N, P]: the products of the batch are summed, so B is a reduction as M is.
Expected<OpShardingRule> addbmmRule(const ir::Node& node) {
  RuleBuilder b(node);
  const char* shapes = "self (broadcast to [N, P]), batch1[B, N, M], batch2[B, M, P] -> [N, P]";
  SPMD_RETURN_IF_ERROR(checkRanks(b, "addbmm", shapes, {-1, 3, 3}, 2));
  if (b.operandShape(0).size() > 2)
    return Status::error(std::string("addbmm rule: expected ") + shapes + "; got ranks " + ranksOf(b));
  const auto& b1 = b.operandShape(1);
  const auto& b2 = b.operandShape(2);
  b.addFactor({-1, 0, 0}, {-1}, b1[0], FactorKind::Reduction);
  int n = b.addFactor({-1, 1, -1}, {0}, b1[1]);
  b.addFactor({-1, 2, 1}, {-1}, b1[2], FactorKind::Reduction);
  int p = b.addFactor({-1, -1, 2}, {1}, b2[2]);
  placeBias(b, {n, p});
  return b.additive(0).linear(Linearity::Joint, {0, 1}).replicateRest().build();
}

// _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim) (bilinear's
// product): each operand unsqueezed at its expand dims to one rank, the
// product summed over sumdim (the result drops those dims). An einsum of
// three: a summed dim is a reduction, the others pass through.
//   aten._trilinear.default(a[3, 4], w[6, 4, 5], c[3, 5], [1, 3], [0], [1, 2], [2, 3])
//     -> ([i, k], [j, k, l], [i, l]) -> ([i, j]) {i=3, j=6, k=4 reduction(sum), l=5 reduction(sum)}
Expected<OpShardingRule> trilinearRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 3 || b.numResults() != 1)
    return Status::error("_trilinear rule: expected three tensors");
  const ir::Argument* e1 = node.input("expand1");
  int64_t full =
      static_cast<int64_t>(b.operandShape(0).size()) + (e1 ? static_cast<int64_t>(e1->ints.size()) : 0);
  std::vector<int64_t> summed = rules::dimsArg(node, "sumdim", full);
  std::vector<std::vector<std::pair<int, int64_t>>> at(static_cast<size_t>(full));
  std::vector<int64_t> size(static_cast<size_t>(full), 1);
  const char* expands[] = {"expand1", "expand2", "expand3"};
  for (int k = 0; k < 3; ++k) {
    std::vector<int64_t> ex = rules::dimsArg(node, expands[k], full);
    const auto& shape = b.operandShape(k);
    if (static_cast<int64_t>(shape.size() + ex.size()) != full)
      return Status::error("_trilinear rule: operand " + std::to_string(k) + " and " + expands[k] +
                           " do not make rank " + std::to_string(full));
    for (int64_t f = 0, d = 0; f < full; ++f) {
      if (std::find(ex.begin(), ex.end(), f) != ex.end()) continue;
      at[static_cast<size_t>(f)].push_back({k, d});
      size[static_cast<size_t>(f)] = std::max(size[static_cast<size_t>(f)], shape[static_cast<size_t>(d)]);
      ++d;
    }
  }
  for (int64_t f = 0, out = 0; f < full; ++f) {
    bool sum = std::find(summed.begin(), summed.end(), f) != summed.end();
    int64_t n = size[static_cast<size_t>(f)];
    if (n != 1) {
      int fac = b.factor(n, sum ? FactorKind::Reduction : FactorKind::PassThrough);
      for (auto [k, d] : at[static_cast<size_t>(f)])
        if (b.operandShape(k)[static_cast<size_t>(d)] == n) b.operand(k, d, fac);
      if (!sum) b.result(0, out, fac);
    }
    if (!sum) ++out;
  }
  return b.linear(Linearity::Each, {0, 1, 2}).replicateRest().build();
}

// linear(input[..., in], weight[out, in], bias[out]?) -> [..., out].
Expected<OpShardingRule> linearRule(const ir::Node& node) {
  RuleBuilder b(node);
  const char* shapes = "input[..., K], weight[N, K], bias[N] (optional) -> [..., N]";
  int64_t r = b.numOperands() > 0 ? static_cast<int64_t>(b.operandShape(0).size()) : 0;
  SPMD_RETURN_IF_ERROR(b.numOperands() == 3 ? checkRanks(b, "linear", shapes, {r, 2, 1}, r)
                                            : checkRanks(b, "linear", shapes, {r, 2}, r));
  if (r < 1) return Status::error(std::string("linear rule: expected ") + shapes + "; got a rank-0 input");
  const auto& in = b.operandShape(0);
  std::vector<int64_t> none(static_cast<size_t>(b.numOperands()), -1);
  for (int64_t d = 0; d + 1 < r; ++d) {
    std::vector<int64_t> ops = none;
    ops[0] = d;
    b.addFactor(ops, {d}, in[static_cast<size_t>(d)]);
  }
  std::vector<int64_t> k = none, n = none;
  k[0] = r - 1;
  k[1] = 1;
  n[1] = 0;
  if (b.numOperands() > 2) n[2] = 0;
  b.addFactor(k, {-1}, in[static_cast<size_t>(r - 1)], FactorKind::Reduction);
  b.addFactor(n, {r - 1}, b.operandShape(1)[0]);
  // With a bias, pending sums flow through input and bias together (as in
  // addmm); without one, through either operand.
  if (b.numOperands() > 2) return b.additive(2).linear(Linearity::Joint, {0, 2}).replicateRest().build();
  return b.linear(Linearity::Each, {0, 1}).replicateRest().build();
}

// baddbmm(self, batch1[B, M, K], batch2[B, K, N]): self broadcasts
// against the [B, M, N] result and is added to the products.
Expected<OpShardingRule> baddbmmRule(const ir::Node& node) {
  RuleBuilder b(node);
  const char* shapes = "self (broadcast to [B, M, N]), batch1[B, M, K], batch2[B, K, N] -> [B, M, N]";
  SPMD_RETURN_IF_ERROR(checkRanks(b, "baddbmm", shapes, {-1, 3, 3}, 3));
  if (b.operandShape(0).size() > 3)
    return Status::error(std::string("baddbmm rule: expected ") + shapes + "; got ranks " + ranksOf(b));
  addProductFactors(b, 1, 2, 1);
  const auto& self = b.operandShape(0);
  const auto& out = b.resultShape(0);
  // Factor ids from addProductFactors: 0 = B, 1 = M, 2 = K (reduction), 3 = N.
  const int ids[] = {0, 1, 3};
  for (int64_t d = 0; d < static_cast<int64_t>(self.size()); ++d) {
    int64_t od = d + static_cast<int64_t>(out.size() - self.size());
    if (od >= 0 && self[static_cast<size_t>(d)] == out[static_cast<size_t>(od)] &&
        out[static_cast<size_t>(od)] != 1)
      b.operand(0, d, ids[od]);
  }
  return b.additive(0).linear(Linearity::Joint, {0, 1}).replicateRest().build();
}

// matmul(a, b): 1-D operands are vectors; batch dims broadcast.
Expected<OpShardingRule> matmulRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1) return Status::error("matmul rule: expected two tensors");
  const auto& as = b.operandShape(0);
  const auto& bs = b.operandShape(1);
  const auto& out = b.resultShape(0);
  auto ra = static_cast<int64_t>(as.size()), rb = static_cast<int64_t>(bs.size());
  auto ro = static_cast<int64_t>(out.size());
  if (ra < 1 || rb < 1) return Status::error("matmul rule: expected tensors of rank >= 1");
  bool am = ra >= 2, bn = rb >= 2;
  int64_t batch = ro - (am ? 1 : 0) - (bn ? 1 : 0);
  int64_t ab = am ? ra - 2 : 0, bb = bn ? rb - 2 : 0;  // batch dims of a and b
  if (batch < 0 || batch < std::max(ab, bb)) return Status::error("matmul rule: result rank does not match");
  auto size = [](const std::vector<int64_t>& s, int64_t d) { return s[static_cast<size_t>(d)]; };
  for (int64_t d = 0; d < batch; ++d) {
    int64_t n = size(out, d);
    if (n == 1) continue;
    int f = b.factor(n);
    b.result(0, d, f);
    int64_t da = d - (batch - ab), db = d - (batch - bb);
    if (da >= 0 && size(as, da) == n) b.operand(0, da, f);
    if (db >= 0 && size(bs, db) == n) b.operand(1, db, f);
  }
  if (am && size(as, ra - 2) != 1) b.addFactor({ra - 2, -1}, {batch}, size(as, ra - 2));
  if (size(as, ra - 1) != 1)
    b.addFactor({ra - 1, bn ? rb - 2 : 0}, {-1}, size(as, ra - 1), FactorKind::Reduction);
  if (bn && size(bs, rb - 1) != 1) b.addFactor({-1, rb - 1}, {ro - 1}, size(bs, rb - 1));
  return b.linear(Linearity::Each, {0, 1}).replicateRest().build();
}

// Labels of one einsum term: letters as themselves, the dims "..." stands
// for as 1000 + their position counted from the right (so they broadcast).
std::vector<int> einsumLabels(std::string_view term, int64_t rank) {
  std::vector<int> out;
  size_t dots = term.find("...");
  int64_t letters = static_cast<int64_t>(term.size()) - (dots == std::string_view::npos ? 0 : 3);
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t k = rank - letters; k > 0; --k) out.push_back(1000 + static_cast<int>(k) - 1);
      i += 2;
      continue;
    }
    if (term[i] != ' ') out.push_back(term[i]);
  }
  return out;
}

// einsum(equation, tensors): a factor per label; labels missing from the
// output are summed; a label repeated in one term (a diagonal) stays whole.
Expected<OpShardingRule> einsumRule(const ir::Node& node) {
  RuleBuilder b(node);
  const ir::Argument* eq = node.input("equation");
  if (!eq || eq->strings.empty() || b.numResults() != 1)
    return Status::error("einsum rule: expected an equation");
  std::string e;
  for (char c : eq->strings[0])
    if (c != ' ') e += c;
  size_t arrow = e.find("->");
  std::vector<std::vector<int>> terms;
  std::string_view lhs = std::string_view(e).substr(0, arrow);
  if (auto n = std::count(lhs.begin(), lhs.end(), ',') + 1; n != b.numOperands())
    return Status::error("einsum rule: the equation \"" + eq->strings[0] + "\" has " + std::to_string(n) +
                         " operand terms for " + std::to_string(b.numOperands()) + " tensors");
  for (int i = 0; i < b.numOperands(); ++i) {
    size_t comma = lhs.find(',');
    terms.push_back(einsumLabels(lhs.substr(0, comma), static_cast<int64_t>(b.operandShape(i).size())));
    lhs = comma == std::string_view::npos ? std::string_view() : lhs.substr(comma + 1);
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    out = einsumLabels(std::string_view(e).substr(arrow + 2), static_cast<int64_t>(b.resultShape(0).size()));
  } else {  // implicit: "..." then the letters used once, sorted
    std::map<int, int> count;
    for (const auto& t : terms)
      for (int l : t) ++count[l];
    for (auto [l, c] : count)
      if (l >= 1000) out.insert(out.begin(), l);
    for (auto [l, c] : count)
      if (l < 1000 && c == 1) out.push_back(l);
  }
  for (int i = 0; i < b.numOperands(); ++i)
    if (terms[static_cast<size_t>(i)].size() != b.operandShape(i).size())
      return Status::error("einsum rule: a term does not match its operand's rank");
  if (out.size() != b.resultShape(0).size()) return Status::error("einsum rule: the output does not match");
  std::map<int, int64_t> sizes;
  std::map<int, bool> repeated;
  auto note = [&](int l, int64_t n) { sizes[l] = std::max(sizes[l], n); };
  for (int i = 0; i < b.numOperands(); ++i) {
    const auto& t = terms[static_cast<size_t>(i)];
    for (size_t d = 0; d < t.size(); ++d) {
      note(t[d], b.operandShape(i)[d]);
      repeated[t[d]] = repeated[t[d]] || std::count(t.begin(), t.end(), t[d]) > 1;
    }
  }
  for (size_t d = 0; d < out.size(); ++d) note(out[d], b.resultShape(0)[d]);
  for (auto [l, n] : sizes) {
    if (n == 1) continue;
    bool kept = std::find(out.begin(), out.end(), l) != out.end();
    FactorKind kind = repeated[l] ? FactorKind::NeedReplication
                      : kept      ? FactorKind::PassThrough
                                  : FactorKind::Reduction;
    int f = b.factor(n, kind);
    for (int i = 0; i < b.numOperands(); ++i) {
      const auto& t = terms[static_cast<size_t>(i)];
      for (size_t d = 0; d < t.size(); ++d)
        if (t[d] == l && b.operandShape(i)[d] == n) b.operand(i, static_cast<int64_t>(d), f);
    }
    for (size_t d = 0; d < out.size(); ++d)
      if (out[d] == l) b.result(0, static_cast<int64_t>(d), f);
  }
  return b.linear(Linearity::Each).replicateRest().build();
}

// _cdist_forward(x1[..., P, M], x2[..., R, M], p, mode) -> [..., P, R]:
// distances need whole rows (M); batch dims broadcast.
Expected<OpShardingRule> cdistRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1 || b.operandShape(0).size() < 2 ||
      b.operandShape(1).size() < 2 || b.resultShape(0).size() < 2)
    return Status::error("cdist rule: expected x1[..., P, M], x2[..., R, M] -> [..., P, R]; got ranks " +
                         ranksOf(b));
  const auto& x1 = b.operandShape(0);
  const auto& x2 = b.operandShape(1);
  const auto& out = b.resultShape(0);
  auto r1 = static_cast<int64_t>(x1.size()), r2 = static_cast<int64_t>(x2.size());
  auto ro = static_cast<int64_t>(out.size());
  for (int64_t d = 0; d + 2 < ro; ++d) {
    int64_t n = out[static_cast<size_t>(d)], d1 = d - (ro - r1), d2 = d - (ro - r2);
    if (n == 1) continue;
    int f = b.factor(n);
    b.result(0, d, f);
    if (d1 >= 0 && x1[static_cast<size_t>(d1)] == n) b.operand(0, d1, f);
    if (d2 >= 0 && x2[static_cast<size_t>(d2)] == n) b.operand(1, d2, f);
  }
  if (x1[static_cast<size_t>(r1 - 2)] != 1)
    b.addFactor({r1 - 2, -1}, {ro - 2}, x1[static_cast<size_t>(r1 - 2)]);
  if (x2[static_cast<size_t>(r2 - 2)] != 1)
    b.addFactor({-1, r2 - 2}, {ro - 1}, x2[static_cast<size_t>(r2 - 2)]);
  return b.replicateRest().build();
}

}  // namespace

void registerMatmulRules(RuleRegistry& r) {
  r.add("aten._cdist_forward.default", cdistRule);
  r.add("aten._trilinear.default", trilinearRule);
  // Every pair of rows: replicated.
  r.add("aten._pdist_forward.default",
        [](const ir::Node& n) { return RuleBuilder(n).replicateRest().build(); });
  r.add("aten.addbmm.default", addbmmRule);
  r.add("aten.addmm.default", addmmRule);
  r.add("aten.addmv.default", addmvRule);
  r.add("aten.baddbmm.default", baddbmmRule);
  r.add("aten.bmm.default", [](const ir::Node& n) { return productRule(n, 1); });
  r.add("aten.einsum.default", einsumRule);
  r.add("aten.linear.default", linearRule);
  r.add("aten.matmul.default", matmulRule);
  r.add("aten.mm.default", [](const ir::Node& n) { return productRule(n, 0); });
}

}  // namespace spmd::sharding
