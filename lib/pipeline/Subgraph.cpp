// extractSubgraph (see Subgraph.h).
#include "pipeline/Subgraph.h"

#include <unordered_map>

namespace spmd::pipeline {
namespace {

class Copier {
 public:
  Expected<ir::Value*> use(const ir::Value* v) {
    auto it = map_.find(v);
    if (it != map_.end()) return it->second;
    SPMD_ASSIGN_OR_RETURN(ir::Value * nv, fresh(*v));
    out_.graph.addInput(nv);
    out_.inputs.push_back(v->name());
    return nv;
  }

  Status copy(const ir::Node& n) {
    std::vector<ir::NamedArgument> inputs = n.inputs();
    for (auto& in : inputs)
      for (auto& v : in.arg.values) {
        if (!v) continue;
        SPMD_ASSIGN_OR_RETURN(v, use(v));
      }
    std::vector<ir::Argument> outputs = n.outputs();
    for (auto& o : outputs)
      for (auto& v : o.values) {
        if (!v) continue;
        SPMD_ASSIGN_OR_RETURN(v, fresh(*v));
      }
    auto node = out_.graph.addNode(n.name(), n.target(), std::move(inputs), std::move(outputs));
    if (!node) return node.status();
    (*node)->mutableMetadata() = n.metadata();
    return Status::ok();
  }

  Subgraph& result() { return out_; }

 private:
  Expected<ir::Value*> fresh(const ir::Value& v) {
    SPMD_ASSIGN_OR_RETURN(ir::Value * nv, out_.graph.addValue(v.name(), v.kind()));
    nv->mutableType() = v.type();
    nv->setSymValue(v.symValue());
    map_[&v] = nv;
    return nv;
  }

  Subgraph out_;
  std::unordered_map<const ir::Value*, ir::Value*> map_;
};

}  // namespace

Expected<Subgraph> extractSubgraph(const std::vector<const ir::Node*>& nodes,
                                   const std::vector<const ir::Value*>& outputs) {
  Copier c;
  for (const ir::Node* n : nodes) SPMD_RETURN_IF_ERROR(c.copy(*n));
  for (const ir::Value* v : outputs) {
    SPMD_ASSIGN_OR_RETURN(ir::Value * nv, c.use(v));
    c.result().graph.addOutput(nv->isTensor() ? ir::Argument::tensor(nv) : ir::Argument::symInt(nv));
    c.result().outputs.push_back(v->name());
  }
  return std::move(c.result());
}

}  // namespace spmd::pipeline
