// dedup-collectives: two collectives with the same target on the same value
// with the same arguments compute the same thing; keep the first.
//
//   %a = spmd.all_reduce(%x, "tp", "sum")
//   %b = spmd.all_reduce(%x, "tp", "sum")      // removed, uses of %b read %a
//
// (As torch.distributed._spmd's _dedup_collectives did.)
#include <map>
#include <set>
#include <unordered_map>

#include "ir/Collectives.h"
#include "passes/Passes.h"
#include "serialize/ToText.h"

namespace spmd::passes {

Status DedupCollectives::run(program::Program& program) {
  ir::Graph& g = program.graph.graph;
  std::map<std::string, ir::Value*> seen;
  std::unordered_map<ir::Value*, ir::Value*> replace;
  for (const auto& n : g.nodes()) {
    if (!ir::isSpmdOp(n->target()) || n->target() == ir::kWait) continue;
    std::string key = n->target();
    for (const auto& in : n->inputs()) key += "|" + in.name + "=" + serialize::printArgument(in.arg);
    auto outs = n->outputValues();
    if (outs.size() != 1) continue;
    auto [it, fresh] = seen.emplace(key, outs[0]);
    if (!fresh) replace.emplace(outs[0], it->second);
  }
  if (replace.empty()) return Status::ok();
  g.replaceUses(replace, [](const ir::Node&) { return false; });  // one walk for all
  std::set<const ir::Node*> dead;
  for (auto [from, to] : replace) dead.insert(from->producer());
  g.eraseNodes([&](const ir::Node& n) { return dead.count(&n) > 0; });
  syncSignatureOutputs(program);
  pruneCollectiveRecords(program);
  return g.verify();
}

}  // namespace spmd::passes
