// The MoE experts kernels on one rank (spmdc.moe_experts, no axis): the
// routed FFN against the same sum written with plain ATen per token, its
// backward against autograd of that sum, and an expert index out of range
// refused with the op's message (checked with one host copy of the
// routing, not a min / max read back each). Tensor parallelism inside the
// experts: the kernels on slices of the FFN dim (w1, w3 by rows, w2 by
// columns, uneven included) give partial results that sum to the whole
// op's, and weight gradients that are the whole op's slices.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>

#include "../TestCatch.h"

#include "runtime/MoeOps.h"

using namespace spmd::runtime;

namespace {

struct Moe {
  at::Tensor x, indices, weights, w1, w2, w3;
};

Moe example(int64_t tokens = 6, int64_t experts = 4, int64_t k = 2, int64_t d = 8, int64_t h = 12) {
  at::manual_seed(0);
  return {at::randn({tokens, d}, at::kDouble),     at::randint(0, experts, {tokens, k}, at::kLong),
          at::rand({tokens, k}, at::kDouble),      at::randn({experts, h, d}, at::kDouble),
          at::randn({experts, d, h}, at::kDouble), at::randn({experts, h, d}, at::kDouble)};
}

/// sum_k weights[t, k] * FFN_{indices[t, k]}(x[t]), token by token.
at::Tensor reference(const Moe& m) {
  std::vector<at::Tensor> rows;
  for (int64_t t = 0; t < m.x.size(0); ++t) {
    at::Tensor y = at::zeros({m.w2.size(1)}, m.x.options());
    for (int64_t j = 0; j < m.indices.size(1); ++j) {
      int64_t e = m.indices[t][j].item<int64_t>();
      at::Tensor v = m.x[t];
      at::Tensor a = at::silu(at::mv(m.w1[e], v)) * at::mv(m.w3[e], v);
      y = y + m.weights[t][j] * at::mv(m.w2[e], a);
    }
    rows.push_back(y);
  }
  return at::stack(rows);
}

std::vector<c10::IValue> call(const char* target, std::vector<c10::IValue> stack) {
  const LocalOp* op = findMoeOp(target);
  REQUIRE(op != nullptr);
  if (std::string(target) == "spmdc.moe_experts.default") stack.emplace_back();  // replicas=None
  op->kernel(stack);
  return stack;
}

}  // namespace

TEST_CASE("moe_experts: the routed FFN and its gradients on one rank", "[runtime][moe]") {
  Moe m = example();
  auto out = call("spmdc.moe_experts.default", {m.x, m.indices, m.weights, m.w1, m.w2, m.w3});
  REQUIRE(out.size() == 1);
  CHECK(at::allclose(out[0].toTensor(), reference(m), 1e-10, 1e-10));

  at::Tensor grad = at::randn_like(out[0].toTensor());
  auto grads =
      call("spmdc.moe_experts_backward.default", {grad, m.x, m.indices, m.weights, m.w1, m.w2, m.w3});
  REQUIRE(grads.size() == 5);
  Moe leaf = m;
  for (at::Tensor* t : {&leaf.x, &leaf.weights, &leaf.w1, &leaf.w2, &leaf.w3})
    *t = t->detach().clone().set_requires_grad(true);
  auto want =
      torch::autograd::grad({reference(leaf)}, {leaf.x, leaf.weights, leaf.w1, leaf.w2, leaf.w3}, {grad});
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("gradient " << i);
    CHECK(at::allclose(grads[i].toTensor(), want[i], 1e-10, 1e-10));
  }
}

TEST_CASE("moe_experts: an expert index out of range is refused", "[runtime][moe]") {
  for (int64_t bad : {-1, 4}) {
    Moe m = example();
    m.indices[2][1] = bad;
    try {
      call("spmdc.moe_experts.default", {m.x, m.indices, m.weights, m.w1, m.w2, m.w3});
      FAIL("index " << bad << " was accepted");
    } catch (const c10::Error& e) {
      CHECK_THAT(std::string(e.what_without_backtrace()), Catch::Contains("outside [0, 4)"));
    }
  }
}

TEST_CASE("moe_experts: FFN-dim slices (tp inside the experts) sum to the whole op", "[runtime][moe]") {
  Moe m = example(/*tokens=*/7, /*experts=*/4, /*k=*/2, /*d=*/8, /*h=*/11);
  auto whole = call("spmdc.moe_experts.default", {m.x, m.indices, m.weights, m.w1, m.w2, m.w3});
  at::Tensor grad = at::randn_like(whole[0].toTensor());
  auto wholeGrads =
      call("spmdc.moe_experts_backward.default", {grad, m.x, m.indices, m.weights, m.w1, m.w2, m.w3});
  // torch.chunk of 11 over 3 ranks: 4, 4, 3.
  at::Tensor out = at::zeros_like(whole[0].toTensor()), gx = at::zeros_like(m.x),
             gw = at::zeros_like(m.weights);
  std::vector<at::Tensor> g1, g2, g3;
  for (const auto& [start, len] : {std::pair<int64_t, int64_t>{0, 4}, {4, 4}, {8, 3}}) {
    at::Tensor w1 = m.w1.narrow(1, start, len), w2 = m.w2.narrow(2, start, len),
               w3 = m.w3.narrow(1, start, len);
    out += call("spmdc.moe_experts.default", {m.x, m.indices, m.weights, w1, w2, w3})[0].toTensor();
    auto g = call("spmdc.moe_experts_backward.default", {grad, m.x, m.indices, m.weights, w1, w2, w3});
    gx += g[0].toTensor();
    gw += g[1].toTensor();
    g1.push_back(g[2].toTensor());
    g2.push_back(g[3].toTensor());
    g3.push_back(g[4].toTensor());
  }
  CHECK(at::allclose(out, whole[0].toTensor(), 1e-10, 1e-10));
  CHECK(at::allclose(gx, wholeGrads[0].toTensor(), 1e-10, 1e-10));
  CHECK(at::allclose(gw, wholeGrads[1].toTensor(), 1e-10, 1e-10));
  CHECK(at::allclose(at::cat(g1, 1), wholeGrads[2].toTensor(), 1e-10, 1e-10));
  CHECK(at::allclose(at::cat(g2, 2), wholeGrads[3].toTensor(), 1e-10, 1e-10));
  CHECK(at::allclose(at::cat(g3, 1), wholeGrads[4].toTensor(), 1e-10, 1e-10));
}
