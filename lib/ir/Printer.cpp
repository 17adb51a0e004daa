// The IR text form, one line per input, node and output:
//
//   program mlp (schema 8.17, torch 2.11.0+cu130)
//   input %x: f32[32, 64] user_input
//   %permute: f32[64, 256] = aten.permute.default(%p_fc1_weight, [1, 0])  # export_models.py:37
//   output %addmm_1 user_output
//
// Output is a pure function of the program, so it can be diffed in CI.
#include <charconv>
#include <cmath>

#include "ir/Graph.h"

namespace spmd::ir {
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

std::string valueRef(const Value* v) { return v ? "%" + v->name() : "none"; }

std::string deviceStr(const std::string& type, int64_t index) {
  return "device(" + type + (index >= 0 ? ":" + std::to_string(index) : "") + ")";
}

template <typename F>
std::string list(size_t n, F item) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += item(i);
  }
  return s + "]";
}

std::string valueDecl(const Value* v) {
  if (!v) return "none";
  std::string s = "%" + v->name() + ": ";
  switch (v->kind()) {
    case ValueKind::Tensor:
      return s + v->type().str();
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

}  // namespace

std::string printArgument(const Argument& a) {
  using K = Argument::Kind;
  auto symItem = [&](size_t i) { return a.values[i] ? valueRef(a.values[i]) : std::to_string(a.ints[i]); };
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
      return a.ints[0] ? "true" : "false";
    case K::Bools:
      return list(a.ints.size(), [&](size_t i) { return std::string(a.ints[i] ? "true" : "false"); });
    case K::String:
      return "\"" + a.strings[0] + "\"";
    case K::Strings:
      return list(a.strings.size(), [&](size_t i) { return "\"" + a.strings[i] + "\""; });
    case K::SymInt:
    case K::SymFloat:
    case K::SymBool:
      return symItem(0);
    case K::SymInts:
    case K::SymBools:
      return list(a.values.size(), symItem);
    case K::SymFloats:
      return list(a.values.size(),
                  [&](size_t i) { return a.values[i] ? valueRef(a.values[i]) : printFloat(a.floats[i]); });
    case K::ScalarType:
      return std::string(scalarTypeName(static_cast<ScalarType>(a.ints[0])));
    case K::MemoryFormat: {
      static const char* kNames[] = {"unknown_format", "contiguous_format", "channels_last",
                                     "channels_last_3d", "preserve_format"};
      int64_t c = a.ints[0];
      return c >= 0 && c <= 4 ? kNames[c] : "memory_format(" + std::to_string(c) + ")";
    }
    case K::Layout:
      return a.ints[0] == static_cast<int64_t>(Layout::Strided) ? "strided"
                                                                : "layout(" + std::to_string(a.ints[0]) + ")";
    case K::Device:
      return deviceStr(a.strings[0], a.ints[0]);
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

std::string printNode(const Node& node) {
  std::string s;
  const auto& outs = node.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i) s += ", ";
    const Argument& o = outs[i];
    if (o.kind == Argument::Kind::Tensors || o.kind == Argument::Kind::OptionalTensors)
      s += list(o.values.size(), [&](size_t j) { return valueDecl(o.values[j]); });
    else
      s += o.values.empty() ? "none" : valueDecl(o.values[0]);
  }
  s += outs.empty() ? "" : " = ";
  s += node.target() + "(";
  bool first = true;
  for (const auto& in : node.inputs()) {
    if (!first) s += ", ";
    first = false;
    if (in.keyword) s += in.name + "=";
    s += printArgument(in.arg);
  }
  s += ")";
  std::string loc = userSourceLine(node.metadata().stackTrace);
  if (!loc.empty()) {
    size_t colon = loc.find(':', loc.find(':') + 1);
    s += "  # " + loc.substr(0, colon);
  }
  return s;
}

std::string printProgram(const ExportedProgram& p) {
  std::string s = "program " + p.name + " (schema " + std::to_string(p.schemaMajor) + "." +
                  std::to_string(p.schemaMinor) + ", torch " + p.torchVersion + ")\n";
  for (const auto& [sym, r] : p.ranges) {
    s += "range " + sym + ": [" + std::to_string(r.min) + ", " +
         (r.max == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(r.max)) + "]\n";
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
  for (const auto& n : p.graph.nodes()) s += printNode(*n) + "\n";
  for (const auto& out : p.signature.outputs) {
    s += "output " + printArgument(out.arg) + " " + std::string(outputKindName(out.kind));
    if (!out.target.empty()) s += " " + out.target;
    s += "\n";
  }
  return s;
}

}  // namespace spmd::ir
