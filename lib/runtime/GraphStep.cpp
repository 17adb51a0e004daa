// GraphStep (see GraphStep.h). The capture path needs the CUDA toolkit's
// headers, which the build adds with the NCCL path (cmake/SpmdTorch.cmake):
// it is compiled under SPMD_WITH_NCCL only, and a CPU torch builds the
// eager path alone.
#include "runtime/GraphStep.h"

#include "support/FirstLine.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>

#ifdef SPMD_WITH_NCCL
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace spmd::runtime {

bool cudaGraphsCompiled() {
#ifdef SPMD_WITH_NCCL
  return true;
#else
  return false;
#endif
}

int64_t tensorBytes(const TensorMap& tensors) {
  int64_t total = 0;
  for (const auto& entry : tensors) total += static_cast<int64_t>(entry.second.nbytes());
  return total;
}

struct GraphStep::Impl {
  GraphStepOptions options;
  int calls = 0;
  std::vector<c10::IValue> staticInputs;
  TensorMap staticOutputs;
#ifdef SPMD_WITH_NCCL
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  at::cuda::MempoolId_t pool{0, 0};
  bool reserved = false;
#endif
};

namespace {

Expected<TensorMap> runEager(ProgramRunner& runner, const std::vector<c10::IValue>& inputs, MeshComm& comm) {
  SPMD_ASSIGN_OR_RETURN(TensorMap out, runner.execute(inputs));
  SPMD_RETURN_IF_ERROR(comm.waitAll());
  return out;
}

#ifdef SPMD_WITH_NCCL
// Copies this step's inputs into the graph's static ones (same shapes: the
// program is static, eligibility checked it); non-tensor inputs must match.
Status copyInputs(std::vector<c10::IValue>& dst, const std::vector<c10::IValue>& src) {
  if (dst.size() != src.size()) return Status::error("captured step: the number of inputs changed");
  for (size_t i = 0; i < dst.size(); ++i) {
    if (!dst[i].isTensor()) {
      if (!(dst[i] == src[i]))
        return Status::error("captured step: input " + std::to_string(i) +
                             " (not a tensor) differs from the captured one");
      continue;
    }
    const at::Tensor& s = src[i].toTensor();
    at::Tensor d = dst[i].toTensor();
    if (s.sizes() != d.sizes())
      return Status::error("captured step: input " + std::to_string(i) + " changed shape");
    d.copy_(s, /*non_blocking=*/true);
  }
  return Status::ok();
}

std::vector<c10::IValue> cloneInputs(const std::vector<c10::IValue>& inputs) {
  std::vector<c10::IValue> out;
  out.reserve(inputs.size());
  for (const c10::IValue& v : inputs) out.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
  return out;
}

// Reserves `bytes` in the private pool `pool`: one block allocated there and
// freed, which the caching allocator keeps for the capture's allocations.
void reservePool(at::cuda::MempoolId_t pool, int64_t bytes, const c10::Device& device) {
  if (bytes <= 0) return;
  c10::cuda::CUDACachingAllocator::beginAllocateToPool(device.index(), pool,
                                                       [](cudaStream_t) { return true; });
  { at::Tensor block = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device)); }
  c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), pool);
}

// Captures one step on a side stream (the default stream cannot capture),
// then replays it once: capture records kernels without running them.
Expected<TensorMap> capture(GraphStep::Impl& s, ProgramRunner& runner, MeshComm& comm) {
  const c10::Device& device = s.options.device;
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  c10::cuda::device_synchronize();  // warm-up and the input copies done before the side stream starts
  Expected<TensorMap> out = Status::error("capture did not run");
  try {
    c10::cuda::CUDAStreamGuard guard(side);
    s.graph = std::make_unique<at::cuda::CUDAGraph>();
    s.pool = at::cuda::graph_pool_handle();
    reservePool(s.pool, s.options.poolBytes, device);
    s.reserved = s.options.poolBytes > 0;
    s.graph->capture_begin(s.pool);
    out = runEager(runner, s.staticInputs, comm);
    s.graph->capture_end();
  } catch (const std::exception& e) {
    std::string what = e.what();
    s.graph.reset();
    return Status::error("capturing the step as a CUDA graph failed (run with --cuda-graph off): " +
                         firstLine(what));
  }
  if (!out) {
    s.graph.reset();
    return out.status().withContext("capturing the step as a CUDA graph (run with --cuda-graph off)");
  }
  s.staticOutputs = std::move(*out);
  c10::cuda::device_synchronize();
  s.graph->replay();
  return s.staticOutputs;
}
#endif

}  // namespace

GraphStep::GraphStep(GraphStepOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = options; }

GraphStep::~GraphStep() {
#ifdef SPMD_WITH_NCCL
  if (impl_ && impl_->graph) {
    impl_->graph.reset();
    // the reservation's reference on the pool (capture took its own)
    if (impl_->reserved)
      c10::cuda::CUDACachingAllocator::releasePool(impl_->options.device.index(), impl_->pool);
  }
#endif
}

bool GraphStep::captured() const {
#ifdef SPMD_WITH_NCCL
  return impl_->graph != nullptr;
#else
  return false;
#endif
}

Expected<TensorMap> GraphStep::run(ProgramRunner& runner, const std::vector<c10::IValue>& inputs,
                                   MeshComm& comm) {
  Impl& s = *impl_;
  int call = s.calls++;
  if (!s.options.graph || call < s.options.warmup) return runEager(runner, inputs, comm);
#ifdef SPMD_WITH_NCCL
  if (call == s.options.warmup) {
    s.staticInputs = cloneInputs(inputs);
    return capture(s, runner, comm);
  }
  if (!s.graph) return Status::error("captured step: the capture failed earlier");
  SPMD_RETURN_IF_ERROR(copyInputs(s.staticInputs, inputs));
  s.graph->replay();
  return s.staticOutputs;
#else
  return Status::error(
      "--cuda-graph: this spmd-run was built without the NCCL path, which carries "
      "the CUDA graph path");
#endif
}

}  // namespace spmd::runtime
