// Element type tables. The export schema's numbers are kept as they come;
// names are the short ones used in IR text (f32) and safetensors' (F32).
#include "ir/Types.h"

#include <array>

namespace spmd::ir {
namespace {

struct TypeInfo {
  ScalarType type;
  std::string_view name;
  std::string_view safetensors;
  int64_t bytes;
};

constexpr std::array<TypeInfo, 20> kTypes = {{
    {ScalarType::Byte, "u8", "U8", 1},
    {ScalarType::Char, "i8", "I8", 1},
    {ScalarType::Short, "i16", "I16", 2},
    {ScalarType::Int, "i32", "I32", 4},
    {ScalarType::Long, "i64", "I64", 8},
    {ScalarType::Half, "f16", "F16", 2},
    {ScalarType::Float, "f32", "F32", 4},
    {ScalarType::Double, "f64", "F64", 8},
    {ScalarType::ComplexHalf, "c32", "", 4},
    {ScalarType::ComplexFloat, "c64", "C64", 8},
    {ScalarType::ComplexDouble, "c128", "", 16},
    {ScalarType::Bool, "b8", "BOOL", 1},
    {ScalarType::BFloat16, "bf16", "BF16", 2},
    {ScalarType::UInt16, "u16", "U16", 2},
    {ScalarType::Float8E4M3FN, "f8e4m3fn", "F8_E4M3", 1},
    {ScalarType::Float8E5M2, "f8e5m2", "F8_E5M2", 1},
    {ScalarType::Float8E4M3FNUZ, "f8e4m3fnuz", "", 1},
    {ScalarType::Float8E5M2FNUZ, "f8e5m2fnuz", "", 1},
    {ScalarType::UInt32, "u32", "U32", 4},
    {ScalarType::UInt64, "u64", "U64", 8},
}};

const TypeInfo* info(ScalarType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}

}  // namespace

std::optional<ScalarType> scalarTypeFromSchema(int64_t code) {
  for (const auto& i : kTypes)
    if (static_cast<int64_t>(i.type) == code) return i.type;
  return std::nullopt;
}

std::string_view scalarTypeName(ScalarType t) {
  const TypeInfo* i = info(t);
  return i ? i->name : "unknown";
}

std::optional<ScalarType> scalarTypeFromName(std::string_view name) {
  for (const auto& i : kTypes)
    if (i.name == name) return i.type;
  return std::nullopt;
}

std::string_view scalarTypeSafetensorsName(ScalarType t) {
  const TypeInfo* i = info(t);
  return i ? i->safetensors : "";
}

std::optional<ScalarType> scalarTypeFromSafetensorsName(std::string_view name) {
  if (name.empty()) return std::nullopt;
  for (const auto& i : kTypes)
    if (i.safetensors == name) return i.type;
  return std::nullopt;
}

int64_t elementSize(ScalarType t) {
  const TypeInfo* i = info(t);
  return i ? i->bytes : 0;
}

bool TensorType::isStatic() const {
  for (const auto& d : sizes)
    if (!d.isStatic()) return false;
  return true;
}

std::optional<int64_t> TensorType::numel() const {
  int64_t n = 1;
  for (const auto& d : sizes) {
    if (!d.isStatic()) return std::nullopt;
    n *= d.value();
  }
  return n;
}

std::string TensorType::str() const {
  std::string s(scalarTypeName(dtype));
  s += "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += sizes[i].str();
  }
  s += "]";
  return s;
}

}  // namespace spmd::ir
