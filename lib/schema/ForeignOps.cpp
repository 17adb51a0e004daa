// Refusing ops from outside LibTorch at compile time (see ForeignOps.h).
#include "schema/ForeignOps.h"

#include <algorithm>
#include <array>
#include <string>

#include "sharding/RuleRegistry.h"

namespace spmd::schema {
namespace {

// Namespaces whose ops LibTorch registers in C++, or spmd-run runs itself
// (symbolic arithmetic, collectives). prims is not one: torch registers it
// from Python.
constexpr std::array<std::string_view, 11> kLibTorchNamespaces = {
    "_c10d_functional", "_operator", "_quantized", "aten", "c10d", "higher_order", "math",
    "profiler",         "quantized", "spmd",       "torch"};

std::string_view namespaceOf(std::string_view target) { return target.substr(0, target.find('.')); }

// "node %moe (transformers.grouped_mm_fallback.default, model.py:40)".
std::string nodeText(const ir::Node& n) {
  std::string loc = ir::userSourceLine(n.metadata().stackTrace);
  return "node %" + n.name() + " (" + n.target() + (loc.empty() ? "" : ", " + loc) + ")";
}

}  // namespace

bool isLibTorchOp(std::string_view target) {
  return std::find(kLibTorchNamespaces.begin(), kLibTorchNamespaces.end(), namespaceOf(target)) !=
         kLibTorchNamespaces.end();
}

Status checkForeignOps(const ir::ExportedProgram& program, const PlacementSchema& schema) {
  const sharding::RuleRegistry& builtIn = sharding::defaultRuleRegistry();
  auto covered = [&](const std::string& target) {
    return isLibTorchOp(target) || builtIn.find(target) != nullptr ||
           std::any_of(schema.opRules.begin(), schema.opRules.end(),
                       [&](const auto& rule) { return rule.first == target; });
  };
  const ir::Node* first = nullptr;
  int64_t more = 0;
  for (const auto& n : program.graph.nodes()) {
    if (covered(n->target())) continue;
    if (first == nullptr)
      first = n.get();
    else
      ++more;
  }
  if (first == nullptr) return Status::ok();
  std::string ns(namespaceOf(first->target()));
  std::string decomposed = ns == "transformers"
                               ? "transformers' MoE: config._experts_implementation = \"batched_mm\""
                               : "torch.export with the op decomposed";
  return Status::error(
      nodeText(*first) + ": the op is not LibTorch's (namespace '" + ns +
      "', registered from Python?), so spmd-run has no kernel for it: export its ATen form instead (" +
      decomposed + "), or give it a rule in the schema's \"rules\" and run spmd-run --load-library with a " +
      "TORCH_LIBRARY kernel for it" +
      (more > 0 ? " (and " + std::to_string(more) + " more node" + (more == 1 ? "" : "s") + " of such ops)"
                : ""));
}

}  // namespace spmd::schema
