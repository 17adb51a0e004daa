// Payload Storage -> one flat base tensor per (file, dtype) -> as_strided
// views with each tensor's sizes, strides and offset.
#include "runtime/Weights.h"

#include <ATen/ATen.h>

#include <utility>

#include "runtime/TypeMap.h"

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

}  // namespace spmd::runtime
