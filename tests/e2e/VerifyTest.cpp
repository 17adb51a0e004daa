// spmd-run --verify's comparison (runtime/Verify.h): tolerances by dtype from
// torch.testing.assert_close's table, applied to each output's norm. A bf16
// output one rounding step off passes, a wrong one fails; near-zero
// gradients pass on the absolute tolerance.
#include <ATen/ATen.h>
#include "../TestCatch.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "runtime/Verify.h"

using namespace spmd;
using runtime::compareTensor;
using runtime::defaultTolerance;

namespace {

// `t` with every `every`-th element moved up by one bf16 rounding step.
at::Tensor oneStepOff(const at::Tensor& t, int64_t every) {
  at::Tensor out = t.clone();
  auto* p = out.data_ptr<at::BFloat16>();
  for (int64_t i = 0; i < out.numel(); i += every) {
    uint16_t bits = p[i].x;
    p[i] = at::BFloat16(static_cast<uint16_t>(bits + 1), at::BFloat16::from_bits());
  }
  return out;
}

}  // namespace

TEST_CASE("default tolerances follow torch.testing.assert_close's table") {
  CHECK(defaultTolerance(at::kFloat).rtol == 1.3e-6);
  CHECK(defaultTolerance(at::kFloat).atol == 1e-5);
  CHECK(defaultTolerance(at::kBFloat16).rtol == 1.6e-2);
  CHECK(defaultTolerance(at::kBFloat16).atol == 1e-5);
  CHECK(defaultTolerance(at::kHalf).rtol == 1e-3);
  CHECK(defaultTolerance(at::kDouble).atol == 1e-7);
  CHECK(defaultTolerance(at::kLong).rtol == 0);
  CHECK(runtime::defaultToleranceTable().find("bf16 rtol 0.016 atol 1e-05") != std::string::npos);
}

TEST_CASE("a bf16 output one rounding step off passes by default; a wrong one fails") {
  at::manual_seed(0);
  at::Tensor want = (at::randn({64, 64}) + 1.2).to(at::kBFloat16);
  at::Tensor got = oneStepOff(want, 7);
  runtime::Comparison c = compareTensor(got, want, std::nullopt, std::nullopt);
  CHECK(c.pass);
  CHECK(c.dtype == at::kBFloat16);
  CHECK(c.maxAbs > 0.0);
  // The old fixed rtol 1e-5 (and any float32-sized tolerance) refuses it.
  CHECK_FALSE(compareTensor(got, want, 1e-5, 0.0).pass);
  // Wrong: every element 5% off, or one row of zeros.
  CHECK_FALSE(
      compareTensor((want.to(at::kFloat) * 1.05).to(at::kBFloat16), want, std::nullopt, std::nullopt).pass);
  at::Tensor zeroRow = want.clone();
  zeroRow[3].zero_();
  CHECK_FALSE(compareTensor(zeroRow, want, std::nullopt, std::nullopt).pass);
  // Against a float32 reference the looser (bf16) defaults apply.
  CHECK(compareTensor(got, want.to(at::kFloat), std::nullopt, std::nullopt).dtype == at::kBFloat16);
}

TEST_CASE("float32: reduction-order noise passes, a real difference fails") {
  at::manual_seed(1);
  at::Tensor want = at::randn({128, 32});
  CHECK(compareTensor(want * (1 + 2e-7), want, std::nullopt, std::nullopt).pass);
  CHECK_FALSE(compareTensor(want * (1 + 1e-4), want, std::nullopt, std::nullopt).pass);
  // --rtol overrides the default.
  CHECK(compareTensor(want * (1 + 1e-4), want, 1e-3, std::nullopt).pass);
}

TEST_CASE("near-zero gradients pass on the absolute tolerance") {
  at::manual_seed(2);
  at::Tensor want = at::randn({16}) * 1e-9;  // BatchNorm bias gradients of a train step
  at::Tensor got = at::randn({16}) * 3e-9;
  runtime::Comparison c = compareTensor(got, want, std::nullopt, std::nullopt);
  CHECK(c.rel > 1.0);  // relative to the reference, all wrong
  CHECK(c.pass);
  CHECK_FALSE(compareTensor(got, want, std::nullopt, 0.0).pass);
}

TEST_CASE("non-finite values, shapes and integers") {
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor want = at::tensor({1.0, inf, 3.0});
  CHECK(compareTensor(want.clone(), want, std::nullopt, std::nullopt).pass);
  at::Tensor nan = at::tensor({1.0, inf, std::nan("")});
  runtime::Comparison c = compareTensor(nan, want, std::nullopt, std::nullopt);
  CHECK_FALSE(c.pass);
  CHECK(c.problem.find("non-finite") != std::string::npos);
  CHECK(
      compareTensor(at::zeros({2, 3}), at::zeros({3, 2}), std::nullopt, std::nullopt).problem.find("shape") !=
      std::string::npos);
  CHECK(compareTensor(at::zeros({0}), at::zeros({0}), std::nullopt, std::nullopt).pass);
  at::Tensor z = at::randn({8}, at::kComplexFloat);
  CHECK(compareTensor(z.clone(), z, std::nullopt, std::nullopt).pass);
  CHECK_FALSE(compareTensor(z * c10::complex<float>(0, 1), z, std::nullopt, std::nullopt).pass);
  at::Tensor ids = at::arange(100, at::kLong);
  CHECK(compareTensor(ids.clone(), ids, std::nullopt, std::nullopt).pass);
  at::Tensor off = ids.clone();
  off[50] = 51;
  CHECK_FALSE(compareTensor(off, ids, std::nullopt, std::nullopt).pass);
}

TEST_CASE("compareOutputs prints one line per reference tensor and fails on a missing one") {
  runtime::TensorMap want{{"output.0", at::ones({4})}, {"loss", at::ones({})}};
  runtime::TensorMap got{{"output.0", at::ones({4})}};
  std::ostringstream out, err;
  CHECK_FALSE(runtime::compareOutputs(got, want, std::nullopt, std::nullopt, out, err));
  CHECK(out.str().find("verify output.0") != std::string::npos);
  CHECK(out.str().find(" ok\n") != std::string::npos);
  CHECK(err.str().find("loss missing") != std::string::npos);
}
