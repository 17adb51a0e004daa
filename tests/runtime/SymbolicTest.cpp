// Symbolic sizes (graphs as IR text): binding symbols from input shapes,
// range and shape errors, sym_size and SymInt arithmetic evaluated by the
// executor.
#include <ATen/ATen.h>

#include "../TestCatch.h"

#include "TestGraph.h"
#include "runtime/Executor.h"
#include "runtime/LocalOps.h"

using namespace spmd;
using namespace spmd::runtime;
using namespace spmd::runtime::test;

namespace {

/// x: f32[s0, 4] (s0 in 2..8), y: f32[s0, s1]; output view(x, [s0 * 4]) and y + 1.
constexpr std::string_view kDynamic = R"(
symbol s0: [2, 8] hint 4
symbol s1: hint 4
input %x: f32[s0, 4] user_input
input %y: f32[s0, s1] user_input
%sym_size_int: sym(s0) = aten.sym_size.int(self=%x, dim=0)
%mul: sym(4*s0) = _operator.mul(a=%sym_size_int, b=4)
%view: f32[4*s0] = aten.view.default(self=%x, size=[%mul])
%add: f32[s0, s1] = aten.add.Tensor(self=%y, other=1)
output %view user_output
output %add user_output
output %mul user_output
)";

Executor prepareOrFail(std::string_view text) {
  ir::ExportedProgram p = programFromText(text);
  Expected<Executor> ex = Executor::prepare(p);
  INFO(ex.status().message());
  REQUIRE(ex.hasValue());
  return std::move(ex).value();
}

std::string runError(Executor& ex, std::vector<c10::IValue> inputs) {
  Expected<std::vector<c10::IValue>> out = ex.run(std::move(inputs));
  REQUIRE(!out.hasValue());
  return out.status().message();
}

}  // namespace

TEST_CASE("symbols bind from input shapes; sym_size and SymInt arithmetic run in the executor") {
  Executor ex = prepareOrFail(kDynamic);
  CHECK(ex.kernelSource(0) == KernelSource::Builtin);
  CHECK(ex.kernelSource(1) == KernelSource::Builtin);
  for (int64_t batch : {2, 3, 8}) {
    at::Tensor x = at::randn({batch, 4});
    at::Tensor y = at::randn({batch, 7});
    Expected<std::vector<c10::IValue>> out = ex.run({x, y});
    INFO(out.status().message());
    REQUIRE(out.hasValue());
    CHECK(at::equal((*out)[0].toTensor(), x.view({batch * 4})));
    CHECK(at::equal((*out)[1].toTensor(), y + 1));
    CHECK((*out)[2].toInt() == batch * 4);
  }
}

TEST_CASE("input shape errors name the input, the dim and the allowed sizes") {
  Executor ex = prepareOrFail(kDynamic);
  CHECK(runError(ex, {at::randn({9, 4}), at::randn({9, 2})}) ==
        "input 'x' dim 0 is 9, but the program allows 2..8 (symbol s0)");
  CHECK(runError(ex, {at::randn({3, 5}), at::randn({3, 2})}) ==
        "input 'x' dim 1 is 5, but the program expects 4 (f32[s0, 4])");
  CHECK(runError(ex, {at::randn({3, 4}), at::randn({2, 2})}) ==
        "input 'y' dim 0 is 2, but symbol s0 is 3 from input 'x' dim 0");
  CHECK(runError(ex, {at::randn({3, 4, 1}), at::randn({3, 2})}) ==
        "input 'x' has rank 3, but the program expects rank 2 (f32[s0, 4])");
  CHECK(runError(ex, {at::ones({3, 4}, at::kLong), at::randn({3, 2})}) ==
        "input 'x' has dtype i64, but the program expects f32 (f32[s0, 4])");
  CHECK(runError(ex, {at::randn({3, 4})}) == "the program takes 2 inputs, got 1");
  CHECK(runError(ex, {c10::IValue(3), at::randn({3, 2})}) == "input 'x' must be a tensor");
}

TEST_CASE("an input dim given as an expression must evaluate to the actual size") {
  Executor ex = prepareOrFail(R"(
symbol s0: hint 4
input %x: f32[s0] user_input
input %y: f32[2*s0] user_input
%cat: f32[3*s0] = aten.cat.default(tensors=[%x, %y])
output %cat user_output
)");
  CHECK(ex.run({at::randn({3}), at::randn({6})}).hasValue());
  CHECK(runError(ex, {at::randn({3}), at::randn({7})}) ==
        "input 'y' dim 0 is 7, but the program expects 2*s0 = 6");
}

TEST_CASE("SymInt arithmetic follows Python") {
  auto call = [](const char* target, c10::IValue a, c10::IValue b) {
    const LocalOp* op = findBuiltin(target);
    REQUIRE(op != nullptr);
    torch::jit::Stack stack{std::move(a), std::move(b)};
    op->kernel(stack);
    REQUIRE(stack.size() == 1);
    return stack[0];
  };
  CHECK(call("_operator.floordiv", 7, 2).toInt() == 3);
  CHECK(call("_operator.floordiv", -7, 2).toInt() == -4);
  CHECK(call("_operator.mod", -7, 3).toInt() == 2);
  CHECK(call("_operator.mod", 7, -3).toInt() == -2);
  CHECK(call("_operator.sub", 3, 5).toInt() == -2);
  CHECK(call("_operator.truediv", 7, 2).toDouble() == 3.5);
  CHECK(call("_operator.mul", 2.5, 2).toDouble() == 5.0);
  CHECK(call("_operator.ge", 4, 4).toBool());
  CHECK(!call("_operator.lt", 4, 4).toBool());
  CHECK(call("torch.sym_max", 4, 9).toInt() == 9);
  CHECK(findBuiltin("aten.mm.default") == nullptr);
}
