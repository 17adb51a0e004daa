// safetensors <-> at::Tensor: copies in (the mapped data carries no
// alignment promise), contiguous CPU copies out.
#include "runtime/TensorIO.h"

#include <ATen/ATen.h>

#include <cstring>
#include <vector>

#include "io/Safetensors.h"
#include "runtime/TypeMap.h"

namespace spmd::runtime {

Expected<TensorMap> readTensors(const std::string& path) {
  SPMD_ASSIGN_OR_RETURN(io::SafetensorsFile file, io::SafetensorsFile::open(path));
  TensorMap out;
  try {
    for (const io::SafetensorsEntry& e : file.entries()) {
      Expected<c10::ScalarType> dtype = toC10ScalarType(e.dtype);
      if (!dtype) return dtype.status().withContext(path + ": tensor '" + e.name + "'");
      at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(*dtype));
      if (static_cast<uint64_t>(t.nbytes()) != e.bytes)
        return Status::error(path + ": tensor '" + e.name + "' has " + std::to_string(e.bytes) +
                             " bytes, expected " + std::to_string(t.nbytes()));
      if (e.bytes > 0) std::memcpy(t.data_ptr(), e.data, e.bytes);
      out.emplace(e.name, std::move(t));
    }
  } catch (const c10::Error& err) {
    return Status::error(path + ": " + err.what_without_backtrace());
  }
  return out;
}

Status writeTensors(const std::string& path, const TensorMap& tensors) {
  std::vector<at::Tensor> keep;
  std::vector<io::TensorView> views;
  keep.reserve(tensors.size());
  try {
    for (const auto& [name, tensor] : tensors) {
      std::optional<ir::ScalarType> dtype = fromC10ScalarType(tensor.scalar_type());
      if (!dtype)
        return Status::error(path + ": tensor '" + name + "' has dtype " +
                             c10::toString(tensor.scalar_type()) + ", which safetensors cannot hold");
      keep.push_back(tensor.to(at::kCPU).contiguous());
      const at::Tensor& t = keep.back();
      views.push_back({name, *dtype, t.sizes().vec(), t.data_ptr(), static_cast<uint64_t>(t.nbytes())});
    }
  } catch (const c10::Error& err) {
    return Status::error(path + ": " + err.what_without_backtrace());
  }
  return io::writeSafetensors(path, views, {{"format", "pt"}});
}

}  // namespace spmd::runtime
