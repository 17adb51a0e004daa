// Helpers shared by the files that build explain's page data (not installed).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "explain/Explain.h"
#include "ir/Graph.h"
#include "program/Program.h"

namespace spmd::explain::detail {

using Json = nlohmann::ordered_json;

/// Local bytes of a tensor value (symbolic sizes at their hint); 0 otherwise.
int64_t valueBytes(const ir::Value& v);

/// Local bytes of a weight entry on rank 0's shard (the graph's shape).
int64_t weightBytes(const program::WeightEntry& w);

/// The module each node belongs to and the module tree of a program.
struct ModuleMap {
  /// Module paths sorted ("" is the root, always first).
  std::vector<std::string> paths;
  /// Module type per path ("torch.nn.modules.linear.Linear"), empty when unknown.
  std::vector<std::string> types;
  /// Index into `paths` per graph node.
  std::vector<int> nodeModule;
  /// True when some node carried an nn_module_stack (else modules are
  /// inferred from the weights each op reads).
  bool fromStack = false;
  /// Index of `path` (or of its nearest ancestor present).
  int indexOf(const std::string& path) const;
};

/// The module of a weight FQN: "layers.0.wq.weight" -> "layers.0.wq";
/// optimizer states ("optim.<param>.exp_avg") belong to their parameter's.
std::string weightModule(const std::string& fqn);

/// Builds the module tree: every prefix of every weight FQN and every
/// nn_module_stack path, and assigns each node a module.
ModuleMap buildModules(const program::Program& p);

/// The "memory" object: per-rank bytes by category over program order.
Json memoryData(const program::Program& p, const ModuleMap& modules);

/// The "diff" object comparing two programs' data (programData output).
Json compareData(const Json& a, const Json& b);

/// The "measured" object: {"files": [...], "ranks": [{"rank", "peak_bytes",
/// "state_bytes", "rss_growth_bytes", "step_ms", "bytes_sent"}]}.
Json measuredData(const Profile& profile);

/// One program's page data.
Json programData(const program::Program& p, const std::string& label);

}  // namespace spmd::explain::detail
