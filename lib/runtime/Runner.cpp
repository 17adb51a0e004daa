// Binding named inputs and weights to graph inputs, naming outputs after
// their signature role.
//
//   inputs:  p_fc1_weight <- weights["fc1.weight"]   x <- "input.0" or "x"
//   outputs: div: LOSS_OUTPUT -> "loss"
//            permute_8: GRADIENT_TO_PARAMETER 'mlp.fc1.weight' -> "grad.mlp.fc1.weight"
#include "runtime/Runner.h"

#include <ATen/ATen.h>

#include <unordered_map>

#include "runtime/Weights.h"

namespace spmd::runtime {
namespace {

Expected<std::string> outputName(const ir::OutputSpec& spec, int& userOutputs, int& losses) {
  switch (spec.kind) {
    case ir::OutputKind::UserOutput:
      return "output." + std::to_string(userOutputs++);
    case ir::OutputKind::LossOutput:
      return losses++ == 0 ? std::string("loss") : "loss." + std::to_string(losses - 1);
    case ir::OutputKind::BufferMutation:
      return "buffer." + spec.target;
    case ir::OutputKind::GradientToParameter:
    case ir::OutputKind::GradientToUserInput:
      return "grad." + spec.target;
    case ir::OutputKind::UserInputMutation:
      return "mutated." + spec.target;
    case ir::OutputKind::ParameterMutation:
      return "parameter." + spec.target;
    case ir::OutputKind::Token:
      return std::string();
  }
  return Status::error("unknown output kind");
}

/// A graph output as a tensor (SymInt/float/bool outputs become 0-d tensors).
at::Tensor asTensor(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor();
  if (v.isInt()) return at::scalar_tensor(v.toInt(), at::kLong);
  if (v.isDouble()) return at::scalar_tensor(v.toDouble(), at::kDouble);
  if (v.isBool()) return at::scalar_tensor(v.toBool(), at::kBool);
  return at::Tensor();
}

/// A symbolic scalar input (SymInt, SymFloat, SymBool) from a one-element tensor.
Expected<c10::IValue> scalarInput(const std::string& name, ir::ValueKind kind, const at::Tensor& t) {
  if (t.numel() != 1)
    return Status::error("input '" + name + "' is a scalar, but the tensor given has " +
                         std::to_string(t.numel()) + " elements");
  if (kind == ir::ValueKind::SymFloat) return c10::IValue(t.item<double>());
  if (kind == ir::ValueKind::SymBool) return c10::IValue(t.item<bool>());
  return c10::IValue(t.item<int64_t>());
}

}  // namespace

Expected<std::vector<std::string>> outputNames(const ir::ExportedProgram& program) {
  std::vector<std::string> names;
  int userOutputs = 0;
  int losses = 0;
  for (const ir::OutputSpec& s : program.signature.outputs) {
    SPMD_ASSIGN_OR_RETURN(std::string name, outputName(s, userOutputs, losses));
    names.push_back(std::move(name));
  }
  return names;
}

Expected<ProgramRunner> ProgramRunner::create(const pt2::Archive& archive, const RunnerOptions& options) {
  SPMD_ASSIGN_OR_RETURN(TensorMap weights, loadWeights(archive, options.device));
  return create(archive.program, weights, options);
}

Expected<ProgramRunner> ProgramRunner::create(const ir::ExportedProgram& program, const TensorMap& weights,
                                              const RunnerOptions& options) {
  SPMD_ASSIGN_OR_RETURN(Executor executor, Executor::prepare(program, options.device));
  ProgramRunner r(std::move(executor));
  r.device_ = options.device;
  std::unordered_map<const ir::Value*, const ir::InputSpec*> specs;
  for (const ir::InputSpec& s : program.signature.inputs)
    if (s.value != nullptr) specs.emplace(s.value, &s);
  for (const ir::Value* v : program.graph.inputs()) {
    auto it = specs.find(v);
    if (it == specs.end()) return Status::error("graph input '" + v->name() + "' has no input spec");
    const ir::InputSpec& s = *it->second;
    r.kinds_.push_back(v->kind());
    if (s.kind == ir::InputKind::UserInput) {
      r.fixed_.emplace_back();
      r.userIndex_.push_back(static_cast<int>(r.userInputNames_.size()));
      r.userInputNames_.push_back(s.name.empty() ? v->name() : s.name);
      continue;
    }
    const bool weight = ir::isStored(s.kind);
    if (!weight)
      return Status::error("input '" + v->name() + "' is a " + std::string(ir::inputKindName(s.kind)) +
                           ", which spmd_runtime cannot feed");
    auto w = weights.find(s.target);
    if (w == weights.end())
      return Status::error(std::string(ir::inputKindName(s.kind)) + " '" + s.target +
                           "' is not in the archive");
    r.fixed_.push_back(w->second);
    r.userIndex_.push_back(-1);
  }
  SPMD_ASSIGN_OR_RETURN(r.outputNames_, runtime::outputNames(program));
  if (r.outputNames_.size() != r.executor_.numOutputs())
    return Status::error("the signature has " + std::to_string(r.outputNames_.size()) +
                         " outputs, the graph " + std::to_string(r.executor_.numOutputs()));
  return r;
}

Expected<std::vector<c10::IValue>> ProgramRunner::bindInputs(const TensorMap& inputs) const {
  const size_t numUser = userInputNames_.size();
  std::vector<const at::Tensor*> user(numUser, nullptr);
  std::vector<std::string> given;
  for (const auto& entry : inputs) given.push_back(entry.first);
  SPMD_RETURN_IF_ERROR(checkInputNames(given, userInputNames_));
  for (const auto& [name, tensor] : inputs)
    for (size_t i = 0; i < numUser; ++i)
      if (name == userInputNames_[i] || name == "input." + std::to_string(i)) {
        user[i] = &tensor;
        break;
      }
  std::vector<c10::IValue> bound;
  bound.reserve(fixed_.size());
  try {
    for (size_t i = 0; i < fixed_.size(); ++i) {
      if (userIndex_[i] < 0) {
        bound.emplace_back(fixed_[i]);
        continue;
      }
      const auto u = static_cast<size_t>(userIndex_[i]);
      if (user[u] == nullptr)
        return Status::error("missing input '" + userInputNames_[u] + "' (input." + std::to_string(u) + ")");
      if (kinds_[i] == ir::ValueKind::Tensor) {
        bound.emplace_back(user[u]->to(device_));
        continue;
      }
      SPMD_ASSIGN_OR_RETURN(c10::IValue scalar, scalarInput(userInputNames_[u], kinds_[i], *user[u]));
      bound.push_back(std::move(scalar));
    }
  } catch (const c10::Error& e) {
    return Status::error(std::string("moving inputs to ") + device_.str() + ": " +
                         e.what_without_backtrace());
  }
  SPMD_RETURN_IF_ERROR(executor_.checkInputs(bound));
  return bound;
}

Expected<TensorMap> ProgramRunner::execute(std::vector<c10::IValue> inputs) {
  SPMD_ASSIGN_OR_RETURN(std::vector<c10::IValue> outputs, executor_.run(std::move(inputs)));
  TensorMap named;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputNames_[i].empty()) continue;
    at::Tensor t = asTensor(outputs[i]);
    if (t.defined()) named[outputNames_[i]] = std::move(t);
  }
  return named;
}

Expected<TensorMap> ProgramRunner::run(const TensorMap& inputs) {
  SPMD_ASSIGN_OR_RETURN(std::vector<c10::IValue> bound, bindInputs(inputs));
  return execute(std::move(bound));
}

}  // namespace spmd::runtime
