// The module tree of a compiled program and the module of each op.
//
//   weights layers.0.wq.weight, layers.0.wk.weight, norm.weight
//   -> modules "", "layers", "layers.0", "layers.0.wk", "layers.0.wq", "norm"
//
// A node's module is the innermost entry of its nn_module_stack. Nodes
// without one (collectives, layout anchors, every op of a joint train step,
// whose export carries no module stack) take the module of the parameter
// whose gradient output they compute, else of the weight they read, else the module of their first input's
// producer when they are spmd ops, else that of the last op that read a weight (ops run in program order, so
// an attention's softmax lands with the projection before it).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "explain/Internal.h"
#include "ir/Collectives.h"
#include "passes/Optimizer.h"

namespace spmd::explain::detail {
namespace {

void addWithPrefixes(std::set<std::string>& paths, const std::string& path) {
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1))
    paths.insert(path.substr(0, dot));
  paths.insert(path);
}

// The weight FQN of each graph input that is a parameter, buffer or constant.
std::map<const ir::Value*, std::string> weightInputs(const program::Program& p) {
  std::map<const ir::Value*, std::string> out;
  for (const auto& in : p.graph.signature.inputs)
    if (in.value && !in.target.empty() && in.kind != ir::InputKind::UserInput) out[in.value] = in.target;
  return out;
}

// For the nodes that compute a parameter's gradient output (and the
// collectives that reduce it), the parameter's module.
std::map<const ir::Node*, std::string> gradientOwners(const program::Program& p) {
  std::map<const ir::Node*, std::string> out;
  for (const auto& o : p.graph.signature.outputs) {
    if (o.kind != ir::OutputKind::GradientToParameter) continue;
    for (const ir::Value* v = o.arg.value(); v && v->producer();) {
      const ir::Node* n = v->producer();
      if (!out.emplace(n, weightModule(o.target)).second) break;
      std::vector<ir::Value*> ins = n->inputValues();
      bool passThrough = ir::isSpmdOp(n->target()) || n->target() == "aten.alias.default";
      v = passThrough && !ins.empty() ? ins[0] : nullptr;
    }
  }
  return out;
}

// True for ops whose result is a view, copy or redistribution of their
// first input (a weight read through them is still that weight).
bool passesWeightOn(const std::string& target) {
  static const std::set<std::string, std::less<>> kViews = {
      "aten.alias.default",        "aten.permute.default",  "aten.t.default",         "aten.view.default",
      "aten._unsafe_view.default", "aten.expand.default",   "aten.transpose.int",     "aten.reshape.default",
      "aten.clone.default",        "aten._to_copy.default", "aten.unsqueeze.default", "aten.squeeze.dim"};
  return ir::isSpmdOp(target) || kViews.count(target) > 0;
}

// Bucketed gathers (BucketCollectives): cat(weights) -> all_gather -> wait
// -> view -> split_with_sizes; each piece the split gives back is the
// weight at its position in the cat.
void trackBuckets(const ir::Node& n, const std::vector<ir::Value*>& ins,
                  std::unordered_map<const ir::Value*, int>& weightOf,
                  std::unordered_map<const ir::Value*, std::vector<int>>& buckets) {
  std::vector<ir::Value*> outs = n.outputValues();
  if (n.target() == "aten.cat.default" && !ins.empty() && outs.size() == 1) {
    std::vector<int> parts;
    for (const ir::Value* v : ins)
      if (auto it = weightOf.find(v); it != weightOf.end()) parts.push_back(it->second);
    if (parts.size() == ins.size()) buckets[outs[0]] = std::move(parts);
    return;
  }
  if (ins.empty()) return;
  auto it = buckets.find(ins[0]);
  if (it == buckets.end()) return;
  if (n.target() == "aten.split_with_sizes.default" || n.target() == "aten.split.Tensor") {
    for (size_t i = 0; i < outs.size() && i < it->second.size(); ++i) weightOf[outs[i]] = it->second[i];
  } else if (passesWeightOn(n.target())) {
    std::vector<int> parts = it->second;
    for (const ir::Value* v : outs) buckets[v] = parts;
  }
}

// Gives each node of `p` a module (see the file comment).
void assignNodes(const program::Program& p, ModuleMap& m) {
  const auto& nodes = p.graph.graph.nodes();
  std::unordered_map<const ir::Value*, int> weightOf;  // values that are (views of) a weight
  for (const auto& [v, fqn] : weightInputs(p)) weightOf[v] = m.indexOf(weightModule(fqn));
  auto gradOwners = gradientOwners(p);
  std::unordered_map<const ir::Value*, std::vector<int>> buckets;
  m.nodeModule.assign(nodes.size(), 0);
  int cursor = 0;  // module of the last op that read a weight
  for (const auto& n : nodes) {
    auto entries = ir::moduleFrames(n->metadata().nnModuleStack);
    int mod = entries.empty() ? -1 : m.indexOf(entries.back().path);
    if (auto it = gradOwners.find(n.get()); mod < 0 && it != gradOwners.end()) mod = m.indexOf(it->second);
    std::vector<ir::Value*> ins = n->inputValues();
    int weight = -1;
    for (size_t i = 0; weight < 0 && i < ins.size(); ++i)
      if (auto it = weightOf.find(ins[i]); it != weightOf.end()) weight = it->second;
    if (weight >= 0 && passesWeightOn(n->target()) && weightOf.count(ins[0]))
      for (const ir::Value* v : n->outputValues()) weightOf[v] = weight;
    trackBuckets(*n, ins, weightOf, buckets);
    if (mod < 0 && weight >= 0) mod = cursor = weight;
    if (mod < 0 && passesWeightOn(n->target()) && !ins.empty() && ins[0]->producer())
      mod = m.nodeModule[static_cast<size_t>(ins[0]->producer()->index())];
    m.nodeModule[static_cast<size_t>(n->index())] = mod < 0 ? cursor : mod;
  }
}

}  // namespace

std::string weightModule(const std::string& fqn) {
  std::string f = fqn;
  const std::string prefix = passes::kOptimizerPrefix;
  if (f.rfind(prefix, 0) == 0) {
    f = f.substr(prefix.size());  // optim.<param fqn>.<state>
    size_t dot = f.rfind('.');
    f = dot == std::string::npos ? "" : f.substr(0, dot);
  }
  size_t dot = f.rfind('.');
  return dot == std::string::npos ? "" : f.substr(0, dot);
}

int ModuleMap::indexOf(const std::string& path) const {
  for (std::string p = path;; p = p.substr(0, p.rfind('.'))) {
    auto it = std::lower_bound(paths.begin(), paths.end(), p);
    if (it != paths.end() && *it == p) return static_cast<int>(it - paths.begin());
    if (p.find('.') == std::string::npos) return 0;
  }
}

ModuleMap buildModules(const program::Program& p) {
  ModuleMap m;
  std::set<std::string> paths = {""};
  std::map<std::string, std::string> types;
  const auto& nodes = p.graph.graph.nodes();
  for (const auto& w : p.weights) {
    std::string mod = weightModule(w.fqn);
    if (!mod.empty()) addWithPrefixes(paths, mod);
  }
  for (const auto& n : nodes)
    for (const auto& [path, type] : ir::moduleFrames(n->metadata().nnModuleStack)) {
      m.fromStack = true;
      if (!path.empty()) addWithPrefixes(paths, path);
      types.emplace(path, type);
    }
  m.paths.assign(paths.begin(), paths.end());
  for (const auto& path : m.paths) m.types.push_back(types.count(path) ? types[path] : "");

  assignNodes(p, m);
  return m;
}

}  // namespace spmd::explain::detail
