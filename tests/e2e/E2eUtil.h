// Helpers of the end-to-end tests: compile a test model with a schema,
// and compare outputs with PyTorch's expected tensors.
#pragma once

#include <ATen/ATen.h>
#include "../TestCatch.h"

#include <filesystem>
#include <string>

#include "passes/Pipeline.h"
#include "program/Reader.h"
#include "program/WeightSource.h"
#include "program/Writer.h"
#include "pt2/Archive.h"
#include "runtime/TensorIO.h"
#include "schema/PlacementSchema.h"

namespace spmd::testing {

inline std::string modelDir(const std::string& m) { return std::string(SPMD_TESTDATA_DIR) + "/pt2/" + m; }

/// AdamW at lr 1e-2 (and `weightDecay`, decoupled), the tests' optimizer.
inline passes::OptimizerOptions adamw(double weightDecay = 1e-2) {
  passes::OptimizerOptions o;
  o.kind = "adamw";
  o.lr = 1e-2;
  o.weightDecay = weightDecay;
  return o;
}

/// Compiles model `m` under the parsed schema `s` with `opts` into `out`.
inline void compileSchemaTo(const std::string& m, const schema::PlacementSchema& s,
                            const passes::CompileOptions& opts, const std::string& out) {
  auto archive = pt2::readArchive(modelDir(m) + "/model.pt2");
  REQUIRE(archive.hasValue());
  auto r = passes::compile(*archive, s, opts);
  if (!r) FAIL(r.status().message());
  program::ArchiveWeightSource archiveWeights(*archive);
  passes::OptimizerWeightSource weights(archiveWeights, r->program);
  Status st = program::writeProgram(out, r->program, weights);
  if (!st.isOk()) FAIL(st.message());
}

/// Compiles model `m` under `schema` (a preset name or a path relative to
/// the source tree) on `mesh` into `out`.
inline void compileTo(const std::string& m, std::string schema, std::vector<int64_t> mesh,
                      const std::string& out, const passes::OptimizerOptions& optimizer = {}) {
  if (std::filesystem::exists(std::string(SPMD_SOURCE_DIR) + "/" + schema))
    schema = std::string(SPMD_SOURCE_DIR) + "/" + schema;
  auto s = schema::loadSchemaOrPreset(schema);
  REQUIRE(s.hasValue());
  passes::CompileOptions opts;
  opts.mesh = mesh;
  opts.optimizer = optimizer;
  compileSchemaTo(m, *s, opts, out);
}

/// Relative error ||got - exp|| / ||exp||, in double.
inline double relativeError(const at::Tensor& got, const at::Tensor& exp) {
  at::Tensor g = got.to(at::kDouble), e = exp.to(at::kDouble);
  double norm = e.norm().item<double>();
  return (g - e).norm().item<double>() / std::max(norm, 1e-30);
}

/// Checks every tensor of `expected` against `got`: relative error <= rtol,
/// except tensors whose entries are all <= 1e-6 (gradients that are zero up
/// to rounding, e.g. conv biases before batch norm), which must be <= 1e-5.
inline void checkOutputs(const runtime::TensorMap& got, const runtime::TensorMap& expected, double rtol) {
  for (const auto& [name, exp] : expected) {
    INFO("output " << name);
    auto it = got.find(name);
    REQUIRE(it != got.end());
    REQUIRE(it->second.sizes() == exp.sizes());
    if (exp.abs().max().item<double>() <= 1e-6) {
      CHECK(it->second.abs().max().item<double>() <= 1e-5);
      continue;
    }
    double rel = relativeError(it->second, exp);
    INFO("relative error " << rel);
    CHECK(rel <= rtol);
  }
}

}  // namespace spmd::testing
