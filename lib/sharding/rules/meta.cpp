// Assertions, value reads and size metadata that are not evaluated
// symbolically (see sharding::isSymbolicOp for those that are): they read
// the whole value, so their tensors are replicated (a pending operand is
// reduced first).
//
//   aten._assert_async.msg(ok[], "...")         -> ([]) -> ()
//   aten._local_scalar_dense.default(n[])        -> ([]) -> ()
//   aten.sym_storage_offset.default(x[8, 4])     -> ([i, j]) -> () {i=8 replicated, j=4 replicated}
//   aten.sym_constrain_range.default(u0, 0, 16)  -> () -> ()
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {

void registerMetaRules(RuleRegistry& r) {
  const RuleFn whole = [](const ir::Node& n) { return RuleBuilder(n).replicateRest().build(); };
  r.add({"aten._assert_async.default", "aten._assert_async.msg"}, whole);
  r.add("aten._functional_assert_async.msg", whole);
  r.add("aten._local_scalar_dense.default", whole);
  r.add("aten.sym_constrain_range.default", whole);
  // A shard's storage offset is its own (a local slice of a replicated tensor).
  r.add("aten.sym_storage_offset.default", whole);
}

}  // namespace spmd::sharding
