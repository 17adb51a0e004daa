// Resolution of a placement schema against a program: one ShardingSpec per
// graph input and output.
//
//   mesh [4] (x); params: [{"match": "fc1.*", "placements": {"x": "S(0)"}},
//                          {"match": "fc2.weight", "placements": ["S(-1)"]}]
//   mlp inputs  (fc1.weight, fc1.bias, fc2.weight, fc2.bias, x)
//     -> inputs  [S(0)], [S(0)], [S(1)], [R], [R]
//   outputs "replicate", mlp_train's grad.fc2.weight -> [S(1)] (follows fc2.weight)
//
// Every error names the schema file, the rule's JSON pointer, the tensor and
// what to change.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "schema/PlacementSchema.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::schema {

/// The layout a compilation starts from.
struct ResolvedPlacements {
  sharding::Mesh mesh;
  /// One per graph input (signature.inputs order); Shard dims are >= 0.
  std::vector<sharding::ShardingSpec> inputs;
  /// One per graph input: the layout a parameter stored sharded is
  /// all-gathered into before use (FSDP); nullopt = used as stored.
  std::vector<std::optional<sharding::ShardingSpec>> gathered;
  /// One per graph output; nullopt = keep what propagation produced ("any").
  std::vector<std::optional<sharding::ShardingSpec>> outputs;
  /// Things the user should know (fsdp fallbacks, symbolic sizes checked at
  /// their trace-time hint), one line each, without "note: ".
  std::vector<std::string> notes;
  /// Things that are likely mistakes (tied weights laid out differently),
  /// one line each, without "warning: ".
  std::vector<std::string> warnings;
};

/// The mesh of `s`, with `meshOverride` (--mesh) replacing its shape. Errors:
/// no mesh at all, an override whose rank differs from the axes the schema
/// names, sizes < 1.
Expected<sharding::Mesh> resolveMesh(const PlacementSchema& s,
                                     const std::optional<std::vector<int64_t>>& meshOverride);

/// The names `outputs` rules match, one per graph output: "output.<i>" (i-th
/// user output), "loss" ("loss.<i>" after the first), "grad.<fqn>",
/// "buffer.<fqn>", "grad_input.<name>", "input_mutation.<name>",
/// "param_mutation.<fqn>", "token.<i>".
std::vector<std::string> outputNames(const ir::ExportedProgram& p);

namespace detail {
class Targets;
}

/// What resolving reads of one program whatever the schema says: its
/// parameters, inputs and outputs, and which of them each rule glob matches.
/// Resolving many schemas against one program through one cache matches
/// each glob once (auto-sharding resolves thousands). Serves only the
/// program it was made for, which must outlive it; not thread-safe.
class ResolveCache {
 public:
  explicit ResolveCache(const ir::ExportedProgram& p);
  ~ResolveCache();
  ResolveCache(const ResolveCache&) = delete;
  ResolveCache& operator=(const ResolveCache&) = delete;

 private:
  friend Expected<ResolvedPlacements> resolvePlacements(const PlacementSchema&, const ir::ExportedProgram&,
                                                        const std::optional<std::vector<int64_t>>&,
                                                        ResolveCache*);
  std::unique_ptr<detail::Targets> targets_;
};

/// Applies `s` to `p` on the mesh from resolveMesh. Unmatched parameters and
/// inputs are replicated. Errors: a rule that matches nothing (unless
/// optional), an unknown axis name, a placement list of the wrong length, a
/// shard dim out of range, a shard that does not divide evenly.
/// With `cache` (made for `p`), the same result, its glob matches reused.
Expected<ResolvedPlacements> resolvePlacements(const PlacementSchema& s, const ir::ExportedProgram& p,
                                               const std::optional<std::vector<int64_t>>& meshOverride,
                                               ResolveCache* cache = nullptr);

}  // namespace spmd::schema
