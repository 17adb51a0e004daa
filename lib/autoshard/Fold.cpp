// Folding repeated layers (see Fold.h for the worked example).
//
// Invariants: nothing changes until the whole stack is checked; layer k's
// window of a part is [start + k * period, ... + |period|); a node's twin is
// the node one period on (layer k+1); the removed layers are keep..L-1, and
// every value a kept node or a graph output read from them is replaced by
// the value the same read has one stack further on (a kept layer reads what
// layer k + L - keep reads: the chain's exit) or one stack back (the
// boundary reads layer keep-1's twin of what it read of layer L-1).
#include "autoshard/Fold.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "serialize/ToText.h"

namespace spmd::autoshard {
namespace {

bool isIndex(const std::string& c) {
  return !c.empty() && c.size() < 9 &&
         std::all_of(c.begin(), c.end(), [](char ch) { return std::isdigit(ch); }) &&
         (c == "0" || c[0] != '0');
}

// The stored inputs of a stack: inputs[k][j] is the signature index of
// layer k's j-th rest (rests in name order).
struct Stack {
  std::string prefix;
  std::vector<std::vector<size_t>> inputs;
  int layers() const { return static_cast<int>(inputs.size()); }
};

// The stack with the most stored inputs: `<prefix>.<k>.<rest>` for every k
// in 0..L-1 with one set of rests.
std::optional<Stack> findStack(const ir::ExportedProgram& p) {
  std::map<std::string, std::map<int, std::map<std::string, size_t>>> byPrefix;
  const auto& ins = p.signature.inputs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ir::isStored(ins[i].kind) || !ins[i].value) continue;
    std::vector<std::string> parts;
    for (size_t a = 0, b; a <= ins[i].target.size(); a = b + 1) {
      b = std::min(ins[i].target.find('.', a), ins[i].target.size());
      parts.push_back(ins[i].target.substr(a, b - a));
    }
    std::string prefix;
    for (size_t c = 0; c + 1 < parts.size(); prefix += (c ? "." : "") + parts[c], ++c) {
      if (c == 0 || !isIndex(parts[c])) continue;
      std::string rest;
      for (size_t r = c + 1; r < parts.size(); ++r) rest += (r > c + 1 ? "." : "") + parts[r];
      byPrefix[prefix][std::stoi(parts[c])][rest] = i;
    }
  }
  std::optional<Stack> best;
  size_t bestCount = 0;
  for (const auto& [prefix, layers] : byPrefix) {
    const auto& first = layers.begin()->second;
    bool ok = layers.begin()->first == 0 && layers.rbegin()->first + 1 == static_cast<int>(layers.size());
    for (const auto& [k, rests] : layers) {
      ok = ok && rests.size() == first.size();
      for (auto a = rests.begin(), b = first.begin(); ok && a != rests.end(); ++a, ++b)
        ok = a->first == b->first;
    }
    if (!ok || layers.size() * first.size() <= bestCount) continue;
    bestCount = layers.size() * first.size();
    Stack s{prefix, {}};
    for (const auto& [k, rests] : layers) {
      s.inputs.emplace_back();
      for (const auto& [rest, i] : rests) s.inputs.back().push_back(i);
    }
    best = std::move(s);
  }
  return best;
}

// What must repeat of a node: target, argument names and constants, result
// types (not the values it reads).
std::string nodeShape(const ir::Node& n) {
  std::string s = n.target();
  for (const auto& in : n.inputs()) {
    s += '|' + in.name + ':' + std::to_string(static_cast<int>(in.arg.kind));
    if (in.arg.values.empty()) {
      s += serialize::printArgument(in.arg);
      continue;
    }
    for (size_t i = 0; i < in.arg.values.size(); ++i)
      s += in.arg.values[i]         ? std::string("v")
           : i < in.arg.ints.size() ? std::to_string(in.arg.ints[i])
                                    : "_";
  }
  for (const ir::Value* v : n.outputValues())
    s += '>' + (v->isTensor() ? v->type().str() : std::to_string(static_cast<int>(v->kind())));
  return s;
}

// One repeating part of the program: layer k's window is
// [start + k * period, start + k * period + |period|).
struct Part {
  int period = 0;
  int start = 0;
};

// Everything foldLayers() decides before it changes the program.
class Folder {
 public:
  Folder(ir::ExportedProgram& p, Stack s, int keep) : p_(p), g_(p.graph), s_(std::move(s)), keep_(keep) {}

  Status analyze() {
    const int n = static_cast<int>(g_.nodes().size());
    layerOf_.assign(static_cast<size_t>(n), -1);
    partOf_.assign(static_cast<size_t>(n), -1);
    for (size_t k = 0; k < s_.inputs.size(); ++k)
      for (size_t j = 0; j < s_.inputs[k].size(); ++j)
        stackInput_[p_.signature.inputs[s_.inputs[k][j]].value] = {static_cast<int>(k), j};
    SPMD_RETURN_IF_ERROR(findParts());
    for (const auto& n : g_.nodes()) shape_.push_back(nodeShape(*n));
    for (size_t i = 0; i < parts_.size(); ++i) SPMD_RETURN_IF_ERROR(place(i));
    SPMD_RETURN_IF_ERROR(checkTwins());
    return planRewiring();
  }

  void apply();

 private:
  int layers() const { return s_.layers(); }
  const ir::Node& node(int i) const { return *g_.nodes()[static_cast<size_t>(i)]; }
  int layerOfValue(const ir::Value* v) const {
    if (v->producer()) return layerOf_[static_cast<size_t>(v->producer()->index())];
    auto it = stackInput_.find(v);
    return it == stackInput_.end() ? -1 : it->second.first;
  }
  bool external(const ir::Value* v) const { return layerOfValue(v) < 0; }
  bool removed(const ir::Value* v) const { return layerOfValue(v) >= keep_; }
  const ir::Value* shifted(const ir::Value* v, int layers) const;
  Status findParts();
  Status place(size_t part);
  Status checkTwins();
  Status planRewiring();
  Status error(const std::string& what) const {
    return Status::error("the layers of " + s_.prefix + " do not fold: " + what);
  }

  ir::ExportedProgram& p_;
  ir::Graph& g_;
  Stack s_;
  int keep_;
  std::unordered_map<const ir::Value*, std::pair<int, size_t>> stackInput_;  // -> (layer, rest)
  std::vector<Part> parts_;
  std::vector<std::vector<int>> seeds_;  // by part: layer 0's nodes that read stack inputs
  std::vector<std::string> shape_;       // by node: nodeShape()
  std::vector<int> layerOf_, partOf_;    // by node; -1: outside the stack
  // The rewiring: (node index, operand position in inputValues order) -> value.
  std::map<std::pair<int, size_t>, ir::Value*> rewire_;
  std::map<size_t, ir::Value*> outputRewire_;  // graph output -> value
  std::vector<size_t> dropOutputs_;            // graph outputs of removed layers
};

// The value `v` becomes `layers` layers on (negative: back): the same result
// of the node that many periods away, or the same rest's stored input.
const ir::Value* Folder::shifted(const ir::Value* v, int layers) const {
  int layer = layerOfValue(v);
  if (layer < 0 || layer + layers < 0 || layer + layers >= this->layers()) return nullptr;
  if (!v->producer()) {
    auto [k, j] = stackInput_.at(v);
    const int to = k + layers;
    return p_.signature.inputs[s_.inputs[static_cast<size_t>(to)][j]].value;
  }
  const ir::Node& n = *v->producer();
  const Part& part = parts_[static_cast<size_t>(partOf_[static_cast<size_t>(n.index())])];
  const ir::Node& m = node(n.index() + layers * part.period);
  auto outs = n.outputValues(), twins = m.outputValues();
  auto it = std::find(outs.begin(), outs.end(), v);
  if (twins.size() != outs.size() || it == outs.end()) return nullptr;
  return twins[static_cast<size_t>(it - outs.begin())];
}

// The periods: each use of a stack input lies a fixed distance after (or
// before) the same use in the layer before.
Status Folder::findParts() {
  std::map<int, std::vector<int>> seeds;  // period -> layer 0's nodes
  const auto& ins = p_.signature.inputs;
  for (size_t j = 0; j < s_.inputs[0].size(); ++j) {
    std::vector<std::vector<int>> uses;
    for (const auto& layer : s_.inputs) {
      uses.emplace_back();
      for (const ir::Node* u : ins[layer[j]].value->users()) uses.back().push_back(u->index());
      std::sort(uses.back().begin(), uses.back().end());
      if (uses.back().size() != uses[0].size())
        return error(ins[layer[j]].target + " has " + std::to_string(uses.back().size()) + " uses, " +
                     ins[s_.inputs[0][j]].target + " " + std::to_string(uses[0].size()));
    }
    for (size_t u = 0; u < uses[0].size(); ++u) {
      int period = uses[1][u] - uses[0][u];
      for (size_t k = 1; k < uses.size(); ++k)
        if (uses[k][u] - uses[k - 1][u] != period || period == 0)
          return error("the uses of " + ins[s_.inputs[k][j]].target + " do not repeat with one period");
      seeds[period].push_back(uses[0][u]);
    }
  }
  if (seeds.empty()) return error("its inputs are not read");
  for (auto& [period, nodes] : seeds) {
    parts_.push_back({period, 0});
    seeds_.push_back(std::move(nodes));
  }
  return Status::ok();
}

// Layer 0's window of a part: the first start whose windows hold layer 0's
// seeds and repeat node for node; marks each node's layer.
Status Folder::place(size_t i) {
  Part& part = parts_[i];
  const int n = static_cast<int>(g_.nodes().size()), len = std::abs(part.period), L = layers();
  const auto [lo, hi] = std::minmax_element(seeds_[i].begin(), seeds_[i].end());
  // The nodes [first, last) that must equal their twin, for layer 0 at `start`.
  auto span = [&](int start) {
    int a = std::min(start, start + (L - 2) * part.period),
        b = std::max(start, start + (L - 2) * part.period);
    return std::make_pair(a, b + len);
  };
  std::vector<int> bad(static_cast<size_t>(n) + 1, 0);  // prefix counts of nodes unlike their twin
  for (int x = 0; x < n; ++x) {
    int t = x + part.period;
    bad[static_cast<size_t>(x) + 1] =
        bad[static_cast<size_t>(x)] +
        (t < 0 || t >= n || shape_[static_cast<size_t>(x)] != shape_[static_cast<size_t>(t)]);
  }
  for (int start = std::max(0, *hi - len + 1); start <= *lo; ++start) {
    auto [a, b] = span(start);
    int lastEnd = start + (L - 1) * part.period + len;
    if (a < 0 || b > n || lastEnd > n || start + (L - 1) * part.period < 0) continue;
    if (bad[static_cast<size_t>(b)] != bad[static_cast<size_t>(a)]) continue;
    part.start = start;
    for (int k = 0; k < L; ++k)
      for (int x = start + k * part.period; x < start + k * part.period + len; ++x) {
        if (layerOf_[static_cast<size_t>(x)] >= 0)
          return error("two parts overlap at node %" + node(x).name());
        layerOf_[static_cast<size_t>(x)] = k;
        partOf_[static_cast<size_t>(x)] = static_cast<int>(i);
      }
    return Status::ok();
  }
  return error("the nodes around %" + node(*lo).name() + " do not repeat every " +
               std::to_string(part.period) + " nodes for " + std::to_string(L) + " layers");
}

// Every operand of a node in layer k+1 is its twin's operand one layer on,
// the same outside value, or the chain's entry (layer 0's twin reads layer
// 0 where layer 0 read the boundary) or exit (layer L-1 reads the boundary
// where layer L-2 read layer L-1).
Status Folder::checkTwins() {
  const int L = layers();
  for (const auto& up : g_.nodes()) {
    const int x = up->index(), k = layerOf_[static_cast<size_t>(x)];
    if (k < 0 || k == L - 1) continue;
    const ir::Node& twin = node(x + parts_[static_cast<size_t>(partOf_[static_cast<size_t>(x)])].period);
    auto a = up->inputValues(), b = twin.inputValues();
    if (a.size() != b.size())
      return error("%" + up->name() + " and %" + twin.name() + " read different counts");
    for (size_t s = 0; s < a.size(); ++s) {
      const ir::Value* t = shifted(a[s], 1);
      bool ok = t ? b[s] == t
                  : (external(a[s]) && (b[s] == a[s] || (k == 0 && layerOfValue(b[s]) == 0))) ||
                        (layerOfValue(a[s]) == L - 1 && k == L - 2 && external(b[s]));
      if (!ok)
        return error("%" + twin.name() + " reads %" + b[s]->name() + " where %" + up->name() + " reads %" +
                     a[s]->name());
    }
  }
  return Status::ok();
}

// What every kept node and graph output reads instead of a removed value.
Status Folder::planRewiring() {
  const int L = layers(), gone = L - keep_;
  for (const auto& up : g_.nodes()) {
    const int x = up->index(), k = layerOf_[static_cast<size_t>(x)];
    if (k >= keep_) continue;
    auto ins = up->inputValues();
    for (size_t s = 0; s < ins.size(); ++s) {
      if (!removed(ins[s])) continue;
      const ir::Value* r = nullptr;
      if (k >= 0) {  // a kept layer reads what its twin in layer k + gone reads (the chain's exit)
        auto far = node(x + gone * parts_[static_cast<size_t>(partOf_[static_cast<size_t>(x)])].period)
                       .inputValues();
        r = s < far.size() ? far[s] : nullptr;
      } else if (layerOfValue(ins[s]) == L - 1) {  // the boundary reads the last kept layer
        r = shifted(ins[s], -gone);
      }
      if (!r || removed(r))
        return error("%" + up->name() + " reads %" + ins[s]->name() + " of a removed layer");
      rewire_[{x, s}] = const_cast<ir::Value*>(r);
    }
  }
  std::unordered_map<std::string, int> layerOfTarget;
  for (size_t k = 0; k < s_.inputs.size(); ++k)
    for (size_t i : s_.inputs[k]) layerOfTarget[p_.signature.inputs[i].target] = static_cast<int>(k);
  const auto& outs = g_.outputs();
  for (size_t o = 0; o < outs.size() && o < p_.signature.outputs.size(); ++o) {
    auto t = layerOfTarget.find(p_.signature.outputs[o].target);
    if (t != layerOfTarget.end() && t->second >= keep_) {
      dropOutputs_.push_back(o);
      continue;
    }
    const ir::Value* v = outs[o].value();
    if (!v || !removed(v)) continue;
    const ir::Value* r = layerOfValue(v) == L - 1 ? shifted(v, -gone) : nullptr;
    if (!r) return error("output " + std::to_string(o) + " reads %" + v->name() + " of a removed layer");
    outputRewire_[o] = const_cast<ir::Value*>(r);
  }
  return Status::ok();
}

void Folder::apply() {
  for (const auto& up : g_.nodes()) {
    if (layerOf_[static_cast<size_t>(up->index())] >= keep_) continue;
    std::vector<ir::NamedArgument> ins = up->inputs();
    size_t s = 0;
    for (auto& in : ins)
      for (ir::Value*& v : in.arg.values) {
        if (!v) continue;
        if (auto it = rewire_.find({up->index(), s}); it != rewire_.end()) v = it->second;
        ++s;
      }
    up->setInputs(std::move(ins));
  }
  auto& outs = g_.mutableOutputs();
  for (const auto& [o, v] : outputRewire_) outs[o] = ir::Argument::tensor(v);
  for (auto it = dropOutputs_.rbegin(); it != dropOutputs_.rend(); ++it) {
    outs.erase(outs.begin() + static_cast<std::ptrdiff_t>(*it));
    p_.signature.outputs.erase(p_.signature.outputs.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  // eraseNodes() renumbers only after it removed: layerOf_ indexes what it asks about.
  g_.eraseNodes([&](const ir::Node& n) { return layerOf_[static_cast<size_t>(n.index())] >= keep_; });
  auto drop = [&](const ir::Value* v) {
    auto it = stackInput_.find(v);
    return it != stackInput_.end() && it->second.first >= keep_;
  };
  g_.eraseInputs([&](const ir::Value& v) { return drop(&v); });
  auto& specs = p_.signature.inputs;
  specs.erase(
      std::remove_if(specs.begin(), specs.end(), [&](const ir::InputSpec& in) { return drop(in.value); }),
      specs.end());
}

}  // namespace

std::optional<std::string> layerStackPrefix(const ir::ExportedProgram& program) {
  std::optional<Stack> s = findStack(program);
  if (!s) return std::nullopt;
  return s->prefix;
}

Expected<FoldedStack> foldLayers(ir::ExportedProgram& program, int keep) {
  std::optional<Stack> stack = findStack(program);
  if (!stack) return Status::error("no stored inputs repeat per layer (<prefix>.<k>.<name>)");
  if (keep < 1 || stack->layers() <= keep + 1)
    return Status::error("the stack " + stack->prefix + " has " + std::to_string(stack->layers()) +
                         " layers: too few to keep " + std::to_string(keep));
  FoldedStack out{stack->prefix, stack->layers(), keep};
  // The first layer may differ from the others (one that also computes
  // what they all reuse: sizes of a dynamic batch, a mask): then the stack
  // is layers 1..L-1 and layer 0 is kept as part of the rest.
  Status first = Status::ok();
  for (int skip = 0; skip < 2 && keep - skip >= 1 && stack->layers() - skip > keep - skip + 1; ++skip) {
    Stack s = *stack;
    s.inputs.erase(s.inputs.begin(), s.inputs.begin() + skip);
    Folder f(program, std::move(s), keep - skip);
    Status st = f.analyze();
    if (!st.isOk()) {
      if (skip == 0) first = st;
      continue;
    }
    f.apply();
    st = program.graph.verify();
    if (!st.isOk()) return st.withContext("folding the layers of " + out.prefix + " (program left changed)");
    return out;
  }
  return first;
}

}  // namespace spmd::autoshard
