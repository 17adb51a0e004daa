// IR -> torch.export JSON (see ToExportJson.h).
//
//   input %x: f32[s52, 64] user_input
//   -> graph.inputs: [{"as_tensor": {"name": "x"}}],
//      graph.tensor_values.x: {"dtype": 7, "sizes": [{"as_expr": {...}}, {"as_int": 64}], ...},
//      signature.input_specs: [{"user_input": {"arg": {"as_tensor": {"name": "x"}}}}]
//
// Every field FromExportJson.cpp consumes is written; fields the IR does not keep
// (opset_version, module_call_graph, custom object classes) get neutral
// values. The text is streamed straight from the IR (no JSON tree); the
// tree-returning functions parse it back.
#include "serialize/ToExportJson.h"

#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>

namespace spmd::serialize {
namespace {

using ir::Argument;
using K = ir::Argument::Kind;

// {"name": n} (empty for a missing value).
void nameRef(JsonWriter& w, const ir::Value* v) {
  w.beginObject().key("name").string(v ? std::string_view(v->name()) : std::string_view()).endObject();
}

// {"as_none": true}
void asNone(JsonWriter& w) { w.beginObject().key("as_none").boolean(true).endObject(); }

// {key: {"as_name": name}}
void symName(JsonWriter& w, const char* key, const std::string& name) {
  w.beginObject().key(key).beginObject().key("as_name").string(name).endObject().endObject();
}

// A value in a defining or reading position: as_tensor, as_token, ...
void valueArgument(JsonWriter& w, const ir::Value* v) {
  if (!v) return asNone(w);
  switch (v->kind()) {
    case ir::ValueKind::Tensor:
      w.beginObject().key("as_tensor");
      nameRef(w, v);
      w.endObject();
      return;
    case ir::ValueKind::Token:
      w.beginObject().key("as_token");
      nameRef(w, v);
      w.endObject();
      return;
    case ir::ValueKind::CustomObj:
      w.beginObject().key("as_custom_obj").beginObject();
      w.key("name").string(v->name()).key("class_fqn").string("");
      w.endObject().endObject();
      return;
    case ir::ValueKind::SymInt:
      return symName(w, "as_sym_int", v->name());
    case ir::ValueKind::SymFloat:
      return symName(w, "as_sym_float", v->name());
    case ir::ValueKind::SymBool:
      return symName(w, "as_sym_bool", v->name());
  }
  asNone(w);
}

// Payload accessors; a malformed Argument is a broken invariant.
int64_t intAt(const Argument& a, size_t i) {
  SPMD_CHECK(i < a.ints.size());
  return a.ints[i];
}
double floatAt(const Argument& a, size_t i) {
  SPMD_CHECK(i < a.floats.size());
  return a.floats[i];
}
const std::string& stringAt(const Argument& a, size_t i) {
  SPMD_CHECK(i < a.strings.size());
  return a.strings[i];
}

void optionalTensor(JsonWriter& w, const ir::Value* v) {
  if (!v) return asNone(w);
  w.beginObject().key("as_tensor");
  nameRef(w, v);
  w.endObject();
}

// One entry of a Sym* argument: {"as_name": n} or {"as_int"/"as_float"/"as_bool": c}.
void symItem(JsonWriter& w, const Argument& a, size_t i) {
  w.beginObject();
  if (i < a.values.size() && a.values[i]) {
    w.key("as_name").string(a.values[i]->name());
    w.endObject();
    return;
  }
  int64_t c = i < a.ints.size() ? a.ints[i] : 0;
  switch (a.kind) {
    case K::SymFloat:
    case K::SymFloats:
      w.key("as_float");
      writeExportFloat(w, i < a.floats.size() ? a.floats[i] : 0.0);
      break;
    case K::SymBool:
    case K::SymBools:
      w.key("as_bool").boolean(c != 0);
      break;
    default:
      w.key("as_int").integer(c);
  }
  w.endObject();
}

void symList(JsonWriter& w, const Argument& a) {
  w.beginArray();
  for (size_t i = 0; i < a.values.size(); ++i) symItem(w, a, i);
  w.endArray();
}

void deviceToJson(JsonWriter& w, const std::string& type, int64_t index) {
  if (type == "cpu" && index < 0) {  // the usual device, in one piece
    w.json(R"({"type":"cpu","index":null})");
    return;
  }
  w.beginObject().key("type").string(type).key("index");
  if (index >= 0)
    w.integer(index);
  else
    w.null();
  w.endObject();
}

void intLists(JsonWriter& w, const Argument& a) {
  w.beginArray();
  size_t off = 0;
  for (int64_t n : a.listSizes) {
    w.beginArray();
    for (int64_t j = 0; j < n; ++j) w.integer(a.ints[off + static_cast<size_t>(j)]);
    off += static_cast<size_t>(n);
    w.endArray();
  }
  w.endArray();
}

// stack_trace, nn_module_stack, torch_fn when set, then `other` by key; a
// key of `other` naming one of the three replaces its value in place.
void metadataToJson(JsonWriter& w, const ir::NodeMetadata& md) {
  const std::pair<const char*, const std::string*> named[] = {
      {"stack_trace", &md.stackTrace}, {"nn_module_stack", &md.nnModuleStack}, {"torch_fn", &md.torchFn}};
  w.beginObject();
  for (const auto& [key, field] : named) {
    if (field->empty()) continue;
    auto it = md.other.find(key);
    w.key(key).string(it == md.other.end() ? *field : it->second);
  }
  for (const auto& [k, v] : md.other) {
    bool written = false;
    for (const auto& [key, field] : named) written = written || (k == key && !field->empty());
    if (!written) w.key(k).string(v);
  }
  w.endObject();
}

void nodeToJson(JsonWriter& w, const ir::Node& n) {
  w.beginObject().key("target").string(exportTarget(n.target())).key("inputs").beginArray();
  for (const auto& in : n.inputs()) {
    w.beginObject().key("name").string(in.name).key("arg");
    writeArgument(w, in.arg);
    w.key("kind").integer(in.keyword ? 2 : 1).endObject();
  }
  w.endArray().key("outputs").beginArray();
  for (const auto& out : n.outputs()) writeArgument(w, out);
  w.endArray().key("metadata");
  metadataToJson(w, n.metadata());
  w.key("is_hop_single_tensor_return").null().key("name").string(n.name()).endObject();
}

void inputSpecToJson(JsonWriter& w, const ir::InputSpec& s) {
  using IK = ir::InputKind;
  auto named = [&](const char* kind, const char* field) {
    w.beginObject().key(kind).beginObject().key("arg");
    nameRef(w, s.value);
    w.key(field).string(s.target);
    if (s.kind == IK::Buffer) w.key("persistent").boolean(s.persistent);
    w.endObject().endObject();
  };
  switch (s.kind) {
    case IK::UserInput:
      w.beginObject().key("user_input").beginObject().key("arg");
      valueArgument(w, s.value);
      w.endObject().endObject();
      return;
    case IK::Parameter:
      return named("parameter", "parameter_name");
    case IK::Buffer:
      return named("buffer", "buffer_name");
    case IK::TensorConstant:
      return named("tensor_constant", "tensor_constant_name");
    case IK::CustomObj:
      w.beginObject().key("custom_obj").beginObject().key("arg").beginObject();
      w.key("name").string(s.value ? std::string_view(s.value->name()) : std::string_view());
      w.key("class_fqn").string("").endObject().key("custom_obj_name").string(s.target);
      w.endObject().endObject();
      return;
    case IK::Token:
      w.beginObject().key("token").beginObject().key("arg");
      nameRef(w, s.value);
      w.endObject().endObject();
      return;
    case IK::ConstantInput:
      w.beginObject().key("constant_input").beginObject().key("name").string(s.name).key("value");
      writeArgument(w, s.constant);
      w.endObject().endObject();
      return;
  }
  w.beginObject().endObject();
}

void outputSpecToJson(JsonWriter& w, const ir::OutputSpec& s) {
  using OK = ir::OutputKind;
  auto named = [&](const char* kind, const char* field) {
    w.beginObject().key(kind).beginObject().key("arg");
    nameRef(w, s.arg.value());
    if (field) w.key(field).string(s.target);
    w.endObject().endObject();
  };
  switch (s.kind) {
    case OK::UserOutput:
      w.beginObject().key("user_output").beginObject().key("arg");
      writeArgument(w, s.arg);
      w.endObject().endObject();
      return;
    case OK::LossOutput:
      return named("loss_output", nullptr);
    case OK::BufferMutation:
      return named("buffer_mutation", "buffer_name");
    case OK::GradientToParameter:
      return named("gradient_to_parameter", "parameter_name");
    case OK::GradientToUserInput:
      return named("gradient_to_user_input", "user_input_name");
    case OK::UserInputMutation:
      return named("user_input_mutation", "user_input_name");
    case OK::Token:
      return named("token", nullptr);
    case OK::ParameterMutation:
      return named("parameter_mutation", "parameter_name");
  }
  w.beginObject().endObject();
}

// Graph inputs in signature order (constant inputs carry their constant);
// error when the non-constant specs do not name graph.inputs() in order.
Status graphInputs(JsonWriter& w, const ir::ExportedProgram& p) {
  const auto& graphIns = p.graph.inputs();
  w.beginArray();
  if (p.signature.inputs.empty()) {
    for (const ir::Value* v : graphIns) valueArgument(w, v);
    w.endArray();
    return Status::ok();
  }
  size_t next = 0;
  for (const auto& s : p.signature.inputs) {
    if (s.kind == ir::InputKind::ConstantInput) {
      writeArgument(w, s.constant);
      continue;
    }
    if (next >= graphIns.size() || graphIns[next] != s.value)
      return Status::error("signature input '" + s.name + "' does not line up with graph input " +
                           std::to_string(next));
    valueArgument(w, s.value);
    ++next;
  }
  if (next != graphIns.size())
    return Status::error("graph has " + std::to_string(graphIns.size()) +
                         " inputs but the signature describes " + std::to_string(next));
  w.endArray();
  return Status::ok();
}

// tensor_values or sym_int_values: the values of `kind` the graph defines
// (inputs, then node outputs in order) with their metadata.
void valueTable(JsonWriter& w, const ir::Graph& g, ir::ValueKind kind) {
  auto describe = [&](const ir::Value* v) {
    if (!v || v->kind() != kind) return;
    w.key(v->name());
    if (kind == ir::ValueKind::Tensor)
      writeTensorType(w, v->type());
    else
      writeSymInt(w, v->symValue());
  };
  w.beginObject();
  for (const ir::Value* v : g.inputs()) describe(v);
  for (const auto& n : g.nodes())  // Node::outputValues() without its vector
    for (const auto& out : n->outputs())
      for (const ir::Value* v : out.values) describe(v);
  w.endObject();
}

void appendSrepr(std::string& s, const ir::SymExpr& e) {
  using SK = ir::SymExpr::Kind;
  auto call = [&](const char* f) {
    s += f;
    s += '(';
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i) s += ", ";
      appendSrepr(s, *e.args[i]);
    }
    s += ')';
  };
  switch (e.kind) {
    case SK::Integer:
      s += "Integer(" + std::to_string(e.value) + ")";
      return;
    case SK::Symbol:
      s += "Symbol('" + e.name + "', positive=True, integer=True)";
      return;
    case SK::Add:
      return call("Add");
    case SK::Mul:
      return call("Mul");
    case SK::FloorDiv:
      return call("FloorDiv");
    case SK::Mod:
      return call("PythonMod");
    case SK::Max:
      return call("Max");
    case SK::Min:
      return call("Min");
    case SK::Pow:
      return call("Pow");
    case SK::CeilDiv:
      return call("CeilDiv");
  }
  s += "Integer(0)";
}

// The export schema's field for an argument of `kind` (Tensor: as_tensor).
const char* argumentKey(K kind) {
  // In Argument::Kind order.
  static constexpr const char* kKeys[] = {
      "as_none",          "as_tensor",     "as_tensors",  "as_optional_tensor", "as_optional_tensors",
      "as_int",           "as_ints",       "as_float",    "as_floats",          "as_bool",
      "as_bools",         "as_string",     "as_strings",  "as_sym_int",         "as_sym_ints",
      "as_sym_float",     "as_sym_floats", "as_sym_bool", "as_sym_bools",       "as_scalar_type",
      "as_memory_format", "as_layout",     "as_device",   "as_complex",         "as_int_lists"};
  static_assert(std::size(kKeys) == static_cast<size_t>(K::IntLists) + 1);
  auto i = static_cast<size_t>(kind);
  return i < std::size(kKeys) ? kKeys[i] : "as_none";
}

// `write` onto a fresh string, parsed back into a tree.
template <typename F>
Json viaText(F write) {
  std::string text;
  JsonWriter w(text);
  write(w);
  return Json::parse(text);
}

}  // namespace

std::string symExprSrepr(const ir::SymExpr& e) {
  std::string s;
  appendSrepr(s, e);
  return s;
}

void writeSymInt(JsonWriter& w, const ir::Dim& d) {
  if (d.isStatic()) {  // {"as_int":N} in one piece: the most written value of a program
    char buf[40] = R"({"as_int":)";
    constexpr size_t kPrefix = 10;
    auto r = std::to_chars(buf + kPrefix, buf + sizeof buf - 1, d.value());
    *r.ptr = '}';
    w.json(std::string_view(buf, static_cast<size_t>(r.ptr + 1 - buf)));
    return;
  }
  w.beginObject();
  w.key("as_expr").beginObject().key("expr_str").string(symExprSrepr(*d.expr()));
  w.key("hint").beginObject().key("as_int").integer(d.value()).endObject();
  w.endObject().endObject();
}

void writeExportFloat(JsonWriter& w, double v) {
  if (std::isnan(v))
    w.string("NaN");
  else if (std::isinf(v))
    w.string(v > 0 ? "Infinity" : "-Infinity");
  else
    w.number(v);
}

void writeTensorType(JsonWriter& w, const ir::TensorType& t) {
  w.beginObject().key("dtype").integer(static_cast<int>(t.dtype)).key("sizes").beginArray();
  for (const auto& d : t.sizes) writeSymInt(w, d);
  w.endArray().key("requires_grad").boolean(t.requiresGrad).key("device");
  deviceToJson(w, t.device.type, t.device.index);
  w.key("strides").beginArray();
  for (const auto& d : t.strides) writeSymInt(w, d);
  w.endArray().key("storage_offset").json(R"({"as_int":0})");
  w.key("layout").integer(static_cast<int>(ir::Layout::Strided)).endObject();
}

void writeArgument(JsonWriter& w, const Argument& a) {
  if (a.kind == K::Tensor) return valueArgument(w, a.value());
  w.beginObject().key(argumentKey(a.kind));
  switch (a.kind) {
    case K::Tensors:
      w.beginArray();
      for (const ir::Value* v : a.values) nameRef(w, v);
      w.endArray();
      break;
    case K::OptionalTensor:
      optionalTensor(w, a.value());
      break;
    case K::OptionalTensors:
      w.beginArray();
      for (const ir::Value* v : a.values) optionalTensor(w, v);
      w.endArray();
      break;
    case K::Int:
    case K::ScalarType:
    case K::MemoryFormat:
    case K::Layout:
      w.integer(intAt(a, 0));
      break;
    case K::Ints:
      w.integers(a.ints);
      break;
    case K::Float:
      writeExportFloat(w, floatAt(a, 0));
      break;
    case K::Floats:
      w.beginArray();
      for (double f : a.floats) writeExportFloat(w, f);
      w.endArray();
      break;
    case K::Bool:
      w.boolean(intAt(a, 0) != 0);
      break;
    case K::Bools:
      w.beginArray();
      for (int64_t b : a.ints) w.boolean(b != 0);
      w.endArray();
      break;
    case K::String:
      w.string(stringAt(a, 0));
      break;
    case K::Strings:
      w.strings(a.strings);
      break;
    case K::SymInt:
    case K::SymFloat:
    case K::SymBool:
      symItem(w, a, 0);
      break;
    case K::SymInts:
    case K::SymFloats:
    case K::SymBools:
      symList(w, a);
      break;
    case K::Device:
      deviceToJson(w, stringAt(a, 0), intAt(a, 0));
      break;
    case K::Complex:
      w.beginObject().key("real");
      writeExportFloat(w, floatAt(a, 0));
      w.key("imag");
      writeExportFloat(w, floatAt(a, 1));
      w.endObject();
      break;
    case K::IntLists:
      intLists(w, a);
      break;
    default:  // None (Tensor is handled above)
      w.boolean(true);
  }
  w.endObject();
}

std::string exportTarget(const std::string& target) {
  std::string ns = target.substr(0, target.find('.'));
  if (ns == "_operator" || ns == "spmd" || ns == "math" || ns == "builtins" || ns == "torch") return target;
  return "torch.ops." + target;
}

Status writeExportedProgram(JsonWriter& w, const ir::ExportedProgram& p) {
  w.beginObject().key("graph_module").beginObject().key("graph").beginObject().key("inputs");
  SPMD_RETURN_IF_ERROR(graphInputs(w, p));
  w.key("outputs").beginArray();
  for (const auto& out : p.graph.outputs()) writeArgument(w, out);
  w.endArray().key("nodes").beginArray();
  for (const auto& n : p.graph.nodes()) nodeToJson(w, *n);
  w.endArray().key("tensor_values");
  valueTable(w, p.graph, ir::ValueKind::Tensor);
  w.key("sym_int_values");
  valueTable(w, p.graph, ir::ValueKind::SymInt);
  w.key("sym_bool_values").beginObject().endObject();
  w.key("is_single_tensor_return").boolean(false);
  w.key("custom_obj_values").beginObject().endObject();
  w.key("sym_float_values").beginObject().endObject();
  w.endObject();  // graph
  w.key("signature").beginObject().key("input_specs").beginArray();
  for (const auto& s : p.signature.inputs) inputSpecToJson(w, s);
  w.endArray().key("output_specs").beginArray();
  for (const auto& s : p.signature.outputs) outputSpecToJson(w, s);
  w.endArray().endObject();
  w.key("module_call_graph").beginArray().endArray();
  w.key("metadata").beginObject().endObject();
  w.key("treespec_namedtuple_fields").beginObject().endObject();
  w.endObject();  // graph_module
  w.key("opset_version").beginObject().endObject();
  w.key("range_constraints").beginObject();
  for (const auto& [sym, r] : p.ranges) {
    w.key(sym).beginObject().key("min_val").integer(r.min).key("max_val");
    if (r.max == std::numeric_limits<int64_t>::max())
      w.null();
    else
      w.integer(r.max);
    w.endObject();
  }
  w.endObject();
  w.key("schema_version").beginObject().key("major").integer(p.schemaMajor);
  w.key("minor").integer(p.schemaMinor).endObject();
  w.key("verifiers").beginArray().endArray();
  w.key("torch_version").string(p.torchVersion);
  w.key("guards_code").beginArray().endArray();
  w.endObject();
  return Status::ok();
}

Json symIntToJson(const ir::Dim& d) {
  return viaText([&](JsonWriter& w) { writeSymInt(w, d); });
}

Json floatToJson(double v) {
  return viaText([&](JsonWriter& w) { writeExportFloat(w, v); });
}

Json tensorTypeToJson(const ir::TensorType& t) {
  return viaText([&](JsonWriter& w) { writeTensorType(w, t); });
}

Json argumentToJson(const Argument& a) {
  return viaText([&](JsonWriter& w) { writeArgument(w, a); });
}

Expected<Json> exportedProgramToJson(const ir::ExportedProgram& p) {
  SPMD_ASSIGN_OR_RETURN(std::string text, exportedProgramToJsonText(p));
  return Json::parse(text);
}

Expected<std::string> exportedProgramToJsonText(const ir::ExportedProgram& p) {
  std::string text;
  JsonWriter w(text);
  SPMD_RETURN_IF_ERROR(writeExportedProgram(w, p));
  return text;
}

}  // namespace spmd::serialize
