// Convolutions and pooling: the batch passes through; output channels pass
// through (weight, bias, result); input channels are contracted, a
// reduction (sharding them leaves the result pending, and the bias pending
// too); spatial dims need replication (a sharded image would need halos),
// except under a 1x1 kernel with unit stride and no padding.
//
//   aten.convolution.default(x[8, 3, 32, 32], w[16, 3, 3, 3], b[16], [1, 1], [1, 1], [1, 1], false, [0, 0],
//   1)
//     -> ([i, k, l, m], [j, k, n, o], [j]) -> ([i, j, p, q]) {i=8, j=16, k=3 reduction(sum), l=32 replicated,
//        ...} linear-joint(0, 2), b additive
//   aten.convolution_backward.default(g[8, 32, 16, 16], x[8, 16, 16, 16], w[32, 16, 3, 3], [32], ...)
//     -> ([i, j, ...], [i, k, ...], [j, k, ...]) -> ([i, k, ...], [j, k, ...], [j])
//        {i=8 reduction(sum), j=32 reduction(sum), k=16, ...} linear-each(0)
//   aten.max_pool2d_with_indices.default(x[8, 16, 32, 32], [2, 2])
//     -> ([i, j, k, l]) -> ([i, j, m, n], [i, j, m, n]) {i=8, j=16, k=32 replicated, ...}
//   aten.upsample_bilinear2d.vec(x[8, 16, 4, 4], [8, 8], false, None)
//     -> ([i, j, k, l]) -> ([i, j, m, n]) {i=8, j=16, k=4 replicated, ...} linear-each(0)
//
// Grouped convolutions keep channels replicated: a channel shard would not
// line up with the groups.
#include <map>

#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

using rules::operandIndex;
using rules::resultIndex;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Places factor `f` at dim `d` of each (operand, dim) / (result, dim) whose
// index is >= 0.
void place(RuleBuilder& b, int f, std::initializer_list<std::pair<int, int64_t>> operands,
           std::initializer_list<std::pair<int, int64_t>> results = {}) {
  for (auto [i, d] : operands)
    if (i >= 0) b.operand(i, d, f);
  for (auto [i, d] : results)
    if (i >= 0) b.result(i, d, f);
}

// True when the convolution maps each position to itself: a 1x1 kernel,
// unit stride, no padding, not transposed.
bool isPointwiseConv(const ir::Node& node, const std::vector<int64_t>& weight) {
  if (rules::boolArg(node, "transposed", false)) return false;
  for (size_t d = 2; d < weight.size(); ++d)
    if (weight[d] != 1) return false;
  for (const char* name : {"stride", "padding"}) {
    const ir::Argument* a = node.input(name);
    if (!a) continue;  // conv2d's defaults: stride 1, padding 0
    for (int64_t v : a->ints)
      if (v != (name[0] == 's' ? 1 : 0)) return false;
  }
  return true;
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed,
// output_padding, groups) -> out.
Expected<OpShardingRule> convolutionRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 2 || b.numResults() != 1)
    return Status::error("convolution rule: expected input and weight");
  const auto& in = b.operandShape(0);
  const auto& w = b.operandShape(1);
  int bias = operandIndex(node, "bias");
  // Unbatched conv2d(x[C, H, W], w[O, C, kh, kw]): replicated.
  if (in.size() + 1 == w.size() && b.resultShape(0).size() == in.size()) return b.replicateRest().build();
  if (in.size() < 3 || in.size() != w.size() || b.resultShape(0).size() != in.size() ||
      (bias >= 0 && b.operandShape(bias).size() != 1))
    return Status::error("convolution rule: expected a batched input and a weight of its rank");
  bool transposed = rules::boolArg(node, "transposed", false);
  int64_t wOut = transposed ? 1 : 0, wIn = transposed ? 0 : 1;
  const auto& out = b.resultShape(0);
  if (in[0] != 1) place(b, b.factor(in[0]), {{0, 0}}, {{0, 0}});
  if (rules::intArg(node, "groups", 1) == 1) {
    if (out[1] != 1) place(b, b.factor(out[1]), {{1, wOut}, {bias, 0}}, {{0, 1}});
    if (in[1] != 1) place(b, b.factor(in[1], FactorKind::Reduction), {{0, 1}, {1, wIn}});
  }
  if (isPointwiseConv(node, w))
    for (int64_t d = 2; d < static_cast<int64_t>(in.size()); ++d)
      if (in[sz(d)] != 1) place(b, b.factor(in[sz(d)]), {{0, d}}, {{0, d}});
  if (bias >= 0)
    b.additive(bias).linear(Linearity::Joint, {0, bias});
  else
    b.linear(Linearity::Each, {0, 1});
  return b.replicateRest().build();
}

// convolution_backward(grad_output, input, weight, bias_sizes, stride,
// padding, dilation, transposed, output_padding, groups, output_mask)
//   -> (grad_input?, grad_weight?, grad_bias?).
// grad_weight and grad_bias sum over the batch; grad_input sums over output
// channels; grad_bias does not depend on input channels.
Expected<OpShardingRule> convolutionBackwardRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 3)
    return Status::error("convolution backward rule: expected grad_output, input and weight");
  const auto& g = b.operandShape(0);
  const auto& in = b.operandShape(1);
  const auto& w = b.operandShape(2);
  int gi = resultIndex(node, 0), gw = resultIndex(node, 1), gb = resultIndex(node, 2);
  auto rankOf = [&](int r, size_t fallback) { return r < 0 ? fallback : b.resultShape(r).size(); };
  if (in.size() < 3 || in.size() != w.size() || g.size() != in.size() || rankOf(gi, in.size()) != in.size() ||
      rankOf(gw, w.size()) != w.size() || rankOf(gb, 1) != 1)
    return Status::error("convolution backward rule: expected a batched input and gradients of their ranks");
  bool transposed = rules::boolArg(node, "transposed", false);
  int64_t wOut = transposed ? 1 : 0, wIn = transposed ? 0 : 1;
  if (in[0] != 1) place(b, b.factor(in[0], FactorKind::Reduction), {{0, 0}, {1, 0}}, {{gi, 0}});
  if (rules::intArg(node, "groups", 1) == 1) {
    if (g[1] != 1)
      place(b, b.factor(g[1], FactorKind::Reduction), {{0, 1}, {2, wOut}}, {{gw, wOut}, {gb, 0}});
    if (in[1] != 1) place(b, b.factor(in[1]), {{1, 1}, {2, wIn}}, {{gi, 1}, {gw, wIn}});
  }
  bool pointwise = isPointwiseConv(node, w);
  for (int64_t d = 2; d < static_cast<int64_t>(in.size()); ++d) {
    if (pointwise) {  // grad_weight and grad_bias sum over positions
      if (in[sz(d)] != 1) place(b, b.factor(in[sz(d)], FactorKind::Reduction), {{0, d}, {1, d}}, {{gi, d}});
      continue;
    }
    // Gradients have the shapes of what they differentiate.
    if (g[sz(d)] != 1) place(b, b.factor(g[sz(d)], FactorKind::NeedReplication), {{0, d}});
    if (in[sz(d)] != 1) place(b, b.factor(in[sz(d)], FactorKind::NeedReplication), {{1, d}}, {{gi, d}});
    if (w[sz(d)] != 1) place(b, b.factor(w[sz(d)], FactorKind::NeedReplication), {{2, d}}, {{gw, d}});
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// Pooling over the last `spatial` dims: the leading dims (batch, channels)
// pass through every operand and result of the same rank.
RuleFn pool(int64_t spatial, Linearity lin) {
  return [=](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numOperands() < 1 || b.numResults() < 1) return Status::error("pooling rule: expected a tensor");
    const auto& out = b.resultShape(0);
    auto rank = static_cast<int64_t>(out.size());
    for (int64_t d = 0; d + spatial < rank; ++d) {
      if (out[sz(d)] == 1) continue;
      int f = b.factor(out[sz(d)]);
      for (int i = 0; i < b.numOperands(); ++i)
        if (static_cast<int64_t>(b.operandShape(i).size()) == rank && b.operandShape(i)[sz(d)] == out[sz(d)])
          b.operand(i, d, f);
      for (int i = 0; i < b.numResults(); ++i)
        if (static_cast<int64_t>(b.resultShape(i).size()) == rank) b.result(i, d, f);
    }
    // Spatial dims: one replicated factor per (dim, size), shared by the
    // tensors of that size (an input and its gradient, outputs and indices).
    std::map<std::pair<int64_t, int64_t>, int> windows;
    auto replicate = [&](const std::vector<int64_t>& shape, auto&& add) {
      if (static_cast<int64_t>(shape.size()) != rank) return;
      for (int64_t d = rank - spatial; d < rank; ++d) {
        if (shape[sz(d)] == 1) continue;
        auto [it, fresh] = windows.try_emplace({d, shape[sz(d)]}, -1);
        if (fresh) it->second = b.factor(shape[sz(d)], FactorKind::NeedReplication);
        add(d, it->second);
      }
    };
    for (int i = 0; i < b.numOperands(); ++i)
      replicate(b.operandShape(i), [&](int64_t d, int f) { b.operand(i, d, f); });
    for (int i = 0; i < b.numResults(); ++i)
      replicate(b.resultShape(i), [&](int64_t d, int f) { b.result(i, d, f); });
    if (lin != Linearity::None) b.linear(lin, {0});
    return b.replicateRest().build();
  };
}

// grid_sampler_2d(input[N, C, H, W], grid[N, Ho, Wo, 2], ...) -> [N, C, Ho,
// Wo], and grid_sampler_3d with [N, C, D, H, W] and grid[N, Do, Ho, Wo, 3]:
// samples interpolate the whole image, linearly.
Expected<OpShardingRule> gridSamplerRule(const ir::Node& node) {
  RuleBuilder b(node);
  auto rank = b.numOperands() == 2 ? static_cast<int64_t>(b.operandShape(0).size()) : 0;
  if (b.numOperands() != 2 || b.numResults() != 1 || (rank != 4 && rank != 5) ||
      static_cast<int64_t>(b.operandShape(1).size()) != rank ||
      static_cast<int64_t>(b.resultShape(0).size()) != rank)
    return Status::error(
        "grid_sampler rule: expected input [N, C, H, W] and grid [N, Ho, Wo, 2] (or [N, C, D, H, W] and "
        "[N, Do, Ho, Wo, 3])");
  const auto& in = b.operandShape(0);
  const auto& grid = b.operandShape(1);
  if (in[0] != 1) b.addFactor({0, 0}, {0}, in[0]);
  if (in[1] != 1) b.addFactor({1, -1}, {1}, in[1]);
  for (int64_t d = 1; d + 1 < rank; ++d)
    if (grid[sz(d)] != 1) b.addFactor({-1, d}, {d + 1}, grid[sz(d)]);
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

// fractional_max_pool2d(self[N, C, H, W], kernel, output_size,
// random_samples[N, C, 2]) -> (out, indices) (3d alike; unbatched [C, H, W]
// reads samples[1, C, k]): each (N, C) row pools with its own random window
// offsets, so N and C pass through self, samples and results together.
RuleFn fractionalPool(int64_t spatial) {
  return [=](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numOperands() != 2 || operandIndex(node, "random_samples") != 1 || b.numResults() != 2)
      return Status::error("fractional_max_pool rule: expected self, random_samples and two results");
    const auto& in = b.operandShape(0);
    const auto& rs = b.operandShape(1);
    int64_t lead = static_cast<int64_t>(in.size()) - spatial;  // 2 batched, 1 unbatched
    if (lead < 1 || lead > 2 || rs.size() != 3 || b.resultShape(0).size() != in.size() ||
        b.resultShape(1).size() != in.size())
      return Status::error(
          "fractional_max_pool rule: expected self [N, C, spatial...] and samples [N, C, k]");
    for (int64_t d = 0; d < lead; ++d) {
      int64_t n = in[sz(d)], sd = d + 2 - lead;
      if (n == 1 || rs[sz(sd)] != n) continue;
      int f = b.factor(n);
      b.operand(0, d, f).operand(1, sd, f).result(0, d, f).result(1, d, f);
    }
    return b.replicateRest().build();
  };
}

// col2im(self[N, C*K, L], output_size, kernel_size, ...) -> [N, C, H, W]
// (N absent when unbatched): blocks overlap, so only N and C pass through.
Expected<OpShardingRule> col2imRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 1 || b.numResults() != 1) return Status::error("col2im rule: expected one tensor");
  const auto& in = b.operandShape(0);
  const auto& out = b.resultShape(0);
  int64_t lead = static_cast<int64_t>(in.size()) - 2;  // 1 batched, 0 unbatched
  if (lead < 0 || static_cast<int64_t>(out.size()) != lead + 3)
    return Status::error("col2im rule: expected [N, C*K, L]");
  if (lead == 1 && in[0] != 1) b.addFactor({0}, {0}, in[0]);
  int64_t c = out[sz(lead)], ck = in[sz(lead)];
  if (c > 1 && ck % c == 0) {  // no channels (c == 0): nothing to divide by
    b.addFactor({lead}, {lead}, c);
    if (ck / c != 1) b.operand(0, lead, b.factor(ck / c, FactorKind::NeedReplication));
  }
  return b.linear(Linearity::Each, {0}).replicateRest().build();
}

}  // namespace

void registerConvRules(RuleRegistry& r) {
  r.add("aten._adaptive_avg_pool2d.default", pool(2, Linearity::Each));
  r.add("aten._adaptive_avg_pool2d_backward.default", pool(2, Linearity::Each));
  r.add("aten._adaptive_avg_pool3d.default", pool(3, Linearity::Each));
  r.add("aten.adaptive_avg_pool2d.default", pool(2, Linearity::Each));
  r.add("aten.adaptive_max_pool2d.default", pool(2, Linearity::None));  // values with indices
  r.add("aten.adaptive_max_pool3d.default", pool(3, Linearity::None));
  r.add("aten.avg_pool2d.default", pool(2, Linearity::Each));
  r.add("aten.avg_pool2d_backward.default", pool(2, Linearity::Each));
  r.add("aten.avg_pool3d.default", pool(3, Linearity::Each));
  r.add("aten.col2im.default", col2imRule);
  r.add({"aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.convolution.default"},
        convolutionRule);
  r.add("aten.convolution_backward.default", convolutionBackwardRule);
  r.add("aten.fractional_max_pool2d.default", fractionalPool(2));
  r.add("aten.fractional_max_pool3d.default", fractionalPool(3));
  r.add({"aten.grid_sampler_2d.default", "aten.grid_sampler_3d.default"}, gridSamplerRule);
  r.add("aten.max_pool2d.default", pool(2, Linearity::None));
  r.add("aten.max_pool2d_with_indices.default", pool(2, Linearity::None));
  r.add("aten.max_pool2d_with_indices_backward.default", pool(2, Linearity::Each));
  r.add("aten.max_pool3d_with_indices.default", pool(3, Linearity::None));
  // Interpolation is linear in the image; it reads neighbours, so space stays whole.
  r.add(
      {"aten._upsample_bilinear2d_aa.default", "aten.upsample_bilinear2d.vec", "aten.upsample_nearest2d.vec"},
      pool(2, Linearity::Each));
}

}  // namespace spmd::sharding
