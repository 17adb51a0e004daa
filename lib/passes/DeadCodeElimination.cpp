// dead-code-elimination: removes nodes none of whose results is read by a
// node or a graph output (collectives included: a collective whose result
// is unused is never waited on).
//
//   %t = aten.clone.default(%x)       // %t unused: removed
#include <unordered_set>

#include "passes/Passes.h"

namespace spmd::passes {

Status DeadCodeElimination::run(program::Program& program) {
  ir::Graph& g = program.graph.graph;
  std::unordered_set<const ir::Value*> live;
  for (const auto& o : g.outputs())
    for (ir::Value* v : o.values)
      if (v) live.insert(v);
  std::unordered_set<const ir::Node*> dead;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const ir::Node& n = **it;
    bool used =
        n.target() == "aten._assert_tensor_metadata.default" || n.target() == "aten._assert_scalar.default";
    for (ir::Value* v : n.outputValues()) used |= live.count(v) > 0;
    if (!used) {
      dead.insert(&n);
      continue;
    }
    for (ir::Value* v : n.inputValues()) live.insert(v);
  }
  if (dead.empty()) return Status::ok();
  g.eraseNodes([&](const ir::Node& n) { return dead.count(&n) > 0; });
  pruneCollectiveRecords(program);
  return g.verify();
}

}  // namespace spmd::passes
