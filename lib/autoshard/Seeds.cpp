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

// The option index of `g` whose layout is S(0) on every axis (gathered as
// asked; parameters of hsdp: R on axis 0), or 0 when it has none.
size_t presetOption(const Group& g, const sharding::Mesh& mesh, bool gathered, bool hsdp) {
  for (size_t i = 1; i < g.options.size(); ++i) {
    const Option& o = g.options[i];
    if (o.gathered != gathered) continue;
    bool ok = true;
    for (int64_t a = 0; a < mesh.numAxes(); ++a) {
      const auto& p = o.spec.placements[static_cast<size_t>(a)];
      bool wantR = (hsdp && a == 0) || mesh.size(a) == 1;
      ok = ok && (wantR ? p.isReplicate() : p.isShard(0));
    }
    if (ok) return i;
  }
  return 0;
}

// The option of `g` that is `want` (not gathered), or 0.
size_t optionWith(const Group& g, const sharding::ShardingSpec& want) {
  for (size_t i = 0; i < g.options.size(); ++i)
    if (!g.options[i].gathered && g.options[i].spec == want) return i;
  return 0;
}

// Megatron on the last mesh axis (roles from rowParallelWeights), the batch
// split over the other axes.
std::vector<size_t> tensorParallelSeed(const std::vector<Group>& gs, const sharding::Mesh& mesh,
                                       const std::map<std::string, bool>& rows) {
  std::vector<size_t> c(gs.size(), 0);
  const int64_t last = mesh.numAxes() - 1;
  for (size_t i = 0; i < gs.size(); ++i) {
    sharding::ShardingSpec want = sharding::ShardingSpec::replicated(mesh.numAxes());
    if (gs[i].isParam) {
      auto it = rows.find(gs[i].names.front());
      if (it == rows.end()) continue;
      want.placements[static_cast<size_t>(last)] = sharding::Placement::shard(it->second ? 1 : 0);
    } else {
      for (int64_t a = 0; a < last; ++a)
        want.placements[static_cast<size_t>(a)] = sharding::Placement::shard(0);
    }
    c[i] = optionWith(gs[i], want);
  }
  return c;
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

std::vector<std::pair<std::string, std::vector<size_t>>> seeds(const std::vector<Group>& gs,
                                                               const sharding::Mesh& mesh,
                                                               const std::map<std::string, bool>& rows) {
  std::vector<std::pair<std::string, std::vector<size_t>>> out;
  out.emplace_back("replicated", std::vector<size_t>(gs.size(), 0));
  out.emplace_back("tensor-parallel", tensorParallelSeed(gs, mesh, rows));
  for (const char* name : {"dp", "fsdp", "hsdp"}) {
    std::string n = name;
    if (n == "hsdp" && mesh.numAxes() != 2) continue;
    std::vector<size_t> c(gs.size(), 0);
    for (size_t i = 0; i < gs.size(); ++i)
      c[i] = !gs[i].isParam ? presetOption(gs[i], mesh, false, false)
             : n == "dp"    ? 0
                            : presetOption(gs[i], mesh, true, n == "hsdp");
    out.emplace_back(n, c);
  }
  return out;
}

}  // namespace spmd::autoshard
