// Executor overhead per op, measured (hidden: run with
// `runtime_executor_test [bench]`). On 1-element tensors the kernels cost
// next to nothing, so executor time minus direct-call time is the price of
// the executor's own bookkeeping: slot pushes, the boxed call, storing
// returns, last-use frees.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include "../TestCatch.h"

#include "TestGraph.h"
#include "pt2/Archive.h"
#include "runtime/Executor.h"
#include "runtime/Runner.h"

using namespace spmd;
using namespace spmd::runtime;
using namespace spmd::runtime::test;

namespace {

using Clock = std::chrono::steady_clock;

/// Median over `repeats` of the time one call of `f` takes, in nanoseconds.
template <typename F>
double medianNs(int repeats, F&& f) {
  std::vector<double> ns;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    f();
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

}  // namespace

TEST_CASE("executor overhead per op on a chain of tiny adds", "[.][bench]") {
  constexpr int kOps = 2000;
  std::string text = "input %x: f32[1] user_input\ninput %y: f32[1] user_input\n";
  std::string cur = "x";
  for (int i = 0; i < kOps; ++i) {
    std::string add = "add_" + std::to_string(i);
    text += "%" + add + ": f32[1] = aten.add.Tensor(self=%" + cur + ", other=%y)\n";
    cur = add;
  }
  text += "output %" + cur + " user_output\n";
  ir::ExportedProgram p = programFromText(text);
  Expected<Executor> ex = Executor::prepare(p.graph);
  REQUIRE(ex.hasValue());
  at::Tensor tx = at::ones({1}), ty = at::ones({1});

  const double exec = medianNs(31, [&] { REQUIRE(ex->run({tx, ty}).hasValue()); });
  const double direct = medianNs(31, [&] {
    c10::InferenceMode guard;
    at::Tensor c = tx;
    for (int i = 0; i < kOps; ++i) c = at::add(c, ty);
  });
  auto op = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
  REQUIRE(op.has_value());
  const double boxed = medianNs(31, [&] {
    c10::InferenceMode guard;
    torch::jit::Stack stack;
    c10::IValue c = tx;
    for (int i = 0; i < kOps; ++i) {
      stack.push_back(std::move(c));
      stack.emplace_back(ty);
      stack.emplace_back(1);
      op->callBoxed(stack);
      c = std::move(stack[0]);
      stack.clear();
    }
  });
  std::cout << "per op: executor " << exec / kOps << " ns, direct at::add " << direct / kOps
            << " ns, hand-boxed callBoxed " << boxed / kOps << " ns; executor overhead over direct "
            << (exec - direct) / kOps << " ns/op\n";
  CHECK(exec > 0);
}

TEST_CASE("executor time per node on llama", "[.][bench]") {
  Expected<pt2::Archive> archive = pt2::readArchive(SPMD_TESTDATA_DIR "/pt2/llama/model.pt2");
  REQUIRE(archive.hasValue());
  Expected<ProgramRunner> runner = ProgramRunner::create(*archive);
  REQUIRE(runner.hasValue());
  Expected<std::vector<c10::IValue>> bound = runner->bindInputs({{"input.0", at::zeros({2, 16}, at::kLong)}});
  REQUIRE(bound.hasValue());
  Executor& ex = runner->executor();
  const double run = medianNs(101, [&] { REQUIRE(ex.run(*bound).hasValue()); });
  std::cout << "llama: " << ex.numSteps() << " nodes, " << run / 1e3 << " us per run, " << run / ex.numSteps()
            << " ns per node\n";
  CHECK(run > 0);
}
