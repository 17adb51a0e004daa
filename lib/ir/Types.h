// Element types, devices and tensor types of the IR.
//
// ScalarType numbers are the torch.export schema's own (7 = float32,
// 5 = int64, 12 = bool, 13 = bfloat16): the reader stores them as they come,
// and the runtime maps them to c10 with an explicit table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/SymExpr.h"

namespace spmd::ir {

/// torch.export schema ScalarType (values are the schema's numbers).
enum class ScalarType : int8_t {
  Unknown = 0,
  Byte = 1,
  Char = 2,
  Short = 3,
  Int = 4,
  Long = 5,
  Half = 6,
  Float = 7,
  Double = 8,
  ComplexHalf = 9,
  ComplexFloat = 10,
  ComplexDouble = 11,
  Bool = 12,
  BFloat16 = 13,
  UInt16 = 28,
  Float8E4M3FN = 29,
  Float8E5M2 = 30,
  Float8E4M3FNUZ = 31,
  Float8E5M2FNUZ = 32,
  UInt32 = 34,
  UInt64 = 35,
};

/// Maps a schema number to a ScalarType; nullopt for numbers the schema lacks.
std::optional<ScalarType> scalarTypeFromSchema(int64_t code);
/// Short name used in IR text: f32, f64, bf16, f16, i64, i32, i16, i8, u8, b8, ...
std::string_view scalarTypeName(ScalarType t);
/// Parses a short name back; nullopt when unknown.
std::optional<ScalarType> scalarTypeFromName(std::string_view name);
/// The safetensors dtype string ("F32", "I64", "BOOL", ...); empty if none.
std::string_view scalarTypeSafetensorsName(ScalarType t);
/// Parses a safetensors dtype string.
std::optional<ScalarType> scalarTypeFromSafetensorsName(std::string_view name);
/// Bytes per element (0 for Unknown).
int64_t elementSize(ScalarType t);

/// torch.export schema Layout numbers (7 = strided).
enum class Layout : int8_t {
  Unknown = 0,
  SparseCoo = 1,
  SparseCsr = 2,
  SparseCsc = 3,
  SparseBsr = 4,
  SparseBsc = 5,
  Mkldnn = 6,
  Strided = 7
};
/// torch.export schema MemoryFormat numbers.
enum class MemoryFormat : int8_t {
  Unknown = 0,
  Contiguous = 1,
  ChannelsLast = 2,
  ChannelsLast3d = 3,
  Preserve = 4
};

/// A device as torch.export writes it: type ("cpu", "cuda") and index (-1: none).
struct Device {
  std::string type = "cpu";
  int64_t index = -1;
  bool operator==(const Device&) const = default;
};

/// Global type of a tensor value: dtype, sizes (ints or symbolic), strides.
struct TensorType {
  ScalarType dtype = ScalarType::Unknown;
  std::vector<Dim> sizes;
  std::vector<Dim> strides;
  Device device;
  bool requiresGrad = false;

  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  /// True when every size is a constant.
  bool isStatic() const;
  /// Product of sizes; nullopt when symbolic.
  std::optional<int64_t> numel() const;
  /// "f32[256, 64]" (symbolic sizes print as their expression).
  std::string str() const;
};

}  // namespace spmd::ir
