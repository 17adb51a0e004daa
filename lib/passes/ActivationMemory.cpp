// Saved activations of a train step (see ActivationMemory.h).
#include "passes/ActivationMemory.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "passes/LayoutCost.h"

namespace spmd::passes {
namespace {

// The value whose storage `v` uses: up through view ops.
const ir::Value* storageOf(const ir::Value* v) {
  while (v->producer() != nullptr && isViewOp(v->producer()->target())) {
    const ir::Argument* self = v->producer()->input("self");
    if (self == nullptr || self->value() == nullptr) break;
    v = self->value();
  }
  return v;
}

}  // namespace

int64_t localBytes(const ir::Value& v) {
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

std::unordered_set<const ir::Node*> forwardNodes(const program::Program& program) {
  std::vector<const ir::Value*> work;
  for (const auto& out : program.graph.signature.outputs)
    if (out.kind == ir::OutputKind::LossOutput)
      for (const ir::Value* v : out.arg.values)
        if (v != nullptr) work.push_back(v);
  std::unordered_set<const ir::Node*> forward;
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    const ir::Node* p = v->producer();
    if (p == nullptr || !forward.insert(p).second) continue;
    for (const ir::Value* in : p->inputValues()) work.push_back(in);
  }
  return forward;
}

ActivationEstimate estimateSavedActivations(const program::Program& program) {
  ActivationEstimate e;
  const ir::Graph& g = program.graph.graph;
  e.trainStep = std::any_of(program.graph.signature.outputs.begin(), program.graph.signature.outputs.end(),
                            [](const ir::OutputSpec& o) { return o.kind == ir::OutputKind::LossOutput; });
  if (!e.trainStep) return e;
  std::unordered_set<const ir::Node*> forward = forwardNodes(program);
  std::unordered_set<const ir::Value*> saved;
  for (const auto& n : g.nodes()) {
    if (forward.count(n.get())) continue;
    for (const ir::Value* in : n->inputValues()) {
      if (!in->isTensor()) continue;
      const ir::Value* s = storageOf(in);
      if (s->producer() != nullptr && forward.count(s->producer()) && saved.insert(s).second) {
        ++e.savedTensors;
        e.savedBytes += localBytes(*s);
      }
    }
  }
  return e;
}

}  // namespace spmd::passes
