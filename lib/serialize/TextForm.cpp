// Spellings and kind inference shared by the IR text's printer and parser
// (see TextForm.h).
#include "serialize/TextForm.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace spmd::serialize {

using namespace ir;  // NOLINT: the IR types throughout
namespace {

constexpr std::array<std::string_view, 5> kMemoryFormats = {
    "unknown_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"};

void collectHint(const Dim& d, std::map<std::string, int64_t>& hints) {
  if (d.isStatic() || d.expr()->kind != SymExpr::Kind::Symbol) return;
  hints.emplace(d.expr()->name, d.value());
}

ItemClass valueClass(const Value* v) { return v ? refClass(*v) : ItemClass::None; }

}  // namespace

std::string quoted(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string deviceText(const Device& d) {
  return d.type + (d.index >= 0 ? ":" + std::to_string(d.index) : "");
}

std::optional<Device> deviceFromText(std::string_view text) {
  Device d;
  size_t colon = text.find(':');
  d.type = std::string(text.substr(0, colon));
  if (d.type.empty()) return std::nullopt;
  if (colon == std::string_view::npos) return d;
  std::string_view idx = text.substr(colon + 1);
  auto res = std::from_chars(idx.data(), idx.data() + idx.size(), d.index);
  if (res.ec != std::errc() || res.ptr != idx.data() + idx.size() || d.index < 0) return std::nullopt;
  return d;
}

std::string memoryFormatText(int64_t code) {
  return code >= 0 && code < static_cast<int64_t>(kMemoryFormats.size())
             ? std::string(kMemoryFormats[static_cast<size_t>(code)])
             : "memory_format(" + std::to_string(code) + ")";
}

std::optional<int64_t> memoryFormatFromText(std::string_view name) {
  auto it = std::find(kMemoryFormats.begin(), kMemoryFormats.end(), name);
  if (it == kMemoryFormats.end()) return std::nullopt;
  return it - kMemoryFormats.begin();
}

std::string layoutText(int64_t code) {
  return code == static_cast<int64_t>(Layout::Strided) ? "strided" : "layout(" + std::to_string(code) + ")";
}

std::vector<Dim> contiguousStrides(const std::vector<Dim>& sizes) {
  std::vector<Dim> strides(sizes.size());
  int64_t constant = 1;
  std::vector<std::shared_ptr<const SymExpr>> symbolic;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (symbolic.empty()) {
      strides[i] = Dim(constant);
    } else {
      std::vector<std::shared_ptr<const SymExpr>> factors;
      if (constant != 1) factors.push_back(symInteger(constant));
      factors.insert(factors.end(), symbolic.begin(), symbolic.end());
      strides[i] = factors.size() == 1 ? Dim(factors[0], 0) : Dim(symOp(SymExpr::Kind::Mul, factors), 0);
    }
    const Dim& s = sizes[i];
    if (s.isStatic()) {
      constant *= std::max<int64_t>(s.value(), 1);
    } else {
      symbolic.push_back(s.expr());
      std::sort(symbolic.begin(), symbolic.end(),
                [](const auto& a, const auto& b) { return symExprStr(*a) < symExprStr(*b); });
    }
  }
  return strides;
}

std::map<std::string, int64_t> symbolHints(const Graph& g) {
  std::map<std::string, int64_t> hints;
  for (size_t id = 0; id < g.numValues(); ++id) {
    const Value* v = g.valueById(static_cast<int>(id));
    if (v->kind() == ValueKind::SymInt) collectHint(v->symValue(), hints);
    if (!v->isTensor()) continue;
    for (const Dim& d : v->type().sizes) collectHint(d, hints);
    for (const Dim& d : v->type().strides) collectHint(d, hints);
  }
  return hints;
}

ItemClass refClass(const Value& v) {
  switch (v.kind()) {
    case ValueKind::SymInt:
      return ItemClass::SymInt;
    case ValueKind::SymFloat:
      return ItemClass::SymFloat;
    case ValueKind::SymBool:
      return ItemClass::SymBool;
    default:
      return ItemClass::Tensor;
  }
}

Argument::Kind refKind(const Value& v) {
  switch (v.kind()) {
    case ValueKind::SymInt:
      return Argument::Kind::SymInt;
    case ValueKind::SymFloat:
      return Argument::Kind::SymFloat;
    case ValueKind::SymBool:
      return Argument::Kind::SymBool;
    default:
      return Argument::Kind::Tensor;
  }
}

std::optional<Argument::Kind> listKind(const std::vector<ItemClass>& items) {
  using K = Argument::Kind;
  using C = ItemClass;
  if (items.empty()) return K::Ints;
  auto only = [&](std::initializer_list<C> allowed) {
    return std::all_of(items.begin(), items.end(),
                       [&](C c) { return std::find(allowed.begin(), allowed.end(), c) != allowed.end(); });
  };
  if (only({C::List})) return K::IntLists;
  if (only({C::Tensor})) return K::Tensors;
  if (only({C::Tensor, C::None})) return K::OptionalTensors;
  if (only({C::Int})) return K::Ints;
  if (only({C::Int, C::SymInt})) return K::SymInts;
  if (only({C::Float})) return K::Floats;
  if (only({C::Float, C::SymFloat})) return K::SymFloats;
  if (only({C::Bool})) return K::Bools;
  if (only({C::Bool, C::SymBool})) return K::SymBools;
  if (only({C::String})) return K::Strings;
  return std::nullopt;
}

Argument::Kind impliedKind(const Argument& a) {
  using K = Argument::Kind;
  auto scalarOf = [](ItemClass c) {
    switch (c) {
      case ItemClass::SymInt:
        return K::SymInt;
      case ItemClass::SymFloat:
        return K::SymFloat;
      case ItemClass::SymBool:
        return K::SymBool;
      case ItemClass::None:
        return K::None;
      default:
        return K::Tensor;
    }
  };
  std::vector<ItemClass> items;
  switch (a.kind) {
    case K::Tensor:
    case K::OptionalTensor:
      return scalarOf(valueClass(a.value()));
    case K::SymInt:
      return a.values[0] ? scalarOf(valueClass(a.values[0])) : K::Int;
    case K::SymFloat:
      return a.values[0] ? scalarOf(valueClass(a.values[0])) : K::Float;
    case K::SymBool:
      return a.values[0] ? scalarOf(valueClass(a.values[0])) : K::Bool;
    case K::Tensors:
    case K::OptionalTensors:
      for (const Value* v : a.values) items.push_back(valueClass(v));
      break;
    case K::SymInts:
    case K::SymFloats:
    case K::SymBools: {
      ItemClass constant = a.kind == K::SymInts     ? ItemClass::Int
                           : a.kind == K::SymFloats ? ItemClass::Float
                                                    : ItemClass::Bool;
      for (const Value* v : a.values) items.push_back(v ? refClass(*v) : constant);
      break;
    }
    case K::Ints:
      items.assign(a.ints.size(), ItemClass::Int);
      break;
    case K::Floats:
      items.assign(a.floats.size(), ItemClass::Float);
      break;
    case K::Bools:
      items.assign(a.ints.size(), ItemClass::Bool);
      break;
    case K::Strings:
      items.assign(a.strings.size(), ItemClass::String);
      break;
    case K::IntLists:
      items.assign(a.listSizes.size(), ItemClass::List);
      break;
    default:
      return a.kind;
  }
  return listKind(items).value_or(K::None);
}

Argument::Kind definedKind(const Argument& a) {
  using K = Argument::Kind;
  if (a.kind == K::Tensors || a.kind == K::OptionalTensors) {
    bool allValues =
        std::all_of(a.values.begin(), a.values.end(), [](const Value* v) { return v != nullptr; });
    return allValues ? K::Tensors : K::OptionalTensors;
  }
  if (a.values.empty() || !a.values[0]) return K::None;
  return refKind(*a.values[0]);
}

}  // namespace spmd::serialize
