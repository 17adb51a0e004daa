// Passes over a compiled program. A pass is one class in one file with a
// name, a one-line description and run():
//
//   DedupCollectives p;   // "dedup-collectives"
//   SPMD_RETURN_IF_ERROR(p.run(program));
//
// `spmdc compile --list-passes` lists them; `--print-after NAME` prints the
// program after a pass.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "program/Program.h"
#include "schema/PlacementSchema.h"

namespace spmd::passes {

/// One transformation of a program.
class Pass {
 public:
  virtual ~Pass() = default;
  /// Stable name ("dead-code-elimination").
  virtual std::string_view name() const = 0;
  /// One line saying what it does.
  virtual std::string_view description() const = 0;
  /// Transforms `program` in place; the graph stays valid (verify()).
  virtual Status run(program::Program& program) = 0;
};

/// Default size of a gradient bucket (bucket-collectives), in bytes.
inline constexpr int64_t kDefaultBucketBytes = int64_t{25} * 1024 * 1024;

/// The passes `spmdc compile` runs after expansion, in order; `recompute`:
/// the schema's activation-checkpointing entries, "auto" ones resolved
/// (chooseRecompute in Recompute.h); `reissueCollectives`: a recomputed
/// module runs its collectives of activations again instead of saving their
/// results (RecomputeCollectives::Reissue); `reshardAfterForward`: fsdp
/// gathers parameters again for the backward (ReshardAfterForward).
std::vector<std::unique_ptr<Pass>> defaultPasses(bool async = true, int64_t bucketBytes = kDefaultBucketBytes,
                                                 std::vector<schema::RecomputeRule> recompute = {},
                                                 bool reissueCollectives = false,
                                                 bool reshardAfterForward = true);

/// Copies the graph outputs back into the signature's output specs (passes
/// edit the graph; the signature mirrors it).
void syncSignatureOutputs(program::Program& program);

/// Removes collective records whose node no longer exists.
void pruneCollectiveRecords(program::Program& program);

/// Commits a pass's rewrite of `program`'s graph: puts the nodes in `order`,
/// makes every reader of a key of `replacement` read its value instead,
/// erases the nodes in `removed`, mirrors the graph outputs into the
/// signature, drops the collective records of erased nodes and verifies the
/// graph (the pass's error when it no longer holds).
Status commitRewrite(program::Program& program, const std::vector<ir::Node*>& order,
                     const std::unordered_map<ir::Value*, ir::Value*>& replacement,
                     const std::unordered_set<const ir::Node*>& removed);

/// A value name not yet in `g`: `base`, else base_1, base_2, ... (the one
/// helper every pass uses to name what it adds).
std::string freshName(const ir::Graph& g, const std::string& base);

/// True for an op that draws random numbers (dropout, rand_like, ...): never
/// recomputed or cloned.
bool isRandomOp(const std::string& target);

/// Appends a copy of `n` to `graph` reading `remap`ped inputs, named after
/// it with `suffix` ("%mm" -> "%mm_rc"); records its outputs in `remap` and
/// `mark` (metadata) -> the original's name on the copy.
Expected<ir::Node*> cloneNode(ir::Graph& graph, const ir::Node& n,
                              std::unordered_map<ir::Value*, ir::Value*>& remap, const std::string& suffix,
                              const std::string& mark);

/// Splices clones into the program order and points the backward at them:
/// `clonesBefore[i]` runs just before the original node of index i (in
/// `originals`, the order the clones were made from); each node of
/// `originals` outside `forward` whose index is past `readersAfter(v)`
/// reads `remap[v]` instead of each `v` in `remap`. Then rebuilds uses and
/// verifies. Shared by recompute and reshard-after-forward.
Status spliceClones(ir::Graph& graph, const std::vector<ir::Node*>& originals,
                    const std::map<int, std::vector<ir::Node*>>& clonesBefore,
                    const std::unordered_set<const ir::Node*>& forward,
                    const std::unordered_map<ir::Value*, ir::Value*>& remap,
                    const std::function<int(const ir::Value*)>& readersAfter);

/// Records the clone of a collective as its original is recorded (for
/// reports), its consumer prefixed with `why` ("recompute of ").
void recordClone(program::Program& program, const ir::Node& original, const ir::Node& clone,
                 const std::string& why);

}  // namespace spmd::passes
