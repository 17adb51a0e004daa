// The decision variables of auto-sharding: one per group of boundary
// tensors that share a layout (a parameter across repeated layers, a user
// input), each with its candidate layouts, and the placement schema an
// assignment of options means.
//
//   llama_train, mesh 4 (x):
//     group "*layers.*.wq.weight" (2 tensors, f32[64, 64]):
//       options [R], [S(0)], [S(1)], [S(0)] gathered, [S(1)] gathered
//     group "tokens" (user input, i64[2, 16]): options [R], [S(1)]
//   assignment {wq: [S(0)], ...} -> {"params": [{"match": "*layers.*.wq.weight",
//                                                "placements": {"x": "S(0)"}}], ...}
//
// Groups: parameters whose FQNs differ only in numeric path components
// (layer indices) form one group; each user input is its own group.
// Buffers and constants stay replicated (RoPE tables, masks). Optimizer
// states follow their parameter (passes::alignOptimizerStates). Options of
// a tensor: per mesh axis R or S(d) for every dim d its size divides evenly
// by the axis (jointly over all axes; a dim split by two axes must divide by
// their product), and for parameters each sharded option also "gathered"
// (stored sharded, all-gathered before use: FSDP).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "schema/PlacementSchema.h"
#include "sharding/Placement.h"

namespace spmd::autoshard {

/// One candidate layout of a group.
struct Option {
  sharding::ShardingSpec spec;  ///< stored layout, one placement per mesh axis
  bool gathered = false;        ///< parameters: all-gathered before use
  /// "[S(0), R]" or "[S(0), R] gathered".
  std::string str() const;
};

/// Boundary tensors that take one layout together.
struct Group {
  std::string match;               ///< the schema glob (or exact name)
  bool isParam = true;             ///< parameter (else user input)
  std::vector<std::string> names;  ///< FQNs or input names, program order
  std::vector<Option> options;     ///< options[0] is replicated
  int64_t bytes = 0;               ///< global bytes of all members
  /// True when `match` would match other tensors too: written as one rule
  /// per member.
  bool exact = false;
};

/// Names (parameter FQNs, user input names) the rules of `pins` match;
/// empty for null.
std::vector<std::string> pinnedNames(const ir::ExportedProgram& program, const schema::PlacementSchema* pins);

/// The groups of `program` on `mesh`; names in `pinned` (already laid out
/// by the user's schema) are left out; `gather` false leaves out the
/// gathered (FSDP) options.
std::vector<Group> buildGroups(const ir::ExportedProgram& program, const sharding::Mesh& mesh,
                               const std::vector<std::string>& pinned, bool gather = true);

/// Megatron roles of the 2-D weights that matmuls read (Seeds.cpp): true
/// for row-parallel (shard the input dim, S(1)), false for column-parallel
/// (S(0)), by FQN.
std::map<std::string, bool> rowParallelWeights(const ir::ExportedProgram& program);

/// The seeds of the local search, as assignments of `gs`: replicated,
/// tensor-parallel (Megatron on the last mesh axis, roles from `rows`,
/// rowParallelWeights; the batch split over the other axes), dp, fsdp and,
/// on 2-D meshes, hsdp.
std::vector<std::pair<std::string, std::vector<size_t>>> seeds(const std::vector<Group>& gs,
                                                               const sharding::Mesh& mesh,
                                                               const std::map<std::string, bool>& rows);

/// The schema meaning `choice` (one option index per group), after the
/// rules of `pins` (first rule wins, so pins win): mesh of `mesh`, outputs
/// replicated.
schema::PlacementSchema schemaFor(const std::vector<Group>& groups, const std::vector<size_t>& choice,
                                  const sharding::Mesh& mesh, const schema::PlacementSchema* pins);

/// The placement-schema JSON text of `s` (lib/schema format: loads back with
/// schema::parsePlacementSchema). Presets are written as their rule-less
/// equivalent only when s has no preset; its "recompute" entries too;
/// `comment` goes into the file.
std::string schemaJson(const schema::PlacementSchema& s, const std::string& comment);

/// The key a search caches a layout's price under: its preset and
/// schemaJson(s, "") (`json`, when the caller has spelled it already).
std::string layoutKey(schema::Preset preset, const std::string& json);
std::string layoutKey(const schema::PlacementSchema& s);

}  // namespace spmd::autoshard
