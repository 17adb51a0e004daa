// async-collectives: each communicating collective moves right after the
// node producing its input, and an spmd.wait just before its first reader,
// so communication overlaps the computation in between. Collectives of graph
// inputs (FSDP's parameter gathers) are prefetched one ahead, as FSDP does:
// each starts at the first reader of the one before, not all at the start.
// So are gathers of a graph input's cast read by nothing else (mixed
// precision's bf16 parameters, MixedPrecision.h): the cast moves with its
// gather (it stays in place when the backward gathers it again).
//
//   %h = aten.mm.default(...)                      %h = aten.mm.default(...)
//   %g = aten.gelu.default(%y)              =>     %r = spmd.all_reduce(%h, "tp", "sum")
//   %r = spmd.all_reduce(%h, "tp", "sum")          %g = aten.gelu.default(%y)
//   %o = aten.add.Tensor(%r, %g)                   %r_wait = spmd.wait(%r)
//                                                  %o = aten.add.Tensor(%r_wait, %g)
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "passes/Pass.h"
#include "passes/Passes.h"

namespace spmd::passes {
namespace {

// The dtype cast of a graph input that only collective `c` reads (a mixed-
// precision parameter before its gather), or null.
ir::Node* castOfGraphInput(const ir::Node& c) {
  if (c.inputValues().empty()) return nullptr;
  const ir::Value* x = c.inputValues()[0];
  ir::Node* cast = x->producer();
  if (cast == nullptr || cast->target() != "aten._to_copy.default" || x->users().size() != 1 ||
      cast->inputValues().size() != 1 || cast->inputValues()[0]->producer() != nullptr)
    return nullptr;
  return cast;
}

}  // namespace

Status AsyncCollectives::run(program::Program& program) {
  ir::Graph& g = program.graph.graph;
  // 1. Move each collective right after the producer of its input.
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> after;
  std::unordered_map<const ir::Node*, ir::Node*> castBefore;  // collective -> the cast that moves with it
  std::unordered_set<const ir::Node*> movedCasts;
  std::vector<ir::Node*> atStart, order, collectives;
  for (const auto& n : g.nodes()) {
    if (!ir::isCommunicating(n->target())) continue;
    collectives.push_back(n.get());
    ir::Node* producer = n->inputValues().empty() ? nullptr : n->inputValues()[0]->producer();
    if (ir::Node* cast = castOfGraphInput(*n)) {
      castBefore[n.get()] = cast;
      movedCasts.insert(cast);
      producer = nullptr;
    } else if (producer && producer->target() == "aten._to_copy.default" &&
               producer->inputValues().size() == 1 && producer->inputValues()[0]->producer() == nullptr) {
      producer = nullptr;  // a cast read again for the backward (reshard-after-forward): prefetched too
    }
    (producer ? after[producer] : atStart).push_back(n.get());
  }
  if (collectives.empty()) return Status::ok();
  auto firstReader = [](const ir::Node* c) {
    const ir::Node* first = nullptr;
    for (ir::Node* u : c->outputValues()[0]->users())
      if (!first || u->index() < first->index()) first = u;
    return first;
  };
  std::stable_sort(atStart.begin(), atStart.end(), [&](const ir::Node* a, const ir::Node* b) {
    const ir::Node* fa = firstReader(a);
    const ir::Node* fb = firstReader(b);
    return (fa ? fa->index() : INT32_MAX) < (fb ? fb->index() : INT32_MAX);
  });
  for (size_t i = atStart.size(); i-- > 1;) {
    const ir::Node* prev = firstReader(atStart[i - 1]);
    const ir::Node* mine = firstReader(atStart[i]);
    if (prev == nullptr || mine == nullptr) continue;
    // Read by the same node as the one before: start right after that one.
    const ir::Node* at = prev->index() < mine->index() ? prev : atStart[i - 1];
    after[at].insert(after[at].begin(), atStart[i]);
    atStart.erase(atStart.begin() + static_cast<std::ptrdiff_t>(i));
  }
  std::function<void(ir::Node*)> place = [&](ir::Node* n) {
    if (auto it = castBefore.find(n); it != castBefore.end()) order.push_back(it->second);
    order.push_back(n);
    if (auto it = after.find(n); it != after.end())
      for (ir::Node* c : it->second) place(c);
  };
  for (ir::Node* c : atStart) place(c);
  for (const auto& n : g.nodes())
    if (!ir::isCommunicating(n->target()) && !movedCasts.count(n.get())) place(n.get());
  g.setNodeOrder(order);
  // 2. A wait before each collective's first reader; readers use the wait.
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> waitsBefore;
  std::vector<ir::Node*> waitsAtEnd;
  std::unordered_map<ir::Value*, ir::Value*> replacement;
  std::unordered_set<const ir::Node*> waits;
  // A reduce-scatter's full-size input lives until its wait: it is waited
  // for where the next reduce-scatter starts at the latest, so one gradient
  // bucket is in flight at a time (as FSDP2), not every one until the end.
  std::unordered_map<const ir::Node*, const ir::Node*> waitBy;
  const ir::Node* previousScatter = nullptr;
  for (const auto& n : g.nodes())
    if (n->target() == ir::kReduceScatter) {
      if (previousScatter) waitBy[previousScatter] = n.get();
      previousScatter = n.get();
    }
  for (ir::Node* c : collectives) {
    std::vector<ir::NamedArgument> args = c->inputs();
    args.push_back({"async", ir::Argument::boolean(true), true});
    c->setInputs(std::move(args));
    ir::Value* y = c->outputValues()[0];
    const std::string name = freshName(g, y->name() + "_wait");
    SPMD_ASSIGN_OR_RETURN(ir::Value * w, g.addValue(name, y->kind()));
    w->mutableType() = y->type();
    const ir::Node* first = nullptr;
    for (ir::Node* u : y->users())
      if (!first || u->index() < first->index()) first = u;
    if (auto by = waitBy.find(c); by != waitBy.end() && (!first || by->second->index() < first->index()))
      first = by->second;
    SPMD_ASSIGN_OR_RETURN(ir::Node * wait,
                          g.addNode(name, std::string(ir::kWait), {{"self", ir::Argument::tensor(y), false}},
                                    {ir::Argument::tensor(w)}));
    wait->mutableMetadata() = c->metadata();
    (first ? waitsBefore[first] : waitsAtEnd).push_back(wait);
    replacement.emplace(y, w);
    waits.insert(wait);
  }
  order.clear();
  for (const auto& n : g.nodes()) {
    if (waits.count(n.get())) continue;
    if (auto it = waitsBefore.find(n.get()); it != waitsBefore.end())
      order.insert(order.end(), it->second.begin(), it->second.end());
    order.push_back(n.get());
  }
  order.insert(order.end(), waitsAtEnd.begin(), waitsAtEnd.end());
  g.setNodeOrder(order);
  g.replaceUses(replacement, [&](const ir::Node& n) { return waits.count(&n) > 0; });
  syncSignatureOutputs(program);
  return g.verify();
}

}  // namespace spmd::passes
