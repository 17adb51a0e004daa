// Rules written in the factor notation the built-in rules print, for ops
// spmdc has no rule for (a user's custom ops):
//
//   "([b, s, h, d], [s, d]) -> ([b, s, h, d])"                  pointwise over b, s, h, d
//   "([m, k], [k, n]) -> ([m, n]) {k reduction(sum)} linear-each(0, 1)"
//   "([b, s x]) -> ([b, s], [b]) {x replicated}"                 x must stay whole
//   "([b, h d]) -> ([b, h, d]) {h=8}"                            a merged dim: h's size given
//
// Factor names are identifiers; a dim lists its factors major first ("h d"),
// or is 1 (no factor). Sizes come from the node's shapes: a factor alone in
// some dim takes that dim's size; one only ever merged needs "{name=size}".
// Annotations: "reduction(sum|avg|max|min)", "replicated". Linearity, as
// printed: linear-each(i, ...), linear-joint(i, ...), value-independent(i, ...).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sharding/Rule.h"
#include "support/Status.h"

namespace spmd::sharding {

/// A parsed rule text, not yet tied to a node's shapes.
struct RuleTemplate {
  /// Per tensor operand / result, per dim, the factor names (empty: "1").
  std::vector<std::vector<std::vector<std::string>>> operands, results;
  struct Annotation {
    std::string name;
    int64_t size = -1;  ///< -1: from the shapes
    FactorKind kind = FactorKind::PassThrough;
    ReduceOp reduce = ReduceOp::Sum;
  };
  std::vector<Annotation> annotations;
  Linearity linearity = Linearity::None;
  std::vector<int> linearOperands;
  /// The text it was parsed from.
  std::string text;
};

/// Parses `text`; the error says what was expected where ("at 14: expected ']'").
Expected<RuleTemplate> parseRuleText(std::string_view text);

/// The rule function of a template: on a node, checks the operand and
/// result counts and ranks, takes sizes from the shapes, and builds.
RuleFn ruleFromTemplate(RuleTemplate t);

}  // namespace spmd::sharding
