// Builtins: symbolic-integer operations the executor evaluates itself.
//
//   %sym_size_int_46 = aten.sym_size.int(%tokens, 0)       ->  2
//   %mul_27 = _operator.mul(%sym_size_int_46, 8)            ->  16
//   %ge = _operator.ge(%mul_27, 4)                          ->  true
//
// SymInts are plain int IValues, SymFloats doubles and SymBools bools;
// arithmetic follows Python (floordiv and mod round toward -inf).
#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <cmath>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/LocalOps.h"

namespace spmd::runtime {
namespace {

using torch::jit::Stack;

/// Pops the last `n` arguments; returns a pointer to the first of them
/// (valid until the stack changes).
const c10::IValue* args(Stack& s, size_t n) {
  TORCH_CHECK(s.size() >= n, "builtin expects ", n, " arguments, stack has ", s.size());
  return s.data() + (s.size() - n);
}

void finish(Stack& s, size_t n, c10::IValue result) {
  s.resize(s.size() - n);
  s.push_back(std::move(result));
}

bool isIntegral(const c10::IValue& v) { return v.isInt() || v.isBool(); }
int64_t asInt(const c10::IValue& v) { return v.isBool() ? int64_t{v.toBool()} : v.toInt(); }
double asDouble(const c10::IValue& v) {
  if (v.isDouble()) return v.toDouble();
  return static_cast<double>(asInt(v));
}

int64_t floorDiv(int64_t a, int64_t b) {
  TORCH_CHECK(b != 0, "integer division by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t pyMod(int64_t a, int64_t b) {
  TORCH_CHECK(b != 0, "integer modulo by zero");
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

enum class BinOp { Add, Sub, Mul, FloorDiv, Mod, TrueDiv, Pow, Max, Min, And, Or, Eq, Ne, Lt, Le, Gt, Ge };

/// Comparisons (the BinOps from Eq on).
template <typename T>
c10::IValue compare(BinOp op, T a, T b) {
  switch (op) {
    case BinOp::Eq:
      return a == b;
    case BinOp::Ne:
      return a != b;
    case BinOp::Lt:
      return a < b;
    case BinOp::Le:
      return a <= b;
    case BinOp::Gt:
      return a > b;
    default:
      return a >= b;
  }
}

c10::IValue intBinary(BinOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinOp::Add:
      return a + b;
    case BinOp::Sub:
      return a - b;
    case BinOp::Mul:
      return a * b;
    case BinOp::FloorDiv:
      return floorDiv(a, b);
    case BinOp::Mod:
      return pyMod(a, b);
    case BinOp::TrueDiv:
      return static_cast<double>(a) / static_cast<double>(b);
    case BinOp::Pow:
      if (b < 0) return std::pow(static_cast<double>(a), static_cast<double>(b));
      {
        int64_t r = 1;
        for (int64_t i = 0; i < b; ++i) r *= a;
        return r;
      }
    case BinOp::Max:
      return std::max(a, b);
    case BinOp::Min:
      return std::min(a, b);
    case BinOp::And:
      return (a != 0) && (b != 0);
    case BinOp::Or:
      return (a != 0) || (b != 0);
    default:
      return compare(op, a, b);
  }
}

c10::IValue floatBinary(BinOp op, double a, double b) {
  switch (op) {
    case BinOp::Add:
      return a + b;
    case BinOp::Sub:
      return a - b;
    case BinOp::Mul:
      return a * b;
    case BinOp::FloorDiv:
      return std::floor(a / b);
    case BinOp::Mod:
      return a - std::floor(a / b) * b;
    case BinOp::TrueDiv:
      return a / b;
    case BinOp::Pow:
      return std::pow(a, b);
    case BinOp::Max:
      return std::max(a, b);
    case BinOp::Min:
      return std::min(a, b);
    case BinOp::And:
      return (a != 0) && (b != 0);
    case BinOp::Or:
      return (a != 0) || (b != 0);
    default:
      return compare(op, a, b);
  }
}

template <BinOp kOp>
void binary(Stack& s) {
  const c10::IValue* a = args(s, 2);
  c10::IValue r;
  if (isIntegral(a[0]) && isIntegral(a[1])) {
    r = intBinary(kOp, asInt(a[0]), asInt(a[1]));
  } else {
    r = floatBinary(kOp, asDouble(a[0]), asDouble(a[1]));
  }
  finish(s, 2, std::move(r));
}

void neg(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1, a[0].isDouble() ? c10::IValue(-a[0].toDouble()) : c10::IValue(-asInt(a[0])));
}
void pos(Stack& s) { (void)args(s, 1); }
void symNot(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1, c10::IValue(!(a[0].isDouble() ? a[0].toDouble() != 0 : asInt(a[0]) != 0)));
}
void symFloat(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1, c10::IValue(asDouble(a[0])));
}
void symInt(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1,
         a[0].isDouble() ? c10::IValue(static_cast<int64_t>(std::trunc(a[0].toDouble())))
                         : c10::IValue(asInt(a[0])));
}
void symSqrt(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1, c10::IValue(std::sqrt(asDouble(a[0]))));
}
void symIte(Stack& s) {
  const c10::IValue* a = args(s, 3);
  c10::IValue r = asInt(a[0]) != 0 ? a[1] : a[2];
  finish(s, 3, std::move(r));
}

void symSize(Stack& s) {
  const c10::IValue* a = args(s, 2);
  finish(s, 2, c10::IValue(a[0].toTensor().size(a[1].toInt())));
}
void symStride(Stack& s) {
  const c10::IValue* a = args(s, 2);
  finish(s, 2, c10::IValue(a[0].toTensor().stride(a[1].toInt())));
}
void symNumel(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1, c10::IValue(a[0].toTensor().numel()));
}
void symStorageOffset(Stack& s) {
  const c10::IValue* a = args(s, 1);
  finish(s, 1, c10::IValue(a[0].toTensor().storage_offset()));
}

// Argument names are the ones torch.export serializes (the Python
// signatures of operator.*, torch.sym_*).
const LocalOpDef kBuiltins[] = {
    {"aten.sym_size.int", "aten::sym_size.int(Tensor self, int dim) -> int", symSize},
    {"aten.sym_stride.int", "aten::sym_stride.int(Tensor self, int dim) -> int", symStride},
    {"aten.sym_numel.default", "aten::sym_numel(Tensor self) -> int", symNumel},
    {"aten.sym_storage_offset.default", "aten::sym_storage_offset(Tensor self) -> int", symStorageOffset},
    {"_operator.add", "_operator::add(Scalar a, Scalar b) -> Scalar", binary<BinOp::Add>},
    {"_operator.sub", "_operator::sub(Scalar a, Scalar b) -> Scalar", binary<BinOp::Sub>},
    {"_operator.mul", "_operator::mul(Scalar a, Scalar b) -> Scalar", binary<BinOp::Mul>},
    {"_operator.floordiv", "_operator::floordiv(Scalar a, Scalar b) -> Scalar", binary<BinOp::FloorDiv>},
    {"_operator.mod", "_operator::mod(Scalar a, Scalar b) -> Scalar", binary<BinOp::Mod>},
    {"_operator.truediv", "_operator::truediv(Scalar a, Scalar b) -> Scalar", binary<BinOp::TrueDiv>},
    {"_operator.pow", "_operator::pow(Scalar a, Scalar b) -> Scalar", binary<BinOp::Pow>},
    {"_operator.eq", "_operator::eq(Scalar a, Scalar b) -> bool", binary<BinOp::Eq>},
    {"_operator.ne", "_operator::ne(Scalar a, Scalar b) -> bool", binary<BinOp::Ne>},
    {"_operator.lt", "_operator::lt(Scalar a, Scalar b) -> bool", binary<BinOp::Lt>},
    {"_operator.le", "_operator::le(Scalar a, Scalar b) -> bool", binary<BinOp::Le>},
    {"_operator.gt", "_operator::gt(Scalar a, Scalar b) -> bool", binary<BinOp::Gt>},
    {"_operator.ge", "_operator::ge(Scalar a, Scalar b) -> bool", binary<BinOp::Ge>},
    {"_operator.and_", "_operator::and_(Scalar a, Scalar b) -> bool", binary<BinOp::And>},
    {"_operator.or_", "_operator::or_(Scalar a, Scalar b) -> bool", binary<BinOp::Or>},
    {"_operator.neg", "_operator::neg(Scalar a) -> Scalar", neg},
    {"_operator.pos", "_operator::pos(Scalar a) -> Scalar", pos},
    {"math.trunc", "math::trunc(Scalar x) -> int", symInt},
    {"torch.sym_not", "torch::sym_not(Scalar a) -> bool", symNot},
    {"torch.sym_float", "torch::sym_float(Scalar a) -> float", symFloat},
    {"torch.sym_int", "torch::sym_int(Scalar a) -> int", symInt},
    {"torch.sym_sqrt", "torch::sym_sqrt(Scalar a) -> float", symSqrt},
    {"torch.sym_max", "torch::sym_max(Scalar a, Scalar b) -> Scalar", binary<BinOp::Max>},
    {"torch.sym_min", "torch::sym_min(Scalar a, Scalar b) -> Scalar", binary<BinOp::Min>},
    {"torch.sym_ite", "torch::sym_ite(Scalar b, Any t, Any f) -> Any", symIte},
};

}  // namespace

const LocalOp* findBuiltin(std::string_view target) { return findLocalOp<kBuiltins>(target); }

}  // namespace spmd::runtime
