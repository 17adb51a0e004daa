// The verifier's value checks and its driver (see Verify.h); the per-op
// argument checks live in VerifyOps.cpp.
//
//   input %x: f32[-1, 64]        -> "input %x: f32[-1, 64]: dim 0 has negative size -1; re-export the model"
//   strides [4611686018427387904, 1] on f32[4, 64]
//                                -> "...: the last element reachable through its strides and storage
//                                    offset lies beyond 2^63 bytes; re-export the model"
#include "ir/Verify.h"

#include <string>

namespace spmd::ir {
namespace {

constexpr const char* kReexport = "; re-export the model";

std::string dimText(const Dim& d) {
  return d.isStatic() ? std::to_string(d.value())
                      : d.str() + " (traced as " + std::to_string(d.value()) + ")";
}

// Bytes of the elements, checked for int64 overflow (zero-size dims aside,
// so that no partial product of sizes overflows either).
Status checkSizes(const TensorType& t, const std::string& where) {
  int64_t bytes = std::max<int64_t>(elementSize(t.dtype), 1);
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    int64_t n = t.sizes[d].value();
    if (n < 0)
      return Status::error(where + ": dim " + std::to_string(d) + " has negative size " +
                           dimText(t.sizes[d]) + kReexport);
    if (n != 0 && __builtin_mul_overflow(bytes, n, &bytes))
      return Status::error(where + ": its sizes hold more than 2^63 bytes" + kReexport);
  }
  return Status::ok();
}

// Strides: one per dim, non-negative, the last reachable element inside
// int64 bytes.
Status checkStrides(const TensorType& t, int64_t storageOffset, const std::string& where) {
  if (storageOffset < 0)
    return Status::error(where + ": storage offset " + std::to_string(storageOffset) + " is negative" +
                         kReexport);
  if (t.strides.empty()) return Status::ok();
  if (t.strides.size() != t.sizes.size())
    return Status::error(where + ": " + std::to_string(t.sizes.size()) + " sizes but " +
                         std::to_string(t.strides.size()) + " strides" + kReexport);
  int64_t last = storageOffset;
  bool empty = false;
  bool overflow = false;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    int64_t stride = t.strides[d].value();
    if (stride < 0)
      return Status::error(where + ": dim " + std::to_string(d) + " has negative stride " +
                           dimText(t.strides[d]) + kReexport);
    int64_t n = t.sizes[d].value();
    if (n == 0) empty = true;
    int64_t step = 0;
    if (n > 0)
      overflow |= __builtin_mul_overflow(n - 1, stride, &step) || __builtin_add_overflow(last, step, &last);
  }
  int64_t bytes = 0;
  overflow |= __builtin_add_overflow(last, 1, &last) ||
              __builtin_mul_overflow(last, std::max<int64_t>(elementSize(t.dtype), 1), &bytes);
  if (overflow && !empty)
    return Status::error(
        where +
        ": the last element reachable through its strides and storage offset lies beyond 2^63 "
        "bytes" +
        kReexport);
  return Status::ok();
}

std::string valueWhere(const Value& v) {
  if (!v.producer()) return "input %" + v.name() + ": " + v.type().str();
  const Node& n = *v.producer();
  std::string where = "node %" + n.name() + " (" + n.target() + ")";
  if (v.name() != n.name()) where += " result %" + v.name();
  return where + ": " + v.type().str();
}

}  // namespace

Status verifyTensorType(const TensorType& type, int64_t storageOffset, std::string_view what) {
  std::string where(what);
  SPMD_RETURN_IF_ERROR(checkSizes(type, where));
  return checkStrides(type, storageOffset, where);
}

Status verifyProgram(const ExportedProgram& program, const VerifyOptions& options) {
  const Graph& g = program.graph;
  SPMD_RETURN_IF_ERROR(g.verify());
  for (size_t id = 0; id < g.numValues(); ++id) {
    const Value& v = *g.valueById(static_cast<int>(id));
    if (!v.isTensor()) continue;
    int64_t offset = options.storageOffset ? options.storageOffset(v) : 0;
    // The checks again with the value's description only when they fail:
    // building it for every value was a tenth of the verifier's time.
    if (!verifyTensorType(v.type(), offset, {}).isOk())
      SPMD_RETURN_IF_ERROR(verifyTensorType(v.type(), offset, valueWhere(v)));
  }
  for (const auto& n : g.nodes()) SPMD_RETURN_IF_ERROR(verifyNode(*n));
  return Status::ok();
}

}  // namespace spmd::ir
