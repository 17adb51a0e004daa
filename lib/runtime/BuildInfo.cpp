// BuildInfo (see BuildInfo.h).
#include "runtime/BuildInfo.h"

#include <ATen/Context.h>
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

}  // namespace spmd::runtime
