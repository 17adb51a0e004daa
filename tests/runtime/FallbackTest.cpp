// Fallbacks for ops the linked LibTorch lacks, checked against what the
// real ops compute (on LibTorch 2.x the dispatcher's kernels run instead;
// the numbers must be the same either way).
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include "TestGraph.h"
#include "runtime/Executor.h"

using namespace spmd;
using namespace spmd::runtime;
using namespace spmd::runtime::test;

namespace {

std::vector<c10::IValue> prepareAndRun(const ir::Graph& g, std::vector<c10::IValue> inputs) {
  Expected<Executor> ex = Executor::prepare(g);
  INFO(ex.status().message());
  REQUIRE(ex.hasValue());
  Expected<std::vector<c10::IValue>> out = ex->run(std::move(inputs));
  INFO(out.status().message());
  REQUIRE(out.hasValue());
  return std::move(out).value();
}

}  // namespace

TEST_CASE("squeeze.dims squeezes only the listed dims of size 1") {
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {1, 3, 1, 1});
  t.output(t.node("squeeze", "aten.squeeze.dims", {{"self", tensor(x)}, {"dim", ints({0, 1, -1})}}));
  at::Tensor tx = at::randn({1, 3, 1, 1});
  auto out = prepareAndRun(t.g, {tx});
  CHECK(out[0].toTensor().sizes() == at::IntArrayRef({3, 1}));
  CHECK(at::equal(out[0].toTensor(), tx.view({3, 1})));
}

TEST_CASE("empty_permuted lays memory out in the physical order") {
  TestGraph t;
  ir::Argument dtype = ir::Argument::scalarType(ir::ScalarType::Float);
  t.output(t.node("empty", "aten.empty_permuted.default",
                  {{"size", ints({2, 3, 4})},
                   {"physical_layout", ints({2, 0, 1})},
                   {"dtype", dtype, true},
                   {"device", ir::Argument::device({"cpu", -1}), true}}));
  auto out = prepareAndRun(t.g, {});
  const at::Tensor& e = out[0].toTensor();
  CHECK(e.sizes() == at::IntArrayRef({2, 3, 4}));
  CHECK(e.strides() == at::IntArrayRef({3, 1, 6}));
  CHECK(e.scalar_type() == at::kFloat);
}

TEST_CASE("batch norm without training equals native_batch_norm in eval mode") {
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {4, 3, 5, 5});
  ir::Value* w = t.input("w", ir::ScalarType::Float, {3});
  ir::Value* b = t.input("b", ir::ScalarType::Float, {3});
  ir::Value* rm = t.input("rm", ir::ScalarType::Float, {3});
  ir::Value* rv = t.input("rv", ir::ScalarType::Float, {3});
  ir::Value* y = t.value("getitem");
  t.multi("bn", "aten._native_batch_norm_legit_no_training.default",
          {{"input", tensor(x)},
           {"weight", tensor(w)},
           {"bias", tensor(b)},
           {"running_mean", tensor(rm)},
           {"running_var", tensor(rv)},
           {"momentum", floating(0.1)},
           {"eps", floating(1e-5)}},
          {ir::Argument::tensor(y), ir::Argument::tensor(t.value("bn_unused_1")),
           ir::Argument::tensor(t.value("bn_unused_2"))});
  t.output(y);
  at::Tensor tx = at::randn({4, 3, 5, 5}), tw = at::randn({3}), tb = at::randn({3});
  at::Tensor trm = at::randn({3}), trv = at::rand({3}) + 0.5;
  auto out = prepareAndRun(t.g, {tx, tw, tb, trm, trv});
  CHECK(at::equal(out[0].toTensor(), at::batch_norm(tx, tw, tb, trm, trv, false, 0.1, 1e-5, false)));
}

TEST_CASE("functional batch norm returns updated running stats and leaves its inputs alone") {
  TestGraph t;
  ir::Value* x = t.input("x", ir::ScalarType::Float, {4, 3, 5, 5});
  ir::Value* w = t.input("w", ir::ScalarType::Float, {3});
  ir::Value* b = t.input("b", ir::ScalarType::Float, {3});
  ir::Value* rm = t.input("rm", ir::ScalarType::Float, {3});
  ir::Value* rv = t.input("rv", ir::ScalarType::Float, {3});
  std::vector<ir::Value*> outs;
  for (int i = 0; i < 5; ++i) outs.push_back(t.value("getitem_" + std::to_string(i)));
  std::vector<ir::Argument> outArgs;
  for (ir::Value* v : outs) outArgs.push_back(ir::Argument::tensor(v));
  t.multi("bn", "aten._native_batch_norm_legit_functional.default",
          {{"input", tensor(x)},
           {"weight", tensor(w)},
           {"bias", tensor(b)},
           {"running_mean", tensor(rm)},
           {"running_var", tensor(rv)},
           {"training", ir::Argument::boolean(true)},
           {"momentum", floating(0.1)},
           {"eps", floating(1e-5)}},
          outArgs);
  for (ir::Value* v : outs) t.output(v);
  at::Tensor tx = at::randn({4, 3, 5, 5}), tw = at::randn({3}), tb = at::randn({3});
  at::Tensor trm = at::randn({3}), trv = at::rand({3}) + 0.5;
  at::Tensor rm0 = trm.clone(), rv0 = trv.clone();
  auto out = prepareAndRun(t.g, {tx, tw, tb, trm, trv});
  CHECK(at::equal(trm, rm0));
  CHECK(at::equal(trv, rv0));
  at::Tensor mean = tx.mean({0, 2, 3});
  at::Tensor var = tx.var({0, 2, 3}, /*unbiased=*/false);
  at::Tensor unbiased = tx.var({0, 2, 3}, /*unbiased=*/true);
  at::Tensor expect =
      (tx - mean.view({1, 3, 1, 1})) / at::sqrt(var.view({1, 3, 1, 1}) + 1e-5) * tw.view({1, 3, 1, 1}) +
      tb.view({1, 3, 1, 1});
  CHECK(at::allclose(out[0].toTensor(), expect, 1e-5, 1e-5));
  CHECK(at::allclose(out[1].toTensor(), mean, 1e-6, 1e-6));
  CHECK(at::allclose(out[2].toTensor(), 1 / at::sqrt(var + 1e-5), 1e-5, 1e-5));
  CHECK(at::allclose(out[3].toTensor(), 0.9 * rm0 + 0.1 * mean, 1e-6, 1e-6));
  CHECK(at::allclose(out[4].toTensor(), 0.9 * rv0 + 0.1 * unbiased, 1e-6, 1e-6));
}

TEST_CASE("_assert_tensor_metadata checks dtype and sizes, whatever the linked schema takes") {
  auto graph = [](ir::ScalarType asserted) {
    auto t = std::make_unique<TestGraph>();
    ir::Value* x = t->input("x", ir::ScalarType::Float, {2, 3});
    (void)*t->g.addNode("assert", "aten._assert_tensor_metadata.default",
                        {{"a", tensor(x)},
                         {"size", ints({2, 3})},
                         {"dtype", ir::Argument::scalarType(asserted), true},
                         {"device", ir::Argument::device({"cpu", -1}), true},
                         {"layout",
                          [] {
                            ir::Argument a;
                            a.kind = ir::Argument::Kind::Layout;
                            a.ints = {7};
                            return a;
                          }(),
                          true}},
                        {});
    t->output(t->node("relu", "aten.relu.default", {{"self", tensor(x)}}));
    return t;
  };
  auto ok = graph(ir::ScalarType::Float);
  auto out = prepareAndRun(ok->g, {at::randn({2, 3})});
  CHECK(out.size() == 1);
  auto bad = graph(ir::ScalarType::Long);
  Expected<Executor> ex = Executor::prepare(bad->g);
  REQUIRE(ex.hasValue());
  Expected<std::vector<c10::IValue>> failed = ex->run({at::randn({2, 3})});
  REQUIRE(!failed.hasValue());
  CHECK_THAT(failed.status().message(),
             Catch::StartsWith("node %assert (aten._assert_tensor_metadata.default): "));
}
