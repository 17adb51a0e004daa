// Payload metadata against payload members and graph inputs (see VerifyArchive.h).
//
// A payload's storage offset is honoured where its bytes are sliced (the
// program writer's ArchiveWeightSource, the runtime's as_strided views): a
// tensor that is a view into a larger storage (a tied or sliced weight)
// legitimately has one. The graph input's tensor_values record the same
// offset; where the two disagree the archive is refused rather than one of
// them silently ignored.
#include "pt2/VerifyArchive.h"

#include <string>
#include <vector>

#include "ir/Verify.h"

namespace spmd::pt2 {
namespace {

using serialize::StorageOffsets;

constexpr const char* kCorrupt = "; the archive is truncated or corrupt, re-export it";

// The payload's type with contiguous strides filled in when the metadata
// gives none.
ir::TensorType payloadType(const TensorPayload& t) {
  ir::TensorType type;
  type.dtype = t.dtype;
  for (int64_t s : t.sizes) type.sizes.emplace_back(s);
  if (!t.strides.empty()) {
    for (int64_t s : t.strides) type.strides.emplace_back(s);
    return type;
  }
  std::vector<int64_t> strides(t.sizes.size(), 1);
  for (size_t i = t.sizes.size(); i > 1; --i) {
    int64_t n = std::max<int64_t>(t.sizes[i - 1], 1);
    if (__builtin_mul_overflow(strides[i - 1], n, &strides[i - 2])) strides[i - 2] = INT64_MAX;
  }
  for (int64_t s : strides) type.strides.emplace_back(s);
  return type;
}

// Bytes from the start of the member to the end of the last element (0 for
// an empty tensor); `type` has passed ir::verifyTensorType, so nothing overflows.
int64_t spanBytes(const ir::TensorType& type, int64_t storageOffset) {
  int64_t last = storageOffset;
  for (size_t i = 0; i < type.sizes.size(); ++i) {
    if (type.sizes[i].value() == 0) return 0;
    last += (type.sizes[i].value() - 1) * type.strides[i].value();
  }
  return (last + 1) * std::max<int64_t>(ir::elementSize(type.dtype), 1);
}

Status checkPayload(const io::ZipArchive& zip, const TensorPayload& t) {
  ir::TensorType type = payloadType(t);
  std::string where = "payload of '" + t.fqn + "' (" + t.member + ")";
  SPMD_RETURN_IF_ERROR(ir::verifyTensorType(type, t.storageOffset, where + ": " + type.str()));
  SPMD_ASSIGN_OR_RETURN(uint64_t size, zip.size(t.member));
  int64_t need = spanBytes(type, t.storageOffset);
  if (size < static_cast<uint64_t>(need))
    return Status::error(where + " has " + std::to_string(size) + " bytes but its metadata needs " +
                         std::to_string(need) + kCorrupt);
  return Status::ok();
}

std::string metaText(const ir::TensorType& type, const std::vector<ir::Dim>& strides, int64_t offset) {
  std::string s = type.str() + " strides [";
  for (size_t i = 0; i < strides.size(); ++i) s += (i ? ", " : "") + strides[i].str();
  return s + "] offset " + std::to_string(offset);
}

// The graph input reading a payload sees the tensor its metadata describes.
Status checkInput(const ir::InputSpec& in, const TensorPayload& t, const StorageOffsets& offsets) {
  const ir::TensorType& g = in.value->type();
  auto it = offsets.find(in.value->name());
  int64_t graphOffset = it == offsets.end() ? 0 : it->second;
  ir::TensorType p = payloadType(t);
  bool same = g.dtype == p.dtype && g.sizes == p.sizes && graphOffset == t.storageOffset;
  if (same && !g.strides.empty() && !t.strides.empty()) same = g.strides == p.strides;
  if (same) return Status::ok();
  return Status::error(std::string(ir::inputKindName(in.kind)) + " '" + in.target + "': the graph reads %" +
                       in.value->name() + " as " + metaText(g, g.strides, graphOffset) +
                       " but its payload metadata says " + metaText(p, p.strides, t.storageOffset) +
                       "; re-export the model");
}

}  // namespace

Status verifyPayloads(const io::ZipArchive& zip, const Archive& archive, const StorageOffsets& offsets) {
  for (const auto* table : {&archive.weights, &archive.constants})
    for (const auto& [fqn, t] : *table)
      if (!t.external) SPMD_RETURN_IF_ERROR(checkPayload(zip, t));
  for (const auto& in : archive.program.signature.inputs) {
    bool stored = ir::isStored(in.kind);
    if (!stored || !in.value || !in.value->isTensor()) continue;
    const TensorPayload* t = archive.payload(in.target);
    if (!t)
      return Status::error(std::string(ir::inputKindName(in.kind)) + " '" + in.target +
                           "' has no stored payload in the archive");
    SPMD_RETURN_IF_ERROR(checkInput(in, *t, offsets));
  }
  return Status::ok();
}

}  // namespace spmd::pt2
