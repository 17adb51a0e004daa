// The reference executor: prepares an ir::Graph once, then runs it many
// times on one device, calling every op boxed through the ATen dispatcher.
//
//   SPMD_ASSIGN_OR_RETURN(Executor ex, Executor::prepare(program, c10::kCPU));
//   std::vector<c10::IValue> in = {fc1Weight, fc1Bias, fc2Weight, fc2Bias, x};
//   SPMD_ASSIGN_OR_RETURN(std::vector<c10::IValue> out, ex.run(std::move(in)));
//   out[0].toTensor();   // the graph's first output
//
// Preparation resolves each node's operator (dispatcher schema, a builtin
// for sym_size / SymInt arithmetic, or an spmd.* collective), converts constant arguments to IValues, fills
// omitted arguments from schema defaults, and computes where each value is used for the last time. A run
// checks the inputs (binding symbolic sizes, checking ranges), then walks the steps: push argument slots onto
// one reused stack, call, move returns into the value table, free values past their last use. No string or
// map lookups happen per op.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <torch/version.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Graph.h"
#include "runtime/ArgConvert.h"
#include "runtime/InputCheck.h"
#include "runtime/LocalOps.h"
#include "support/Status.h"

namespace spmd::runtime {

/// How a graph is prepared.
struct ExecutorOptions {
  /// The device every op runs on: device arguments in the graph ("cpu" at
  /// export time) are replaced by it, and inputs must live on it.
  c10::Device device = c10::kCPU;
  /// Allowed range of each symbol, checked when inputs bind symbols.
  RangeMap ranges;
};

/// Where a step's kernel comes from.
enum class KernelSource : uint8_t { Dispatcher, Builtin };

/// A prepared graph. Not thread-safe: one run at a time.
class Executor {
 public:
  /// Prepares `graph`. Errors name the node: "node %mm_3 (aten.mm.default):
  /// <what>" (unknown operator, missing required argument, argument the
  /// schema does not have, argument of the wrong kind, return count).
  static Expected<Executor> prepare(const ir::Graph& graph, const ExecutorOptions& options = {});
  /// Prepares `program`'s graph with its symbol ranges.
  static Expected<Executor> prepare(const ir::ExportedProgram& program, c10::Device device = c10::kCPU);

  Executor(Executor&&) noexcept = default;
  Executor& operator=(Executor&&) noexcept = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// The device ops run on.
  const c10::Device& device() const { return device_; }
  /// Number of graph inputs run() takes.
  size_t numInputs() const { return inputIds_.size(); }
  /// Number of values run() returns (one per graph output).
  size_t numOutputs() const { return outputs_.size(); }

  /// Checks inputs (one per graph input, in graph order) without running:
  /// count, tensor-ness, device, dtype, rank, sizes, symbol ranges.
  Status checkInputs(const std::vector<c10::IValue>& inputs) const { return checker_.check(inputs); }

  /// Checks the inputs, runs the graph, returns one IValue per graph output
  /// (tensors; ints for SymInt outputs; constants as exported). A kernel
  /// error is one line naming the node: "node %mm_3 (aten.mm.default): <what>".
  Expected<std::vector<c10::IValue>> run(std::vector<c10::IValue> inputs);

  /// Number of steps (one per node).
  size_t numSteps() const { return steps_.size(); }
  /// "node %name (target)" of step `i`.
  const std::string& stepLabel(size_t i) const { return labels_[i]; }
  /// Where step `i`'s kernel comes from.
  KernelSource kernelSource(size_t i) const { return steps_[i].source; }
  /// Names of the values released right after step `i` runs.
  std::vector<std::string> freedAfter(size_t i) const;

 private:
  Executor() = default;

  struct OutSlot {
    int valueId = -1;          ///< single return: value stored, -1 = dropped
    bool list = false;         ///< Tensor[] return
    std::vector<int> listIds;  ///< list return: value per element, -1 = dropped
  };
  struct Step {
    std::optional<c10::OperatorHandle> op;
    BoxedKernel kernel = nullptr;
    KernelSource source = KernelSource::Dispatcher;
    bool hasTensorLists = false;
    uint32_t argBegin = 0, argEnd = 0;
    uint32_t outBegin = 0, outEnd = 0;
    uint32_t freeBegin = 0, freeEnd = 0;
  };
  struct OutputRef {
    int valueId = -1;  ///< -1: `constant`
    c10::IValue constant;
  };

  Status prepareGraph(const ir::Graph& graph);
  Status prepareNode(const ir::Node& node, const std::vector<int>& lastUse, const std::vector<bool>& kept);
  Status planArguments(const ir::Node& node, const c10::FunctionSchema& schema);
  Status planReturns(const ir::Node& node, const c10::FunctionSchema& schema, const std::vector<bool>& kept);
  void runStep(const Step& step);
  void clearValues();

  c10::Device device_ = c10::kCPU;
  InputChecker checker_;
  std::vector<Step> steps_;
  std::vector<std::string> labels_;
  std::vector<ArgSlot> slots_;
  std::vector<OutSlot> outs_;
  std::vector<int> frees_;
  std::vector<int> inputIds_;  ///< value id per graph input, -1 when unused
  std::vector<OutputRef> outputs_;
  std::vector<std::string> valueNames_;
  std::vector<c10::IValue> values_;
  torch::jit::Stack stack_;
};

}  // namespace spmd::runtime
