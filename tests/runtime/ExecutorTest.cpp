// Executor units on graphs written as IR text: argument slots and defaults,
// wrapped numbers, list arguments and returns, last-use freeing, node-named
// errors. Each result is compared with the same ATen call made directly.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>

#include "../TestCatch.h"

#include "TestGraph.h"
#include "runtime/Executor.h"

using namespace spmd;
using namespace spmd::runtime;
using namespace spmd::runtime::test;

namespace {

Executor prepareOrFail(std::string_view text, ExecutorOptions options = {}) {
  ir::ExportedProgram p = programFromText(text);
  Expected<Executor> ex = Executor::prepare(p.graph, std::move(options));
  INFO(ex.status().message());
  REQUIRE(ex.hasValue());
  return std::move(ex).value();
}

std::vector<c10::IValue> runOrFail(Executor& ex, std::vector<c10::IValue> inputs) {
  Expected<std::vector<c10::IValue>> out = ex.run(std::move(inputs));
  INFO(out.status().message());
  REQUIRE(out.hasValue());
  return std::move(out).value();
}

/// The error preparing `text` gives.
std::string prepareError(std::string_view text) {
  ir::ExportedProgram p = programFromText(text);
  Expected<Executor> ex = Executor::prepare(p.graph);
  REQUIRE(!ex.hasValue());
  return ex.status().message();
}

}  // namespace

TEST_CASE("addmm fills beta and alpha from the schema defaults") {
  Executor ex = prepareOrFail(R"(
input %b: f32[4] user_input
input %x: f32[2, 3] user_input
input %w: f32[3, 4] user_input
%addmm: f32[2, 4] = aten.addmm.default(self=%b, mat1=%x, mat2=%w)
output %addmm user_output
)");
  CHECK(ex.kernelSource(0) == KernelSource::Dispatcher);
  at::Tensor tb = at::randn({4}), tx = at::randn({2, 3}), tw = at::randn({3, 4});
  auto out = runOrFail(ex, {tb, tx, tw});
  REQUIRE(out.size() == 1);
  CHECK(at::equal(out[0].toTensor(), at::addmm(tb, tx, tw)));
  // A prepared executor runs again with new inputs.
  at::Tensor tx2 = at::randn({2, 3});
  auto out2 = runOrFail(ex, {tb, tx2, tw});
  CHECK(at::equal(out2[0].toTensor(), at::addmm(tb, tx2, tw)));
}

TEST_CASE("Python numbers passed as Tensor are wrapped numbers, as in eager") {
  Executor ex = prepareOrFail(R"(
input %i: i64[3] user_input
input %f: f32[5] user_input
%add: f32[3] = aten.add.Tensor(self=%i, other=2.5)
%mul: f32[5] = aten.mul.Tensor(self=%f, other=0.1)
%sub: i64[3] = aten.sub.Tensor(self=%i, other=1)
output %add user_output
output %mul user_output
output %sub user_output
)");
  at::Tensor ti = at::arange(3, at::kLong), tf = at::randn({5});
  auto out = runOrFail(ex, {ti, tf});
  // A wrapped double does not promote i64 to f64: the result takes the default dtype.
  CHECK(out[0].toTensor().scalar_type() == at::kFloat);
  CHECK(at::equal(out[0].toTensor(), at::tensor({2.5f, 3.5f, 4.5f})));
  at::Tensor eager = at::mul(tf, at::native::wrapped_scalar_tensor(0.1));
  CHECK(at::equal(out[1].toTensor(), eager));
  CHECK(out[2].toTensor().scalar_type() == at::kLong);
  CHECK(at::equal(out[2].toTensor(), ti - 1));
}

TEST_CASE("enum and device arguments map to c10") {
  Executor ex = prepareOrFail(R"(
input %x: f32[2, 3] user_input
%full: f32[2, 2] = aten.full.default(size=[2, 2], fill_value=-inf, *, device=device(cpu))
%copy: i64[2, 3] = aten._to_copy.default(self=%x, *, dtype=i64)
%clone: f32[2, 3] = aten.clone.default(self=%x, *, memory_format=contiguous_format)
output %full user_output
output %copy user_output
output %clone user_output
)");
  at::Tensor tx = at::randn({2, 3}) * 10;
  auto out = runOrFail(ex, {tx});
  CHECK(at::equal(out[0].toTensor(), at::full({2, 2}, -INFINITY)));
  CHECK(out[1].toTensor().scalar_type() == at::kLong);
  CHECK(at::equal(out[1].toTensor(), tx.to(at::kLong)));
  CHECK(at::equal(out[2].toTensor(), tx));
}

TEST_CASE("Tensor[] arguments and returns") {
  Executor ex = prepareOrFail(R"(
input %x: f32[6, 2] user_input
[%split_0: f32[2, 2], %split_1: f32[2, 2], %split_2: f32[2, 2]] = aten.split.Tensor(self=%x, split_size=2) {name="split"}
%cat: f32[4, 2] = aten.cat.default(tensors=[%split_2, %split_0])
output %cat user_output
)");
  at::Tensor tx = at::randn({6, 2});
  auto out = runOrFail(ex, {tx});
  CHECK(at::equal(out[0].toTensor(), at::cat({tx.slice(0, 4, 6), tx.slice(0, 0, 2)})));
  CHECK(ex.freedAfter(1) == std::vector<std::string>{"split_2", "split_0"});
}

TEST_CASE("index_put takes a Tensor?[] from as_tensors") {
  Executor ex = prepareOrFail(R"(
input %base: f32[5] user_input
input %idx: i64[4] user_input
input %val: f32[4] user_input
%index_put: f32[5] = aten.index_put.default(self=%base, indices=[%idx], values=%val, accumulate=true)
%index: f32[4] = aten.index.Tensor(self=%base, indices=optional_tensors([%idx]))
output %index_put user_output
output %index user_output
)");
  at::Tensor tb = at::zeros({5}), ti = at::tensor({0, 2, 2, 4}, at::kLong), tv = at::ones({4});
  auto out = runOrFail(ex, {tb, ti, tv});
  CHECK(at::equal(out[0].toTensor(), at::tensor({1.f, 0.f, 2.f, 0.f, 1.f})));
  CHECK(at::equal(out[1].toTensor(), at::zeros({4})));
}

TEST_CASE("values are freed after their last use, outputs never") {
  Executor ex = prepareOrFail(R"(
input %x: f32[4] user_input
%relu: f32[4] = aten.relu.default(self=%x)
%neg: f32[4] = aten.neg.default(self=%relu)
%add: f32[4] = aten.add.Tensor(self=%neg, other=%x)
%topk_values: f32[2], %topk_unused_1: i64[2] = aten.topk.default(self=%neg, k=2) {name="topk"}
output %neg user_output
output %topk_values user_output
)");
  CHECK(ex.freedAfter(0).empty());
  CHECK(ex.freedAfter(1) == std::vector<std::string>{"relu"});
  CHECK(ex.freedAfter(2) == std::vector<std::string>{"x"});
  CHECK(ex.freedAfter(3).empty());
  at::Tensor tx = at::tensor({1.f, -2.f, 3.f, 4.f});
  auto out = runOrFail(ex, {tx});
  CHECK(at::equal(out[0].toTensor(), -at::relu(tx)));
  CHECK(at::equal(out[1].toTensor(), at::tensor({0.f, -1.f})));
}

TEST_CASE("preparation errors name the node and the argument") {
  CHECK(prepareError(R"(
input %b: f32[4] user_input
%addmm_3: f32[4] = aten.addmm.default(self=%b, mat1=%b)
output %addmm_3 user_output
)") == "node %addmm_3 (aten.addmm.default): required argument 'mat2' is missing");
  CHECK_THAT(
      prepareError(R"(
input %x: f32[4] user_input
%relu: f32[4] = aten.relu.default(self=%x, inplace=true)
output %relu user_output
)"),
      Catch::StartsWith("node %relu (aten.relu.default): argument 'inplace' is not in the linked schema "
                        "aten::relu(Tensor self) -> Tensor"));
  CHECK(prepareError(R"(
input %x: f32[4] user_input
%pow: f32[4] = aten.pow.Tensor_Scalar(self=%x, exponent="two")
output %pow user_output
)") == "node %pow (aten.pow.Tensor_Scalar): argument 'exponent': as_string cannot pass as Scalar");
  CHECK_THAT(prepareError(R"(
input %x: f32[4] user_input
%frob: f32[4] = aten.frobnicate.default(self=%x)
output %frob user_output
)"),
             Catch::StartsWith("node %frob (aten.frobnicate.default): the linked LibTorch ") &&
                 Catch::EndsWith(" has no operator aten::frobnicate"));
}

TEST_CASE("a kernel error names the node, in one line") {
  Executor ex = prepareOrFail(R"(
input %a: f32[2, 3] user_input
input %b: f32[4, 5] user_input
%mm_3: f32[2, 5] = aten.mm.default(self=%a, mat2=%b)
output %mm_3 user_output
)");
  Expected<std::vector<c10::IValue>> out = ex.run({at::randn({2, 3}), at::randn({4, 5})});
  REQUIRE(!out.hasValue());
  CHECK_THAT(out.status().message(), Catch::StartsWith("node %mm_3 (aten.mm.default): "));
  CHECK(out.status().message().find('\n') == std::string::npos);
}

TEST_CASE("a factory op whose device is left out makes its tensor on the run's device") {
  // The meta device stands in for a GPU: a worker on cuda:1 must get its
  // arange on cuda:1, not on the CPU (None's meaning in the schema).
  constexpr std::string_view kText = R"(
input %x: f32[4] user_input
%arange: i64[4] = aten.arange.default(end=4)
%add: f32[4] = aten.add.Tensor(self=%x, other=%arange)
output %add user_output
)";
  ExecutorOptions options;
  options.device = c10::Device(c10::kMeta);
  Executor ex = prepareOrFail(kText, options);
  auto out = runOrFail(ex, {at::empty({4}, at::TensorOptions().device(c10::kMeta))});
  CHECK(out[0].toTensor().device() == c10::Device(c10::kMeta));
  // On the CPU the default stands.
  Executor cpu = prepareOrFail(kText);
  auto got = runOrFail(cpu, {at::ones({4})});
  CHECK(at::equal(got[0].toTensor(), at::arange(4) + 1));
}
