// Data movement that moves elements across positions: padding, flips,
// repeats, differences, triangles, grids. Dims whose elements move (a
// padded or flipped dim, the last two of tril) stay whole; the others pass
// through. A repeated dim is [copies, n] with the copies whole, so sharding
// n gives the result a strided shard: each rank repeats its own block.
//
//   aten.constant_pad_nd.default(x[4, 6], [1, 1], 0.0) -> ([i, j]) -> ([i, k]) {i=4, j=6 replicated,
//     k=8 replicated} linear-each(0)
//   aten.repeat.default(x[4, 6], [2, 1])             -> ([i, j]) -> ([k i, j]) {i=4, j=6, k=2 replicated}
//   aten.repeat_interleave.self_int(x[4, 6], 3, 0)   -> ([i, j]) -> ([i k, j]) {i=4, j=6, k=3 replicated}
//   aten.meshgrid.default([a[4], b[6]])              -> ([i], [j]) -> ([i, j], [i, j])
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Padding of the last dims by `padArg` (pairs, last dim first); linear
// when `linear` says so for the node.
RuleFn pad(const char* padArg, bool (*linear)(const ir::Node&)) {
  return [=](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numOperands() != 1 || b.numResults() != 1)
      return Status::error("padding rule: expected one tensor");
    const auto& in = b.operandShape(0);
    const ir::Argument* p = node.input(padArg);
    std::vector<int64_t> pads = p ? p->ints : std::vector<int64_t>{};
    int64_t rank = static_cast<int64_t>(in.size());
    for (int64_t d = 0; d < rank; ++d) {
      size_t k = sz(2 * (rank - 1 - d));  // pads of dim d: pads[k], pads[k + 1]
      bool padded = k < pads.size() && (pads[k] != 0 || (k + 1 < pads.size() && pads[k + 1] != 0));
      if (!padded && in[sz(d)] != 1 && b.resultShape(0)[sz(d)] == in[sz(d)]) b.addFactor({d}, {d}, in[sz(d)]);
    }
    if (linear(node)) b.linear(Linearity::Each, {0});
    return b.replicateRest().build();
  };
}

bool always(const ir::Node&) { return true; }
// Padding with zeros is linear, with another constant it is not.
bool zeroValue(const ir::Node& n) { return rules::scalarArg(n, "value", 0) == 0; }
bool zeroOrNotConstant(const ir::Node& n) {
  const ir::Argument* mode = n.input("mode");
  bool constant = !mode || mode->strings.empty() || mode->strings[0] == "constant";
  return !constant || zeroValue(n);
}

// repeat(self, repeats): result dim d is [repeats[d], n] (leading new dims
// only the copies).
Expected<OpShardingRule> repeatRule(const ir::Node& node) {
  RuleBuilder b(node);
  const ir::Argument* reps = node.input("repeats");
  if (b.numOperands() != 1 || b.numResults() != 1 || !reps)
    return Status::error("repeat rule: expected one tensor");
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(b.resultShape(0).size());
  int64_t lead = rank - static_cast<int64_t>(in.size());
  if (lead < 0 || static_cast<int64_t>(reps->ints.size()) != rank) return b.replicateRest().build();
  for (int64_t d = lead; d < rank; ++d) {
    int64_t n = in[sz(d - lead)], r = reps->ints[sz(d)];
    if (n == 1) continue;  // only the copies: replicated below
    if (r != 1) b.result(0, d, b.factor(r, FactorKind::NeedReplication));
    b.addFactor({d - lead}, {d}, n);
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// repeat_interleave(self, repeats, dim, output_size): dim is [n, repeats];
// without a dim (flattened) or with output_size (a global size) it stays whole.
Expected<OpShardingRule> repeatInterleaveRule(const ir::Node& node) {
  RuleBuilder b(node);
  const ir::Argument* dimArg = node.input("dim");
  const ir::Argument* outSize = node.input("output_size");
  bool whole = !dimArg || dimArg->kind == ir::Argument::Kind::None ||
               (outSize && outSize->kind != ir::Argument::Kind::None);
  if (b.numOperands() != 1 || b.numResults() != 1 || whole) return b.replicateRest().build();
  const auto& in = b.operandShape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t dim = normalizeDim(dimArg->ints[0], rank);
  int64_t r = rules::intArg(node, "repeats", 1);
  for (int64_t d = 0; d < rank; ++d) {
    if (in[sz(d)] == 1) continue;
    b.addFactor({d}, {d}, in[sz(d)]);
    if (d == dim && r != 1) b.result(0, d, b.factor(r, FactorKind::NeedReplication));
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// meshgrid(tensors[, indexing]): input i spans dim i of every result
// (dims 0 and 1 swapped under indexing "xy").
Expected<OpShardingRule> meshgridRule(const ir::Node& node) {
  RuleBuilder b(node);
  const ir::Argument* indexing = node.input("indexing");
  bool xy = indexing && !indexing->strings.empty() && indexing->strings[0] == "xy";
  for (int i = 0; i < b.numOperands(); ++i) {
    if (b.operandShape(i).size() != 1) return b.replicateRest().build();
    int64_t d = xy && i < 2 && b.numOperands() >= 2 ? 1 - i : i;
    int64_t n = b.operandShape(i)[0];
    if (n == 1) continue;
    int f = b.factor(n);
    b.operand(i, 0, f);
    for (int k = 0; k < b.numResults(); ++k) b.result(k, d, f);
  }
  return b.replicateRest().build();
}

}  // namespace

void registerMovementRules(RuleRegistry& r) {
  using rules::pointwiseExceptDims;
  r.add("aten.constant_pad_nd.default", pad("pad", zeroValue));
  // diff(self, n, dim, prepend, append) is linear in its tensors together.
  r.add("aten.diff.default", pointwiseExceptDims("dim", Linearity::Joint, {}, {-1}));
  r.add("aten.flip.default", pointwiseExceptDims("dims", Linearity::Each, {0}));
  r.add("aten.meshgrid.default", meshgridRule);
  r.add("aten.pad.default", pad("pad", zeroOrNotConstant));
  r.add({"aten.reflection_pad1d.default", "aten.reflection_pad2d.default", "aten.reflection_pad3d.default"},
        pad("padding", always));
  r.add("aten.repeat.default", repeatRule);
  r.add("aten.repeat_interleave.self_int", repeatInterleaveRule);
  r.add({"aten.replication_pad2d.default", "aten.replication_pad3d.default"}, pad("padding", always));
  // The diagonal is counted in global rows and columns.
  r.add({"aten.tril.default", "aten.triu.default"}, pointwiseExceptDims("", Linearity::Each, {0}, {-2, -1}));
}

}  // namespace spmd::sharding
