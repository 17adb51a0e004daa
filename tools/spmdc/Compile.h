// spmdc compile's flags and their driver (the flags explain shares too).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "passes/Pipeline.h"
#include "pt2/Archive.h"
#include "support/Status.h"

namespace spmdc {

/// Flags of `spmdc compile` (and of explain's .pt2 inputs).
struct CompileArgs {
  std::string model, schema, output, report, mesh;
  spmd::passes::OptimizerOptions optimizer;
  std::vector<double> betas;
  /// --mixed-precision / --reduce-dtype (empty: not given).
  std::string mixedPrecision;
  std::string reduceDtype;
  std::vector<std::string> printAfter;
  bool replicateUnknown = false, noAsync = false, quiet = false, embedWeights = false;
  double bucketMb = 25;
  /// --device-profile, --axes, --memory-budget, --pin, --write-schema.
  std::string deviceProfile, axes, memoryBudget, pin, writeSchema;
  /// --recompute-collectives: "save" or "reissue" (empty: the default rule).
  std::string recomputeCollectives;
};

/// Compiles a.model under a.schema (a file or preset) with the options of `a`.
spmd::Expected<spmd::passes::CompileResult> compileModel(const CompileArgs& a,
                                                         std::optional<spmd::pt2::Archive>& archive);

/// `spmdc compile`: the program, --report, --write-schema, the summary.
/// Returns the exit status.
int runCompile(const CompileArgs& a);

/// `spmdc opt`: a .pt2 or IR text model printed as IR text, or, with a
/// schema, compiled in memory and printed after the --print-after passes
/// (the final program without any). Returns the exit status.
int runOpt(const CompileArgs& a, bool debugInfo);

/// The options compile and explain share (all but the model, -o, --schema).
void addCompileOptions(CLI::App* cmd, CompileArgs& c);

/// The options only compile has: --device-profile, --axes, --memory-budget,
/// --pin, --write-schema (auto-sharding), --recompute-collectives and
/// --embed-weights.
void addAutoOptions(CLI::App* cmd, CompileArgs& c);

/// The mesh of --mesh ("2x4") and --axes ("dp,tp"; empty: default names).
/// Errors name the flags.
spmd::Expected<spmd::sharding::Mesh> meshFromFlags(const std::string& meshFlag, const std::string& axesFlag);

/// Prints "error: <message>" and returns the bad-input exit status.
int fail(const spmd::Status& s);

}  // namespace spmdc
