// BuildInfo (see BuildInfo.h).
#include "runtime/BuildInfo.h"

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

namespace spmd::runtime {

bool torchHasCuda() {
#ifdef SPMD_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

bool ncclCompiled() {
#ifdef SPMD_WITH_NCCL
  return true;
#else
  return false;
#endif
}

std::string buildSummary() {
  return std::string("LibTorch ") + TORCH_VERSION + (torchHasCuda() ? " (CUDA)" : " (CPU)") +
         (ncclCompiled() ? ", NCCL path compiled" : ", no NCCL path (CPU torch)");
}

bool cudaUsable() { return torchHasCuda() && at::hasCUDA() && at::getNumGPUs() > 0; }

Expected<c10::Device> resolveDevice(std::string_view name, int64_t localRank) {
  if (name == "cpu" || (name == "auto" && !cudaUsable())) return c10::Device(c10::kCPU);
  if (name != "cuda" && name != "auto")
    return Status::error("--device " + std::string(name) + ": expected cpu, cuda or auto");
  if (!torchHasCuda())
    return Status::error("--device cuda: this spmd-run was built against a CPU torch (" + buildSummary() +
                         ")");
  int64_t gpus = at::hasCUDA() ? static_cast<int64_t>(at::getNumGPUs()) : 0;
  if (gpus == 0) return Status::error("--device cuda: no GPU is visible to this process");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(localRank % gpus));
}

void selectDevice(const c10::Device& device) {
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
}

void synchronizeDevice(const c10::Device& device) {
  if (!device.is_cpu()) c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
}

}  // namespace spmd::runtime
