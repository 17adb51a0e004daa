// Schema-driven conversion of export arguments to boxed call slots. The
// schema argument's type decides the IValue; the export argument kind says
// what was passed:
//
//   Tensor        <- as_tensor (runtime value) | as_int/as_float/as_bool
//                    (0-d wrapped-number tensor, as eager's argument parser)
//   Tensor?[]     <- as_tensors | as_optional_tensors (list of optionals)
//   int / SymInt  <- as_int | as_sym_int | as_scalar_type/as_layout/
//                    as_memory_format (mapped to c10's numbers)
//   int[]         <- as_ints | as_sym_ints (constants and SymInt values)
//   Device        <- as_device, None or left out: always the executor's
//                    target device (a factory op exported with device=cpu,
//                    device=None or no device makes its tensor where the
//                    run's other values are)
#include "runtime/ArgConvert.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/jit_type.h>

#include <string>

#include "runtime/TypeMap.h"

namespace spmd::runtime {
namespace {

using K = ir::Argument::Kind;
using TK = c10::TypeKind;

Status mismatch(const c10::Argument& s, const ir::Argument& a) {
  return Status::error("argument '" + s.name() + "': " + std::string(ir::argumentKindName(a.kind)) +
                       " cannot pass as " + s.type()->str());
}

/// Device or Device?: the argument that places a factory op's tensor.
bool isDeviceArgument(const c10::Argument& s) {
  c10::TypePtr t = s.type();
  if (t->kind() == TK::OptionalType) t = t->containedType(0);
  return t->kind() == TK::DeviceObjType;
}

ArgSlot constant(c10::IValue v) {
  ArgSlot slot;
  slot.kind = ArgSlot::Kind::Constant;
  slot.constant = std::move(v);
  return slot;
}

/// A slot reading runtime value `v`, which must be a tensor (`tensor`) or a
/// symbolic scalar (SymInt, SymFloat, SymBool).
Expected<ArgSlot> value(const c10::Argument& s, const ir::Value* v, bool tensor) {
  if (v->isTensor() != tensor)
    return Status::error("argument '" + s.name() + "': %" + v->name() + " is not a " +
                         (tensor ? "tensor" : "symbolic scalar"));
  ArgSlot slot;
  slot.kind = ArgSlot::Kind::Value;
  slot.valueId = v->id();
  return slot;
}

bool isIntLike(TK k) {
  return k == TK::IntType || k == TK::SymIntType || k == TK::ScalarTypeType || k == TK::LayoutType ||
         k == TK::MemoryFormatType;
}

/// A 0-d CPU tensor holding a Python number, flagged as a wrapped number so
/// type promotion treats it like eager does.
c10::IValue wrappedNumber(const c10::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

/// The c10 number of an enum argument (export numbers differ from c10's).
Expected<c10::IValue> enumCode(const ir::Argument& a) {
  const int64_t code = a.ints.at(0);
  if (a.kind == K::ScalarType) {
    SPMD_ASSIGN_OR_RETURN(c10::ScalarType t, toC10ScalarType(code));
    return c10::IValue(static_cast<int64_t>(t));
  }
  if (a.kind == K::Layout) {
    SPMD_ASSIGN_OR_RETURN(c10::Layout l, toC10Layout(code));
    return c10::IValue(static_cast<int64_t>(l));
  }
  SPMD_ASSIGN_OR_RETURN(c10::MemoryFormat f, toC10MemoryFormat(code));
  return c10::IValue(static_cast<int64_t>(f));
}

Expected<ArgSlot> convertTensor(const c10::Argument& s, const ir::Argument& a) {
  switch (a.kind) {
    case K::Tensor:
    case K::OptionalTensor:
      if (a.value() == nullptr) break;
      return value(s, a.value(), true);
    case K::Int:
      return constant(wrappedNumber(c10::Scalar(a.ints.at(0))));
    case K::Float:
      return constant(wrappedNumber(c10::Scalar(a.floats.at(0))));
    case K::Bool:
      return constant(wrappedNumber(c10::Scalar(a.ints.at(0) != 0)));
    default:
      break;
  }
  return mismatch(s, a);
}

/// Scalars (Scalar, int, float, bool, Any): constants or one SymInt/SymFloat/SymBool value.
Expected<ArgSlot> convertScalar(const c10::Argument& s, TK kind, const ir::Argument& a) {
  const bool symbolic = a.kind == K::SymInt || a.kind == K::SymFloat || a.kind == K::SymBool;
  if (symbolic && a.value() != nullptr) return value(s, a.value(), false);
  const bool wantsFloat = kind == TK::FloatType;
  switch (a.kind) {
    case K::Int:
    case K::SymInt:
      if (kind == TK::BoolType) break;
      if (wantsFloat) return constant(static_cast<double>(a.ints.at(0)));
      return constant(a.ints.at(0));
    case K::Float:
    case K::SymFloat:
      if (isIntLike(kind) || kind == TK::BoolType) break;
      return constant(a.floats.at(0));
    case K::Bool:
    case K::SymBool:
      if (kind == TK::BoolType || kind == TK::NumberType || kind == TK::AnyType)
        return constant(a.ints.at(0) != 0);
      break;
    case K::ScalarType:
    case K::Layout:
    case K::MemoryFormat:
      if (!isIntLike(kind)) break;
      {
        SPMD_ASSIGN_OR_RETURN(c10::IValue code, enumCode(a));
        return constant(std::move(code));
      }
    case K::Complex:
      if (kind != TK::NumberType && kind != TK::ComplexType) break;
      return constant(c10::complex<double>(a.floats.at(0), a.floats.at(1)));
    default:
      break;
  }
  return mismatch(s, a);
}

ArgSlot dynamicList(c10::IValue list, std::vector<int> ids, bool tensors, c10::IValue empty) {
  ArgSlot slot;
  slot.kind = ArgSlot::Kind::List;
  slot.constant = std::move(list);
  slot.elementIds = std::move(ids);
  slot.tensorElements = tensors;
  slot.emptyElement = std::move(empty);
  return slot;
}

Expected<ArgSlot> convertTensorList(const c10::Argument& s, bool optionalElements, const ir::Argument& a) {
  if (a.kind != K::Tensors && !(optionalElements && a.kind == K::OptionalTensors)) return mismatch(s, a);
  std::vector<int> ids;
  for (const ir::Value* v : a.values) {
    if (v == nullptr && !optionalElements)
      return Status::error("argument '" + s.name() + "': None in a Tensor[]");
    if (v != nullptr && !v->isTensor())
      return Status::error("argument '" + s.name() + "': %" + v->name() + " is not a tensor");
    ids.push_back(v ? v->id() : -1);
  }
  if (optionalElements) {
    c10::List<std::optional<at::Tensor>> list;
    for (size_t i = 0; i < ids.size(); ++i) list.push_back(std::nullopt);
    return dynamicList(std::move(list), std::move(ids), true, c10::IValue());
  }
  c10::List<at::Tensor> list;
  for (size_t i = 0; i < ids.size(); ++i) list.push_back(at::Tensor());
  return dynamicList(std::move(list), std::move(ids), true, c10::IValue(at::Tensor()));
}

Expected<ArgSlot> convertIntList(const c10::Argument& s, const ir::Argument& a) {
  if (a.kind == K::Int || (a.kind == K::SymInt && a.value() == nullptr))
    return constant(c10::List<int64_t>({a.ints.at(0)}));
  if (a.kind == K::Ints) return constant(c10::List<int64_t>(c10::ArrayRef<int64_t>(a.ints)));
  if (a.kind != K::SymInts && a.kind != K::SymInt) return mismatch(s, a);
  std::vector<int> ids;
  bool dynamic = false;
  for (const ir::Value* v : a.values) {
    if (v != nullptr && v->kind() != ir::ValueKind::SymInt)
      return Status::error("argument '" + s.name() + "': %" + v->name() + " is not a SymInt");
    ids.push_back(v ? v->id() : -1);
    dynamic = dynamic || v != nullptr;
  }
  c10::List<int64_t> list(c10::ArrayRef<int64_t>(a.ints));
  if (!dynamic) return constant(std::move(list));
  return dynamicList(std::move(list), std::move(ids), false, c10::IValue());
}

Expected<ArgSlot> convertList(const c10::Argument& s, const c10::TypePtr& elem, const ir::Argument& a) {
  const TK ek = elem->kind();
  if (ek == TK::TensorType) return convertTensorList(s, false, a);
  if (ek == TK::OptionalType && elem->containedType(0)->kind() == TK::TensorType)
    return convertTensorList(s, true, a);
  if (isIntLike(ek)) return convertIntList(s, a);
  if (ek == TK::FloatType && a.kind == K::Floats)
    return constant(c10::List<double>(c10::ArrayRef<double>(a.floats)));
  if (ek == TK::FloatType && a.kind == K::Ints) {
    c10::List<double> list;
    for (int64_t i : a.ints) list.push_back(static_cast<double>(i));
    return constant(std::move(list));
  }
  if (ek == TK::BoolType && a.kind == K::Bools) {
    c10::List<bool> list;
    for (int64_t b : a.ints) list.push_back(b != 0);
    return constant(std::move(list));
  }
  if (ek == TK::StringType && a.kind == K::Strings)
    return constant(c10::List<std::string>(c10::ArrayRef<std::string>(a.strings)));
  return mismatch(s, a);
}

}  // namespace

Expected<ArgSlot> convertArgument(const c10::Argument& schemaArg, const ir::Argument& arg,
                                  const c10::Device& device) {
  c10::TypePtr type = schemaArg.type();
  // None would put a factory op's tensor on the CPU, away from every other value.
  if (isDeviceArgument(schemaArg) && arg.kind == K::None) return constant(device);
  if (type->kind() == TK::OptionalType) {
    const bool none = arg.kind == K::None || (arg.kind == K::OptionalTensor && arg.value() == nullptr);
    if (none) return constant(c10::IValue());
    type = type->containedType(0);
  }
  switch (type->kind()) {
    case TK::TensorType:
      return convertTensor(schemaArg, arg);
    case TK::ListType:
      return convertList(schemaArg, type->containedType(0), arg);
    case TK::StringType:
      if (arg.kind != K::String) return mismatch(schemaArg, arg);
      return constant(arg.strings.at(0));
    case TK::DeviceObjType:
      if (arg.kind != K::Device) return mismatch(schemaArg, arg);
      return constant(device);
    case TK::GeneratorType:
      return mismatch(schemaArg, arg);
    default:
      return convertScalar(schemaArg, type->kind(), arg);
  }
}

Expected<ArgSlot> defaultArgument(const c10::Argument& schemaArg, const c10::Device& device) {
  if (isDeviceArgument(schemaArg)) return constant(device);
  if (!schemaArg.default_value())
    return Status::error("required argument '" + schemaArg.name() + "' is missing");
  return constant(*schemaArg.default_value());
}

}  // namespace spmd::runtime
