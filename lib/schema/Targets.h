// The tensors of one program that placement rules match, and which of them
// each rule glob matches, memoized (internal to spmd_schema).
//
//   llama_train: params [tok.weight, layers.0.wq.weight, ...], inputs [tokens]
//   matches(Params, "layers.*.wq.weight") -> [0, 3, 0, ...]: bit 0 = one of
//   the target's names matches, bit 1 = its first (display) name matches
//
// resolvePlacements builds one for each call, or takes the one a
// ResolveCache keeps, so that resolving thousands of schemas against one
// program (auto-sharding's search) matches each glob once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/Graph.h"

namespace spmd::schema::detail {

/// A tensor a rule may match.
struct Target {
  /// Index into signature.inputs or signature.outputs.
  size_t index = 0;
  /// The names a glob is tried against; the first is the display name.
  std::vector<std::string> names;
  /// "parameter 'fc1.weight'", "input 'x'", "output 'grad.fc1.weight'".
  std::string what;
  /// The tensor; null for constants.
  const ir::Value* value = nullptr;
};

/// Parameters, buffers and tensor constants; user inputs; graph outputs.
enum class TargetKind : uint8_t { Params, Inputs, Outputs };

/// The targets of one program, each list built on first use.
class Targets {
 public:
  explicit Targets(const ir::ExportedProgram& p) : p_(p) {}
  /// The program these targets are of.
  const ir::ExportedProgram& program() const { return p_; }
  /// Params: FQN, then the tied names of the same bytes that are no graph
  /// input; Inputs: the value's name, then "input.<k>"; Outputs: outputNames.
  const std::vector<Target>& of(TargetKind k);
  /// One byte per target of `k`: bit 0 set when `pattern` matches one of its
  /// names, bit 1 when it matches the first. Stays valid while this lives.
  const std::vector<uint8_t>& matches(TargetKind k, const std::string& pattern);

 private:
  const ir::ExportedProgram& p_;
  std::optional<std::vector<Target>> lists_[3];
  std::unordered_map<std::string, std::vector<uint8_t>> hits_[3];
};

}  // namespace spmd::schema::detail
