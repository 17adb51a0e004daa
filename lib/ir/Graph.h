// The graph IR. It mirrors torch.export's serialized graph one to one:
//
//   input %x: f32[32, 64] user_input
//   %permute: f32[64, 256] = aten.permute.default(%p_fc1_weight, [1, 0])
//   %addmm: f32[32, 256] = aten.addmm.default(%p_fc1_bias, %x, %permute)
//   output %addmm user_output
//
// A Graph owns Values and Nodes. A Node's target is the exact overload
// ("aten.addmm.default", "_operator.mul"); its inputs are the export
// schema's named arguments (positional or keyword, defaults omitted), its
// outputs the export schema's output arguments. A Value knows its global
// type, its producer and its users. Nodes are kept in topological order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/SymExpr.h"
#include "ir/Types.h"
#include "support/Status.h"

namespace spmd::ir {

class Node;

/// What a value holds.
enum class ValueKind : uint8_t { Tensor, SymInt, SymFloat, SymBool, Token, CustomObj };

/// A named SSA value: a graph input or a node output.
class Value {
 public:
  int id() const { return id_; }
  const std::string& name() const { return name_; }
  ValueKind kind() const { return kind_; }
  bool isTensor() const { return kind_ == ValueKind::Tensor; }
  /// Global tensor type (meaningful for tensors).
  const TensorType& type() const { return type_; }
  TensorType& mutableType() { return type_; }
  /// Symbolic value of a SymInt (its expression and trace-time hint).
  const Dim& symValue() const { return sym_; }
  void setSymValue(Dim d) { sym_ = std::move(d); }
  /// The node producing this value; null for graph inputs.
  Node* producer() const { return producer_; }
  /// Nodes that read this value, in graph order, one entry per node.
  const std::vector<Node*>& users() const { return users_; }

 private:
  friend class Graph;
  int id_ = 0;
  std::string name_;
  ValueKind kind_ = ValueKind::Tensor;
  TensorType type_;
  Dim sym_;
  Node* producer_ = nullptr;
  std::vector<Node*> users_;
};

/// One argument, as the export schema's Argument union.
struct Argument {
  enum class Kind : uint8_t {
    None,
    Tensor,
    Tensors,
    OptionalTensor,
    OptionalTensors,
    Int,
    Ints,
    Float,
    Floats,
    Bool,
    Bools,
    String,
    Strings,
    SymInt,
    SymInts,
    SymFloat,
    SymFloats,
    SymBool,
    SymBools,
    ScalarType,
    MemoryFormat,
    Layout,
    Device,
    Complex,
    IntLists,
  };
  Kind kind = Kind::None;
  /// Tensor(s), OptionalTensor(s) (null = None), Sym*(s) (null where constant).
  std::vector<Value*> values;
  /// Int(s), Bool(s), Sym*(s) constants, enum codes, Device index, IntLists.
  std::vector<int64_t> ints;
  /// Float(s), SymFloat constants, Complex (real, imag).
  std::vector<double> floats;
  /// String(s); Device type.
  std::vector<std::string> strings;
  /// IntLists: length of each inner list.
  std::vector<int64_t> listSizes;

  static Argument none() { return {}; }
  static Argument tensor(Value* v);
  static Argument tensors(std::vector<Value*> vs);
  static Argument integer(int64_t v);
  static Argument integers(std::vector<int64_t> vs);
  static Argument floating(double v);
  static Argument boolean(bool v);
  /// A SymInt argument: a value (v != null) or a constant.
  static Argument symInt(Value* v, int64_t constant = 0);
  /// A SymInt list: where values[i] is null, ints[i] is the constant.
  static Argument symInts(std::vector<Value*> vs, std::vector<int64_t> constants);
  static Argument scalarType(ScalarType t);
  static Argument device(const Device& d);

  /// True for kinds whose payload is one tensor/list of tensors.
  bool isTensorLike() const {
    return kind == Kind::Tensor || kind == Kind::Tensors || kind == Kind::OptionalTensor ||
           kind == Kind::OptionalTensors;
  }
  /// The single value of a Tensor/SymInt/... argument (null otherwise).
  Value* value() const { return values.size() == 1 ? values[0] : nullptr; }
  bool operator==(const Argument&) const = default;
};

/// Name of an Argument kind as in the export schema ("as_tensor", ...).
std::string_view argumentKindName(Argument::Kind k);

/// A node input: the operator schema's argument name, and how it was passed.
struct NamedArgument {
  std::string name;
  Argument arg;
  bool keyword = false;
};

/// Node metadata kept from the archive, for error messages and reports.
struct NodeMetadata {
  std::string stackTrace;
  std::string nnModuleStack;
  std::string torchFn;
  /// Everything else, sorted by key.
  std::map<std::string, std::string> other;
};

/// "file.py:37: <code>" from the innermost user frame of a stack trace:
/// frames of torch itself and generated code ("<eval_with_key>.42") are
/// skipped, a model library's (transformers' modeling_llama.py) are not.
/// Empty when none.
std::string userSourceLine(const std::string& stackTrace);

/// One module of an nn_module_stack ("key,path,type;key,path,type;...",
/// outermost first): ("layers.0.attn", "torch.nn.modules.linear.Linear").
struct ModuleFrame {
  std::string path;
  std::string type;
};

/// The frames of an nn_module_stack, outermost first; malformed entries
/// are skipped.
std::vector<ModuleFrame> moduleFrames(const std::string& nnModuleStack);

/// One operator call.
class Node {
 public:
  const std::string& name() const { return name_; }
  /// The exact overload: "aten.mm.default", "_operator.mul".
  const std::string& target() const { return target_; }
  /// Position in the graph's node list.
  int index() const { return index_; }
  const std::vector<NamedArgument>& inputs() const { return inputs_; }
  /// The argument named `name`, or null when omitted (default applies).
  const Argument* input(std::string_view name) const;
  const std::vector<Argument>& outputs() const { return outputs_; }
  /// Every value the node defines, flattened in order.
  std::vector<Value*> outputValues() const;
  /// Every value the node reads, flattened in argument order (may repeat).
  std::vector<Value*> inputValues() const;
  const NodeMetadata& metadata() const { return meta_; }
  NodeMetadata& mutableMetadata() { return meta_; }
  /// Replaces the inputs. Value users are not updated: call
  /// Graph::rebuildUses() when the values read change.
  void setInputs(std::vector<NamedArgument> inputs) { inputs_ = std::move(inputs); }

 private:
  friend class Graph;
  std::string name_;
  std::string target_;
  int index_ = 0;
  std::vector<NamedArgument> inputs_;
  std::vector<Argument> outputs_;
  NodeMetadata meta_;
};

/// What a graph input is, as the export signature's InputSpec.
enum class InputKind : uint8_t {
  UserInput,
  Parameter,
  Buffer,
  TensorConstant,
  CustomObj,
  Token,
  ConstantInput
};
/// What a graph output is, as the export signature's OutputSpec.
enum class OutputKind : uint8_t {
  UserOutput,
  LossOutput,
  BufferMutation,
  GradientToParameter,
  GradientToUserInput,
  UserInputMutation,
  Token,
  ParameterMutation,
};
/// "parameter", "user_input", ... (the export schema's field names).
std::string_view inputKindName(InputKind k);
/// True for inputs stored with the program (parameters, buffers, tensor
/// constants), as opposed to what the caller feeds.
inline bool isStored(InputKind k) {
  return k == InputKind::Parameter || k == InputKind::Buffer || k == InputKind::TensorConstant;
}
std::string_view outputKindName(OutputKind k);

/// One graph input with its meaning.
struct InputSpec {
  InputKind kind = InputKind::UserInput;
  /// The graph input value (null for a ConstantInput).
  Value* value = nullptr;
  /// FQN of the parameter/buffer/constant/custom object; empty for user inputs.
  std::string target;
  bool persistent = true;
  /// The constant of a ConstantInput.
  Argument constant;
  /// The input's name: value name, or the constant input's name.
  std::string name;
};

/// One graph output with its meaning.
struct OutputSpec {
  OutputKind kind = OutputKind::UserOutput;
  /// The output (a tensor, a SymInt, or a constant).
  Argument arg;
  /// FQN of the parameter/buffer/user input it refers to; empty otherwise.
  std::string target;
};

/// The export signature: one InputSpec per graph input (same order), one
/// OutputSpec per graph output.
struct Signature {
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
};

/// Bounds of a symbol ([min, max], inclusive; max = int64 max when unbounded).
struct RangeConstraint {
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
};

/// A dataflow graph of ATen operator calls.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  /// A deep copy: the same values (ids, names, types, producers, users),
  /// nodes (order, indices, arguments, metadata), inputs and outputs, each
  /// pointing into the copy. What the JSON round trip gives, without text.
  Graph clone() const;

  /// Creates a value; error when the name is taken.
  Expected<Value*> addValue(std::string name, ValueKind kind);
  /// The value named `name`, or null.
  Value* findValue(std::string_view name) const;
  /// Appends a node (its output values must already exist and have no
  /// producer); links producers and users.
  Expected<Node*> addNode(std::string name, std::string target, std::vector<NamedArgument> inputs,
                          std::vector<Argument> outputs);
  /// Appends a graph input.
  void addInput(Value* v) { inputs_.push_back(v); }
  /// Appends a graph output.
  void addOutput(Argument a) { outputs_.push_back(std::move(a)); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Argument>& outputs() const { return outputs_; }
  std::vector<Argument>& mutableOutputs() { return outputs_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t numValues() const { return values_.size(); }
  /// Value with id `id` (ids are dense, 0..numValues()-1).
  Value* valueById(int id) const { return values_[static_cast<size_t>(id)].get(); }

  /// Recomputes every value's users from node inputs.
  void rebuildUses();
  /// Puts the nodes in `order` (each node exactly once); indices follow.
  void setNodeOrder(const std::vector<Node*>& order);
  /// Removes the nodes for which `pred` holds; their results must be unused.
  void eraseNodes(const std::function<bool(const Node&)>& pred);
  /// Removes the graph inputs for which `pred` holds; they must be unused
  /// (the caller keeps the signature's InputSpecs in step).
  void eraseInputs(const std::function<bool(const Value&)>& pred);
  /// Makes every node at index >= `fromIndex`, and every graph output, read
  /// `to` instead of `from`; users are updated.
  void replaceUses(Value* from, Value* to, int fromIndex = 0);
  /// Makes every node for which `skip` is false, and every graph output,
  /// read `m[v]` instead of each `v` in `m`; one pass over the graph.
  void replaceUses(const std::unordered_map<Value*, Value*>& m, const std::function<bool(const Node&)>& skip);
  /// Checks SSA: every value read is defined before use, names unique.
  Status verify() const;

 private:
  friend class Node;
  std::vector<std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, Value*> byName_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Argument> outputs_;
};

/// A whole exported program: graph, signature and symbol ranges.
struct ExportedProgram {
  Graph graph;
  Signature signature;
  std::map<std::string, RangeConstraint, std::less<>> ranges;
  int schemaMajor = 0;
  int schemaMinor = 0;
  std::string torchVersion;
  /// Display name (the archive's stem).
  std::string name;
  /// Tied weights: for a stored tensor's FQN, the other FQNs that name the
  /// same bytes (e.g. GPT-2's lm_head.weight and transformer.wte.weight),
  /// whether or not they are graph inputs too.
  std::map<std::string, std::vector<std::string>, std::less<>> tiedNames;

  /// A deep copy (Graph::clone), the signature pointing into the copy.
  ExportedProgram clone() const;
};

}  // namespace spmd::ir
