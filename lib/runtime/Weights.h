// Parameters, buffers and tensor constants of a .pt2 as tensors on a device.
//
//   SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive("llama.pt2"));
//   SPMD_ASSIGN_OR_RETURN(TensorMap w, loadWeights(a, c10::kCPU));
//   w.at("tok.weight");      // f32[256, 64], a view of the archive's bytes
//
// On the CPU the tensors alias the archive's payload Storage (no copy; the
// Storage stays alive as long as any tensor does). On other devices each
// payload file is copied once, so tied weights still share memory. Sizes,
// strides and storage offsets are the archive's. The tensors are read-only
// by contract: exported graphs are functional and never write weights.
#pragma once

#include <c10/core/Device.h>

#include "pt2/Archive.h"
#include "runtime/TensorIO.h"
#include "support/Status.h"

namespace spmd::runtime {

/// Every weight and constant of `archive`, by FQN, on `device`. Errors name
/// the tensor: payload not loaded (ReadOptions::loadWeights was false), a
/// dtype the linked LibTorch lacks, sizes/strides reaching past the payload.
Expected<TensorMap> loadWeights(const pt2::Archive& archive, c10::Device device);

}  // namespace spmd::runtime
