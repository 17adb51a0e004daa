// What this spmd_runtime was built with: the LibTorch version, whether that
// torch is a CUDA build, and whether the NCCL path is compiled in.
//
//   spmd-run --version
//   spmd-run 0.1.0, LibTorch 2.14.1 (CUDA), NCCL path compiled
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <string_view>

#include "support/Status.h"

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

/// The device a worker with local rank `localRank` runs on, for `name`:
/// "cpu"; "cuda" (GPU localRank modulo the GPUs it sees; an error naming
/// why when this build or machine has none); "auto" (cuda when usable,
/// else cpu).
Expected<c10::Device> resolveDevice(std::string_view name, int64_t localRank);

/// Makes `device` this thread's current CUDA device (before any process
/// group or stream exists); nothing for the CPU.
void selectDevice(const c10::Device& device);

/// Waits until the kernels queued on `device` have finished; nothing for
/// the CPU.
void synchronizeDevice(const c10::Device& device);

}  // namespace spmd::runtime
