// Executor units on hand-built graphs: argument slots and defaults, wrapped
// numbers, list arguments and returns, last-use freeing, node-named errors.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>

#include "../TestCatch.h"

#include "TestGraph.h"
#include "runtime/Executor.h"

using namespace spmd;
using namespace spmd::runtime;
using namespace spmd::runtime::test;

namespace {

Executor prepareOrFail(const ir::Graph& g, ExecutorOptions options = {}) {
  Expected<Executor> ex = Executor::prepare(g, std::move(options));
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

}  // namespace

TEST_CASE("addmm fills beta and alpha from the schema defaults") {
  TestGraph t;
  ir::Value* b = t.input("b", ir::ScalarType::Float, {4});
  ir::Value* x = t.input("x", ir::ScalarType::Float, {2, 3});
  ir::Value* w = t.input("w", ir::ScalarType::Float, {3, 4});
  t.output(
      t.node("addmm", "aten.addmm.default", {{"self", tensor(b)}, {"mat1", tensor(x)}, {"mat2", tensor(w)}}));
  Executor ex = prepareOrFail(t.g);
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
  TestGraph t;
  ir::Value* i = t.input("i", ir::ScalarType::Long, {3});
  ir::Value* f = t.input("f", ir::ScalarType::Float, {5});
  t.output(t.node("add", "aten.add.Tensor", {{"self", tensor(i)}, {"other", floating(2.5)}}));
  t.output(t.node("mul", "aten.mul.Tensor", {{"self", tensor(f)}, {"other", floating(0.1)}}));
  t.output(t.node("sub", "aten.sub.Tensor", {{"self", tensor(i)}, {"other", integer(1)}}));
  Executor ex = prepareOrFail(t.g);
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
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {2, 3});
  ir::Argument dtype = ir::Argument::scalarType(ir::ScalarType::Long);
  ir::Argument device = ir::Argument::device({"cpu", -1});
  t.output(t.node("full", "aten.full.default",
                  {{"size", ints({2, 2})}, {"fill_value", floating(-INFINITY)}, {"device", device, true}}));
  t.output(t.node("copy", "aten._to_copy.default", {{"self", tensor(x)}, {"dtype", dtype, true}}));
  ir::Argument format;
  format.kind = ir::Argument::Kind::MemoryFormat;
  format.ints = {1};
  t.output(t.node("clone", "aten.clone.default", {{"self", tensor(x)}, {"memory_format", format, true}}));
  Executor ex = prepareOrFail(t.g);
  at::Tensor tx = at::randn({2, 3}) * 10;
  auto out = runOrFail(ex, {tx});
  CHECK(at::equal(out[0].toTensor(), at::full({2, 2}, -INFINITY)));
  CHECK(out[1].toTensor().scalar_type() == at::kLong);
  CHECK(at::equal(out[1].toTensor(), tx.to(at::kLong)));
  CHECK(at::equal(out[2].toTensor(), tx));
}

TEST_CASE("Tensor[] arguments and returns") {
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {6, 2});
  ir::Value* a = t.value("split_0");
  ir::Value* b = t.value("split_1");
  ir::Value* c = t.value("split_2");
  t.multi("split", "aten.split.Tensor", {{"self", tensor(x)}, {"split_size", integer(2)}},
          {ir::Argument::tensors({a, b, c})});
  t.output(t.node("cat", "aten.cat.default", {{"tensors", ir::Argument::tensors({c, a})}}));
  Executor ex = prepareOrFail(t.g);
  at::Tensor tx = at::randn({6, 2});
  auto out = runOrFail(ex, {tx});
  CHECK(at::equal(out[0].toTensor(), at::cat({tx.slice(0, 4, 6), tx.slice(0, 0, 2)})));
  CHECK(ex.freedAfter(1) == std::vector<std::string>{"split_2", "split_0"});
}

TEST_CASE("index_put takes a Tensor?[] from as_tensors") {
  TestGraph t;
  ir::Value* base = t.input("base", ir::ScalarType::Float, {5});
  ir::Value* idx = t.input("idx", ir::ScalarType::Long, {4});
  ir::Value* val = t.input("val", ir::ScalarType::Float, {4});
  t.output(t.node("index_put", "aten.index_put.default",
                  {{"self", tensor(base)},
                   {"indices", ir::Argument::tensors({idx})},
                   {"values", tensor(val)},
                   {"accumulate", ir::Argument::boolean(true)}}));
  ir::Argument optional;
  optional.kind = ir::Argument::Kind::OptionalTensors;
  optional.values = {idx};
  t.output(t.node("index", "aten.index.Tensor", {{"self", tensor(base)}, {"indices", optional}}));
  Executor ex = prepareOrFail(t.g);
  at::Tensor tb = at::zeros({5}), ti = at::tensor({0, 2, 2, 4}, at::kLong), tv = at::ones({4});
  auto out = runOrFail(ex, {tb, ti, tv});
  CHECK(at::equal(out[0].toTensor(), at::tensor({1.f, 0.f, 2.f, 0.f, 1.f})));
  CHECK(at::equal(out[1].toTensor(), at::zeros({4})));
}

TEST_CASE("values are freed after their last use, outputs never") {
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {4});
  ir::Value* relu = t.node("relu", "aten.relu.default", {{"self", tensor(x)}});
  ir::Value* neg = t.node("neg", "aten.neg.default", {{"self", tensor(relu)}});
  ir::Value* add = t.node("add", "aten.add.Tensor", {{"self", tensor(neg)}, {"other", tensor(x)}});
  (void)add;
  ir::Value* values = t.value("topk_values");
  ir::Value* indices = t.value("topk_unused_1");
  t.multi("topk", "aten.topk.default", {{"self", tensor(neg)}, {"k", integer(2)}},
          {ir::Argument::tensor(values), ir::Argument::tensor(indices)});
  t.output(neg);
  t.output(values);
  Executor ex = prepareOrFail(t.g);
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
  SECTION("a missing required argument") {
    TestGraph t;
    ir::Value* b = t.input("b", ir::ScalarType::Float, {4});
    t.output(t.node("addmm_3", "aten.addmm.default", {{"self", tensor(b)}, {"mat1", tensor(b)}}));
    Expected<Executor> ex = Executor::prepare(t.g);
    REQUIRE(!ex.hasValue());
    CHECK(ex.status().message() == "node %addmm_3 (aten.addmm.default): required argument 'mat2' is missing");
  }
  SECTION("an argument the schema does not have") {
    TestGraph t;
    ir::Value* x = t.input("x", ir::ScalarType::Float, {4});
    t.output(
        t.node("relu", "aten.relu.default", {{"self", tensor(x)}, {"inplace", ir::Argument::boolean(true)}}));
    Expected<Executor> ex = Executor::prepare(t.g);
    REQUIRE(!ex.hasValue());
    CHECK_THAT(
        ex.status().message(),
        Catch::StartsWith("node %relu (aten.relu.default): argument 'inplace' is not in the linked schema "
                          "aten::relu(Tensor self) -> Tensor"));
  }
  SECTION("an argument of the wrong kind") {
    TestGraph t;
    ir::Value* x = t.input("x", ir::ScalarType::Float, {4});
    ir::Argument s;
    s.kind = ir::Argument::Kind::String;
    s.strings = {"two"};
    t.output(t.node("pow", "aten.pow.Tensor_Scalar", {{"self", tensor(x)}, {"exponent", s}}));
    Expected<Executor> ex = Executor::prepare(t.g);
    REQUIRE(!ex.hasValue());
    CHECK(ex.status().message() ==
          "node %pow (aten.pow.Tensor_Scalar): argument 'exponent': as_string cannot pass as Scalar");
  }
  SECTION("an operator nobody has") {
    TestGraph t;
    ir::Value* x = t.input("x", ir::ScalarType::Float, {4});
    t.output(t.node("frob", "aten.frobnicate.default", {{"self", tensor(x)}}));
    Expected<Executor> ex = Executor::prepare(t.g);
    REQUIRE(!ex.hasValue());
    CHECK_THAT(ex.status().message(),
               Catch::StartsWith("node %frob (aten.frobnicate.default): the linked LibTorch ") &&
                   Catch::EndsWith(" has no operator aten::frobnicate"));
  }
}

TEST_CASE("a kernel error names the node, in one line") {
  TestGraph t;
  ir::Value* a = t.input("a", ir::ScalarType::Float, {2, 3});
  ir::Value* b = t.input("b", ir::ScalarType::Float, {4, 5});
  t.output(t.node("mm_3", "aten.mm.default", {{"self", tensor(a)}, {"mat2", tensor(b)}}));
  Executor ex = prepareOrFail(t.g);
  Expected<std::vector<c10::IValue>> out = ex.run({at::randn({2, 3}), at::randn({4, 5})});
  REQUIRE(!out.hasValue());
  CHECK_THAT(out.status().message(), Catch::StartsWith("node %mm_3 (aten.mm.default): "));
  CHECK(out.status().message().find('\n') == std::string::npos);
}

TEST_CASE("a factory op whose device is left out makes its tensor on the run's device") {
  // The meta device stands in for a GPU: a worker on cuda:1 must get its
  // arange on cuda:1, not on the CPU (None's meaning in the schema).
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {4});
  ir::Value* r = t.node("arange", "aten.arange.default", {{"end", integer(4)}});
  t.output(t.node("add", "aten.add.Tensor", {{"self", tensor(x)}, {"other", tensor(r)}}));
  ExecutorOptions options;
  options.device = c10::Device(c10::kMeta);
  Executor ex = prepareOrFail(t.g, options);
  auto out = runOrFail(ex, {at::empty({4}, at::TensorOptions().device(c10::kMeta))});
  CHECK(out[0].toTensor().device() == c10::Device(c10::kMeta));
  // On the CPU the default stands.
  Executor cpu = prepareOrFail(t.g);
  auto got = runOrFail(cpu, {at::ones({4})});
  CHECK(at::equal(got[0].toTensor(), at::arange(4) + 1));
}
