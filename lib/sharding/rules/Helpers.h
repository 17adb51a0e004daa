// Rule helpers shared by the families: the common shapes of rules, so a
// family file is mostly a table of registrations.
#pragma once

#include <vector>

#include "sharding/RuleRegistry.h"

namespace spmd::sharding::rules {

/// Elementwise op with numpy broadcasting over every tensor operand; every
/// result has the broadcast shape. `lin`/`linearOperands` as in RuleBuilder::linear.
RuleFn pointwise(Linearity lin = Linearity::None, const std::vector<int>& linearOperands = {});
/// Like pointwise, but the dims in `replicatedDims` (an int or int-list
/// argument named `dimArg`, or fixed dims when `dimArg` is empty) must be
/// replicated: softmax and its backward, cumsum, ...
RuleFn pointwiseExceptDims(const char* dimArg, Linearity lin = Linearity::None,
                           const std::vector<int>& linearOperands = {});
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

}  // namespace spmd::sharding::rules
