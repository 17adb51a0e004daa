// Builds the IR from a serialized ExportedProgram (export schema 8.x).
//
//   {"target": "torch.ops.aten.permute.default",
//    "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "p_w"}}, "kind": 1},
//               {"name": "dims", "arg": {"as_ints": [1, 0]}, "kind": 1}],
//    "outputs": [{"as_tensor": {"name": "permute"}}], "name": "permute", ...}
//   becomes
//   %permute: f32[64, 256] = aten.permute.default(%p_w, [1, 0])
//
// Every value name read must be defined earlier (graph input or node
// output); its type comes from graph.tensor_values / sym_int_values.
#include "serialize/FromExportJson.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/Verify.h"
#include "serialize/JsonUtil.h"

namespace spmd::serialize {
namespace {

using ir::Argument;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr int kSupportedMajor = 8;

// Looks `key` up in a table of (name, value) pairs; null when absent.
template <typename Table>
const auto* findKind(const Table& table, std::string_view key) {
  for (const auto& entry : table)
    if (entry.first == key) return &entry.second;
  return static_cast<decltype(&table[0].second)>(nullptr);
}

class IrBuilder {
 public:
  IrBuilder(ir::ExportedProgram& p, StorageOffsets* offsets) : p_(p), g_(p.graph), offsets_(offsets) {}

  Status build(object root) {
    SPMD_RETURN_IF_ERROR(readVersion(root));
    SPMD_ASSIGN_OR_RETURN(object gm, getObject(root, "graph_module"));
    SPMD_ASSIGN_OR_RETURN(object graph, getObject(gm, "graph"));
    SPMD_ASSIGN_OR_RETURN(object tensorValues, getObject(graph, "tensor_values"));
    // simdjson object lookup is a linear scan: index once.
    tensorMeta_.reserve(tensorValues.size());
    for (auto field : tensorValues) tensorMeta_.emplace(field.key, field.value);
    for (auto field : optObject(graph, "sym_int_values")) symInts_.emplace(field.key, field.value);
    SPMD_RETURN_IF_ERROR(readRanges(root));
    SPMD_ASSIGN_OR_RETURN(array inputs, getArray(graph, "inputs"));
    std::vector<Argument> inputArgs;
    for (element in : inputs) {
      SPMD_ASSIGN_OR_RETURN(Argument a, defineArgument(in, "graph input"));
      for (ir::Value* v : a.values)
        if (v) g_.addInput(v);
      inputArgs.push_back(std::move(a));
    }
    SPMD_ASSIGN_OR_RETURN(array nodes, getArray(graph, "nodes"));
    for (element n : nodes) SPMD_RETURN_IF_ERROR(readNode(n));
    SPMD_ASSIGN_OR_RETURN(array outputs, getArray(graph, "outputs"));
    for (element out : outputs) {
      SPMD_ASSIGN_OR_RETURN(Argument a, useArgument(out, "graph output"));
      g_.addOutput(std::move(a));
    }
    SPMD_ASSIGN_OR_RETURN(object sig, getObject(gm, "signature"));
    return readSignature(sig, inputArgs);
  }

 private:
  Status readVersion(object root) {
    SPMD_ASSIGN_OR_RETURN(object v, getObject(root, "schema_version"));
    SPMD_ASSIGN_OR_RETURN(int64_t major, getInt(v, "major"));
    SPMD_ASSIGN_OR_RETURN(int64_t minor, getInt(v, "minor"));
    if (major != kSupportedMajor)
      return Status::error("export schema version " + std::to_string(major) + "." + std::to_string(minor) +
                           " is not supported (this build reads " + std::to_string(kSupportedMajor) +
                           ".x); re-export with a torch release that writes schema " +
                           std::to_string(kSupportedMajor) + ".x");
    p_.schemaMajor = static_cast<int>(major);
    p_.schemaMinor = static_cast<int>(minor);
    std::string_view tv;
    if (root["torch_version"].get_string().get(tv) == simdjson::SUCCESS) p_.torchVersion = std::string(tv);
    return Status::ok();
  }

  Status readRanges(object root) {
    object ranges = optObject(root, "range_constraints");
    for (auto field : ranges) {
      ir::RangeConstraint rc;
      object r;
      if (field.value.get_object().get(r) != simdjson::SUCCESS)
        return Status::error("range_constraints." + std::string(field.key) + " is not an object");
      rc.min = clampedInt(r["min_val"], 0);
      rc.max = clampedInt(r["max_val"], std::numeric_limits<int64_t>::max());
      p_.ranges[std::string(field.key)] = rc;
    }
    return Status::ok();
  }

  Expected<ir::TensorType> tensorType(std::string_view name) {
    object meta;
    auto it = tensorMeta_.find(name);
    if (it == tensorMeta_.end() || it->second.get_object().get(meta) != simdjson::SUCCESS)
      return Status::error("tensor '" + std::string(name) + "' has no entry in graph.tensor_values");
    int64_t offset = clampedInt(meta["storage_offset"]["as_int"], 0);
    if (offset != 0 && offsets_) offsets_->emplace(std::string(name), offset);
    return parseTensorMeta(meta, name);
  }

  // Creates the value an output/input argument defines.
  Expected<ir::Value*> defineValue(std::string_view name, ir::ValueKind kind) {
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, g_.addValue(std::string(name), kind));
    if (kind == ir::ValueKind::Tensor) {
      SPMD_ASSIGN_OR_RETURN(v->mutableType(), tensorType(name));
    } else if (kind == ir::ValueKind::SymInt) {
      if (auto it = symInts_.find(name); it != symInts_.end()) {
        SPMD_ASSIGN_OR_RETURN(ir::Dim d, parseSymInt(it->second, name));
        v->setSymValue(std::move(d));
      }
    }
    return v;
  }

  Expected<ir::Value*> lookup(std::string_view name, const std::string& where) {
    ir::Value* v = g_.findValue(name);
    if (!v) return Status::error(where + " reads undefined value '" + std::string(name) + "'");
    return v;
  }

  // An argument that defines values (graph inputs, node outputs).
  Expected<Argument> defineArgument(element e, const std::string& where) {
    SPMD_ASSIGN_OR_RETURN(auto kv, singleField(e, where));
    auto [key, val] = kv;
    Argument a;
    if (key == "as_none") return a;
    if (key == "as_tensor" || key == "as_token" || key == "as_custom_obj") {
      a.kind = Argument::Kind::Tensor;
      SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(val, "name"));
      ir::ValueKind k = key == "as_tensor"  ? ir::ValueKind::Tensor
                        : key == "as_token" ? ir::ValueKind::Token
                                            : ir::ValueKind::CustomObj;
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, defineValue(name, k));
      a.values = {v};
      return a;
    }
    if (key == "as_tensors") {
      a.kind = Argument::Kind::Tensors;
      SPMD_ASSIGN_OR_RETURN(array items, asArray(val, where));
      for (element it : items) {
        SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(it, "name"));
        SPMD_ASSIGN_OR_RETURN(ir::Value * v, defineValue(name, ir::ValueKind::Tensor));
        a.values.push_back(v);
      }
      return a;
    }
    if (key == "as_sym_int" || key == "as_sym_float" || key == "as_sym_bool") {
      a.kind = key == "as_sym_int"     ? Argument::Kind::SymInt
               : key == "as_sym_float" ? Argument::Kind::SymFloat
                                       : Argument::Kind::SymBool;
      std::string_view name;
      if (val["as_name"].get_string().get(name) != simdjson::SUCCESS)
        return useArgument(e, where);  // a constant, defines nothing
      ir::ValueKind k = key == "as_sym_int"     ? ir::ValueKind::SymInt
                        : key == "as_sym_float" ? ir::ValueKind::SymFloat
                                                : ir::ValueKind::SymBool;
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, defineValue(name, k));
      a.values = {v};
      a.ints = {0};
      return a;
    }
    // Constants (ints, floats, ...) define nothing.
    return useArgument(e, where);
  }

  Expected<Argument> symList(element val, Argument::Kind kind, const char* constKey,
                             const std::string& where) {
    Argument a;
    a.kind = kind;
    SPMD_ASSIGN_OR_RETURN(array items, asArray(val, where));
    for (element it : items) {
      SPMD_ASSIGN_OR_RETURN(Argument one, symScalar(it, kind, constKey, where));
      a.values.push_back(one.values[0]);
      a.ints.push_back(one.ints.empty() ? 0 : one.ints[0]);
      if (!one.floats.empty()) a.floats.push_back(one.floats[0]);
    }
    return a;
  }

  Expected<Argument> symScalar(element val, Argument::Kind kind, const char* constKey,
                               const std::string& where) {
    Argument a;
    a.kind = kind;
    std::string_view name;
    if (val["as_name"].get_string().get(name) == simdjson::SUCCESS) {
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, lookup(name, where));
      a.values = {v};
      a.ints = {0};
      a.floats = {0.0};
      return a;
    }
    element c;
    if (val[constKey].get(c) != simdjson::SUCCESS)
      return Status::error(where + ": symbolic argument has neither as_name nor " + constKey);
    a.values = {nullptr};
    if (std::string_view(constKey) == "as_float") {
      SPMD_ASSIGN_OR_RETURN(double f, toDouble(c, where));
      a.floats = {f};
      a.ints = {0};
    } else {
      SPMD_ASSIGN_OR_RETURN(int64_t i, toInt(c, where));
      a.ints = {i};
    }
    return a;
  }

  Expected<Argument> optionalTensor(element val, const std::string& where) {
    Argument a;
    a.kind = Argument::Kind::OptionalTensor;
    element t;
    if (val["as_tensor"].get(t) == simdjson::SUCCESS) {
      SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(t, "name"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, lookup(name, where));
      a.values = {v};
    } else {
      a.values = {nullptr};
    }
    return a;
  }

  // An argument that only reads values: a reference to values defined
  // earlier, or a constant.
  Expected<Argument> useArgument(element e, const std::string& where) {
    SPMD_ASSIGN_OR_RETURN(auto kv, singleField(e, where));
    auto [key, val] = kv;
    if (key == "as_none") return Argument();
    if (key == "as_tensor" || key == "as_token" || key == "as_custom_obj" || key == "as_tensors" ||
        key == "as_optional_tensor" || key == "as_optional_tensors")
      return tensorReference(key, val, where);
    if (key == "as_sym_int") return symScalar(val, Argument::Kind::SymInt, "as_int", where);
    if (key == "as_sym_ints") return symList(val, Argument::Kind::SymInts, "as_int", where);
    if (key == "as_sym_float") return symScalar(val, Argument::Kind::SymFloat, "as_float", where);
    if (key == "as_sym_floats") return symList(val, Argument::Kind::SymFloats, "as_float", where);
    if (key == "as_sym_bool") return symScalar(val, Argument::Kind::SymBool, "as_bool", where);
    if (key == "as_sym_bools") return symList(val, Argument::Kind::SymBools, "as_bool", where);
    if (key == "as_ints" || key == "as_bools" || key == "as_floats" || key == "as_strings" ||
        key == "as_int_lists")
      return constantList(key, val, where);
    if (key == "as_graph" || key == "as_operator" || key == "as_nested_tensors" ||
        key == "as_string_to_argument")
      return Status::error(
          where + ": argument kind '" + std::string(key) +
          "' is not supported (higher-order ops and nested containers cannot be compiled yet)");
    return constantScalar(key, val, where);
  }

  // The values an argument of kind `key` names: tensors (also tokens and
  // custom objects), lists of them, and optional ones.
  Expected<Argument> tensorReference(std::string_view key, element val, const std::string& where) {
    if (key == "as_optional_tensor") return optionalTensor(val, where);
    if (key != "as_tensors" && key != "as_optional_tensors") {
      SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(val, "name"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, lookup(name, where));
      return Argument::tensor(v);
    }
    Argument a;
    a.kind = key == "as_tensors" ? Argument::Kind::Tensors : Argument::Kind::OptionalTensors;
    SPMD_ASSIGN_OR_RETURN(array items, asArray(val, where));
    for (element it : items) {
      if (a.kind == Argument::Kind::OptionalTensors) {
        SPMD_ASSIGN_OR_RETURN(Argument one, optionalTensor(it, where));
        a.values.push_back(one.values[0]);
        continue;
      }
      SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(it, "name"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, lookup(name, where));
      a.values.push_back(v);
    }
    return a;
  }

  // A constant that is one number, flag, string, device or complex number;
  // error for an unknown kind.
  Expected<Argument> constantScalar(std::string_view key, element val, const std::string& where) {
    using K = Argument::Kind;
    Argument a;
    if (key == "as_int" || key == "as_scalar_type" || key == "as_memory_format" || key == "as_layout") {
      a.kind = key == "as_int"           ? K::Int
               : key == "as_scalar_type" ? K::ScalarType
               : key == "as_layout"      ? K::Layout
                                         : K::MemoryFormat;
      SPMD_ASSIGN_OR_RETURN(int64_t i, toInt(val, where));
      if (a.kind == K::ScalarType && !ir::scalarTypeFromSchema(i))
        return Status::error(where + ": unknown scalar type " + std::to_string(i));
      a.ints = {i};
      return a;
    }
    if (key == "as_bool") {
      bool b = false;
      if (val.get_bool().get(b) != simdjson::SUCCESS) return Status::error(where + ": as_bool is not a bool");
      return Argument::boolean(b);
    }
    if (key == "as_float") {
      SPMD_ASSIGN_OR_RETURN(double f, toDouble(val, where));
      return Argument::floating(f);
    }
    if (key == "as_string") {
      a.kind = K::String;
      std::string_view s;
      if (val.get_string().get(s) != simdjson::SUCCESS)
        return Status::error(where + ": as_string is not a string");
      a.strings = {std::string(s)};
      return a;
    }
    if (key == "as_device") {
      SPMD_ASSIGN_OR_RETURN(ir::Device d, parseDevice(val));
      return Argument::device(d);
    }
    if (key == "as_complex") {
      a.kind = K::Complex;
      double re = 0, im = 0;
      SPMD_ASSIGN_OR_RETURN(re, toDouble(val["real"].value_unsafe(), where));
      SPMD_ASSIGN_OR_RETURN(im, toDouble(val["imag"].value_unsafe(), where));
      a.floats = {re, im};
      return a;
    }
    return Status::error(where + ": unknown argument kind '" + std::string(key) + "'");
  }

  // A constant list: ints, bools, floats, strings, or lists of ints.
  Expected<Argument> constantList(std::string_view key, element val, const std::string& where) {
    using K = Argument::Kind;
    Argument a;
    a.kind = key == "as_ints"      ? K::Ints
             : key == "as_bools"   ? K::Bools
             : key == "as_floats"  ? K::Floats
             : key == "as_strings" ? K::Strings
                                   : K::IntLists;
    SPMD_ASSIGN_OR_RETURN(array items, asArray(val, where));
    for (element it : items) {
      bool b = false;
      std::string_view s;
      if (a.kind == K::Bools && it.get_bool().get(b) == simdjson::SUCCESS) {
        a.ints.push_back(b ? 1 : 0);
      } else if (a.kind == K::Floats) {
        SPMD_ASSIGN_OR_RETURN(double f, toDouble(it, where));
        a.floats.push_back(f);
      } else if (a.kind == K::Strings) {
        if (it.get_string().get(s) != simdjson::SUCCESS)
          return Status::error(where + ": as_strings holds a non-string");
        a.strings.emplace_back(s);
      } else if (a.kind == K::IntLists) {
        SPMD_ASSIGN_OR_RETURN(array inner, asArray(it, where));
        int64_t n = 0;
        for (element i : inner) {
          SPMD_ASSIGN_OR_RETURN(int64_t v, toInt(i, where));
          a.ints.push_back(v);
          ++n;
        }
        a.listSizes.push_back(n);
      } else {
        SPMD_ASSIGN_OR_RETURN(int64_t i, toInt(it, where));
        a.ints.push_back(i);
      }
    }
    return a;
  }

  Status readNode(element n) {
    SPMD_ASSIGN_OR_RETURN(std::string_view target, getString(n, "target"));
    std::string_view name;
    if (n["name"].get_string().get(name) != simdjson::SUCCESS) name = {};
    if (target.starts_with("torch.ops.")) target.remove_prefix(10);
    std::string t(target);
    std::string where = "node %" + std::string(name.empty() ? "?" : name) + " (" + t + ")";
    std::vector<ir::NamedArgument> inputs;
    SPMD_ASSIGN_OR_RETURN(array ins, getArray(n, "inputs"));
    for (element in : ins) {
      ir::NamedArgument na;
      SPMD_ASSIGN_OR_RETURN(std::string_view argName, getString(in, "name"));
      na.name = std::string(argName);
      int64_t kind = 1;
      if (in["kind"].get_int64().get(kind) != simdjson::SUCCESS) kind = 1;
      na.keyword = kind == 2;
      element arg;
      if (in["arg"].get(arg) != simdjson::SUCCESS)
        return Status::error(where + ": input '" + na.name + "' has no arg");
      SPMD_ASSIGN_OR_RETURN(na.arg, useArgument(arg, where + " argument '" + na.name + "'"));
      inputs.push_back(std::move(na));
    }
    std::vector<Argument> outputs;
    SPMD_ASSIGN_OR_RETURN(array outs, getArray(n, "outputs"));
    for (element out : outs) {
      SPMD_ASSIGN_OR_RETURN(Argument a, defineArgument(out, where + " output"));
      outputs.push_back(std::move(a));
    }
    if (name.empty() && !outputs.empty() && outputs[0].value()) name = outputs[0].value()->name();
    SPMD_ASSIGN_OR_RETURN(ir::Node * node,
                          g_.addNode(std::string(name), std::move(t), std::move(inputs), std::move(outputs)));
    object meta = optObject(n, "metadata");
    auto& md = node->mutableMetadata();
    for (auto field : meta) {
      std::string_view v;
      if (field.value.get_string().get(v) != simdjson::SUCCESS) continue;
      if (field.key == "stack_trace")
        md.stackTrace = std::string(v);
      else if (field.key == "nn_module_stack")
        md.nnModuleStack = std::string(v);
      else if (field.key == "torch_fn")
        md.torchFn = std::string(v);
      // from_node (provenance through export passes) is long and unused: dropped.
      else if (field.key != "from_node")
        md.other.emplace(std::string(field.key), std::string(v));
    }
    return Status::ok();
  }

  Status readSignature(object sig, const std::vector<Argument>& inputArgs) {
    SPMD_ASSIGN_OR_RETURN(array ins, getArray(sig, "input_specs"));
    size_t i = 0;
    for (element spec : ins) {
      if (i >= inputArgs.size())
        return Status::error("signature has more input specs than the graph has inputs (" +
                             std::to_string(inputArgs.size()) + ")");
      SPMD_ASSIGN_OR_RETURN(ir::InputSpec s, parseInputSpec(spec, inputArgs[i]));
      p_.signature.inputs.push_back(std::move(s));
      ++i;
    }
    if (i != inputArgs.size())
      return Status::error("graph has " + std::to_string(inputArgs.size()) +
                           " inputs but the signature describes " + std::to_string(i));
    SPMD_ASSIGN_OR_RETURN(array outs, getArray(sig, "output_specs"));
    for (element spec : outs) {
      SPMD_ASSIGN_OR_RETURN(ir::OutputSpec s, parseOutputSpec(spec));
      p_.signature.outputs.push_back(std::move(s));
    }
    if (p_.signature.outputs.size() != g_.outputs().size())
      return Status::error("graph has " + std::to_string(g_.outputs().size()) +
                           " outputs but the signature describes " +
                           std::to_string(p_.signature.outputs.size()));
    return Status::ok();
  }

  Expected<ir::InputSpec> parseInputSpec(element spec, const Argument& graphArg) {
    SPMD_ASSIGN_OR_RETURN(auto kv, singleField(spec, "input spec"));
    auto [key, val] = kv;
    static const std::pair<std::string_view, std::pair<ir::InputKind, const char*>> kKinds[] = {
        {"user_input", {ir::InputKind::UserInput, ""}},
        {"parameter", {ir::InputKind::Parameter, "parameter_name"}},
        {"buffer", {ir::InputKind::Buffer, "buffer_name"}},
        {"tensor_constant", {ir::InputKind::TensorConstant, "tensor_constant_name"}},
        {"custom_obj", {ir::InputKind::CustomObj, "custom_obj_name"}},
        {"token", {ir::InputKind::Token, ""}},
        {"constant_input", {ir::InputKind::ConstantInput, ""}},
    };
    ir::InputSpec s;
    const auto* kind = findKind(kKinds, key);
    if (!kind) return Status::error("unknown input spec kind '" + std::string(key) + "'");
    s.kind = kind->first;
    if (*kind->second) {
      SPMD_ASSIGN_OR_RETURN(std::string_view t, getString(val, kind->second));
      s.target = std::string(t);
    }
    bool persistent = true;
    if (val["persistent"].get_bool().get(persistent) == simdjson::SUCCESS) s.persistent = persistent;
    if (s.kind == ir::InputKind::ConstantInput) {
      SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(val, "name"));
      s.name = std::string(name);
      element cv;
      if (val["value"].get(cv) == simdjson::SUCCESS) {
        SPMD_ASSIGN_OR_RETURN(s.constant, useArgument(cv, "constant input " + s.name));
      }
      return s;
    }
    s.value = graphArg.value();
    if (!s.value)
      return Status::error("input spec '" + std::string(key) +
                           "' lines up with a graph input that is not a value");
    s.name = s.value->name();
    return s;
  }

  Expected<ir::OutputSpec> parseOutputSpec(element spec) {
    SPMD_ASSIGN_OR_RETURN(auto kv, singleField(spec, "output spec"));
    auto [key, val] = kv;
    static const std::pair<std::string_view, std::pair<ir::OutputKind, const char*>> kKinds[] = {
        {"user_output", {ir::OutputKind::UserOutput, ""}},
        {"loss_output", {ir::OutputKind::LossOutput, ""}},
        {"buffer_mutation", {ir::OutputKind::BufferMutation, "buffer_name"}},
        {"gradient_to_parameter", {ir::OutputKind::GradientToParameter, "parameter_name"}},
        {"gradient_to_user_input", {ir::OutputKind::GradientToUserInput, "user_input_name"}},
        {"user_input_mutation", {ir::OutputKind::UserInputMutation, "user_input_name"}},
        {"token", {ir::OutputKind::Token, ""}},
        {"parameter_mutation", {ir::OutputKind::ParameterMutation, "parameter_name"}},
    };
    const auto* kind = findKind(kKinds, key);
    if (!kind) return Status::error("unknown output spec kind '" + std::string(key) + "'");
    ir::OutputSpec s;
    s.kind = kind->first;
    if (*kind->second) {
      SPMD_ASSIGN_OR_RETURN(std::string_view t, getString(val, kind->second));
      s.target = std::string(t);
    }
    element arg;
    if (val["arg"].get(arg) != simdjson::SUCCESS)
      return Status::error("output spec '" + std::string(key) + "' has no arg");
    if (s.kind == ir::OutputKind::UserOutput) {
      SPMD_ASSIGN_OR_RETURN(s.arg, useArgument(arg, "output spec"));
    } else {
      SPMD_ASSIGN_OR_RETURN(std::string_view name, getString(arg, "name"));
      SPMD_ASSIGN_OR_RETURN(ir::Value * v, lookup(name, "output spec"));
      s.arg = Argument::tensor(v);
    }
    return s;
  }

  ir::ExportedProgram& p_;
  ir::Graph& g_;
  std::unordered_map<std::string_view, element> tensorMeta_;
  std::unordered_map<std::string_view, element> symInts_;
  StorageOffsets* offsets_;
};

}  // namespace

Expected<ir::ExportedProgram> buildProgram(const simdjson::dom::element& root, std::string name,
                                           StorageOffsets* offsets) {
  ir::ExportedProgram p;
  p.name = std::move(name);
  object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) return Status::error("model JSON is not an object");
  IrBuilder b(p, offsets);
  SPMD_RETURN_IF_ERROR(b.build(obj));
  return p;
}

Status verifyProgram(const ir::ExportedProgram& program, const StorageOffsets& offsets) {
  ir::VerifyOptions options;
  if (!offsets.empty())
    options.storageOffset = [&offsets](const ir::Value& v) {
      auto it = offsets.find(v.name());
      return it == offsets.end() ? int64_t{0} : it->second;
    };
  return ir::verifyProgram(program, options);
}

Expected<ir::ExportedProgram> parseExportedProgram(std::string_view json, std::string name) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::padded_string padded(json);
  if (auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS)
    return Status::error(std::string("model JSON does not parse: ") + simdjson::error_message(err));
  StorageOffsets offsets;
  SPMD_ASSIGN_OR_RETURN(ir::ExportedProgram p, buildProgram(root, std::move(name), &offsets));
  SPMD_RETURN_IF_ERROR(verifyProgram(p, offsets));
  return p;
}

}  // namespace spmd::serialize
