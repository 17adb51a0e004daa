// Graph construction and use tracking.
#include "ir/Graph.h"

#include <algorithm>
#include <unordered_set>

namespace spmd::ir {

Argument Argument::tensor(Value* v) {
  Argument a;
  a.kind = Kind::Tensor;
  a.values = {v};
  return a;
}
Argument Argument::tensors(std::vector<Value*> vs) {
  Argument a;
  a.kind = Kind::Tensors;
  a.values = std::move(vs);
  return a;
}
Argument Argument::integer(int64_t v) {
  Argument a;
  a.kind = Kind::Int;
  a.ints = {v};
  return a;
}
Argument Argument::integers(std::vector<int64_t> vs) {
  Argument a;
  a.kind = Kind::Ints;
  a.ints = std::move(vs);
  return a;
}
Argument Argument::floating(double v) {
  Argument a;
  a.kind = Kind::Float;
  a.floats = {v};
  return a;
}
Argument Argument::boolean(bool v) {
  Argument a;
  a.kind = Kind::Bool;
  a.ints = {v ? 1 : 0};
  return a;
}
Argument Argument::symInt(Value* v, int64_t constant) {
  Argument a;
  a.kind = Kind::SymInt;
  a.values = {v};
  a.ints = {constant};
  return a;
}
Argument Argument::symInts(std::vector<Value*> vs, std::vector<int64_t> constants) {
  SPMD_CHECK(vs.size() == constants.size());
  Argument a;
  a.kind = Kind::SymInts;
  a.values = std::move(vs);
  a.ints = std::move(constants);
  return a;
}
Argument Argument::scalarType(ScalarType t) {
  Argument a;
  a.kind = Kind::ScalarType;
  a.ints = {static_cast<int64_t>(t)};
  return a;
}
Argument Argument::device(const Device& d) {
  Argument a;
  a.kind = Kind::Device;
  a.strings = {d.type};
  a.ints = {d.index};
  return a;
}

std::string_view argumentKindName(Argument::Kind k) {
  using K = Argument::Kind;
  switch (k) {
    case K::None:
      return "as_none";
    case K::Tensor:
      return "as_tensor";
    case K::Tensors:
      return "as_tensors";
    case K::OptionalTensor:
      return "as_optional_tensor";
    case K::OptionalTensors:
      return "as_optional_tensors";
    case K::Int:
      return "as_int";
    case K::Ints:
      return "as_ints";
    case K::Float:
      return "as_float";
    case K::Floats:
      return "as_floats";
    case K::Bool:
      return "as_bool";
    case K::Bools:
      return "as_bools";
    case K::String:
      return "as_string";
    case K::Strings:
      return "as_strings";
    case K::SymInt:
      return "as_sym_int";
    case K::SymInts:
      return "as_sym_ints";
    case K::SymFloat:
      return "as_sym_float";
    case K::SymFloats:
      return "as_sym_floats";
    case K::SymBool:
      return "as_sym_bool";
    case K::SymBools:
      return "as_sym_bools";
    case K::ScalarType:
      return "as_scalar_type";
    case K::MemoryFormat:
      return "as_memory_format";
    case K::Layout:
      return "as_layout";
    case K::Device:
      return "as_device";
    case K::Complex:
      return "as_complex";
    case K::IntLists:
      return "as_int_lists";
  }
  return "?";
}

std::string_view inputKindName(InputKind k) {
  switch (k) {
    case InputKind::UserInput:
      return "user_input";
    case InputKind::Parameter:
      return "parameter";
    case InputKind::Buffer:
      return "buffer";
    case InputKind::TensorConstant:
      return "tensor_constant";
    case InputKind::CustomObj:
      return "custom_obj";
    case InputKind::Token:
      return "token";
    case InputKind::ConstantInput:
      return "constant_input";
  }
  return "?";
}

std::string_view outputKindName(OutputKind k) {
  switch (k) {
    case OutputKind::UserOutput:
      return "user_output";
    case OutputKind::LossOutput:
      return "loss_output";
    case OutputKind::BufferMutation:
      return "buffer_mutation";
    case OutputKind::GradientToParameter:
      return "gradient_to_parameter";
    case OutputKind::GradientToUserInput:
      return "gradient_to_user_input";
    case OutputKind::UserInputMutation:
      return "user_input_mutation";
    case OutputKind::Token:
      return "token";
    case OutputKind::ParameterMutation:
      return "parameter_mutation";
  }
  return "?";
}

std::vector<ModuleFrame> moduleFrames(const std::string& nnModuleStack) {
  std::vector<ModuleFrame> out;
  size_t start = 0;
  while (start < nnModuleStack.size()) {
    size_t end = nnModuleStack.find(';', start);
    if (end == std::string::npos) end = nnModuleStack.size();
    std::string entry = nnModuleStack.substr(start, end - start);
    size_t a = entry.find(','), b = entry.rfind(',');
    if (a != std::string::npos && b != a)
      out.push_back({entry.substr(a + 1, b - a - 1), entry.substr(b + 1)});
    start = end + 1;
  }
  return out;
}

std::string userSourceLine(const std::string& stackTrace) {
  // Frames read: File "<path>", line <n>, in <fn>\n    <code>
  std::string best;
  size_t pos = 0;
  while ((pos = stackTrace.find("File \"", pos)) != std::string::npos) {
    size_t pathStart = pos + 6;
    size_t pathEnd = stackTrace.find('"', pathStart);
    if (pathEnd == std::string::npos) break;
    std::string path = stackTrace.substr(pathStart, pathEnd - pathStart);
    size_t lineTag = stackTrace.find("line ", pathEnd);
    size_t lineEnd = stackTrace.find_first_not_of("0123456789", lineTag + 5);
    std::string line =
        lineTag == std::string::npos ? "" : stackTrace.substr(lineTag + 5, lineEnd - lineTag - 5);
    size_t codeStart = stackTrace.find('\n', pathEnd);
    std::string code;
    if (codeStart != std::string::npos) {
      size_t codeEnd = stackTrace.find('\n', codeStart + 1);
      code = stackTrace.substr(codeStart + 1,
                               codeEnd == std::string::npos ? std::string::npos : codeEnd - codeStart - 1);
      size_t first = code.find_first_not_of(' ');
      code = first == std::string::npos ? "" : code.substr(first);
      if (code.rfind("File \"", 0) == 0) code.clear();
    }
    pos = pathEnd;
    // PyTorch's own frames and generated code (FX's "<eval_with_key>.42")
    // are not the user's; model libraries (transformers, timm) are.
    bool library = path.starts_with("torch/") || path.find("/torch/") != std::string::npos ||
                   path.find("/functorch/") != std::string::npos || path.starts_with('<');
    if (library) continue;
    size_t slash = path.rfind('/');
    best = (slash == std::string::npos ? path : path.substr(slash + 1)) + ":" + line;
    if (!code.empty()) best += ": " + code;
  }
  return best;
}

const Argument* Node::input(std::string_view name) const {
  for (const auto& a : inputs_)
    if (a.name == name) return &a.arg;
  return nullptr;
}

std::vector<Value*> Node::outputValues() const {
  std::vector<Value*> out;
  size_t n = 0;
  for (const auto& a : outputs_) n += a.values.size();
  out.reserve(n);
  for (const auto& a : outputs_)
    for (Value* v : a.values)
      if (v) out.push_back(v);
  return out;
}

std::vector<Value*> Node::inputValues() const {
  std::vector<Value*> out;
  size_t n = 0;
  for (const auto& a : inputs_) n += a.arg.values.size();
  out.reserve(n);
  for (const auto& a : inputs_)
    for (Value* v : a.arg.values)
      if (v) out.push_back(v);
  return out;
}

Expected<Value*> Graph::addValue(std::string name, ValueKind kind) {
  if (byName_.count(name)) return Status::error("value '" + name + "' is defined twice");
  auto v = std::make_unique<Value>();
  v->id_ = static_cast<int>(values_.size());
  v->name_ = std::move(name);
  v->kind_ = kind;
  Value* raw = v.get();
  byName_.emplace(raw->name_, raw);
  values_.push_back(std::move(v));
  return raw;
}

Value* Graph::findValue(std::string_view name) const {
  auto it = byName_.find(std::string(name));
  return it == byName_.end() ? nullptr : it->second;
}

Expected<Node*> Graph::addNode(std::string name, std::string target, std::vector<NamedArgument> inputs,
                               std::vector<Argument> outputs) {
  auto n = std::make_unique<Node>();
  n->name_ = std::move(name);
  n->target_ = std::move(target);
  n->index_ = static_cast<int>(nodes_.size());
  n->inputs_ = std::move(inputs);
  n->outputs_ = std::move(outputs);
  for (const auto& a : n->outputs_) {
    for (Value* v : a.values) {
      if (!v) continue;
      if (v->producer_)
        return Status::error("node " + n->name_ + ": value '" + v->name_ + "' already produced by node " +
                             v->producer_->name_);
      v->producer_ = n.get();
    }
  }
  Node* raw = n.get();
  for (const auto& a : raw->inputs_)  // Node::inputValues() without its vector
    for (Value* v : a.arg.values)
      if (v && (v->users_.empty() || v->users_.back() != raw)) v->users_.push_back(raw);
  nodes_.push_back(std::move(n));
  return raw;
}

Graph Graph::clone() const {
  Graph g;
  g.values_.reserve(values_.size());
  for (const auto& v : values_) g.values_.push_back(std::make_unique<Value>(*v));
  auto value = [&](const Value* v) { return v ? g.values_[static_cast<size_t>(v->id_)].get() : nullptr; };
  auto remap = [&](Argument& a) {
    for (Value*& v : a.values) v = value(v);
  };
  std::unordered_map<const Node*, Node*> nodeOf;
  g.nodes_.reserve(nodes_.size());
  for (const auto& n : nodes_) {
    auto c = std::make_unique<Node>(*n);
    for (NamedArgument& a : c->inputs_) remap(a.arg);
    for (Argument& a : c->outputs_) remap(a);
    nodeOf.emplace(n.get(), c.get());
    g.nodes_.push_back(std::move(c));
  }
  for (auto& v : g.values_) {
    if (v->producer_) v->producer_ = nodeOf.at(v->producer_);
    std::vector<Node*> users;
    for (Node* u : v->users_)
      if (auto it = nodeOf.find(u); it != nodeOf.end()) users.push_back(it->second);
    v->users_ = std::move(users);
  }
  g.byName_.reserve(byName_.size());
  for (const auto& [name, v] : byName_) g.byName_.emplace(name, value(v));
  for (const Value* v : inputs_) g.inputs_.push_back(value(v));
  g.outputs_ = outputs_;
  for (Argument& a : g.outputs_) remap(a);
  return g;
}

ExportedProgram ExportedProgram::clone() const {
  ExportedProgram p{graph.clone(), signature,    ranges, schemaMajor,
                    schemaMinor,   torchVersion, name,   tiedNames};
  auto value = [&](const Value* v) { return v ? p.graph.valueById(v->id()) : nullptr; };
  for (InputSpec& in : p.signature.inputs) {
    in.value = value(in.value);
    for (Value*& v : in.constant.values) v = value(v);
  }
  for (OutputSpec& out : p.signature.outputs)
    for (Value*& v : out.arg.values) v = value(v);
  return p;
}

void Graph::rebuildUses() {
  for (auto& v : values_) v->users_.clear();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node* n = nodes_[i].get();
    n->index_ = static_cast<int>(i);
    for (const auto& a : n->inputs_)  // Node::inputValues() without its vector
      for (Value* v : a.arg.values)
        if (v && (v->users_.empty() || v->users_.back() != n)) v->users_.push_back(n);
  }
}

void Graph::setNodeOrder(const std::vector<Node*>& order) {
  SPMD_CHECK(order.size() == nodes_.size());
  // Nodes are found by their index when every index is current (the usual
  // case), else through a map.
  bool indexed = true;
  for (size_t i = 0; i < nodes_.size() && indexed; ++i) indexed = nodes_[i]->index_ == static_cast<int>(i);
  if (indexed) {
    std::vector<std::unique_ptr<Node>> old = std::move(nodes_);
    nodes_.clear();
    nodes_.reserve(old.size());
    for (Node* n : order) {
      auto i = static_cast<size_t>(n->index_);
      SPMD_CHECK(i < old.size() && old[i].get() == n);
      nodes_.push_back(std::move(old[i]));
    }
    rebuildUses();
    return;
  }
  std::unordered_map<const Node*, std::unique_ptr<Node>> owned;
  for (auto& n : nodes_) owned.emplace(n.get(), std::move(n));
  nodes_.clear();
  for (Node* n : order) {
    auto it = owned.find(n);
    SPMD_CHECK(it != owned.end());
    nodes_.push_back(std::move(it->second));
    owned.erase(it);
  }
  rebuildUses();
}

void Graph::eraseNodes(const std::function<bool(const Node&)>& pred) {
  for (const auto& n : nodes_)
    if (pred(*n))
      for (Value* v : n->outputValues()) v->producer_ = nullptr;
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&](const auto& n) { return pred(*n); }),
               nodes_.end());
  rebuildUses();
}

void Graph::eraseInputs(const std::function<bool(const Value&)>& pred) {
  inputs_.erase(std::remove_if(inputs_.begin(), inputs_.end(),
                               [&](const Value* v) {
                                 if (!pred(*v)) return false;
                                 SPMD_CHECK(v->users_.empty());
                                 return true;
                               }),
                inputs_.end());
}

void Graph::replaceUses(Value* from, Value* to, int fromIndex) {
  for (size_t i = static_cast<size_t>(std::max(fromIndex, 0)); i < nodes_.size(); ++i)
    for (auto& in : nodes_[i]->inputs_)
      for (Value*& v : in.arg.values)
        if (v == from) v = to;
  for (auto& o : outputs_)
    for (Value*& v : o.values)
      if (v == from) v = to;
  rebuildUses();
}

void Graph::replaceUses(const std::unordered_map<Value*, Value*>& m,
                        const std::function<bool(const Node&)>& skip) {
  auto swap = [&](Value*& v) {
    if (!v) return;
    auto it = m.find(v);
    if (it != m.end()) v = it->second;
  };
  for (auto& n : nodes_) {
    if (skip(*n)) continue;
    for (auto& in : n->inputs_)
      for (Value*& v : in.arg.values) swap(v);
  }
  for (auto& o : outputs_)
    for (Value*& v : o.values) swap(v);
  rebuildUses();
}

Status Graph::verify() const {
  // By value id; a value of another graph (id out of range or not this
  // graph's value of that id) is never defined here.
  std::vector<char> defined(values_.size(), 0);
  auto isDefined = [&](const Value* v) {
    auto id = static_cast<size_t>(v->id_);
    return id < values_.size() && values_[id].get() == v && defined[id] != 0;
  };
  auto define = [&](const Value* v) {
    auto id = static_cast<size_t>(v->id_);
    if (id < values_.size() && values_[id].get() == v) defined[id] = 1;
  };
  for (const Value* v : inputs_) define(v);
  for (const auto& n : nodes_) {
    for (const auto& in : n->inputs_)
      for (const Value* v : in.arg.values)
        if (v && !isDefined(v))
          return Status::error("node " + n->name() + " (" + n->target() + ") reads '" + v->name() +
                               "' before it is defined");
    for (const auto& out : n->outputs_)
      for (const Value* v : out.values)
        if (v) define(v);
  }
  for (const auto& o : outputs_)
    for (Value* v : o.values)
      if (v && !isDefined(v)) return Status::error("graph output '" + v->name() + "' is never defined");
  return Status::ok();
}

}  // namespace spmd::ir
