// Numeric checks of sharding rules (DTensor's strategy validation, offline):
// one node is cut out of its graph, every strategy its rule offers on a
// mesh (1-D of 2 or 4 ranks, or 2x2) is expanded, written, read back and
// run on simulated ranks, and the assembled outputs are compared with the
// node run unsharded.
//
//   %mm: f32[16, 32] = aten.mm.default(%a, %b)             (a f32[16, 64], b f32[64, 32])
//   strategy [S(1)], [S(0)] -> [P(sum)]:
//     rank r: mm(a[:, 32r:32r+32], b[32r:32r+32, :]); outputs summed -> compared with mm(a, b)
//
// Pending operands are not fed as (value, zeros): each rank gets a random
// share (x - r, r for sums; x + r, x - r for means; x and something
// smaller for max; as many shares as ranks the pending axes hold), so a rule that lets a pending value
// through a non-linear op (gelu(0) = 0 would hide it) or a product of two pending operands fails. Results
// compare with allclose(rtol 1e-5, atol 1e-6), integers and bools exactly; where a strategy regroups sums
// across ranks, a few ulps of the op's magnitude (the op on |operands|) are allowed too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "runtime/TensorIO.h"
#include "sharding/Propagation.h"

namespace spmd::numeric {

using runtime::TensorMap;

/// What a batch of checks did.
struct CheckStats {
  int nodes = 0;  ///< nodes checked
  int pairs = 0;  ///< (node, strategy, mesh) cases run and compared
  /// Cases run per mesh ("2", "4", "2x2").
  std::map<std::string, int> pairsByMesh;
  int skippedUneven = 0;              ///< strategies whose shards do not divide the real shapes
  int setupRetries = 0;               ///< process-group setups that failed and were retried
  std::vector<std::string> failures;  ///< one paragraph per failing pair
  /// Each case run: "aten.sum.dim_IntList: operands [S(1)] -> results [P(sum)]"
  /// on the 1-D mesh of 2, with " on 2x2" (the mesh) appended on others.
  std::vector<std::string> checked;
  /// One line: "N nodes, M (node, strategy, mesh) cases (2: a, 4: b, 2x2: c), K skipped (uneven)".
  std::string summary() const;
  /// Adds `other`'s counts, failures and cases.
  void add(const CheckStats& other);
};

/// The meshes rules are checked on: 1-D of 2 and of 4 ranks, 2-D 2x2.
const std::vector<std::vector<int64_t>>& allMeshes();

/// The strategies checked on a mesh of `sizes`: enumerateStrategies on a
/// 1-D mesh; on a 2-D mesh each pair of 1-D strategies (axis 0, axis 1)
/// that composes: in every tensor, a dim both axes shard is sharded by the
/// same strategy without strided shards, and a tensor pending on both axes
/// is pending with one reduce op.
Expected<std::vector<sharding::NodeSharding>> strategiesOn(const ir::Node& node,
                                                           const std::vector<int64_t>& sizes);

/// True when `node` can be checked alone: it has a rule (or is not
/// symbolic), reads no SymInt/SymFloat/SymBool values and every value it
/// reads or defines has static sizes.
bool checkable(const ir::Node& node);

/// Checks every strategy of `node`'s rule numerically on `mesh` (sizes of
/// its axes): on a 1-D mesh those of sharding::enumerateStrategies; on a
/// 2-D mesh each pair of 1-D strategies, one per axis, that composes (not
/// two factors in one dim, no strided shard nested in another, one reduce
/// op per pending tensor). `operands` holds the global value of each tensor
/// the node reads, by value name. `where` prefixes failure reports (model
/// name). Failures (with node, target, rule, placements and mesh) and
/// counts go to `stats`.
void checkNode(const ir::Node& node, const TensorMap& operands, const std::string& where, CheckStats& stats,
               const std::vector<int64_t>& mesh = {2});

/// Copy of `program` whose outputs are the values named `names` (user
/// outputs "output.<i>" in this order); everything else is kept.
Expected<ir::ExportedProgram> withOutputs(const ir::ExportedProgram& program,
                                          const std::vector<std::string>& names);

}  // namespace spmd::numeric
