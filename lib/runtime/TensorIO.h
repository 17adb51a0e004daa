// Named tensors in and out of safetensors files.
//
//   SPMD_ASSIGN_OR_RETURN(TensorMap in, readTensors("inputs.safetensors"));
//   in.at("input.0");                                   // CPU tensor, own memory
//   SPMD_RETURN_IF_ERROR(writeTensors("out.safetensors", {{"output.0", y}}));
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "support/Status.h"

namespace spmd::runtime {

/// Tensors by name, sorted.
using TensorMap = std::map<std::string, at::Tensor, std::less<>>;

/// Reads every tensor of a safetensors file into fresh, contiguous CPU
/// tensors (the file is not kept open). Errors name the file, and the tensor
/// where one is at fault (a dtype the linked LibTorch lacks).
Expected<TensorMap> readTensors(const std::string& path);

/// Writes `tensors` (any device, any layout: copied to contiguous CPU) to a
/// safetensors file, atomically: on error no file is left at `path`. Errors
/// name the file.
Status writeTensors(const std::string& path, const TensorMap& tensors);

}  // namespace spmd::runtime
