// Fallbacks for ATen ops that some linked LibTorch lacks. Each one is what
// the missing op computes in newer PyTorch, built from ops every version
// has, so numerics match eager:
//
//   _native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)
//     == native_batch_norm(x, w, b, rm, rv, training=false, 0.1, 1e-5)
//   _native_batch_norm_legit_functional(x, w, b, rm, rv, true, 0.1, 1e-5)
//     == native_batch_norm on clones of rm/rv, which it updates in place
//        (new running stats = momentum * batch stat + (1 - momentum) * old,
//        the running variance from the unbiased batch variance), returned
//        as outputs 3 and 4
//   empty_permuted([2, 3, 4], [2, 0, 1]) == empty([4, 2, 3]).permute([1, 2, 0])
//   squeeze.dims(x, [0, 2]) squeezes the listed dims whose size is 1
//   _assert_tensor_metadata(a, size, stride, dtype, device, layout) checks
//     dtype and sizes (device, layout: the executor places every tensor)
#include <ATen/ATen.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "runtime/Compat.h"
#include "runtime/LocalOps.h"

namespace spmd::runtime {
namespace {

using torch::jit::Stack;

c10::optional<at::Tensor> optTensor(const c10::IValue& v) {
  if (v.isNone()) return c10::nullopt;
  return v.toTensor();
}

void batchNormNoTraining(Stack& s) {
  const c10::IValue* a = s.data() + (s.size() - 7);
  auto [out, mean, invstd] =
      at::native_batch_norm(a[0].toTensor(), optTensor(a[1]), optTensor(a[2]), a[3].toTensor(),
                            a[4].toTensor(), /*training=*/false, a[5].toDouble(), a[6].toDouble());
  s.resize(s.size() - 7);
  s.emplace_back(std::move(out));
  s.emplace_back(std::move(mean));
  s.emplace_back(std::move(invstd));
}

void batchNormFunctional(Stack& s) {
  const c10::IValue* a = s.data() + (s.size() - 8);
  at::Tensor runningMean = a[3].toTensor().clone();
  at::Tensor runningVar = a[4].toTensor().clone();
  auto [out, mean, invstd] =
      at::native_batch_norm(a[0].toTensor(), optTensor(a[1]), optTensor(a[2]), runningMean, runningVar,
                            a[5].toBool(), a[6].toDouble(), a[7].toDouble());
  s.resize(s.size() - 8);
  s.emplace_back(std::move(out));
  s.emplace_back(std::move(mean));
  s.emplace_back(std::move(invstd));
  s.emplace_back(std::move(runningMean));
  s.emplace_back(std::move(runningVar));
}

void emptyPermuted(Stack& s) {
  const c10::IValue* a = s.data() + (s.size() - 6);
  std::vector<int64_t> size = a[0].toIntVector();
  std::vector<int64_t> layout = a[1].toIntVector();
  TORCH_CHECK(size.size() == layout.size(), "empty_permuted: size has ", size.size(),
              " dims but physical_layout ", layout.size());
  std::vector<int64_t> physical(size.size());
  std::vector<int64_t> inverse(size.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    TORCH_CHECK(layout[i] >= 0 && layout[i] < static_cast<int64_t>(size.size()),
                "empty_permuted: bad physical_layout");
    physical[i] = size[static_cast<size_t>(layout[i])];
    inverse[static_cast<size_t>(layout[i])] = static_cast<int64_t>(i);
  }
  at::TensorOptions options = at::TensorOptions()
                                  .dtype(a[2].toOptional<at::ScalarType>())
                                  .layout(a[3].toOptional<at::Layout>())
                                  .device(a[4].toOptional<at::Device>())
                                  .pinned_memory(a[5].toOptional<bool>());
  at::Tensor result = at::empty(physical, options).permute(inverse);
  s.resize(s.size() - 6);
  s.emplace_back(std::move(result));
}

void squeezeDims(Stack& s) {
  const c10::IValue* a = s.data() + (s.size() - 2);
  at::Tensor result = a[0].toTensor();
  std::vector<int64_t> dims = a[1].toIntVector();
  const int64_t rank = result.dim();
  for (int64_t& d : dims) d = c10::maybe_wrap_dim(d, rank);
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  for (auto it = dims.rbegin(); it != dims.rend(); ++it)
    if (rank > 0 && result.size(*it) == 1) result = result.squeeze(*it);
  if (result.is_same(a[0].toTensor())) result = result.alias();
  s.resize(s.size() - 2);
  s.emplace_back(std::move(result));
}

void assertTensorMetadata(Stack& s) {
  const c10::IValue* a = s.data() + (s.size() - 6);
  const at::Tensor& t = a[0].toTensor();
  if (!a[1].isNone()) {
    std::vector<int64_t> size = a[1].toIntVector();
    TORCH_CHECK(t.sizes().vec() == size, "tensor has sizes ", t.sizes(), ", expected ", size);
  }
  if (!a[3].isNone()) {
    auto dtype = static_cast<at::ScalarType>(a[3].toInt());
    TORCH_CHECK(t.scalar_type() == dtype, "tensor has dtype ", t.scalar_type(), ", expected ", dtype);
  }
  s.resize(s.size() - 6);
}

struct FallbackDef {
  const char* schema;
  BoxedKernel kernel;
};

// Schemas as in PyTorch 2.x's native_functions.yaml.
const FallbackDef kFallbacks[] = {
    {"aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, "
     "Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
     batchNormNoTraining},
    {"aten::_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, "
     "Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> "
     "(Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)",
     batchNormFunctional},
    {"aten::empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, "
     "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
     emptyPermuted},
    {"aten::squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", squeezeDims},
    {"aten::_assert_tensor_metadata(Tensor a, SymInt[]? size=None, SymInt[]? stride=None, "
     "ScalarType? dtype=None, *, Device? device=None, Layout? layout=None) -> ()",
     assertTensorMetadata},
};

}  // namespace

const LocalOp* findFallback(const c10::OperatorName& name) {
  static const std::deque<std::pair<c10::FunctionSchema, LocalOp>> kTable = [] {
    std::deque<std::pair<c10::FunctionSchema, LocalOp>> table;
    for (const FallbackDef& d : kFallbacks) {
      table.emplace_back(torch::jit::parseSchema(d.schema), LocalOp{nullptr, d.kernel});
      table.back().second.schema = &table.back().first;
    }
    return table;
  }();
  for (const auto& [schema, op] : kTable)
    if (schema.operator_name() == name) return &op;
  return nullptr;
}

}  // namespace spmd::runtime
