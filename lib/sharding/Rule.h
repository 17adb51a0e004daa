// Op sharding rules as data (after Shardy's OpShardingRule).
//
// A rule names the *factors* of an op's iteration space and says which
// tensor dims each factor spans. mm(a[32, 64], b[64, 256]) -> r[32, 256]:
//
//   ([i, j], [j, k]) -> ([i, k])  {i=32, j=64 reduction(sum), k=256}
//
// Sharding factor i over a mesh axis gives a=S(0), b=R, r=S(0); k gives
// a=R, b=S(1), r=S(1); j gives a=S(1), b=S(0) and a pending sum r=P(sum).
// A view that merges dims lists several factors in one dim, major first:
// view(x[2, 8, 16], [16, 16]) is ([i, j, k]) -> ([i j, k]); sharding j
// there gives the result dim 0 a strided shard S(0, sf=2).
//
// Factor kinds: pass-through (may be sharded freely), reduction (sharding
// it leaves results that lack it pending), need-replication (never
// sharded: softmax's reduced dim, a sliced dim).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::sharding {

/// How a factor may be sharded.
enum class FactorKind : uint8_t { PassThrough, Reduction, NeedReplication };

/// One factor of an op's iteration space.
struct Factor {
  int64_t size = 1;  ///< global size (trace-time hint when symbolic)
  FactorKind kind = FactorKind::PassThrough;
  ReduceOp reduce = ReduceOp::Sum;  ///< pending op of results lacking a sharded reduction factor
  /// An exchange factor spans dims of different sizes that split together
  /// over one axis, the op's kernel exchanging data between the ranks (MoE
  /// experts: tokens and experts on the ep axis, rules/moe.cpp). `size` is
  /// the gcd of those dims: it divides over an axis exactly when each does.
  bool exchange = false;
  /// For an exchange factor: the operand whose layout asks for the
  /// exchange; the factor is split only over axes where that operand
  /// arrives split by it (the experts placed on ep), never over another
  /// axis that would merely slice it.
  int exchangeOperand = -1;
};

/// Per tensor dim, the factors composing it, major first; an empty list is a
/// dim the op does not iterate over (size 1, broadcast).
using DimFactors = std::vector<std::vector<int>>;

/// How pending sums flow through an op on one mesh axis.
enum class Linearity : uint8_t {
  None,   ///< pending operands must be reduced first
  Each,   ///< linear in each marked operand alone (mul, mm): one P operand, others R -> P
  Joint,  ///< linear in the marked operands together (add, cat): all marked P -> P
  /// Results do not depend on the marked operands' values (full_like,
  /// sym_size): any of them may stay pending, results are not pending.
  ValueIndependent,
};

/// The sharding rule of one node.
struct OpShardingRule {
  std::vector<Factor> factors;
  /// One entry per tensor operand, in Node::inputValues() order (tensors only).
  std::vector<DimFactors> operands;
  /// One entry per tensor result, in Node::outputValues() order (tensors only).
  std::vector<DimFactors> results;
  Linearity linearity = Linearity::None;
  /// For Each/Joint: the operands the op is linear in (others stay R).
  std::vector<bool> linearOperands;
  /// Operands added to a reduction's result (addmm's bias): where a
  /// reduction factor is sharded they must be pending too, not R.
  std::vector<bool> additiveOperands;

  /// Shardy-style text: "([i, j], [j, k]) -> ([i, k]) {i=32, j=64 reduction(sum), k=256}".
  std::string str() const;
};

/// Builds an OpShardingRule for one node with a fluent API:
///
///   RuleBuilder b(node);                      // reads operand/result shapes
///   int i = b.factor(32);                     // a pass-through factor
///   b.operand(0, 0, i).result(0, 0, i);       // dim 0 of operand 0 and result 0
///   int j = b.factor(64, FactorKind::Reduction);
///   ...
///   return b.build();
class RuleBuilder {
 public:
  /// Starts a rule for `node` with one empty dim list per tensor dim.
  explicit RuleBuilder(const ir::Node& node);

  /// Adds a factor; returns its index.
  int factor(int64_t size, FactorKind kind = FactorKind::PassThrough, ReduceOp reduce = ReduceOp::Sum);
  /// Adds an exchange factor (see Factor::exchange) of size `size`, split
  /// only where operand `operand` arrives split by it.
  int exchangeFactor(int64_t size, int operand);
  /// Appends factor `f` (as the next-minor factor) to dim `dim` of operand `i`.
  /// An operand or dim out of range (a malformed node) makes build() fail.
  RuleBuilder& operand(int i, int64_t dim, int f);
  /// Appends factor `f` to dim `dim` of result `i`; out of range as operand().
  RuleBuilder& result(int i, int64_t dim, int f);
  /// Adds a factor spanning the given dim of each operand and result
  /// (-1: absent), of size `size`.
  int addFactor(const std::vector<int64_t>& operandDims, const std::vector<int64_t>& resultDims, int64_t size,
                FactorKind kind = FactorKind::PassThrough, ReduceOp reduce = ReduceOp::Sum);
  /// Marks the op linear (see Linearity) in `operands` (all when empty).
  RuleBuilder& linear(Linearity l, const std::vector<int>& operands = {});
  /// Marks operand `i` as added to the reduction's result (see OpShardingRule).
  RuleBuilder& additive(int i);
  /// Every dim not yet covered by a factor gets its own need-replication
  /// factor (size-1 dims stay empty).
  RuleBuilder& replicateRest();

  /// Number of tensor operands / results.
  int numOperands() const { return static_cast<int>(rule_.operands.size()); }
  int numResults() const { return static_cast<int>(rule_.results.size()); }
  /// Shape (hints for symbolic dims) of operand / result `i`.
  const std::vector<int64_t>& operandShape(int i) const { return operandShapes_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& resultShape(int i) const { return resultShapes_[static_cast<size_t>(i)]; }

  /// The rule; errors when a factor's size disagrees with a dim it spans,
  /// or an operand, result or dim was out of range. The last call on the
  /// builder: the rule is moved out, not copied.
  Expected<OpShardingRule> build();

 private:
  OpShardingRule rule_;
  Status error_;  ///< the first out-of-range operand/result/dim
  std::vector<std::vector<int64_t>> operandShapes_;
  std::vector<std::vector<int64_t>> resultShapes_;
};

/// Computes the rule of a node; errors name what is unsupported.
using RuleFn = std::function<Expected<OpShardingRule>(const ir::Node&)>;

/// Tensor values a rule's operands refer to (Node::inputValues() tensors).
std::vector<ir::Value*> tensorOperands(const ir::Node& node);
/// Tensor values a rule's results refer to (Node::outputValues() tensors).
std::vector<ir::Value*> tensorResults(const ir::Node& node);
/// Static sizes of a tensor value (hints for symbolic dims).
std::vector<int64_t> shapeHint(const ir::Value& v);
/// Normalizes a possibly negative dim against `rank`.
int64_t normalizeDim(int64_t dim, int64_t rank);

}  // namespace spmd::sharding
