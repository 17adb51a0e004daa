// A custom-op library for the tests, as a user would build one:
// spmdtest::scaled_add(x, y) = x + 2 * y, registered with the dispatcher
// when spmd-run --load-library loads it. testdata/pt2/custom_op calls it.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {
at::Tensor scaledAdd(const at::Tensor& x, const at::Tensor& y) { return x + 2 * y; }
}  // namespace

TORCH_LIBRARY(spmdtest, m) { m.def("scaled_add(Tensor x, Tensor y) -> Tensor"); }
TORCH_LIBRARY_IMPL(spmdtest, CPU, m) { m.impl("scaled_add", &scaledAdd); }
