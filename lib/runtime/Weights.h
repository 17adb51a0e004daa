// Parameters, buffers and tensor constants of a .pt2, or one rank's shards
// of a .spmd program's weights, as tensors on a device.
//
//   SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive("llama.pt2"));
//   SPMD_ASSIGN_OR_RETURN(TensorMap w, loadWeights(a, c10::kCPU));
//   w.at("tok.weight");      // f32[256, 64], a view of the archive's bytes
//
//   SPMD_ASSIGN_OR_RETURN(auto lp, program::readProgram("llama.spmd"));
//   SPMD_ASSIGN_OR_RETURN(TensorMap mine, loadRankWeights(lp, 3, c10::kCPU));
//   mine.at("tok.weight");   // f32[64, 64], rank 3's checked copy of its blob
//
// On the CPU the tensors alias the archive's payload Storage (no copy; the
// Storage stays alive as long as any tensor does). On other devices each
// payload file is copied once, so tied weights still share memory. Sizes,
// strides and storage offsets are the archive's. The tensors are read-only
// by contract: exported graphs are functional and never write weights.
#pragma once

#include <set>
#include <string>

#include <c10/core/Device.h>

#include "program/Reader.h"
#include "pt2/Archive.h"
#include "runtime/TensorIO.h"
#include "support/Status.h"

namespace spmd::runtime {

/// Every weight and constant of `archive`, by FQN, on `device`. Errors name
/// the tensor: payload not loaded (ReadOptions::loadWeights was false), a
/// dtype the linked LibTorch lacks, sizes/strides reaching past the payload.
Expected<TensorMap> loadWeights(const pt2::Archive& archive, c10::Device device);

/// Every weight of `program` as `rank` holds it: a copy of the rank's blob,
/// or of its region of the weight's source checkpoint (converted to the
/// weight's dtype where the file's differs), in the weight's local shape, on
/// `device`. Errors are one line starting
/// with the program's path: a blob that does not match its checksum ("the
/// file is damaged: recompile or copy it again"), a dtype the linked
/// LibTorch lacks, or LibTorch failing to allocate or move the tensor.
/// With `only`, just the weights it names (a pipeline stage's): the others
/// are neither read nor allocated.
Expected<TensorMap> loadRankWeights(const program::LoadedProgram& program, int64_t rank, c10::Device device,
                                    const std::set<std::string>* only = nullptr);

}  // namespace spmd::runtime
