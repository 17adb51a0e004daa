// Helpers of the pipeline end-to-end tests (PipelineTest.cpp,
// PipelineMatrixTest.cpp): compile a model under a pipeline schema, run
// its ranks on threads, compare several steps with one worker's.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../TestUtil.h"
#include "E2eUtil.h"
#include "passes/Pipeline.h"
#include "program/Reader.h"
#include "program/Writer.h"
#include "runtime/TensorIO.h"
#include "runtime/Worker.h"
#include "schema/PlacementSchema.h"

namespace spmd::testing::pipeline_e2e {

inline Expected<passes::CompileResult> compileWith(const std::string& model, const std::string& schemaJson,
                                                   const passes::OptimizerOptions& optimizer = {}) {
  auto archive = pt2::readArchive(modelDir(model) + "/model.pt2");
  if (!archive) return archive.status();
  SPMD_ASSIGN_OR_RETURN(schema::PlacementSchema s, schema::parsePlacementSchema(schemaJson, "pp.json"));
  passes::CompileOptions opts;
  opts.optimizer = optimizer;
  return passes::compile(*archive, s, opts);
}

// Compiles `model` under a pipeline schema into `path` and reads it back.
inline program::LoadedProgram compileToProgram(const std::string& model, const std::string& schemaJson,
                                               const std::string& path,
                                               const passes::OptimizerOptions& optimizer = {}) {
  auto r = compileWith(model, schemaJson, optimizer);
  if (!r) FAIL(r.status().message());
  REQUIRE(r->program.pipeline.has_value());
  auto archive = pt2::readArchive(modelDir(model) + "/model.pt2");
  REQUIRE(archive.hasValue());
  program::ArchiveWeightSource archiveWeights(*archive);
  passes::OptimizerWeightSource weights(archiveWeights, r->program);
  Status st = program::writeProgram(path, r->program, weights);
  if (!st.isOk()) FAIL(st.message());
  auto program = program::readProgram(path);
  REQUIRE(program.hasValue());
  REQUIRE(program->program().pipeline == r->program.pipeline);
  return std::move(*program);
}

inline std::vector<runtime::RankResult> runRanks(const program::LoadedProgram& program,
                                                 const std::string& model, const runtime::RankOptions& opts) {
  auto in = runtime::readTensors(modelDir(model) + "/inputs.safetensors");
  REQUIRE(in.hasValue());
  auto out = runtime::runThreadedRanks(program, *in, opts);
  if (!out) FAIL(out.status().message());
  return std::move(*out);
}

inline runtime::RankResult compileAndRun(const std::string& model, const std::string& schemaJson,
                                         int steps = 1, const passes::OptimizerOptions& optimizer = {}) {
  TempDir dir;
  program::LoadedProgram program = compileToProgram(model, schemaJson, dir.file("p.spmd"), optimizer);
  runtime::RankOptions opts;
  opts.steps = steps;
  return std::move(runRanks(program, model, opts)[0]);
}

inline std::string schemaText(const std::string& mesh, const std::string& axes, const std::string& pipeline,
                              const std::string& rest = "") {
  return R"({"version": 1, "mesh": {"shape": )" + mesh + R"(, "axes": )" + axes + "}, " + rest +
         R"("pipeline": )" + pipeline + "}";
}

inline const char* kLlamaTp =
    R"js("params": [{"match": "*layers.*.w[qkv13].weight", "placements": {"tp": "S(0)"}},
                    {"match": "*layers.*.w[o2].weight", "placements": {"tp": "S(1)"}}], )js";

// `steps` steps of `model` with `optimizer` under the pipeline schema
// `schemaJson` and on one worker without a pipeline: (piped, one worker).
inline std::pair<runtime::RankResult, runtime::RankResult> pipedAndSingle(
    const std::string& model, const std::string& schemaJson, int steps,
    const passes::OptimizerOptions& optimizer) {
  runtime::RankResult piped = compileAndRun(model, schemaJson, steps, optimizer);
  REQUIRE(piped.losses.size() == static_cast<size_t>(steps));
  // One worker's run, once per model, optimizer and step count.
  static std::map<std::string, runtime::RankResult> singles;
  std::string key =
      model + " " + optimizer.kind + " " + std::to_string(optimizer.lr) + " " + std::to_string(steps);
  if (!singles.count(key)) {
    TempDir dir;
    spmd::testing::compileTo(model, "dp", {1}, dir.file("one.spmd"), optimizer);
    auto one = program::readProgram(dir.file("one.spmd"));
    REQUIRE(one.hasValue());
    auto in = runtime::readTensors(modelDir(model) + "/inputs.safetensors");
    REQUIRE(in.hasValue());
    runtime::RankOptions opts;
    opts.steps = steps;
    auto single = runtime::runThreaded(*one, *in, opts);
    REQUIRE(single.hasValue());
    REQUIRE(single->losses.size() == static_cast<size_t>(steps));
    singles.emplace(key, std::move(*single));
  }
  return {std::move(piped), singles.at(key)};
}

// `steps` AdamW steps of `model` under the pipeline schema `schemaJson`
// give one worker's losses and weights (1e-5; `paramTol` for the weights),
// and the loss goes down.
inline void checkAdamwSteps(const std::string& model, const std::string& schemaJson, int steps,
                            double paramTol = 1e-5) {
  INFO(model << " " << schemaJson);
  auto [piped, single] = pipedAndSingle(model, schemaJson, steps, spmd::testing::adamw());
  for (size_t i = 0; i < piped.losses.size(); ++i) {
    INFO("step " << i);
    CHECK(std::abs(piped.losses[i] - single.losses[i]) <= 1e-5 * std::abs(single.losses[i]));
  }
  CHECK(piped.losses.back() < piped.losses.front());
  spmd::testing::checkOutputs(piped.outputs, single.outputs, paramTol);
}

/// llama_pipe_train: 8 layers, batch 8 (testdata/pipeline/export.py).
inline const char* kPipeModel = "../pipeline/llama_pipe_train";

}  // namespace spmd::testing::pipeline_e2e
