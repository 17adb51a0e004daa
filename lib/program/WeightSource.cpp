// Weight sources for the program writer (see WeightSource.h).
//
//   payload fc1.weight: f32 sizes [256, 64] strides [64, 1] offset 0
//     -> a view of the archive's storage (no copy)
//   payload w_t: f32 sizes [64, 256] strides [1, 64] (a transposed view)
//     -> copied element by element into a contiguous [64, 256] buffer
#include "program/WeightSource.h"

#include <cstring>

#include "support/Strings.h"

namespace spmd::program {
namespace {

bool isContiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (strides.empty()) return true;
  if (strides.size() != sizes.size()) return false;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

// Copies the strided view into row-major order (odometer over the indices).
void copyStrided(const std::byte* base, const std::vector<int64_t>& sizes,
                 const std::vector<int64_t>& strides, int64_t elem, std::byte* out) {
  std::vector<int64_t> index(sizes.size(), 0);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  for (int64_t n = 0; n < numel; ++n) {
    int64_t off = 0;
    for (size_t d = 0; d < sizes.size(); ++d) off += index[d] * strides[d];
    std::memcpy(out + n * elem, base + off * elem, static_cast<size_t>(elem));
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Expected<std::span<const std::byte>> MemoryWeightSource::globalBytes(const std::string& fqn) const {
  auto it = bytes_.find(fqn);
  if (it == bytes_.end()) return Status::error("weight '" + fqn + "' has no bytes in the weight source");
  return std::span<const std::byte>(it->second);
}

Expected<std::span<const std::byte>> ArchiveWeightSource::globalBytes(const std::string& fqn) const {
  if (auto it = copies_.find(fqn); it != copies_.end()) return std::span<const std::byte>(it->second);
  const pt2::TensorPayload* p = archive_.payload(fqn);
  if (!p)
    return Status::error("weight '" + fqn + "' is not a parameter, buffer or constant of " + archive_.path);
  if (p->external) {
    if (!files_) files_ = std::make_unique<SourceFiles>(archive_.weightsRoot);
    SPMD_ASSIGN_OR_RETURN(const io::SafetensorsEntry* e,
                          files_->entry(p->external->file, p->external->tensor));
    if (e->dtype != p->dtype || e->shape != p->sizes)
      return Status::error(sourcePath(archive_.weightsRoot, p->external->file) + ": tensor '" +
                           p->external->tensor + "' is " + std::string(ir::scalarTypeName(e->dtype)) +
                           formatShape(e->shape) + ", weight '" + fqn + "' is " +
                           std::string(ir::scalarTypeName(p->dtype)) + formatShape(p->sizes) +
                           "; --embed-weights copies bytes as stored: export with the checkpoint's dtype");
    return std::span<const std::byte>(static_cast<const std::byte*>(e->data), e->bytes);
  }
  if (!p->storage) return Status::error("weight '" + fqn + "': the archive was read without weights");
  int64_t elem = ir::elementSize(p->dtype);
  int64_t numel = 1;
  for (int64_t s : p->sizes) numel *= s;
  if (numel == 0 || elem == 0) return std::span<const std::byte>();
  for (int64_t st : p->strides)
    if (st < 0) return Status::error("weight '" + fqn + "' has a negative stride");
  // Last element reachable through sizes/strides, in elements from the base.
  int64_t last = p->storageOffset;
  bool strided = !isContiguous(p->sizes, p->strides);
  for (size_t d = 0; d < p->sizes.size(); ++d) last += (p->sizes[d] - 1) * (strided ? p->strides[d] : 0);
  if (!strided) last += numel - 1;
  if (p->storageOffset < 0 || (last + 1) * elem > static_cast<int64_t>(p->storage->size()))
    return Status::error("weight '" + fqn + "': payload of " + std::to_string(p->storage->size()) +
                         " bytes is shorter than its sizes and strides need");
  const std::byte* base = p->storage->data() + p->storageOffset * elem;
  if (!strided) return std::span<const std::byte>(base, static_cast<size_t>(numel * elem));
  std::vector<std::byte> copy(static_cast<size_t>(numel * elem));
  copyStrided(base, p->sizes, p->strides, elem, copy.data());
  auto [it, inserted] = copies_.emplace(fqn, std::move(copy));
  return std::span<const std::byte>(it->second);
}

}  // namespace spmd::program
