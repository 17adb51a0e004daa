// Rule helpers shared by the families: the common shapes of rules, so a
// family file is mostly a table of registrations.
#pragma once

#include <vector>

#include "sharding/RuleRegistry.h"

namespace spmd::sharding::rules {

/// Elementwise op with numpy broadcasting over every tensor operand; every
/// result has the broadcast shape. `lin`/`linearOperands` as in RuleBuilder::linear.
RuleFn pointwise(Linearity lin = Linearity::None, const std::vector<int>& linearOperands = {});
/// Like pointwise, but the dims named by the int or int-list argument
/// `dimArg` (`fallback` when it is absent or None, or when `dimArg` is
/// empty) must be replicated: softmax and its backward, cumsum, flip, ...
RuleFn pointwiseExceptDims(const char* dimArg, Linearity lin = Linearity::None,
                           const std::vector<int>& linearOperands = {}, std::vector<int64_t> fallback = {});
/// Adds broadcast-aligned pointwise factors for every dim of result
/// `result`; the dims in `replicatedDims` get need-replication factors.
void addBroadcastFactors(RuleBuilder& b, int result = 0, const std::vector<int64_t>& replicatedDims = {});
/// Dims named by an int / int-list argument (normalized to `rank`); the
/// default when the argument is absent or None.
std::vector<int64_t> dimsArg(const ir::Node& node, const char* name, int64_t rank,
                             std::vector<int64_t> fallback = {});
/// An int argument, or `fallback` when absent.
int64_t intArg(const ir::Node& node, const char* name, int64_t fallback);
/// Operand index (tensorOperands order) of the first tensor of argument
/// `name`; -1 when the argument is absent or None.
int operandIndex(const ir::Node& node, std::string_view name);
/// Result index (tensorResults order) of output `k`; -1 when it is None.
int resultIndex(const ir::Node& node, size_t k);
/// A bool argument, or `fallback` when absent.
bool boolArg(const ir::Node& node, const char* name, bool fallback);
/// A number (Scalar, float or int) argument, or `fallback` when absent or None.
double scalarArg(const ir::Node& node, const char* name, double fallback);
/// True for floating-point and complex dtypes.
bool isFloatingType(ir::ScalarType t);
/// True when converting `from` to `to` is linear (sums commute with it):
/// not when it rounds floats to integers or tests for nonzero (bool).
bool castIsLinear(ir::ScalarType from, ir::ScalarType to);
/// A dtype conversion of operand `operand` (pointwise, broadcast): linear in
/// it unless it rounds floats to integers or tests for nonzero (bool).
RuleFn cast(int operand = 0);
/// Gives each dim (not of size 1) of operand `i` its own pass-through
/// factor, in no other tensor: for operands only read for their dtype or
/// device (type_as's `other`, new_zeros' `self`).
void addOwnFactors(RuleBuilder& b, int i);

}  // namespace spmd::sharding::rules
