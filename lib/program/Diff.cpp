// The `spmdc diff` text (see Diff.h).
//
//   a: %relu = aten.relu.default(%all_reduce)     b: %relu = aten.relu.default(%all_gather)
//   -> "~ %relu:" followed by the old line ("- ") and the new line ("+ ")
//
// Each section is computed from name-keyed maps, walked in program order.
#include "program/Diff.h"

#include <map>
#include <set>
#include <unordered_map>

#include "program/Dump.h"
#include "serialize/ToText.h"

namespace spmd::program {
namespace {

std::string meshStr(const sharding::Mesh& m) { return m.numAxes() == 0 ? "(none)" : m.str(); }

std::string inputKey(const ir::InputSpec& in) {
  return in.kind == ir::InputKind::ConstantInput ? in.name : "%" + in.name;
}

// The input's type (or constant) without its name: "f32[4, 4]", "0.5".
std::string declType(const ir::InputSpec& in) {
  std::string d = inputDecl(in);
  size_t sep = in.kind == ir::InputKind::ConstantInput ? d.find(" = ") : d.find(": ");
  return sep == std::string::npos ? d : d.substr(sep + (in.kind == ir::InputKind::ConstantInput ? 3 : 2));
}

void diffInputs(const Program& a, const Program& b, std::string& out) {
  auto index = [](const Program& p) {
    std::unordered_map<std::string, size_t> m;
    for (size_t i = 0; i < p.graph.signature.inputs.size(); ++i) m[inputKey(p.graph.signature.inputs[i])] = i;
    return m;
  };
  auto ia = index(a), ib = index(b);
  auto spec = [](const Program& p, size_t i) { return i < p.inputs.size() ? p.inputs[i].spec.str() : "?"; };
  for (size_t i = 0; i < a.graph.signature.inputs.size(); ++i) {
    const auto& in = a.graph.signature.inputs[i];
    auto it = ib.find(inputKey(in));
    if (it == ib.end()) {
      out += "input - " + inputDecl(in) + "  " + spec(a, i) + "\n";
      continue;
    }
    std::string sa = spec(a, i), sb = spec(b, it->second);
    if (sa != sb)
      out.append("input ").append(inputKey(in)).append(": ").append(sa).append(" -> ").append(sb) += '\n';
    std::string da = declType(in), db = declType(b.graph.signature.inputs[it->second]);
    if (da != db)
      out.append("input ").append(inputKey(in)).append(": ").append(da).append(" -> ").append(db) += '\n';
  }
  for (size_t i = 0; i < b.graph.signature.inputs.size(); ++i) {
    const auto& in = b.graph.signature.inputs[i];
    if (!ia.count(inputKey(in))) out += "input + " + inputDecl(in) + "  " + spec(b, i) + "\n";
  }
}

std::string outputLabel(const ir::OutputSpec& o) {
  std::string s = serialize::printArgument(o.arg) + " " + std::string(ir::outputKindName(o.kind));
  return o.target.empty() ? s : s + " " + o.target;
}

void diffOutputs(const Program& a, const Program& b, std::string& out) {
  const auto& oa = a.graph.signature.outputs;
  const auto& ob = b.graph.signature.outputs;
  auto spec = [](const Program& p, size_t i) { return i < p.outputs.size() ? p.outputs[i].spec.str() : "?"; };
  for (size_t i = 0; i < std::max(oa.size(), ob.size()); ++i) {
    std::string n = std::to_string(i);
    if (i >= ob.size()) {
      out += "output - " + n + " (" + outputLabel(oa[i]) + ")  " + spec(a, i) + "\n";
    } else if (i >= oa.size()) {
      out += "output + " + n + " (" + outputLabel(ob[i]) + ")  " + spec(b, i) + "\n";
    } else {
      if (outputLabel(oa[i]) != outputLabel(ob[i]))
        out += "output " + n + ": " + outputLabel(oa[i]) + " -> " + outputLabel(ob[i]) + "\n";
      if (spec(a, i) != spec(b, i))
        out += "output " + n + " (" + outputLabel(ob[i]) + "): " + spec(a, i) + " -> " + spec(b, i) + "\n";
    }
  }
}

void diffNodes(const Program& a, const Program& b, std::string& out) {
  auto lines = [](const Program& p) {
    std::unordered_map<std::string, std::string> m;
    for (const auto& n : p.graph.graph.nodes()) m[n->name()] = serialize::printNode(*n);
    return m;
  };
  auto la = lines(a), lb = lines(b);
  std::string changed;
  for (const auto& n : a.graph.graph.nodes())
    if (!lb.count(n->name())) out += "- " + la[n->name()] + "\n";
  for (const auto& n : b.graph.graph.nodes()) {
    const std::string& line = lb[n->name()];
    auto it = la.find(n->name());
    if (it == la.end()) {
      out += "+ " + line + "\n";
    } else if (it->second != line) {
      changed += "~ %" + n->name() + ":\n    - " + it->second + "\n    + " + line + "\n";
    }
  }
  out += changed;
}

void diffCollectives(const Program& a, const Program& b, std::string& out) {
  auto ca = summarizeCollectives(a), cb = summarizeCollectives(b);
  std::set<std::string> kinds;
  for (const auto& [k, v] : ca) kinds.insert(k);
  for (const auto& [k, v] : cb) kinds.insert(k);
  for (const auto& k : kinds) {
    int64_t na = ca.count(k) ? ca[k].count : 0;
    int64_t nb = cb.count(k) ? cb[k].count : 0;
    if (na != nb) out += "collective " + k + ": " + std::to_string(na) + " -> " + std::to_string(nb) + "\n";
  }
}

void diffWeights(const Program& a, const Program& b, std::string& out) {
  std::map<std::string, const WeightEntry*> wa, wb;
  for (const auto& w : a.weights) wa[w.fqn] = &w;
  for (const auto& w : b.weights) wb[w.fqn] = &w;
  for (const auto& w : a.weights) {
    auto it = wb.find(w.fqn);
    if (it == wb.end()) {
      out += "weight - " + w.fqn + "  " + w.spec.str() + "\n";
    } else if (w.spec != it->second->spec) {
      out += "weight " + w.fqn + ": " + w.spec.str() + " -> " + it->second->spec.str() + "\n";
    }
  }
  for (const auto& w : b.weights)
    if (!wa.count(w.fqn)) out += "weight + " + w.fqn + "  " + w.spec.str() + "\n";
}

}  // namespace

DiffResult diffPrograms(const Program& a, const Program& b) {
  DiffResult r;
  if (a.mesh != b.mesh) r.text += "mesh: " + meshStr(a.mesh) + " -> " + meshStr(b.mesh) + "\n";
  diffInputs(a, b, r.text);
  diffOutputs(a, b, r.text);
  diffNodes(a, b, r.text);
  diffCollectives(a, b, r.text);
  diffWeights(a, b, r.text);
  r.same = r.text.empty();
  return r;
}

}  // namespace spmd::program
