// Executor preparation (kernel lookup, argument slots, returns, last uses)
// and the run loop.
//
//   %permute = aten.permute.default(%p_fc1_weight, [1, 0])
//   %addmm   = aten.addmm.default(%p_fc1_bias, %x, %permute)
// prepares into
//   step 0: dispatcher aten::permute  slots [Value p_fc1_weight][Constant [1, 0]]
//           returns -> permute; frees p_fc1_weight
//   step 1: dispatcher aten::addmm    slots [Value p_fc1_bias][Value x][Value permute (moved)]
//           [Constant 1 (beta)][Constant 1 (alpha)]; returns -> addmm (graph output, kept)
#include "runtime/Executor.h"

#include "runtime/CollectiveOps.h"
#include "runtime/MemoryMeter.h"
#include "runtime/MoeOps.h"
#include "runtime/RingAttentionOps.h"
#include "serialize/ToText.h"
#include "support/FirstLine.h"

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace spmd::runtime {
namespace {

/// "aten.addmm.default" -> {"aten::addmm", ""}; "aten.sum.dim_IntList" -> {"aten::sum", "dim_IntList"}.
Expected<c10::OperatorName> operatorName(std::string_view target) {
  constexpr std::string_view kPrefix = "torch.ops.";
  if (target.substr(0, kPrefix.size()) == kPrefix) target.remove_prefix(kPrefix.size());
  const size_t first = target.find('.');
  const size_t last = target.rfind('.');
  if (first == std::string_view::npos || first == last)
    return Status::error("target '" + std::string(target) +
                         "' is not an operator overload (namespace.op.overload)");
  std::string overload(target.substr(last + 1));
  if (overload == "default") overload.clear();
  return c10::OperatorName(
      std::string(target.substr(0, first)) + "::" + std::string(target.substr(first + 1, last - first - 1)),
      overload);
}

std::string operatorText(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

/// An error where `op` cannot run on `device`: the fused CPU attention
/// kernels of a train step exported with --attention fused have only CPU
/// (and Meta) kernels in LibTorch up to 2.14; the export names the fix.
Status checkDeviceKernel(const c10::OperatorHandle& op, const c10::Device& device) {
  const std::string& name = op.operator_name().name;
  if (!device.is_cuda() || name.rfind("aten::_scaled_dot_product_flash_attention_for_cpu", 0) != 0 ||
      op.hasKernelForDispatchKey(c10::DispatchKey::CUDA))
    return Status::ok();
  return Status::error("the linked LibTorch " TORCH_VERSION
                       " has no CUDA kernel for this fused CPU attention; re-export the train step with "
                       "`python -m spmdc_export ... --train --attention math` to run it on a GPU");
}

}  // namespace

Expected<Executor> Executor::prepare(const ir::Graph& graph, const ExecutorOptions& options) {
  Executor ex;
  ex.device_ = options.device;
  SPMD_ASSIGN_OR_RETURN(ex.checker_, InputChecker::create(graph, options.ranges, options.device));
  try {
    SPMD_RETURN_IF_ERROR(ex.prepareGraph(graph));
  } catch (const c10::Error& e) {
    return Status::error(firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return Status::error(firstLine(e.what()));
  }
  return ex;
}

Expected<Executor> Executor::prepare(const ir::ExportedProgram& program, c10::Device device) {
  ExecutorOptions options;
  options.device = device;
  options.ranges = program.ranges;
  return prepare(program.graph, options);
}

Status Executor::prepareGraph(const ir::Graph& graph) {
  const size_t n = graph.numValues();
  values_.assign(n, c10::IValue());
  valueNames_.resize(n);
  for (size_t i = 0; i < n; ++i) valueNames_[i] = graph.valueById(static_cast<int>(i))->name();
  std::vector<bool> kept(n, false);
  for (const ir::Argument& a : graph.outputs())
    for (const ir::Value* v : a.values)
      if (v != nullptr) kept[static_cast<size_t>(v->id())] = true;
  std::vector<int> lastUse(n, -1);
  for (const auto& node : graph.nodes())
    for (const ir::Value* v : node->inputValues()) lastUse[static_cast<size_t>(v->id())] = node->index();
  for (const ir::Value* v : graph.inputs()) {
    const bool used = kept[static_cast<size_t>(v->id())] || !v->users().empty();
    inputIds_.push_back(used ? v->id() : -1);
  }
  for (const auto& node : graph.nodes()) {
    Status st = prepareNode(*node, lastUse, kept);
    if (!st.isOk()) return st.withContext("node %" + node->name() + " (" + node->target() + ")");
  }
  for (const ir::Argument& a : graph.outputs()) {
    OutputRef ref;
    if (a.value() != nullptr) {
      ref.valueId = a.value()->id();
    } else if (a.kind == ir::Argument::Kind::Int || a.kind == ir::Argument::Kind::SymInt) {
      ref.constant = a.ints.at(0);
    } else if (a.kind == ir::Argument::Kind::Float || a.kind == ir::Argument::Kind::SymFloat) {
      ref.constant = a.floats.at(0);
    } else if (a.kind == ir::Argument::Kind::Bool || a.kind == ir::Argument::Kind::SymBool) {
      ref.constant = a.ints.at(0) != 0;
    } else if (a.kind != ir::Argument::Kind::None) {
      return Status::error("graph output " + serialize::printArgument(a) + " (" +
                           std::string(ir::argumentKindName(a.kind)) + ") is not supported");
    }
    outputs_.push_back(std::move(ref));
  }
  stack_.reserve(32);
  return Status::ok();
}

Status Executor::prepareNode(const ir::Node& node, const std::vector<int>& lastUse,
                             const std::vector<bool>& kept) {
  Step step;
  step.argBegin = static_cast<uint32_t>(slots_.size());
  const c10::FunctionSchema* schema = nullptr;
  const LocalOp* builtin = findBuiltin(node.target());
  if (!builtin) builtin = findCollective(node.target());
  if (!builtin) builtin = findMoeOp(node.target());
  if (!builtin) builtin = findRingAttentionOp(node.target());
  if (builtin) {
    step.kernel = builtin->kernel;
    step.source = KernelSource::Builtin;
    schema = builtin->schema;
    SPMD_RETURN_IF_ERROR(planArguments(node, *schema));
  } else {
    SPMD_ASSIGN_OR_RETURN(c10::OperatorName name, operatorName(node.target()));
    auto handle = c10::Dispatcher::singleton().findSchema(name);
    if (!handle)
      return Status::error("the linked LibTorch " TORCH_VERSION " has no operator " + operatorText(name));
    SPMD_RETURN_IF_ERROR(checkDeviceKernel(*handle, device_));
    SPMD_RETURN_IF_ERROR(planArguments(node, handle->schema()));
    step.op = *handle;
    schema = &handle->schema();
  }
  step.argEnd = static_cast<uint32_t>(slots_.size());

  const std::vector<ir::Value*> reads = node.inputValues();
  for (uint32_t k = step.argBegin; k < step.argEnd; ++k) {
    ArgSlot& slot = slots_[k];
    step.hasTensorLists = step.hasTensorLists || slot.tensorElements;
    if (slot.kind != ArgSlot::Kind::Value) continue;
    const auto id = static_cast<size_t>(slot.valueId);
    const auto uses = std::count_if(reads.begin(), reads.end(),
                                    [&](const ir::Value* v) { return v->id() == slot.valueId; });
    slot.moveValue = lastUse[id] == node.index() && !kept[id] && uses == 1;
  }
  step.outBegin = static_cast<uint32_t>(outs_.size());
  SPMD_RETURN_IF_ERROR(planReturns(node, *schema, kept));
  step.outEnd = static_cast<uint32_t>(outs_.size());
  step.freeBegin = static_cast<uint32_t>(frees_.size());
  for (const ir::Value* v : reads) {
    const auto id = static_cast<size_t>(v->id());
    if (lastUse[id] != node.index() || kept[id]) continue;
    if (std::find(frees_.begin() + step.freeBegin, frees_.end(), v->id()) == frees_.end())
      frees_.push_back(v->id());
  }
  step.freeEnd = static_cast<uint32_t>(frees_.size());
  steps_.push_back(std::move(step));
  labels_.push_back("node %" + node.name() + " (" + node.target() + ")");
  return Status::ok();
}

Status Executor::planArguments(const ir::Node& node, const c10::FunctionSchema& schema) {
  const auto& inputs = node.inputs();
  std::vector<bool> used(inputs.size(), false);
  for (const c10::Argument& arg : schema.arguments()) {
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const ir::NamedArgument& a) { return a.name == arg.name(); });
    auto slot = [&]() -> Expected<ArgSlot> {
      if (it != inputs.end()) {
        used[static_cast<size_t>(it - inputs.begin())] = true;
        return convertArgument(arg, it->arg, device_);
      }
      return defaultArgument(arg, device_);
    }();
    if (!slot) return slot.status();
    slots_.push_back(std::move(slot).value());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (used[i]) continue;
    std::ostringstream text;
    text << schema;
    return Status::error("argument '" + inputs[i].name + "' is not in the linked schema " + text.str());
  }
  return Status::ok();
}

Status Executor::planReturns(const ir::Node& node, const c10::FunctionSchema& schema,
                             const std::vector<bool>& kept) {
  const auto& returns = schema.returns();
  const auto& outputs = node.outputs();
  const bool allNone = std::all_of(outputs.begin(), outputs.end(),
                                   [](const ir::Argument& a) { return a.kind == ir::Argument::Kind::None; });
  if (returns.size() != outputs.size() && !(returns.empty() && allNone))
    return Status::error("the graph names " + std::to_string(outputs.size()) +
                         " outputs, but the linked operator returns " + std::to_string(returns.size()));
  auto usedId = [&](const ir::Value* v) {
    if (v == nullptr) return -1;
    return kept[static_cast<size_t>(v->id())] || !v->users().empty() ? v->id() : -1;
  };
  for (size_t j = 0; j < returns.size(); ++j) {
    const ir::Argument& a = outputs[j];
    OutSlot out;
    if (returns[j].type()->kind() == c10::TypeKind::ListType) {
      out.list = true;
      if (a.kind != ir::Argument::Kind::Tensors && a.kind != ir::Argument::Kind::None)
        return Status::error("output " + std::to_string(j) + " is " +
                             std::string(ir::argumentKindName(a.kind)) + ", but the operator returns a list");
      for (const ir::Value* v : a.values) out.listIds.push_back(usedId(v));
    } else if (a.kind == ir::Argument::Kind::Tensors) {
      return Status::error("output " + std::to_string(j) + " is a list, but the operator returns " +
                           returns[j].type()->str());
    } else {
      out.valueId = usedId(a.value());
    }
    outs_.push_back(std::move(out));
  }
  return Status::ok();
}

void Executor::runStep(const Step& step) {
  for (uint32_t k = step.argBegin; k < step.argEnd; ++k) {
    const ArgSlot& slot = slots_[k];
    switch (slot.kind) {
      case ArgSlot::Kind::Constant:
        stack_.push_back(slot.constant);
        break;
      case ArgSlot::Kind::Value:
        if (slot.moveValue) {
          stack_.push_back(std::move(values_[static_cast<size_t>(slot.valueId)]));
        } else {
          stack_.push_back(values_[static_cast<size_t>(slot.valueId)]);
        }
        break;
      case ArgSlot::Kind::List: {
        c10::impl::GenericList list = slot.constant.toList();
        for (size_t e = 0; e < slot.elementIds.size(); ++e)
          if (slot.elementIds[e] >= 0) list.set(e, values_[static_cast<size_t>(slot.elementIds[e])]);
        stack_.push_back(slot.constant);
        break;
      }
    }
  }
  if (step.op) {
    step.op->callBoxed(stack_);
  } else {
    step.kernel(stack_);
  }
  const uint32_t numOuts = step.outEnd - step.outBegin;
  TORCH_CHECK(stack_.size() == numOuts, "the kernel returned ", stack_.size(), " values, the graph expects ",
              numOuts);
  for (uint32_t j = 0; j < numOuts; ++j) {
    const OutSlot& out = outs_[step.outBegin + j];
    if (!out.list) {
      if (out.valueId >= 0) values_[static_cast<size_t>(out.valueId)] = std::move(stack_[j]);
      continue;
    }
    if (out.listIds.empty()) continue;
    c10::impl::GenericList list = stack_[j].toList();
    TORCH_CHECK(list.size() == out.listIds.size(), "the kernel returned a list of ", list.size(),
                " values, the graph names ", out.listIds.size());
    for (size_t e = 0; e < out.listIds.size(); ++e)
      if (out.listIds[e] >= 0) values_[static_cast<size_t>(out.listIds[e])] = list.get(e);
  }
  stack_.clear();
  if (step.hasTensorLists) {
    for (uint32_t k = step.argBegin; k < step.argEnd; ++k) {
      const ArgSlot& slot = slots_[k];
      if (!slot.tensorElements) continue;
      c10::impl::GenericList list = slot.constant.toList();
      for (size_t e = 0; e < slot.elementIds.size(); ++e)
        if (slot.elementIds[e] >= 0) list.set(e, slot.emptyElement);
    }
  }
  // Debugging the memory estimate: live tensor bytes while the step's
  // results and last-read operands coexist (passes::liveRanges' node figure).
  static const bool trace = std::getenv("SPMD_MEMORY_TRACE") != nullptr;
  if (trace)
    std::fprintf(stderr, "memory %zu %lld %lld %s\n", static_cast<size_t>(&step - steps_.data()),
                 static_cast<long long>(MemoryMeter::activeCurrentBytes()),
                 static_cast<long long>(MemoryMeter::activePeakBytes()),
                 labels_[static_cast<size_t>(&step - steps_.data())].c_str());
  for (uint32_t k = step.freeBegin; k < step.freeEnd; ++k)
    values_[static_cast<size_t>(frees_[k])] = c10::IValue();
}

Expected<std::vector<c10::IValue>> Executor::run(std::vector<c10::IValue> inputs) {
  SPMD_RETURN_IF_ERROR(checker_.check(inputs));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputIds_[i] >= 0) values_[static_cast<size_t>(inputIds_[i])] = std::move(inputs[i]);
  size_t i = 0;
  std::string failure;
  try {
    c10::InferenceMode inferenceMode;
    c10::OptionalDeviceGuard deviceGuard;
    if (!device_.is_cpu()) deviceGuard.reset_device(device_);
    for (; i < steps_.size(); ++i) runStep(steps_[i]);
  } catch (const c10::Error& e) {
    failure = firstLine(e.what_without_backtrace());
  } catch (const std::exception& e) {
    failure = firstLine(e.what());
  } catch (...) {
    failure = "unknown exception";
  }
  if (!failure.empty() || i < steps_.size()) {
    clearValues();
    return Status::error(labels_[i] + ": " + (failure.empty() ? "unknown error" : failure));
  }
  std::vector<c10::IValue> outputs;
  outputs.reserve(outputs_.size());
  for (const OutputRef& o : outputs_)
    outputs.push_back(o.valueId >= 0 ? values_[static_cast<size_t>(o.valueId)] : o.constant);
  clearValues();
  return outputs;
}

void Executor::clearValues() {
  stack_.clear();
  for (c10::IValue& v : values_) v = c10::IValue();
  for (const ArgSlot& slot : slots_) {
    if (!slot.tensorElements) continue;
    c10::impl::GenericList list = slot.constant.toList();
    for (size_t e = 0; e < slot.elementIds.size(); ++e)
      if (slot.elementIds[e] >= 0) list.set(e, slot.emptyElement);
  }
}

std::vector<std::string> Executor::freedAfter(size_t i) const {
  std::vector<std::string> names;
  for (uint32_t k = steps_[i].freeBegin; k < steps_[i].freeEnd; ++k)
    names.push_back(valueNames_[static_cast<size_t>(frees_[k])]);
  return names;
}

}  // namespace spmd::runtime
