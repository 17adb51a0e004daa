// One step of a program, run eagerly or, after warm-up, as one captured
// CUDA graph replayed per step (spmd-run --cuda-graph; whether a program
// may be captured is CudaGraph.h's decision).
//
//   GraphStep step({.graph = true, .warmup = 2, .poolBytes = graphPoolBytes(peak, params),
//                   .device = cuda0});
//   for (auto& batch : batches) outputs = step.run(runner, batch, comm);
//   // calls 1-2: eager; call 3: inputs copied into static tensors, the
//   // step captured on a side stream (collectives included: NCCL supports
//   // capture) in a private pool reserved at poolBytes, then replayed;
//   // later calls: inputs copied in, replayed.
//
// The outputs of a replayed step are the graph's static tensors: they are
// overwritten by the next replay (copy what must outlive it). The capture
// code is compiled with the NCCL path (SPMD_WITH_NCCL, a CUDA torch with
// the toolkit's headers); elsewhere `graph` must be false.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <memory>
#include <vector>

#include "runtime/Comm.h"
#include "runtime/Runner.h"
#include "support/Status.h"

namespace spmd::runtime {

/// How GraphStep runs.
struct GraphStepOptions {
  bool graph = false;     ///< capture and replay (CUDA builds with the NCCL path only)
  int warmup = 2;         ///< eager steps before the capture (lazy inits, NCCL communicators)
  int64_t poolBytes = 0;  ///< reserved in the graph's private pool before capture (0: none)
  c10::Device device = c10::kCPU;
};

/// True when this build can capture CUDA graphs (the NCCL path is compiled).
bool cudaGraphsCompiled();

/// The bytes `tensors` hold (each tensor's nbytes; shared storage counted
/// per tensor): a rank's weights, allocated outside the graph's pool.
int64_t tensorBytes(const TensorMap& tensors);

/// A program's step, eager or captured (see the file comment).
class GraphStep {
 public:
  explicit GraphStep(GraphStepOptions options);
  ~GraphStep();
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;

  /// Runs one step on `inputs` (bound by runner.bindInputs; the same
  /// shapes every call) and completes its collectives; returns the outputs
  /// by name. Errors name the node, or the capture that failed.
  Expected<TensorMap> run(ProgramRunner& runner, const std::vector<c10::IValue>& inputs, MeshComm& comm);
  /// True once the step has been captured (later calls replay it).
  bool captured() const;

  /// The step's state (defined in GraphStep.cpp).
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace spmd::runtime
