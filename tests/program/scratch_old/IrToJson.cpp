// IR -> torch.export JSON (see IrToJson.h).
//
//   input %x: f32[s52, 64] user_input
//   -> graph.inputs: [{"as_tensor": {"name": "x"}}],
//      graph.tensor_values.x: {"dtype": 7, "sizes": [{"as_expr": {...}}, {"as_int": 64}], ...},
//      signature.input_specs: [{"user_input": {"arg": {"as_tensor": {"name": "x"}}}}]
//
// Every field pt2's reader consumes is written; fields the IR does not keep
// (opset_version, module_call_graph, custom object classes) get neutral
// values. nlohmann exceptions stop at exportedProgramToJsonText.
#include "IrToJson.h"

#include <cmath>
#include <exception>
#include <limits>

namespace spmd::program_old {
namespace {

using ir::Argument;
using K = ir::Argument::Kind;

Json nameRef(const ir::Value* v) { return Json{{"name", v ? v->name() : std::string()}}; }

// A value in a defining or reading position: as_tensor, as_token, ...
Json valueArgument(const ir::Value* v) {
  if (!v) return Json{{"as_none", true}};
  switch (v->kind()) {
    case ir::ValueKind::Tensor:
      return Json{{"as_tensor", nameRef(v)}};
    case ir::ValueKind::Token:
      return Json{{"as_token", nameRef(v)}};
    case ir::ValueKind::CustomObj:
      return Json{{"as_custom_obj", Json{{"name", v->name()}, {"class_fqn", ""}}}};
    case ir::ValueKind::SymInt:
      return Json{{"as_sym_int", Json{{"as_name", v->name()}}}};
    case ir::ValueKind::SymFloat:
      return Json{{"as_sym_float", Json{{"as_name", v->name()}}}};
    case ir::ValueKind::SymBool:
      return Json{{"as_sym_bool", Json{{"as_name", v->name()}}}};
  }
  return Json{{"as_none", true}};
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

Json optionalTensor(const ir::Value* v) {
  if (!v) return Json{{"as_none", true}};
  return Json{{"as_tensor", nameRef(v)}};
}

// One entry of a Sym* argument: {"as_name": n} or {"as_int"/"as_float"/"as_bool": c}.
Json symItem(const Argument& a, size_t i) {
  if (i < a.values.size() && a.values[i]) return Json{{"as_name", a.values[i]->name()}};
  int64_t c = i < a.ints.size() ? a.ints[i] : 0;
  switch (a.kind) {
    case K::SymFloat:
    case K::SymFloats:
      return Json{{"as_float", floatToJson(i < a.floats.size() ? a.floats[i] : 0.0)}};
    case K::SymBool:
    case K::SymBools:
      return Json{{"as_bool", c != 0}};
    default:
      return Json{{"as_int", c}};
  }
}

Json symList(const Argument& a) {
  Json items = Json::array();
  for (size_t i = 0; i < a.values.size(); ++i) items.push_back(symItem(a, i));
  return items;
}

Json floats(const std::vector<double>& v) {
  Json items = Json::array();
  for (double f : v) items.push_back(floatToJson(f));
  return items;
}

Json deviceToJson(const std::string& type, int64_t index) {
  Json d = {{"type", type}, {"index", nullptr}};
  if (index >= 0) d["index"] = index;
  return d;
}

Json intLists(const Argument& a) {
  Json outer = Json::array();
  size_t off = 0;
  for (int64_t n : a.listSizes) {
    Json inner = Json::array();
    for (int64_t j = 0; j < n; ++j) inner.push_back(a.ints[off + static_cast<size_t>(j)]);
    off += static_cast<size_t>(n);
    outer.push_back(std::move(inner));
  }
  return outer;
}

Json metadataToJson(const ir::NodeMetadata& md) {
  Json m = Json::object();
  if (!md.stackTrace.empty()) m["stack_trace"] = md.stackTrace;
  if (!md.nnModuleStack.empty()) m["nn_module_stack"] = md.nnModuleStack;
  if (!md.torchFn.empty()) m["torch_fn"] = md.torchFn;
  for (const auto& [k, v] : md.other) m[k] = v;
  return m;
}

Json nodeToJson(const ir::Node& n) {
  Json inputs = Json::array();
  for (const auto& in : n.inputs())
    inputs.push_back(Json{{"name", in.name}, {"arg", argumentToJson(in.arg)}, {"kind", in.keyword ? 2 : 1}});
  Json outputs = Json::array();
  for (const auto& out : n.outputs()) outputs.push_back(argumentToJson(out));
  return Json{{"target", exportTarget(n.target())},     {"inputs", std::move(inputs)},
              {"outputs", std::move(outputs)},          {"metadata", metadataToJson(n.metadata())},
              {"is_hop_single_tensor_return", nullptr}, {"name", n.name()}};
}

// Records the metadata of a defined value in tensor_values / sym_int_values.
void appendUnique(Json& object, const std::string& key, Json value) {
  auto& entries = static_cast<std::vector<std::pair<const std::string, Json>>&>(object.get_ref<Json::object_t&>());
  entries.emplace_back(key, std::move(value));
}
void describeValue(const ir::Value* v, Json& tensorValues, Json& symIntValues) {
  if (!v) return;
  if (v->kind() == ir::ValueKind::Tensor) appendUnique(tensorValues, v->name(), tensorTypeToJson(v->type()));
  if (v->kind() == ir::ValueKind::SymInt) appendUnique(symIntValues, v->name(), symIntToJson(v->symValue()));
}

Json inputSpecToJson(const ir::InputSpec& s) {
  using IK = ir::InputKind;
  auto named = [&](const char* kind, const char* field) {
    Json body = {{"arg", nameRef(s.value)}, {field, s.target}};
    if (s.kind == IK::Buffer) body["persistent"] = s.persistent;
    return Json{{kind, std::move(body)}};
  };
  switch (s.kind) {
    case IK::UserInput:
      return Json{{"user_input", Json{{"arg", valueArgument(s.value)}}}};
    case IK::Parameter:
      return named("parameter", "parameter_name");
    case IK::Buffer:
      return named("buffer", "buffer_name");
    case IK::TensorConstant:
      return named("tensor_constant", "tensor_constant_name");
    case IK::CustomObj:
      return Json{
          {"custom_obj", Json{{"arg", Json{{"name", s.value ? s.value->name() : ""}, {"class_fqn", ""}}},
                              {"custom_obj_name", s.target}}}};
    case IK::Token:
      return Json{{"token", Json{{"arg", nameRef(s.value)}}}};
    case IK::ConstantInput:
      return Json{{"constant_input", Json{{"name", s.name}, {"value", argumentToJson(s.constant)}}}};
  }
  return Json::object();
}

Json outputSpecToJson(const ir::OutputSpec& s) {
  using OK = ir::OutputKind;
  auto named = [&](const char* kind, const char* field) {
    Json body = {{"arg", nameRef(s.arg.value())}};
    if (field) body[field] = s.target;
    return Json{{kind, std::move(body)}};
  };
  switch (s.kind) {
    case OK::UserOutput:
      return Json{{"user_output", Json{{"arg", argumentToJson(s.arg)}}}};
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
  return Json::object();
}

// Graph inputs in signature order (constant inputs carry their constant);
// error when the non-constant specs do not name graph.inputs() in order.
Expected<Json> graphInputs(const ir::ExportedProgram& p, Json& tensorValues, Json& symIntValues) {
  Json inputs = Json::array();
  const auto& graphIns = p.graph.inputs();
  if (p.signature.inputs.empty()) {
    for (const ir::Value* v : graphIns) {
      inputs.push_back(valueArgument(v));
      describeValue(v, tensorValues, symIntValues);
    }
    return inputs;
  }
  size_t next = 0;
  for (const auto& s : p.signature.inputs) {
    if (s.kind == ir::InputKind::ConstantInput) {
      inputs.push_back(argumentToJson(s.constant));
      continue;
    }
    if (next >= graphIns.size() || graphIns[next] != s.value)
      return Status::error("signature input '" + s.name + "' does not line up with graph input " +
                           std::to_string(next));
    inputs.push_back(valueArgument(s.value));
    describeValue(s.value, tensorValues, symIntValues);
    ++next;
  }
  if (next != graphIns.size())
    return Status::error("graph has " + std::to_string(graphIns.size()) +
                         " inputs but the signature describes " + std::to_string(next));
  return inputs;
}

}  // namespace

std::string symExprSrepr(const ir::SymExpr& e) {
  using SK = ir::SymExpr::Kind;
  auto call = [&](const char* f) {
    std::string s = std::string(f) + "(";
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i) s += ", ";
      s += symExprSrepr(*e.args[i]);
    }
    return s + ")";
  };
  switch (e.kind) {
    case SK::Integer:
      return "Integer(" + std::to_string(e.value) + ")";
    case SK::Symbol:
      return "Symbol('" + e.name + "', positive=True, integer=True)";
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
  return "Integer(0)";
}

Json symIntToJson(const ir::Dim& d) {
  if (d.isStatic()) return Json{{"as_int", d.value()}};
  return Json{
      {"as_expr", Json{{"expr_str", symExprSrepr(*d.expr())}, {"hint", Json{{"as_int", d.value()}}}}}};
}

Json floatToJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

Json tensorTypeToJson(const ir::TensorType& t) {
  Json sizes = Json::array();
  for (const auto& d : t.sizes) sizes.push_back(symIntToJson(d));
  Json strides = Json::array();
  for (const auto& d : t.strides) strides.push_back(symIntToJson(d));
  return Json{{"dtype", static_cast<int>(t.dtype)},
              {"sizes", std::move(sizes)},
              {"requires_grad", t.requiresGrad},
              {"device", deviceToJson(t.device.type, t.device.index)},
              {"strides", std::move(strides)},
              {"storage_offset", Json{{"as_int", 0}}},
              {"layout", static_cast<int>(ir::Layout::Strided)}};
}

Json argumentToJson(const Argument& a) {
  auto one = [](const char* key, Json v) { return Json{{key, std::move(v)}}; };
  auto valueList = [&](auto item) {
    Json items = Json::array();
    for (const ir::Value* v : a.values) items.push_back(item(v));
    return items;
  };
  switch (a.kind) {
    case K::None:
      return one("as_none", true);
    case K::Tensor:
      return valueArgument(a.value());
    case K::Tensors:
      return one("as_tensors", valueList(nameRef));
    case K::OptionalTensor:
      return one("as_optional_tensor", optionalTensor(a.value()));
    case K::OptionalTensors:
      return one("as_optional_tensors", valueList(optionalTensor));
    case K::Int:
      return one("as_int", intAt(a, 0));
    case K::Ints:
      return one("as_ints", a.ints);
    case K::Float:
      return one("as_float", floatToJson(floatAt(a, 0)));
    case K::Floats:
      return one("as_floats", floats(a.floats));
    case K::Bool:
      return one("as_bool", intAt(a, 0) != 0);
    case K::Bools: {
      Json items = Json::array();
      for (int64_t b : a.ints) items.push_back(b != 0);
      return one("as_bools", std::move(items));
    }
    case K::String:
      return one("as_string", stringAt(a, 0));
    case K::Strings:
      return one("as_strings", a.strings);
    case K::SymInt:
      return one("as_sym_int", symItem(a, 0));
    case K::SymInts:
      return one("as_sym_ints", symList(a));
    case K::SymFloat:
      return one("as_sym_float", symItem(a, 0));
    case K::SymFloats:
      return one("as_sym_floats", symList(a));
    case K::SymBool:
      return one("as_sym_bool", symItem(a, 0));
    case K::SymBools:
      return one("as_sym_bools", symList(a));
    case K::ScalarType:
      return one("as_scalar_type", intAt(a, 0));
    case K::MemoryFormat:
      return one("as_memory_format", intAt(a, 0));
    case K::Layout:
      return one("as_layout", intAt(a, 0));
    case K::Device:
      return one("as_device", deviceToJson(stringAt(a, 0), intAt(a, 0)));
    case K::Complex:
      return one("as_complex",
                 Json{{"real", floatToJson(floatAt(a, 0))}, {"imag", floatToJson(floatAt(a, 1))}});
    case K::IntLists:
      return one("as_int_lists", intLists(a));
  }
  return one("as_none", true);
}

std::string exportTarget(const std::string& target) {
  std::string ns = target.substr(0, target.find('.'));
  if (ns == "_operator" || ns == "spmd" || ns == "math" || ns == "builtins" || ns == "torch") return target;
  return "torch.ops." + target;
}

Expected<Json> exportedProgramToJson(const ir::ExportedProgram& p) {
  Json tensorValues = Json::object();
  Json symIntValues = Json::object();
  SPMD_ASSIGN_OR_RETURN(Json inputs, graphInputs(p, tensorValues, symIntValues));
  Json nodes = Json::array();
  for (const auto& n : p.graph.nodes()) {
    nodes.push_back(nodeToJson(*n));
    for (const ir::Value* v : n->outputValues()) describeValue(v, tensorValues, symIntValues);
  }
  Json outputs = Json::array();
  for (const auto& out : p.graph.outputs()) outputs.push_back(argumentToJson(out));
  Json graph = {{"inputs", std::move(inputs)},
                {"outputs", std::move(outputs)},
                {"nodes", std::move(nodes)},
                {"tensor_values", std::move(tensorValues)},
                {"sym_int_values", std::move(symIntValues)},
                {"sym_bool_values", Json::object()},
                {"is_single_tensor_return", false},
                {"custom_obj_values", Json::object()},
                {"sym_float_values", Json::object()}};
  Json inputSpecs = Json::array();
  for (const auto& s : p.signature.inputs) inputSpecs.push_back(inputSpecToJson(s));
  Json outputSpecs = Json::array();
  for (const auto& s : p.signature.outputs) outputSpecs.push_back(outputSpecToJson(s));
  Json ranges = Json::object();
  for (const auto& [sym, r] : p.ranges) {
    Json max = r.max == std::numeric_limits<int64_t>::max() ? Json(nullptr) : Json(r.max);
    ranges[sym] = Json{{"min_val", r.min}, {"max_val", std::move(max)}};
  }
  Json module = {
      {"graph", std::move(graph)},
      {"signature", Json{{"input_specs", std::move(inputSpecs)}, {"output_specs", std::move(outputSpecs)}}},
      {"module_call_graph", Json::array()},
      {"metadata", Json::object()},
      {"treespec_namedtuple_fields", Json::object()}};
  return Json{{"graph_module", std::move(module)},
              {"opset_version", Json::object()},
              {"range_constraints", std::move(ranges)},
              {"schema_version", Json{{"major", p.schemaMajor}, {"minor", p.schemaMinor}}},
              {"verifiers", Json::array()},
              {"torch_version", p.torchVersion},
              {"guards_code", Json::array()}};
}

Expected<std::string> exportedProgramToJsonText(const ir::ExportedProgram& p) {
  SPMD_ASSIGN_OR_RETURN(Json j, exportedProgramToJson(p));
  try {
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot print the program JSON: ") + e.what());
  }
}

}  // namespace spmd::program_old
