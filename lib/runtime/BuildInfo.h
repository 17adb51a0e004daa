// What this spmd_runtime was built with: the LibTorch version, whether that
// torch is a CUDA build, and whether the NCCL path is compiled in.
//
//   spmd-run --version
//   spmd-run 0.1.0, LibTorch 2.14.1 (CUDA), NCCL path compiled
#pragma once

#include <string>

namespace spmd::runtime {

/// True when the linked LibTorch is a CUDA build.
bool torchHasCuda();
/// True when the NCCL process-group path is compiled in (CUDA builds).
bool ncclCompiled();
/// One line naming the LibTorch version and the paths compiled in.
std::string buildSummary();
/// True when this build and this machine can run on a GPU (a CUDA build
/// that sees at least one device).
bool cudaUsable();

}  // namespace spmd::runtime
