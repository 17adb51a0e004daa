// Reads the IR text form back (see FromText.h). One line at a time, by
// recursive descent over a Cursor:
//
//   %add: f32[2, s0] = aten.add.Tensor(self=%x, other=%y, *, alpha=2)  # m.py:3
//   ^ outputs          ^ target         ^ arguments    ^ keyword-only  ^ source line
//
// Arguments are read as literals first (a reference, number, string,
// word, call or list) and then given a kind: the one the literal implies
// (TextForm.h's rules, which the printer follows), or the one its
// `kind(...)` wrapper names.
#include "serialize/FromText.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "serialize/ParseCursor.h"
#include "serialize/TextForm.h"

namespace spmd::serialize {

using namespace ir;  // NOLINT: the IR types throughout
namespace {

using K = Argument::Kind;

// An argument of `kind` reading `v`, with the payload the export JSON's
// reader gives one (a zero constant beside a symbolic value).
Argument refArgument(Value* v, K kind) {
  Argument a;
  a.kind = kind;
  a.values = {v};
  if (kind == K::SymInt || kind == K::SymBool) a.ints = {0};
  if (kind == K::SymFloat) a.floats = {0.0};
  return a;
}

// The kind a `kind(...)` wrapper names ("sym_ints" -> SymInts).
std::optional<K> kindFromTag(std::string_view tag) {
  for (int k = 0; k <= static_cast<int>(K::IntLists); ++k) {
    auto kind = static_cast<K>(k);
    if (argumentKindName(kind).substr(3) == tag) return kind;
  }
  return std::nullopt;
}

class LineParser {
 public:
  LineParser(ExportedProgram& p, const std::map<std::string, int64_t>& hints, Cursor& c)
      : g_(p.graph), hints_(hints), c_(c) {}

  // `%name: type` — defines the value.
  Expected<Value*> valueDecl() {
    SPMD_ASSIGN_OR_RETURN(std::string name, c_.valueName());
    SPMD_RETURN_IF_ERROR(c_.expect(":"));
    c_.skipSpaces();
    ValueKind kind = ValueKind::Tensor;
    Dim sym;
    TensorType type;
    if (c_.accept("sym(")) {
      kind = ValueKind::SymInt;
      SPMD_ASSIGN_OR_RETURN(std::string text, c_.balancedUntil(')'));
      auto d = parseDim(text, hints_);
      if (!d.hasValue()) return c_.error(d.status().message());
      sym = std::move(*d);
    } else if (c_.acceptWord("symfloat")) {
      kind = ValueKind::SymFloat;
    } else if (c_.acceptWord("symbool")) {
      kind = ValueKind::SymBool;
    } else if (c_.acceptWord("token")) {
      kind = ValueKind::Token;
    } else if (c_.acceptWord("object")) {
      kind = ValueKind::CustomObj;
    } else {
      SPMD_ASSIGN_OR_RETURN(type, tensorType());
    }
    auto v = g_.addValue(name, kind);
    if (!v.hasValue()) return c_.error(v.status().message());
    if (kind == ValueKind::Tensor) (*v)->mutableType() = std::move(type);
    if (kind == ValueKind::SymInt) (*v)->setSymValue(std::move(sym));
    return *v;
  }

  // `f32[2, s0]{strides=[1, 2], device=cuda:0, requires_grad}`.
  Expected<TensorType> tensorType() {
    TensorType t;
    std::string dtype = c_.word();
    auto st = scalarTypeFromName(dtype);
    if (!st) return c_.error("unknown dtype '" + dtype + "'");
    t.dtype = *st;
    SPMD_ASSIGN_OR_RETURN(t.sizes, dimList());
    for (const Dim& d : contiguousStrides(t.sizes)) t.strides.push_back(withHint(d, hints_));
    if (!c_.accept("{")) return t;
    do {
      c_.skipSpaces();
      std::string key = c_.word();
      if (key == "requires_grad") {
        t.requiresGrad = true;
      } else if (key == "strides" && c_.accept("=")) {
        SPMD_ASSIGN_OR_RETURN(t.strides, dimList());
      } else if (key == "device" && c_.accept("=")) {
        std::string text = c_.until(",}");
        auto d = deviceFromText(text);
        if (!d) return c_.error("malformed device '" + text + "'");
        t.device = *d;
      } else {
        return c_.error("unknown type attribute '" + key + "'");
      }
    } while (c_.accept(","));
    SPMD_RETURN_IF_ERROR(c_.expect("}"));
    return t;
  }

  Expected<std::vector<Dim>> dimList() {
    SPMD_RETURN_IF_ERROR(c_.expect("["));
    SPMD_ASSIGN_OR_RETURN(std::string inner, c_.balancedUntil(']'));
    std::vector<Dim> out;
    for (const std::string& item : splitTopLevel(inner)) {
      auto d = parseDim(item, hints_);
      if (!d.hasValue()) return c_.error(d.status().message());
      out.push_back(std::move(*d));
    }
    return out;
  }

  // A node output: `%a: T`, `[%a: T, none]`, `none`, or `kind(...)`.
  Expected<Argument> outputDecl() {
    c_.skipSpaces();
    std::optional<K> forced;
    size_t save = c_.pos();
    std::string tag = c_.word();
    if (!tag.empty() && tag != "none" && c_.accept("(")) {
      forced = kindFromTag(tag);
      if (!forced) return c_.error("unknown argument kind '" + tag + "'");
    } else {
      c_.seek(save);
    }
    Argument a;
    if (c_.accept("[")) {
      a.kind = K::Tensors;
      while (!c_.accept("]")) {
        if (!a.values.empty()) SPMD_RETURN_IF_ERROR(c_.expect(","));
        c_.skipSpaces();
        if (c_.acceptWord("none")) {
          a.values.push_back(nullptr);
          a.kind = K::OptionalTensors;
          continue;
        }
        SPMD_ASSIGN_OR_RETURN(Value * v, valueDecl());
        a.values.push_back(v);
      }
    } else if (c_.acceptWord("none")) {
      a.kind = K::None;
    } else {
      SPMD_ASSIGN_OR_RETURN(Value * v, valueDecl());
      a = refArgument(v, refKind(*v));
    }
    if (forced) {
      a.kind = *forced;
      SPMD_RETURN_IF_ERROR(c_.expect(")"));
    }
    return a;
  }

  Expected<Argument> argument() {
    SPMD_ASSIGN_OR_RETURN(Literal lit, c_.literal());
    return toArgument(lit, std::nullopt);
  }

  Expected<Argument> toArgument(const Literal& lit, std::optional<K> forced) {
    if (!forced && lit.type == Literal::Call) {
      if (auto tag = kindFromTag(lit.text); tag && lit.text != "device" && lit.text != "complex" &&
                                            lit.text != "memory_format" && lit.text != "layout") {
        if (lit.items.size() != 1) return c_.error("'" + lit.text + "(...)' takes one value");
        return toArgument(lit.items[0], *tag);
      }
    }
    if (lit.type == Literal::List) return listArgument(lit, forced);
    return scalarArgument(lit, forced);
  }

  Expected<Value*> ref(const Literal& lit) {
    Value* v = g_.findValue(lit.text);
    if (!v) return c_.error("unknown value %" + lit.text);
    return v;
  }

  Expected<Argument> scalarArgument(const Literal& lit, std::optional<K> forced) {
    Argument a;
    switch (lit.type) {
      case Literal::None:
        a.kind = forced.value_or(K::None);
        if (a.kind == K::Tensor || a.kind == K::OptionalTensor) a.values = {nullptr};
        return a;
      case Literal::Ref: {
        SPMD_ASSIGN_OR_RETURN(Value * v, ref(lit));
        return refArgument(v, forced.value_or(refKind(*v)));
      }
      case Literal::Int:
        a.kind = forced.value_or(K::Int);
        if (a.kind == K::SymInt) a.values = {nullptr};
        a.ints = {lit.i};
        return a;
      case Literal::Float:
        a.kind = forced.value_or(K::Float);
        if (a.kind == K::SymFloat) a.values = {nullptr};
        a.floats = {lit.f};
        return a;
      case Literal::Bool:
        a.kind = forced.value_or(K::Bool);
        if (a.kind == K::SymBool) a.values = {nullptr};
        a.ints = {lit.i};
        return a;
      case Literal::String:
        a.kind = K::String;
        a.strings = {lit.text};
        return a;
      case Literal::Word:
        return wordArgument(lit.text);
      case Literal::Call:
        return callArgument(lit);
      case Literal::List:
        break;
    }
    return c_.error("unexpected list");
  }

  Expected<Argument> wordArgument(const std::string& w) {
    Argument a;
    if (auto st = scalarTypeFromName(w)) return Argument::scalarType(*st);
    if (auto mf = memoryFormatFromText(w)) {
      a.kind = K::MemoryFormat;
      a.ints = {*mf};
      return a;
    }
    if (w == "strided") {
      a.kind = K::Layout;
      a.ints = {static_cast<int64_t>(Layout::Strided)};
      return a;
    }
    return c_.error("unknown word '" + w + "' in an argument");
  }

  Expected<Argument> callArgument(const Literal& lit) {
    Argument a;
    if (lit.text == "device") {
      auto d = deviceFromText(lit.raw);
      if (!d) return c_.error("malformed device '" + lit.raw + "'");
      return Argument::device(*d);
    }
    auto number = [&](size_t i) -> Expected<double> {
      if (i >= lit.items.size()) return c_.error("'" + lit.text + "(...)' is missing a value");
      const Literal& it = lit.items[i];
      if (it.type == Literal::Float) return it.f;
      if (it.type == Literal::Int) return static_cast<double>(it.i);
      return c_.error("'" + lit.text + "(...)' takes numbers");
    };
    if (lit.text == "complex") {
      a.kind = K::Complex;
      SPMD_ASSIGN_OR_RETURN(double re, number(0));
      SPMD_ASSIGN_OR_RETURN(double im, number(1));
      a.floats = {re, im};
      return a;
    }
    if (lit.text == "memory_format" || lit.text == "layout") {
      a.kind = lit.text == "layout" ? K::Layout : K::MemoryFormat;
      if (lit.items.size() != 1 || lit.items[0].type != Literal::Int)
        return c_.error("'" + lit.text + "(...)' takes one integer");
      a.ints = {lit.items[0].i};
      return a;
    }
    return c_.error("unknown call '" + lit.text + "(...)' in an argument");
  }

  Expected<Argument> listArgument(const Literal& lit, std::optional<K> forced) {
    std::vector<ItemClass> classes;
    std::vector<Value*> refs;
    for (const Literal& it : lit.items) {
      Value* v = nullptr;
      ItemClass cls = ItemClass::None;
      switch (it.type) {
        case Literal::Ref: {
          SPMD_ASSIGN_OR_RETURN(v, ref(it));
          cls = refClass(*v);
          break;
        }
        case Literal::None:
          cls = ItemClass::None;
          break;
        case Literal::Int:
          cls = ItemClass::Int;
          break;
        case Literal::Float:
          cls = ItemClass::Float;
          break;
        case Literal::Bool:
          cls = ItemClass::Bool;
          break;
        case Literal::String:
          cls = ItemClass::String;
          break;
        case Literal::List:
          cls = ItemClass::List;
          break;
        default:
          return c_.error("a list cannot hold '" + it.text + "'");
      }
      classes.push_back(cls);
      refs.push_back(v);
    }
    std::optional<K> kind = forced ? forced : listKind(classes);
    if (!kind) return c_.error("a list mixes items of different kinds");
    Argument a;
    a.kind = *kind;
    for (size_t i = 0; i < lit.items.size(); ++i) {
      const Literal& it = lit.items[i];
      switch (a.kind) {
        case K::Tensors:
        case K::OptionalTensors:
          a.values.push_back(refs[i]);
          break;
        case K::SymInts:
        case K::SymBools:
          a.values.push_back(refs[i]);
          a.ints.push_back(refs[i] ? 0 : it.i);
          break;
        case K::SymFloats:
          a.values.push_back(refs[i]);
          a.floats.push_back(refs[i] ? 0.0 : it.f);
          a.ints.push_back(0);
          break;
        case K::Ints:
        case K::Bools:
          a.ints.push_back(it.i);
          break;
        case K::Floats:
          a.floats.push_back(it.f);
          break;
        case K::Strings:
          a.strings.push_back(it.text);
          break;
        case K::IntLists:
          for (const Literal& x : it.items) a.ints.push_back(x.i);
          a.listSizes.push_back(static_cast<int64_t>(it.items.size()));
          break;
        default:
          return c_.error("a list cannot be read as " + std::string(argumentKindName(a.kind)));
      }
    }
    return a;
  }

 private:
  Graph& g_;
  const std::map<std::string, int64_t>& hints_;
  Cursor& c_;
};

// Dispatches each line on its first word: program, symbol, tied, input,
// output; anything else is a node.
class ProgramReader {
 public:
  ProgramReader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Expected<ExportedProgram> read() {
    size_t start = 0;
    int number = 0;
    while (start <= text_.size()) {
      size_t end = text_.find('\n', start);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      ++number;
      start = end + 1;
      size_t first = line.find_first_not_of(" \t");
      if (first == std::string_view::npos || line.substr(first, 2) == "//") continue;
      Cursor c(line, number, source_);
      SPMD_RETURN_IF_ERROR(readLine(c));
    }
    for (const auto& out : p_.signature.outputs) p_.graph.addOutput(out.arg);
    if (Status st = p_.graph.verify(); !st.isOk())
      return Status::error(std::string(source_) + ": " + st.message());
    return std::move(p_);
  }

 private:
  Status readLine(Cursor& c) {
    size_t save = c.pos();
    std::string head = c.word();
    if (c.rest().starts_with("(")) head.clear();  // a node without results: `word(`
    if (head == "program") return programLine(c);
    if (head == "symbol") return symbolLine(c);
    if (head == "tied") return tiedLine(c);
    if (head == "input") return inputLine(c);
    if (head == "output") return outputLine(c);
    c.seek(save);
    return nodeLine(c);
  }

  Status programLine(Cursor& c) {
    std::string_view rest = c.rest();
    size_t open = rest.rfind(" (schema ");
    if (open == std::string_view::npos) return c.error("expected 'program NAME (schema M.N, torch V)'");
    std::string_view name = rest.substr(0, open);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    p_.name = std::string(name);
    c.seek(c.pos() + open + 9);
    std::string version = c.until(",");
    size_t dot = version.find('.');
    auto major = std::from_chars(version.data(), version.data() + dot, p_.schemaMajor);
    auto minor = std::from_chars(version.data() + dot + 1, version.data() + version.size(), p_.schemaMinor);
    if (dot == std::string::npos || major.ec != std::errc() || minor.ec != std::errc())
      return c.error("malformed schema version '" + version + "'");
    SPMD_RETURN_IF_ERROR(c.expect(", torch "));
    p_.torchVersion = c.until(")");
    return c.expect(")");
  }

  Status symbolLine(Cursor& c) {
    std::string sym = c.word();
    SPMD_RETURN_IF_ERROR(c.expect(":"));
    if (c.accept("[")) {
      RangeConstraint r;
      SPMD_ASSIGN_OR_RETURN(Literal lo, c.literal());
      SPMD_RETURN_IF_ERROR(c.expect(","));
      SPMD_ASSIGN_OR_RETURN(Literal hi, c.literal());
      SPMD_RETURN_IF_ERROR(c.expect("]"));
      if (lo.type != Literal::Int || (hi.type != Literal::Int && !(hi.type == Literal::Float && hi.f > 0)))
        return c.error("symbol " + sym + ": a range is [min, max] or [min, inf]");
      r.min = lo.i;
      if (hi.type == Literal::Int) r.max = hi.i;
      p_.ranges[sym] = r;
    }
    if (c.acceptWord("hint")) {
      SPMD_ASSIGN_OR_RETURN(Literal h, c.literal());
      if (h.type != Literal::Int) return c.error("symbol " + sym + ": a hint is an integer");
      hints_[sym] = h.i;
    }
    if (!c.atEnd()) return c.error("unexpected '" + std::string(c.rest()) + "'");
    return Status::ok();
  }

  Status tiedLine(Cursor& c) {
    std::string fqn = c.word();
    SPMD_RETURN_IF_ERROR(c.expect("="));
    auto& others = p_.tiedNames[fqn];
    do others.push_back(c.word());
    while (c.accept(","));
    return Status::ok();
  }

  Expected<std::string> kindWord(Cursor& c) {
    std::string w = c.word();
    if (w.empty()) return c.error("expected an input or output kind");
    return w;
  }

  Status inputLine(Cursor& c) {
    LineParser lp(p_, hints_, c);
    InputSpec spec;
    c.skipSpaces();
    if (c.rest().starts_with("%")) {
      SPMD_ASSIGN_OR_RETURN(spec.value, lp.valueDecl());
      spec.name = spec.value->name();
      p_.graph.addInput(spec.value);
    } else {
      spec.name = c.word();
      SPMD_RETURN_IF_ERROR(c.expect("="));
      SPMD_ASSIGN_OR_RETURN(spec.constant, lp.argument());
    }
    SPMD_ASSIGN_OR_RETURN(std::string kind, kindWord(c));
    for (int k = 0; k <= static_cast<int>(InputKind::ConstantInput); ++k)
      if (inputKindName(static_cast<InputKind>(k)) == kind) spec.kind = static_cast<InputKind>(k);
    if (inputKindName(spec.kind) != kind) return c.error("unknown input kind '" + kind + "'");
    if ((spec.kind == InputKind::ConstantInput) != (spec.value == nullptr))
      return c.error("input " + spec.name + ": only a constant_input is written NAME = VALUE");
    if (!c.atEnd() && !c.rest().starts_with("non_persistent")) spec.target = c.word();
    if (c.acceptWord("non_persistent")) spec.persistent = false;
    if (!c.atEnd()) return c.error("unexpected '" + std::string(c.rest()) + "'");
    p_.signature.inputs.push_back(std::move(spec));
    return Status::ok();
  }

  Status outputLine(Cursor& c) {
    LineParser lp(p_, hints_, c);
    OutputSpec spec;
    SPMD_ASSIGN_OR_RETURN(spec.arg, lp.argument());
    SPMD_ASSIGN_OR_RETURN(std::string kind, kindWord(c));
    for (int k = 0; k <= static_cast<int>(OutputKind::ParameterMutation); ++k)
      if (outputKindName(static_cast<OutputKind>(k)) == kind) spec.kind = static_cast<OutputKind>(k);
    if (outputKindName(spec.kind) != kind) return c.error("unknown output kind '" + kind + "'");
    if (!c.atEnd()) spec.target = c.word();
    if (!c.atEnd()) return c.error("unexpected '" + std::string(c.rest()) + "'");
    p_.signature.outputs.push_back(std::move(spec));
    return Status::ok();
  }

  Status nodeLine(Cursor& c) {
    LineParser lp(p_, hints_, c);
    std::vector<Argument> outputs;
    if (size_t eq = c.findAssignment(); eq != std::string_view::npos) {
      do {
        SPMD_ASSIGN_OR_RETURN(Argument a, lp.outputDecl());
        outputs.push_back(std::move(a));
      } while (c.pos() < eq && c.accept(","));
      SPMD_RETURN_IF_ERROR(c.expect("="));
    }
    std::string target = c.word();
    if (target.empty()) return c.error("expected an operator at '" + std::string(c.rest()) + "'");
    SPMD_RETURN_IF_ERROR(c.expect("("));
    std::vector<NamedArgument> inputs;
    bool keyword = false;
    while (!c.accept(")")) {
      if (!inputs.empty() || keyword) SPMD_RETURN_IF_ERROR(c.expect(","));
      if (c.accept("*")) {
        keyword = true;
        continue;
      }
      NamedArgument na;
      na.name = c.word();
      na.keyword = keyword;
      if (na.name.empty()) return c.error(target + ": an argument without a name");
      SPMD_RETURN_IF_ERROR(c.expect("="));
      SPMD_ASSIGN_OR_RETURN(na.arg, lp.argument());
      inputs.push_back(std::move(na));
    }
    NodeMetadata meta;
    std::string name = outputs.empty() || outputs[0].values.empty() || !outputs[0].values[0]
                           ? std::string()
                           : outputs[0].values[0]->name();
    if (c.accept("{")) SPMD_RETURN_IF_ERROR(metadataDict(c, meta, name));
    if (c.accept("#")) {
      c.skipSpaces();
      std::string loc = c.until("");
      if (!meta.stackTrace.empty()) loc.clear();
      size_t colon = loc.rfind(':');
      while (!loc.empty() && loc.back() == ' ') loc.pop_back();
      if (colon != std::string::npos)
        meta.stackTrace =
            "  File \"" + loc.substr(0, colon) + "\", line " + loc.substr(colon + 1) + ", in <ir>\n";
    }
    if (!c.atEnd()) return c.error("unexpected '" + std::string(c.rest()) + "'");
    auto node = p_.graph.addNode(name, target, std::move(inputs), std::move(outputs));
    if (!node.hasValue()) return c.error(node.status().message());
    (*node)->mutableMetadata() = std::move(meta);
    return Status::ok();
  }

  Status metadataDict(Cursor& c, NodeMetadata& meta, std::string& name) {
    do {
      std::string key = c.word();
      SPMD_RETURN_IF_ERROR(c.expect("="));
      SPMD_ASSIGN_OR_RETURN(Literal v, c.literal());
      if (v.type != Literal::String) return c.error("metadata '" + key + "' is not a string");
      if (key == "name")
        name = v.text;
      else if (key == "stack_trace")
        meta.stackTrace = v.text;
      else if (key == "nn_module_stack")
        meta.nnModuleStack = v.text;
      else if (key == "torch_fn")
        meta.torchFn = v.text;
      else
        meta.other[key] = v.text;
    } while (c.accept(","));
    return c.expect("}");
  }

  std::string_view text_;
  std::string_view source_;
  ExportedProgram p_;
  std::map<std::string, int64_t> hints_;
};

}  // namespace

Expected<ExportedProgram> parseProgram(std::string_view text, std::string_view source) {
  return ProgramReader(text, source).read();
}

}  // namespace spmd::serialize
