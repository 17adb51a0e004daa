// The MoE experts kernels on one rank (spmdc.moe_experts, no axis): the
// routed FFN against the same sum written with plain ATen per token, its
// backward against autograd of that sum, and an expert index out of range
// refused with the op's message (checked with one host copy of the
// routing, not a min / max read back each).
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
