// Running a whole exported program with its weights on one device, with
// inputs and outputs by name — what `spmd-run model.pt2` does.
//
//   SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive("llama_train.pt2"));
//   SPMD_ASSIGN_OR_RETURN(ProgramRunner r, ProgramRunner::create(a, {c10::kCPU}));
//   SPMD_ASSIGN_OR_RETURN(TensorMap out, r.run({{"input.0", tokens}, {"labels", labels}}));
//   out.at("loss");  out.at("grad.model.tok.weight");
//
// Inputs: the i-th user input is "input.<i>" or its signature name
// ("tokens"); parameters, buffers and constants come from the archive. A
// user input that is a symbolic scalar (SymInt, ...) is given as a
// one-element tensor.
// Outputs: "output.<i>" (the i-th user output), "loss", "grad.<fqn>"
// (gradients of parameters, or of user inputs by name), "buffer.<fqn>"
// (buffer mutations), "mutated.<name>" (user input mutations),
// "parameter.<fqn>" (parameter mutations).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "ir/Graph.h"
#include "pt2/Archive.h"
#include "runtime/Executor.h"
#include "runtime/TensorIO.h"
#include "support/Status.h"

namespace spmd::runtime {

/// How a program runs.
struct RunnerOptions {
  /// The device ops run on; inputs are moved there, outputs stay there.
  c10::Device device = c10::kCPU;
};

/// The names spmd-run gives `program`'s outputs, one per signature output:
/// output.<i>, loss, grad.<fqn>, parameter.<fqn>, buffer.<fqn>,
/// mutated.<name> ("" for tokens). Error on an unknown output kind.
Expected<std::vector<std::string>> outputNames(const ir::ExportedProgram& program);

/// A prepared program with its weights on one device. Not thread-safe.
class ProgramRunner {
 public:
  /// Prepares `archive`'s program and loads its weights onto the device.
  /// Errors: weights (see loadWeights), a parameter/buffer/constant missing
  /// from the archive, an input kind that cannot be fed (custom objects,
  /// tokens), and the executor's preparation errors (naming the node).
  static Expected<ProgramRunner> create(const pt2::Archive& archive, const RunnerOptions& options = {});
  /// As above, with weights given by FQN (already on the device).
  static Expected<ProgramRunner> create(const ir::ExportedProgram& program, const TensorMap& weights,
                                        const RunnerOptions& options = {});

  /// Signature names of the user inputs, in order ("input.<i>" is the i-th).
  const std::vector<std::string>& userInputNames() const { return userInputNames_; }
  /// Output names, one per graph output ("" where nothing is returned).
  const std::vector<std::string>& outputNames() const { return outputNames_; }
  /// The executor (for statistics and benchmarks).
  Executor& executor() { return executor_; }

  /// Matches named inputs to the program's user inputs, moves them to the
  /// device and checks them (dtype, rank, sizes, symbol ranges). Errors name
  /// the input: unknown name, given twice, missing, wrong dtype or shape.
  Expected<std::vector<c10::IValue>> bindInputs(const TensorMap& inputs) const;
  /// Runs inputs from bindInputs(); returns the outputs by name.
  Expected<TensorMap> execute(std::vector<c10::IValue> inputs);
  /// bindInputs() then execute().
  Expected<TensorMap> run(const TensorMap& inputs);

 private:
  explicit ProgramRunner(Executor executor) : executor_(std::move(executor)) {}

  Executor executor_;
  c10::Device device_ = c10::kCPU;
  /// Per graph input: the fixed weight, or undefined for user input `userIndex_[i]`.
  std::vector<at::Tensor> fixed_;
  std::vector<int> userIndex_;
  /// Per graph input: the value kind (user inputs may be SymInt/SymFloat/SymBool scalars).
  std::vector<ir::ValueKind> kinds_;
  std::vector<std::string> userInputNames_;
  std::vector<std::string> outputNames_;
};

}  // namespace spmd::runtime
