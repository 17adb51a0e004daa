// The tensor-parallel seed of the local search: Megatron's column/row
// pairing read off the dataflow, so that the search starts from a layout
// no single move reaches (column and row weights pay off only together).
//
//   %mm   = mm(%norm, t(%wq))      wq: no weight matmul upstream   -> column, S(0)
//   %attn = sdpa(view(%mm), ...)
//   %mm_3 = mm(view(%attn), t(%wo)) wo: upstream of %attn is wq (column) -> row, S(1)
//
// A weight is the parameter a matmul (mm, addmm, matmul, linear) reads
// through views and transposes; its role comes from the first such matmul
// in program order (the forward pass): row when a column weight's matmul
// lies upstream of its activation operand (crossing any op but another
// weight matmul), else column.
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "autoshard/Variables.h"

namespace spmd::autoshard {
namespace {

bool isMatmul(const std::string& t) {
  return t == "aten.mm.default" || t == "aten.addmm.default" || t == "aten.matmul.default" ||
         t == "aten.linear.default";
}

bool isViewLike(const std::string& t) {
  return t == "aten.t.default" || t == "aten.permute.default" || t == "aten.transpose.int" ||
         t == "aten.view.default" || t == "aten._unsafe_view.default" || t == "aten.alias.default" ||
         t == "aten._to_copy.default" || t == "aten.reshape.default";
}

// The parameter `v` is (through view-like ops), or empty.
std::string paramBehind(const ir::Value* v, const std::unordered_map<const ir::Value*, std::string>& params) {
  for (int hops = 0; v && hops < 8; ++hops) {
    if (auto it = params.find(v); it != params.end()) return it->second;
    const ir::Node* n = v->producer();
    if (!n || !isViewLike(n->target())) return "";
    auto ins = n->inputValues();
    v = ins.empty() ? nullptr : ins[0];
  }
  return "";
}

}  // namespace

std::map<std::string, bool> rowParallelWeights(const ir::ExportedProgram& p) {
  std::unordered_map<const ir::Value*, std::string> params;
  for (const auto& in : p.signature.inputs)
    if (in.kind == ir::InputKind::Parameter && in.value) params[in.value] = in.target;
  std::map<std::string, bool> roles;                          // fqn -> row
  std::unordered_map<const ir::Node*, std::string> weightOf;  // weight matmuls
  for (const auto& node : p.graph.nodes()) {
    if (!isMatmul(node->target())) continue;
    std::string weight;
    const ir::Value* activation = nullptr;
    for (const ir::Value* v : node->inputValues()) {
      std::string w = paramBehind(v, params);
      if (!w.empty() && weight.empty())
        weight = w;
      else if (!activation && w.empty())
        activation = v;
    }
    if (weight.empty()) continue;
    weightOf[node.get()] = weight;
    if (roles.count(weight)) continue;
    // Upstream of the activation, stopping at weight matmuls.
    bool afterColumn = false;
    std::vector<const ir::Value*> stack{activation};
    std::unordered_set<const ir::Value*> seen;
    while (!stack.empty() && !afterColumn) {
      const ir::Value* v = stack.back();
      stack.pop_back();
      if (!v || !seen.insert(v).second || seen.size() > 4096) continue;
      const ir::Node* n = v->producer();
      if (!n) continue;
      if (auto it = weightOf.find(n); it != weightOf.end()) {
        auto role = roles.find(it->second);
        afterColumn = role != roles.end() && !role->second;
        continue;
      }
      for (const ir::Value* in : n->inputValues()) stack.push_back(in);
    }
    roles[weight] = afterColumn;
  }
  return roles;
}

}  // namespace spmd::autoshard
