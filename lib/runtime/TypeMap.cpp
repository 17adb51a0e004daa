// The export schema numbers next to their c10 counterparts, one row each.
#include "runtime/TypeMap.h"

#include <array>
#include <string>
#include <utility>

#include <torch/version.h>

namespace spmd::runtime {
namespace {

using ST = ir::ScalarType;

constexpr std::pair<ST, c10::ScalarType> kScalarTypes[] = {
    {ST::Byte, c10::kByte},
    {ST::Char, c10::kChar},
    {ST::Short, c10::kShort},
    {ST::Int, c10::kInt},
    {ST::Long, c10::kLong},
    {ST::Half, c10::kHalf},
    {ST::Float, c10::kFloat},
    {ST::Double, c10::kDouble},
    {ST::ComplexHalf, c10::kComplexHalf},
    {ST::ComplexFloat, c10::kComplexFloat},
    {ST::ComplexDouble, c10::kComplexDouble},
    {ST::Bool, c10::kBool},
    {ST::BFloat16, c10::kBFloat16},
    {ST::UInt16, c10::ScalarType::UInt16},
    {ST::Float8E4M3FN, c10::ScalarType::Float8_e4m3fn},
    {ST::Float8E5M2, c10::ScalarType::Float8_e5m2},
    {ST::Float8E4M3FNUZ, c10::ScalarType::Float8_e4m3fnuz},
    {ST::Float8E5M2FNUZ, c10::ScalarType::Float8_e5m2fnuz},
    {ST::UInt32, c10::ScalarType::UInt32},
    {ST::UInt64, c10::ScalarType::UInt64},
};

// Export schema Layout numbers: 1 sparse_coo, 2 sparse_csr, 3 sparse_csc,
// 4 sparse_bsr, 5 sparse_bsc, 6 _mkldnn, 7 strided.
constexpr std::pair<int64_t, c10::Layout> kLayouts[] = {
    {1, c10::kSparse},    {2, c10::kSparseCsr}, {3, c10::kSparseCsc}, {4, c10::kSparseBsr},
    {5, c10::kSparseBsc}, {6, c10::kMkldnn},    {7, c10::kStrided},
};

// Export schema MemoryFormat numbers: 1 contiguous, 2 channels_last,
// 3 channels_last_3d, 4 preserve.
constexpr std::pair<int64_t, c10::MemoryFormat> kMemoryFormats[] = {
    {1, c10::MemoryFormat::Contiguous},
    {2, c10::MemoryFormat::ChannelsLast},
    {3, c10::MemoryFormat::ChannelsLast3d},
    {4, c10::MemoryFormat::Preserve},
};

}  // namespace

Expected<c10::ScalarType> toC10ScalarType(ir::ScalarType t) {
  for (const auto& [ours, theirs] : kScalarTypes)
    if (ours == t) return theirs;
  return Status::error("dtype " + std::string(ir::scalarTypeName(t)) +
                       " is not supported by the linked LibTorch " TORCH_VERSION);
}

Expected<c10::ScalarType> toC10ScalarType(int64_t exportCode) {
  std::optional<ir::ScalarType> t = ir::scalarTypeFromSchema(exportCode);
  if (!t) return Status::error("unknown export dtype number " + std::to_string(exportCode));
  return toC10ScalarType(*t);
}

std::optional<ir::ScalarType> fromC10ScalarType(c10::ScalarType t) {
  for (const auto& [ours, theirs] : kScalarTypes)
    if (theirs == t) return ours;
  return std::nullopt;
}

Expected<c10::Layout> toC10Layout(int64_t exportCode) {
  for (const auto& [code, layout] : kLayouts)
    if (code == exportCode) return layout;
  return Status::error("unknown export layout number " + std::to_string(exportCode));
}

Expected<c10::MemoryFormat> toC10MemoryFormat(int64_t exportCode) {
  for (const auto& [code, format] : kMemoryFormats)
    if (code == exportCode) return format;
  return Status::error("unknown export memory format number " + std::to_string(exportCode));
}

}  // namespace spmd::runtime
