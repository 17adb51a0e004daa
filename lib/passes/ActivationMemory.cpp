// Saved activations of a train step (see ActivationMemory.h).
#include "passes/ActivationMemory.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "ir/Collectives.h"
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

// A gradient bucket (BucketCollectives) can carry the loss's all-reduce:
//   %bucket = cat([%loss_flat, %grad_flat, ...], 0) -> all_reduce -> wait
//   -> split_with_sizes -> %part_0 (the loss), %part_1, ...
// The piece `v` of such a split is the cat's member at its position, and
// `cat` the bucket; nullptr when `v` is no bucket's piece.
const ir::Value* bucketMember(const ir::Value* v, const ir::Node** cat) {
  const ir::Node* split = v->producer();
  if (split == nullptr || split->target() != "aten.split_with_sizes.default") return nullptr;
  const std::vector<ir::Value*> parts = split->outputValues();
  const auto at = std::find(parts.begin(), parts.end(), v);
  const ir::Value* x = split->inputValues().empty() ? nullptr : split->inputValues()[0];
  bool reduced = false;
  while (x != nullptr && x->producer() != nullptr &&
         (ir::isCommunicating(x->producer()->target()) || x->producer()->target() == ir::kWait)) {
    reduced = true;
    x = x->producer()->inputValues().empty() ? nullptr : x->producer()->inputValues()[0];
  }
  if (!reduced || x == nullptr || x->producer() == nullptr || x->producer()->target() != "aten.cat.default")
    return nullptr;
  const std::vector<ir::Value*> members = x->producer()->inputValues();
  if (members.size() != parts.size()) return nullptr;
  *cat = x->producer();
  return members[static_cast<size_t>(at - parts.begin())];
}

// The forward (see forwardNodes) and the bucket cats its walk went through.
struct Forward {
  std::unordered_set<const ir::Node*> nodes;
  std::unordered_set<const ir::Node*> buckets;
};

Forward walkForward(const program::Program& program) {
  Forward f;
  std::vector<const ir::Value*> work;
  for (const auto& out : program.graph.signature.outputs)
    if (out.kind == ir::OutputKind::LossOutput)
      for (const ir::Value* v : out.arg.values)
        if (v != nullptr) work.push_back(v);
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    // Through a bucket, the loss depends on its own member only, not on the
    // gradients reduced with it.
    const ir::Node* cat = nullptr;
    if (const ir::Value* member = bucketMember(v, &cat)) {
      f.buckets.insert(cat);
      work.push_back(member);
      continue;
    }
    const ir::Node* p = v->producer();
    if (p == nullptr || !f.nodes.insert(p).second) continue;
    for (const ir::Value* in : p->inputValues()) work.push_back(in);
  }
  return f;
}

}  // namespace

int64_t localBytes(const ir::Value& v) {
  int64_t n = ir::elementSize(v.type().dtype);
  for (const auto& d : v.type().sizes) n *= d.value();
  return n;
}

std::unordered_set<const ir::Node*> forwardNodes(const program::Program& program) {
  return walkForward(program).nodes;
}

ActivationEstimate estimateSavedActivations(const program::Program& program) {
  ActivationEstimate e;
  const ir::Graph& g = program.graph.graph;
  e.trainStep = std::any_of(program.graph.signature.outputs.begin(), program.graph.signature.outputs.end(),
                            [](const ir::OutputSpec& o) { return o.kind == ir::OutputKind::LossOutput; });
  if (!e.trainStep) return e;
  const Forward f = walkForward(program);
  const std::unordered_set<const ir::Node*>& forward = f.nodes;
  std::unordered_set<const ir::Value*> saved;
  for (const auto& n : g.nodes()) {
    // A bucket reads the loss as the all-reduce it replaced did: no saving.
    if (forward.count(n.get()) || f.buckets.count(n.get())) continue;
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
