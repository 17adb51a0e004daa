// Compiler benchmarks: reading a .pt2 (JSON parse and IR build separately,
// simdjson against nlohmann for the parser choice) and whole compiles.
//
//   build/bench/bench_compiler --benchmark_filter=Read
#include <benchmark/benchmark.h>

#include <simdjson.h>
#include <chrono>

#include <nlohmann/json.hpp>

#include "autoshard/QuickModel.h"
#include "io/Zip.h"
#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "program/WeightSource.h"
#include "program/Writer.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

namespace {

using namespace spmd;

std::string modelPath(const std::string& m) {
  return std::string(SPMD_SOURCE_DIR) + "/testdata/pt2/" + m + "/model.pt2";
}

std::string modelJson(const std::string& m) {
  auto zip = io::ZipArchive::open(modelPath(m));
  return *(*zip)->readString("model/models/model.json");
}

void BM_ParseJsonSimdjson(benchmark::State& state) {
  std::string text = modelJson("llama_deep_train");
  simdjson::padded_string padded(text);
  simdjson::dom::parser parser;
  for (auto _ : state) {
    simdjson::dom::element root;
    if (parser.parse(padded).get(root) != simdjson::SUCCESS) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(root);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ParseJsonSimdjson)->Unit(benchmark::kMillisecond);

void BM_ParseJsonNlohmann(benchmark::State& state) {
  std::string text = modelJson("llama_deep_train");
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ParseJsonNlohmann)->Unit(benchmark::kMillisecond);

// Whole read into IR (metadata only), with the reader's own phase timings.
void BM_ReadArchive(benchmark::State& state) {
  double parse = 0, build = 0, open = 0;
  for (auto _ : state) {
    auto a = pt2::readArchive(modelPath("llama_deep_train"), {.loadWeights = false});
    if (!a) state.SkipWithError(a.status().message().c_str());
    parse += a->stats.parseMs;
    build += a->stats.buildMs;
    open += a->stats.openMs;
  }
  double n = static_cast<double>(state.iterations());
  state.counters["open_ms"] = open / n;
  state.counters["parse_ms"] = parse / n;
  state.counters["build_ms"] = build / n;
}
BENCHMARK(BM_ReadArchive)->Unit(benchmark::kMillisecond);

// spmdc compile end to end: read (with weights), compile, write the program.
void compileBench(benchmark::State& state, const std::string& model, const std::string& schemaArg,
                  std::vector<int64_t> mesh) {
  auto schema = schema::loadSchemaOrPreset(schemaArg);
  if (!schema) return state.SkipWithError(schema.status().message().c_str());
  int64_t nodes = 0;
  for (auto _ : state) {
    auto archive = pt2::readArchive(modelPath(model));
    passes::CompileOptions opts;
    opts.mesh = mesh;
    auto r = passes::compile(*archive, *schema, opts);
    if (!r) return state.SkipWithError(r.status().message().c_str());
    program::ArchiveWeightSource weights(*archive);
    Status st = program::writeProgram("/tmp/spmdc-bench.spmd", r->program, weights);
    if (!st.isOk()) return state.SkipWithError(st.message().c_str());
    nodes = static_cast<int64_t>(archive->program.graph.nodes().size());
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["us_per_node"] =
      benchmark::Counter(static_cast<double>(nodes) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

std::string example(const std::string& e) { return std::string(SPMD_SOURCE_DIR) + "/schemas/examples/" + e; }

BENCHMARK_CAPTURE(compileBench, llama_train_fsdp_2, "llama_train", "fsdp", {2})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(compileBench, llama_deep_train_fsdp_2, "llama_deep_train", "fsdp", {2})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(compileBench, llama_train_megatron_4, "llama_train", example("llama_tp.json"), {4})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(compileBench, llama_deep_train_megatron_4, "llama_deep_train", example("llama_tp.json"),
                  {4})
    ->Unit(benchmark::kMillisecond);

// One layout of llama_deep_train + AdamW on mesh 8 priced two ways: by
// auto-sharding's quick model, and by compiling and modeling it (what the
// search did before; its finalists still are). us_per_node on the quick one.
void priceBench(benchmark::State& state, bool quick, const std::string& layout) {
  auto schema = schema::loadSchemaOrPreset(layout);
  if (!schema) return state.SkipWithError(schema.status().message().c_str());
  autoshard::AutoOptions o;
  o.mesh = *sharding::Mesh::create({8});
  o.compile.optimizer.kind = "adamw";
  auto model = autoshard::QuickModel::create(modelPath("llama_deep_train"), o);
  if (!model) return state.SkipWithError(model.status().message().c_str());
  auto archive = pt2::readArchive(modelPath("llama_deep_train"), {.loadWeights = false});
  if (!archive) return state.SkipWithError(archive.status().message().c_str());
  double step = 0;
  for (auto _ : state) {
    if (quick) {
      auto c = (*model)->evaluate(*schema);
      if (!c) return state.SkipWithError(c.status().message().c_str());
      step = c->stepSeconds();
    } else {
      state.PauseTiming();
      auto copy = pt2::readArchive(modelPath("llama_deep_train"), {.loadWeights = false});
      state.ResumeTiming();
      passes::CompileOptions opts;
      opts.mesh = std::vector<int64_t>{8};
      opts.optimizer.kind = "adamw";
      auto r = passes::compile(*copy, *schema, opts);
      if (!r) return state.SkipWithError(r.status().message().c_str());
      step = passes::modelLayout(r->program, sharding::defaultDeviceProfile()).stepSeconds();
    }
  }
  state.counters["modeled_step_ms"] = step * 1e3;
}
BENCHMARK_CAPTURE(priceBench, quick_fsdp, true, "fsdp")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(priceBench, compiled_fsdp, false, "fsdp")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(priceBench, quick_megatron, true, example("llama_tp.json"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(priceBench, compiled_megatron, false, example("llama_tp.json"))
    ->Unit(benchmark::kMillisecond);

// The search's access pattern: from fsdp, every option of every group in
// turn (one group changed at a time), priced by one quick model; the time
// is per layout.
void quickWalkBench(benchmark::State& state, std::vector<int64_t> shape) {
  autoshard::AutoOptions o;
  o.mesh = *sharding::Mesh::create(shape);
  o.compile.optimizer.kind = "adamw";
  auto model = autoshard::QuickModel::create(modelPath("llama_deep_train"), o);
  if (!model) return state.SkipWithError(model.status().message().c_str());
  auto archive = pt2::readArchive(modelPath("llama_deep_train"), {.loadWeights = false});
  if (!archive) return state.SkipWithError(archive.status().message().c_str());
  auto groups = autoshard::buildGroups(archive->program, o.mesh, {}, true);
  std::vector<schema::PlacementSchema> walk;
  std::vector<size_t> c(groups.size(), 0);
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t opt = 0; opt < groups[g].options.size(); ++opt) {
      c[g] = opt;
      walk.push_back(autoshard::schemaFor(groups, c, o.mesh, nullptr));
    }
  int64_t priced = 0;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state)
    for (const auto& s : walk) {
      auto r = (*model)->evaluate(s);
      benchmark::DoNotOptimize(r);
      ++priced;
    }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  state.counters["layouts"] = static_cast<double>(walk.size());
  state.counters["ms_per_layout"] = ms / static_cast<double>(std::max<int64_t>(priced, 1));
}
BENCHMARK_CAPTURE(quickWalkBench, mesh_8, std::vector<int64_t>{8})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(quickWalkBench, mesh_2x4, std::vector<int64_t>{2, 4})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
