// Expert parallelism checks before propagation (see ExpertParallel.h).
#include "passes/ExpertParallel.h"

#include <unordered_map>
#include <vector>

#include "support/Strings.h"

namespace spmd::passes {
namespace {

// The graph input `v` reads, through layout anchors (aten.alias), or null.
const ir::Value* inputOf(const ir::Value* v) {
  while (v && v->producer() && v->producer()->target() == "aten.alias.default") {
    auto in = v->producer()->inputValues();
    v = in.empty() ? nullptr : in[0];
  }
  return v && !v->producer() ? v : nullptr;
}

}  // namespace

Status checkExpertPlacements(const ir::ExportedProgram& program,
                             const schema::ResolvedPlacements& placements) {
  std::unordered_map<const ir::Value*, size_t> index;
  const auto& inputs = program.graph.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) index[inputs[i]] = i;
  for (const auto& n : program.graph.nodes()) {
    bool forward = n->target() == "spmdc.moe_experts.default";
    if (!forward && n->target() != "spmdc.moe_experts_backward.default") continue;
    auto operands = n->inputValues();
    for (size_t w = forward ? 3 : 4; w < operands.size(); ++w) {
      const ir::Value* in = inputOf(operands[w]);
      auto it = in ? index.find(in) : index.end();
      if (it == index.end() || it->second >= placements.inputs.size()) continue;
      // The layout the node reads: a parameter stored sharded and gathered
      // before use (fsdp) is read in its gathered layout.
      const auto& gathered =
          it->second < placements.gathered.size() ? placements.gathered[it->second] : std::nullopt;
      const sharding::ShardingSpec& spec = gathered ? *gathered : placements.inputs[it->second];
      if (in->type().sizes.empty()) continue;
      const ir::Dim& experts = in->type().sizes[0];
      std::vector<int64_t> shape;
      for (const ir::Dim& d : in->type().sizes) shape.push_back(d.value());
      for (int64_t a = 0; a < placements.mesh.numAxes(); ++a) {
        int64_t size = placements.mesh.size(a);
        if (!spec.placements[static_cast<size_t>(a)].isShard(0) || experts.value() % size == 0) continue;
        std::string e = std::to_string(experts.value());
        return Status::error(
            "node %" + n->name() + " (" + n->target() + "): its " + e + " experts (%" + in->name() + " " +
            formatShape(shape) + ", laid out " + spec.str() + ") do not divide over mesh axis " +
            placements.mesh.axisNames()[static_cast<size_t>(a)] + " (" + std::to_string(size) +
            " ranks): make that axis' size divide " + e + ", or replicate the experts");
      }
    }
  }
  return Status::ok();
}

}  // namespace spmd::passes
