// .pt2: payload Storage -> one flat base tensor per (file, dtype) ->
// as_strided views with each tensor's sizes, strides and offset.
// .spmd: the rank's blob (checksum checked by shardFor), or its region of
// the weight's source checkpoint -> a tensor of the weight's local shape,
// copied out of the mapped file.
#include "runtime/Weights.h"

#include <ATen/ATen.h>

#include <cstring>
#include <utility>

#include "runtime/TypeMap.h"
#include "support/FirstLine.h"

namespace spmd::runtime {
namespace {

using BaseKey = std::pair<const pt2::Storage*, c10::ScalarType>;

/// Contiguous strides for `sizes`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i > 1; --i)
    strides[i - 2] = strides[i - 1] * std::max<int64_t>(sizes[i - 1], 1);
  return strides;
}

Expected<at::Tensor> payloadTensor(const pt2::TensorPayload& p, c10::Device device,
                                   std::map<BaseKey, at::Tensor>& bases) {
  if (!p.storage) return Status::error("'" + p.fqn + "': payload bytes were not loaded");
  SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(p.dtype));
  const auto elem = static_cast<int64_t>(c10::elementSize(dtype));
  const auto numel = static_cast<int64_t>(p.storage->size()) / elem;
  std::vector<int64_t> strides = p.strides.empty() ? contiguousStrides(p.sizes) : p.strides;
  if (strides.size() != p.sizes.size())
    return Status::error("'" + p.fqn + "': " + std::to_string(p.sizes.size()) + " sizes but " +
                         std::to_string(strides.size()) + " strides");
  int64_t extent = p.storageOffset + 1;
  for (size_t d = 0; d < p.sizes.size(); ++d) {
    if (p.sizes[d] == 0) extent = 0;
    if (extent > 0) extent += (p.sizes[d] - 1) * strides[d];
  }
  if (extent > numel)
    return Status::error("'" + p.fqn + "': the payload holds " + std::to_string(numel) +
                         " elements, the tensor reaches element " + std::to_string(extent));
  at::Tensor& base = bases[{p.storage.get(), dtype}];
  if (!base.defined()) {
    std::shared_ptr<const pt2::Storage> keep = p.storage;
    void* data = const_cast<std::byte*>(keep->data());
    base = at::from_blob(
        data, {numel}, [keep](void*) {}, at::TensorOptions().dtype(dtype));
    if (device != c10::Device(c10::kCPU)) base = base.to(device);
  }
  return base.as_strided(p.sizes, strides, p.storageOffset);
}

}  // namespace

Expected<TensorMap> loadWeights(const pt2::Archive& archive, c10::Device device) {
  TensorMap out;
  std::map<BaseKey, at::Tensor> bases;
  try {
    for (const auto* table : {&archive.weights, &archive.constants}) {
      for (const auto& [fqn, payload] : *table) {
        SPMD_ASSIGN_OR_RETURN(at::Tensor t, payloadTensor(payload, device, bases));
        out.emplace(fqn, std::move(t));
      }
    }
  } catch (const c10::Error& e) {
    return Status::error(std::string("loading weights: ") + e.what_without_backtrace());
  }
  return out;
}

Expected<TensorMap> loadRankWeights(const program::LoadedProgram& program, int64_t rank, c10::Device device,
                                    const std::set<std::string>* only) {
  TensorMap out;
  for (const auto& w : program.program().weights) {
    if (only && !only->count(w.fqn)) continue;
    auto stored = toC10ScalarType(program::LoadedProgram::storedDtype(w));
    auto dtype = toC10ScalarType(w.dtype);
    if (!stored) return stored.status().withContext(program.path() + ": weight '" + w.fqn + "'");
    if (!dtype) return dtype.status().withContext(program.path() + ": weight '" + w.fqn + "'");
    try {
      // Uneven shards: each rank's own shape (torch.chunk), rank 0's is w.localShape.
      auto shape = sharding::localShape(w.globalShape, w.spec, program.program().mesh,
                                        program.program().mesh.coords(rank));
      at::Tensor t = at::empty(shape, at::TensorOptions().dtype(*stored));
      auto* data = static_cast<std::byte*>(t.data_ptr());
      SPMD_RETURN_IF_ERROR(program.readShard(w, rank, std::span<std::byte>(data, t.nbytes())));
      // A checkpoint stored in another dtype (bf16 file, float32 program) is converted here.
      if (*stored != *dtype) t = t.to(*dtype);
      out.emplace(w.fqn, device.is_cpu() ? t : t.to(device));
    } catch (const c10::Error& e) {
      std::string what = e.what_without_backtrace();
      return Status::error(program.path() + ": weight '" + w.fqn + "': " + firstLine(what));
    } catch (const std::exception& e) {  // std::bad_alloc and the like
      return Status::error(program.path() + ": weight '" + w.fqn + "': " + e.what());
    }
  }
  return out;
}

}  // namespace spmd::runtime
