// The IR text form, one line per symbol, tie, input, node and output; every
// argument named, every attribute of the IR spelled, so that parseProgram
// (FromText.cpp) reads it back to a program that prints the same:
//
//   program mlp (schema 8.17, torch 2.11.0+cu130)
//   input %x: f32[32, 64] user_input
//   %permute: f32[64, 256]{strides=[1, 64]} = aten.permute.default(self=%p_fc1_weight, dims=[1, 0])  #
//   m.py:37 output %addmm_1 user_output
//
// A type spells only what differs from the default: strides that are not
// row-major (none recorded reads as row-major), a device other than the
// CPU, requires_grad. An argument whose
// kind the text does not imply (an optional tensor, a list of SymInts with
// only constants) carries its kind: `optional_tensor(%x)`, `sym_ints([2, 3])`.
// Keyword-only arguments follow a `*`. The trailing comment is the node's
// source location; with PrintOptions::debugInfo the node's whole metadata
// follows the call in braces. Output is a pure function of the program.
#include <charconv>
#include <cmath>
#include <set>

#include "serialize/TextForm.h"
#include "serialize/ToText.h"

namespace spmd::serialize {

using namespace ir;  // NOLINT: the IR types throughout
namespace {

std::string printFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// `body` inside its kind's wrapper: "sym_ints([4])".
std::string withKind(Argument::Kind kind, const std::string& body) {
  return std::string(argumentKindName(kind).substr(3)) + "(" + body + ")";
}

std::string valueRef(const Value* v) { return v ? "%" + v->name() : "none"; }

template <typename F>
std::string list(size_t n, F item) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += item(i);
  }
  return s + "]";
}

std::string dims(const std::vector<Dim>& ds) {
  return list(ds.size(), [&](size_t i) { return ds[i].str(); });
}

// "f32[64, 256]{strides=[1, 64], device=cuda:0, requires_grad}".
std::string typeStr(const TensorType& t) {
  std::vector<std::string> attrs;
  // An expanded program's local values record no strides: nothing to spell.
  if (!t.strides.empty() && t.strides != contiguousStrides(t.sizes))
    attrs.push_back("strides=" + dims(t.strides));
  if (!(t.device == Device{})) attrs.push_back("device=" + deviceText(t.device));
  if (t.requiresGrad) attrs.emplace_back("requires_grad");
  std::string s = t.str();
  if (attrs.empty()) return s;
  s += "{";
  for (size_t i = 0; i < attrs.size(); ++i) s += (i ? ", " : "") + attrs[i];
  return s + "}";
}

std::string valueDecl(const Value* v) {
  if (!v) return "none";
  std::string s = "%" + v->name() + ": ";
  switch (v->kind()) {
    case ValueKind::Tensor:
      return s + typeStr(v->type());
    case ValueKind::SymInt:
      return s + "sym(" + v->symValue().str() + ")";
    case ValueKind::SymFloat:
      return s + "symfloat";
    case ValueKind::SymBool:
      return s + "symbool";
    case ValueKind::Token:
      return s + "token";
    case ValueKind::CustomObj:
      return s + "object";
  }
  return s;
}

// The argument's payload, without its kind.
std::string payload(const Argument& a) {
  using K = Argument::Kind;
  auto symItem = [&](size_t i) { return a.values[i] ? valueRef(a.values[i]) : std::to_string(a.ints[i]); };
  auto boolItem = [&](size_t i) { return std::string(a.ints[i] ? "true" : "false"); };
  switch (a.kind) {
    case K::None:
      return "none";
    case K::Tensor:
    case K::OptionalTensor:
      return valueRef(a.value());
    case K::Tensors:
    case K::OptionalTensors:
      return list(a.values.size(), [&](size_t i) { return valueRef(a.values[i]); });
    case K::Int:
      return std::to_string(a.ints[0]);
    case K::Ints:
      return list(a.ints.size(), [&](size_t i) { return std::to_string(a.ints[i]); });
    case K::Float:
      return printFloat(a.floats[0]);
    case K::Floats:
      return list(a.floats.size(), [&](size_t i) { return printFloat(a.floats[i]); });
    case K::Bool:
      return boolItem(0);
    case K::Bools:
      return list(a.ints.size(), boolItem);
    case K::String:
      return quoted(a.strings[0]);
    case K::Strings:
      return list(a.strings.size(), [&](size_t i) { return quoted(a.strings[i]); });
    case K::SymInt:
      return symItem(0);
    case K::SymBool:
      return a.values[0] ? valueRef(a.values[0]) : boolItem(0);
    case K::SymFloat:
      return a.values[0] ? valueRef(a.values[0]) : printFloat(a.floats[0]);
    case K::SymInts:
      return list(a.values.size(), symItem);
    case K::SymBools:
      return list(a.values.size(),
                  [&](size_t i) { return a.values[i] ? valueRef(a.values[i]) : boolItem(i); });
    case K::SymFloats:
      return list(a.values.size(),
                  [&](size_t i) { return a.values[i] ? valueRef(a.values[i]) : printFloat(a.floats[i]); });
    case K::ScalarType:
      return std::string(scalarTypeName(static_cast<ScalarType>(a.ints[0])));
    case K::MemoryFormat:
      return memoryFormatText(a.ints[0]);
    case K::Layout:
      return layoutText(a.ints[0]);
    case K::Device:
      return "device(" + deviceText(Device{a.strings[0], a.ints[0]}) + ")";
    case K::Complex:
      return "complex(" + printFloat(a.floats[0]) + ", " + printFloat(a.floats[1]) + ")";
    case K::IntLists: {
      std::string s = "[";
      size_t off = 0;
      for (size_t i = 0; i < a.listSizes.size(); ++i) {
        if (i) s += ", ";
        s += list(static_cast<size_t>(a.listSizes[i]),
                  [&](size_t j) { return std::to_string(a.ints[off + j]); });
        off += static_cast<size_t>(a.listSizes[i]);
      }
      return s + "]";
    }
  }
  return "?";
}

std::string metadataDict(const Node& node, bool debugInfo) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::string implied =
      node.outputValues().empty() || !node.outputValues()[0] ? std::string() : node.outputValues()[0]->name();
  if (node.name() != implied) entries.emplace_back("name", node.name());
  const NodeMetadata& m = node.metadata();
  if (debugInfo) {
    if (!m.stackTrace.empty()) entries.emplace_back("stack_trace", m.stackTrace);
    if (!m.nnModuleStack.empty()) entries.emplace_back("nn_module_stack", m.nnModuleStack);
    if (!m.torchFn.empty()) entries.emplace_back("torch_fn", m.torchFn);
    for (const auto& [k, v] : m.other) entries.emplace_back(k, v);
  }
  if (entries.empty()) return "";
  std::string s = " {";
  for (size_t i = 0; i < entries.size(); ++i)
    s += (i ? ", " : "") + entries[i].first + "=" + quoted(entries[i].second);
  return s + "}";
}

// "s52: [2, inf] hint 8" for each symbol with a range or a known hint.
std::string symbolLines(const ExportedProgram& p) {
  std::map<std::string, int64_t> hints = symbolHints(p.graph);
  std::set<std::string> names;
  for (const auto& [sym, r] : p.ranges) names.insert(sym);
  for (const auto& [sym, h] : hints) names.insert(sym);
  std::string s;
  for (const auto& sym : names) {
    s += "symbol " + sym + ":";
    if (auto r = p.ranges.find(sym); r != p.ranges.end())
      s += " [" + std::to_string(r->second.min) + ", " +
           (r->second.max == std::numeric_limits<int64_t>::max() ? std::string("inf")
                                                                 : std::to_string(r->second.max)) +
           "]";
    if (auto h = hints.find(sym); h != hints.end()) s += " hint " + std::to_string(h->second);
    s += "\n";
  }
  return s;
}

}  // namespace

std::string printArgument(const Argument& a) {
  std::string body = payload(a);
  if (impliedKind(a) == a.kind) return body;
  return withKind(a.kind, body);
}

std::string printNode(const Node& node, const PrintOptions& options) {
  std::string s;
  std::vector<std::string> outs;
  for (const Argument& o : node.outputs()) {
    std::string decl = o.kind == Argument::Kind::Tensors || o.kind == Argument::Kind::OptionalTensors
                           ? list(o.values.size(), [&](size_t j) { return valueDecl(o.values[j]); })
                       : o.values.empty() ? "none"
                                          : valueDecl(o.values[0]);
    outs.push_back(definedKind(o) == o.kind ? decl : withKind(o.kind, decl));
  }
  for (size_t i = 0; i < outs.size(); ++i) s += (i ? ", " : "") + outs[i];
  s += outs.empty() ? "" : " = ";
  s += node.target() + "(";
  bool keywords = false;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const NamedArgument& in = node.inputs()[i];
    if (i) s += ", ";
    if (in.keyword && !keywords) s += "*, ";
    keywords = keywords || in.keyword;
    s += in.name + "=" + printArgument(in.arg);
  }
  s += ")" + metadataDict(node, options.debugInfo);
  std::string loc = userSourceLine(node.metadata().stackTrace);
  if (!loc.empty()) {
    size_t colon = loc.find(':', loc.find(':') + 1);
    s += "  # " + loc.substr(0, colon);
  }
  return s;
}

std::string printProgram(const ExportedProgram& p, const PrintOptions& options) {
  std::string s = "program " + p.name + " (schema " + std::to_string(p.schemaMajor) + "." +
                  std::to_string(p.schemaMinor) + ", torch " + p.torchVersion + ")\n";
  s += symbolLines(p);
  for (const auto& [fqn, others] : p.tiedNames) {
    s += "tied " + fqn + " =";
    for (size_t i = 0; i < others.size(); ++i) s += (i ? ", " : " ") + others[i];
    s += "\n";
  }
  for (const auto& in : p.signature.inputs) {
    s += "input ";
    if (in.kind == InputKind::ConstantInput)
      s += in.name + " = " + printArgument(in.constant);
    else
      s += valueDecl(in.value);
    s += " " + std::string(inputKindName(in.kind));
    if (!in.target.empty()) s += " " + in.target;
    if (in.kind == InputKind::Buffer && !in.persistent) s += " non_persistent";
    s += "\n";
  }
  for (const auto& n : p.graph.nodes()) s += printNode(*n, options) + "\n";
  for (const auto& out : p.signature.outputs) {
    s += "output " + printArgument(out.arg) + " " + std::string(outputKindName(out.kind));
    if (!out.target.empty()) s += " " + out.target;
    s += "\n";
  }
  return s;
}

}  // namespace spmd::serialize
