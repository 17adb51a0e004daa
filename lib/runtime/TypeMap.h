// Explicit tables between the export schema's enum numbers and c10's.
//
//   toC10ScalarType(ir::ScalarType::Float) == c10::kFloat   (export 7, c10 6)
//   toC10Layout(7) == c10::kStrided
//   toC10MemoryFormat(1) == c10::MemoryFormat::Contiguous
//   fromC10ScalarType(c10::kLong) == ir::ScalarType::Long
//
// The numbers differ between the two (export's float32 is 7, c10's is 6), so
// nothing here casts one enum to the other.
#pragma once

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>

#include "ir/Types.h"
#include "support/Status.h"

namespace spmd::runtime {

/// The c10 dtype of an export dtype; error when the linked LibTorch has none.
Expected<c10::ScalarType> toC10ScalarType(ir::ScalarType t);
/// The c10 dtype of an export schema dtype number (7 = float32).
Expected<c10::ScalarType> toC10ScalarType(int64_t exportCode);
/// The export dtype of a c10 dtype; nullopt when the export schema has none.
std::optional<ir::ScalarType> fromC10ScalarType(c10::ScalarType t);
/// The c10 layout of an export schema layout number (7 = strided).
Expected<c10::Layout> toC10Layout(int64_t exportCode);
/// The c10 memory format of an export schema number (1 = contiguous).
Expected<c10::MemoryFormat> toC10MemoryFormat(int64_t exportCode);

}  // namespace spmd::runtime
