// Sharding propagation: choose, node by node in graph order, a layout for
// every tensor operand and result, following the op's rule and the cost
// model (DTensor-style "follow the inputs", one mesh axis at a time).
//
//   inputs: %x [R], %w1 [S(0)], %w2 [S(1)]   (Megatron MLP on mesh 8)
//   %permute  = permute(%w1)          -> [S(1)]
//   %addmm    = addmm(%b1, %x, %permute)      operands [S(0)], [R], [S(1)] -> [S(1)]
//   %addmm_1  = addmm(%b2, %gelu, %permute_1) operands [P(sum)], [S(1)], [S(0)] -> [P(sum)]
//
// Invariants: a node's operand layouts come from its rule (one candidate per
// mesh axis); a value's layout is the layout its producer chose; operands
// whose current layout differs are redistributed by the expansion. For each
// axis the cheapest candidate wins: redistribution cost of the operands, plus
// (for a candidate that introduces a sharding no operand had) the cost of
// gathering its result later, so sharding spreads only where it is free.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Graph.h"
#include "sharding/CostModel.h"
#include "sharding/Placement.h"
#include "sharding/RuleRegistry.h"

namespace spmd::sharding {

/// Node metadata key of a layout anchor: a one-operand identity node (e.g.
/// aten.alias) whose operand and result take the layout of the value this
/// key names, whatever its rule would choose. The optimizer anchors each
/// gradient to its parameter's layout.
inline constexpr std::string_view kLayoutAsKey = "spmd_layout_as";

/// Node metadata key of a fixed layout anchor: like kLayoutAsKey, but the
/// layout is written out ("[R, S(0)]", ShardingSpec::str()). A parameter
/// stored sharded and gathered before use (FSDP) is read through one.
inline constexpr std::string_view kLayoutKey = "spmd_layout";

/// Options of propagate().
struct PropagationOptions {
  CostModel cost = CostModel();
  /// Run ops without a rule replicated (with a warning each) instead of
  /// refusing the program.
  bool replicateUnknown = false;
  /// Fill NodeSharding::rule (the rule text, for --report and explain) and
  /// the gather warnings; auto-sharding's quick model leaves them out.
  bool details = true;
  /// Run the second pass (see propagate()); the quick model skips it.
  bool secondPass = true;
  /// By node index: the layout a fixed layout anchor (kLayoutKey) takes
  /// instead of the one its metadata names (auto-sharding prices gathered
  /// and not gathered parameters on one graph).
  std::map<int, ShardingSpec> layoutOverrides;
  /// Propagator::runInto() only, with `details` and `secondPass` off: when
  /// the result it is given is the one its last run wrote (same mesh and
  /// options but for the inputs and layoutOverrides), plan again only the
  /// nodes whose operand layouts, anchor layout or the layouts their operands
  /// were already redistributed into changed. The result is the one a full
  /// run gives; the search's neighbouring layouts share most of it.
  bool incremental = false;
};

/// The layouts one node works with.
struct NodeSharding {
  /// Required layout of each tensor operand (tensorOperands order).
  std::vector<ShardingSpec> operands;
  /// Layout of each tensor result (tensorResults order).
  std::vector<ShardingSpec> results;
  /// The rule text (empty for ops without a rule).
  std::string rule;
};

/// Result of propagate().
struct Propagation {
  /// Layout each tensor value is produced in, by value id (empty spec for
  /// non-tensors).
  std::vector<ShardingSpec> values;
  /// By node index.
  std::vector<NodeSharding> nodes;
  std::vector<std::string> warnings;
};

/// Propagation of one program under many input layouts: the operand lists,
/// anchors and rules of its nodes are read once.
///
///   Propagator prop(program, registry);
///   for (const auto& specs : layouts) auto p = prop.run(specs, mesh);
class Propagator {
 public:
  /// `program` and `registry` must outlive it, and the graph must not change.
  Propagator(const ir::ExportedProgram& program, const RuleRegistry& registry);
  ~Propagator();
  Propagator(const Propagator&) = delete;
  Propagator& operator=(const Propagator&) = delete;

  /// What propagate() returns for these arguments. Nodes that plan alike
  /// (same rule, types and operand layouts: repeated layers) plan once per
  /// Propagator; every run on one mesh must use the same options.cost.
  Expected<Propagation> run(const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                            const PropagationOptions& options = PropagationOptions());
  /// run(), into `out`, whose storage an earlier run of this Propagator left
  /// is reused (auto-sharding prices many layouts).
  Status runInto(const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                 const PropagationOptions& options, Propagation& out);
  /// After a successful incremental runInto(): the nodes it planned again,
  /// in graph order. No other node's layouts changed; a value whose layout
  /// changed is a graph input or a result of one of them, and its users are
  /// all among them. Null after any other run (every node may differ).
  const std::vector<int>* replanned() const;
  /// The tensor uses of `v`: (node index, operand slot in tensorOperands
  /// order), in graph order.
  const std::vector<std::pair<int, size_t>>& uses(const ir::Value& v);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Propagates `inputSpecs` (one per graph input) through `program`.
/// Errors: ops without a rule (all listed in one message, each with the
/// user's source line), a rule that fails on its node.
Expected<Propagation> propagate(const ir::ExportedProgram& program,
                                const std::vector<ShardingSpec>& inputSpecs, const Mesh& mesh,
                                const RuleRegistry& registry,
                                const PropagationOptions& options = PropagationOptions());

/// Bytes of one rank's piece of `v` laid out as `s` on `mesh`: the element
/// count divided by the size of each axis that shards it (at least 1
/// element; symbolic sizes at their hint), times the element size.
int64_t localBytes(const ir::Value& v, const ShardingSpec& s, const Mesh& mesh);

/// Every strategy the rule of `node` offers on the 1-D `mesh`: replicated,
/// one per shardable factor, and the pending-sum pass-throughs of linear
/// ops. For numeric checks of rules.
Expected<std::vector<NodeSharding>> enumerateStrategies(const ir::Node& node, const RuleRegistry& registry,
                                                        const Mesh& mesh);

/// Targets evaluated without a rule (symbolic integer arithmetic, sym_size,
/// and asserts such as _assert_tensor_metadata): tensor operands are read in
/// whatever layout they have, with no collective.
bool isSymbolicOp(std::string_view target);

}  // namespace spmd::sharding
