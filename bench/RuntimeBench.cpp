// Runtime benchmarks: the executor's own cost per op (a chain of adds on
// 1-element tensors, where kernels cost next to nothing, against the same
// at::add calls written directly), and a whole llama forward on one device.
//
//   build/bench/bench_runtime
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include "pt2/Archive.h"
#include "runtime/Executor.h"
#include "runtime/Runner.h"
#include "runtime/TensorIO.h"

namespace {

using namespace spmd;

constexpr int kOps = 2000;

ir::Graph addChain() {
  ir::Graph g;
  auto mk = [&](const std::string& name) {
    ir::Value* v = *g.addValue(name, ir::ValueKind::Tensor);
    v->mutableType().dtype = ir::ScalarType::Float;
    v->mutableType().sizes = {ir::Dim(1)};
    return v;
  };
  ir::Value* x = mk("x");
  ir::Value* y = mk("y");
  g.addInput(x);
  g.addInput(y);
  ir::Value* cur = x;
  for (int i = 0; i < kOps; ++i) {
    ir::Value* out = mk("add_" + std::to_string(i));
    (void)g.addNode(out->name(), "aten.add.Tensor",
                    {{"self", ir::Argument::tensor(cur), false}, {"other", ir::Argument::tensor(y), false}},
                    {ir::Argument::tensor(out)});
    cur = out;
  }
  g.addOutput(ir::Argument::tensor(cur));
  return g;
}

void BM_ExecutorAddChain(benchmark::State& state) {
  ir::Graph g = addChain();
  auto ex = runtime::Executor::prepare(g);
  if (!ex) return state.SkipWithError(ex.status().message().c_str());
  at::Tensor x = at::ones({1}), y = at::ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(ex->run({x, y}));
  state.counters["ns_per_op"] = benchmark::Counter(static_cast<double>(kOps) * state.iterations(),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ExecutorAddChain)->Unit(benchmark::kMicrosecond);

void BM_DirectAddChain(benchmark::State& state) {
  at::Tensor x = at::ones({1}), y = at::ones({1});
  for (auto _ : state) {
    c10::InferenceMode guard;
    at::Tensor c = x;
    for (int i = 0; i < kOps; ++i) c = at::add(c, y);
    benchmark::DoNotOptimize(c);
  }
  state.counters["ns_per_op"] = benchmark::Counter(static_cast<double>(kOps) * state.iterations(),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DirectAddChain)->Unit(benchmark::kMicrosecond);

void BM_LlamaForward(benchmark::State& state) {
  std::string dir = std::string(SPMD_SOURCE_DIR) + "/testdata/pt2/llama/";
  auto archive = pt2::readArchive(dir + "model.pt2");
  auto runner = runtime::ProgramRunner::create(*archive);
  auto inputs = runtime::readTensors(dir + "inputs.safetensors");
  auto bound = runner->bindInputs(*inputs);
  if (!bound) return state.SkipWithError(bound.status().message().c_str());
  for (auto _ : state) benchmark::DoNotOptimize(runner->execute(*bound));
  state.counters["nodes"] = static_cast<double>(archive->program.graph.nodes().size());
}
BENCHMARK(BM_LlamaForward)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
