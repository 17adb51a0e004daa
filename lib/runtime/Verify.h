// spmd-run --verify / --verify-against: the distributed outputs against a
// reference, with tolerances by dtype (torch.testing.assert_close's table)
// applied to each output's norm.
//
//   spmd-run -n 4 m.spmd --inputs in.safetensors --verify m.pt2                    (m.pt2 on one device)
//   spmd-run -n 4 m.spmd --inputs in.safetensors --verify-against expected.safetensors   (PyTorch's outputs)
//   verify output.0   max abs 0.0117  rel 0.0021  (bfloat16: rtol 0.016 atol 1e-05)  ok
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <ostream>
#include <string>

#include "ir/Graph.h"
#include "runtime/Distributed.h"
#include "runtime/TensorIO.h"
#include "support/Status.h"

namespace spmd::runtime {

/// Relative and absolute tolerance of one comparison.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// torch.testing.assert_close's defaults for `dtype`: float16 1e-3/1e-5,
/// bfloat16 1.6e-2/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7 (complex
/// types as their parts); integers and bool 0/0 (exact).
Tolerance defaultTolerance(at::ScalarType dtype);

/// The defaults as one line for --help ("float32 rtol 1.3e-06 atol 1e-05, ...").
std::string defaultToleranceTable();

/// One output against its reference.
struct Comparison {
  bool pass = false;
  double maxAbs = 0;                  ///< largest |got - want|
  double rel = 0;                     ///< ||got - want|| / ||want|| (maxAbs where want is all zero)
  Tolerance tol;                      ///< the tolerance applied
  at::ScalarType dtype = at::kFloat;  ///< the dtype whose defaults apply (the looser of the two)
  std::string problem;  ///< why it fails regardless of tolerance (shape, non-finite values); empty if none
};

/// Compares `got` with `want` (same shape): passes when
///   ||got - want||_2 <= atol * sqrt(n) + rtol * ||want||_2,
/// i.e. RMS(got - want) <= atol + rtol * RMS(want): assert_close's
/// per-element bound on the whole tensor, so rounding noise on a few
/// elements passes and a wrong output fails. Elements equal in both
/// (infinities included) count as no error; non-finite values that differ
/// fail. `rtol`/`atol` override the dtype's defaults (defaultTolerance of
/// the looser of the two dtypes).
Comparison compareTensor(const at::Tensor& got, const at::Tensor& want, std::optional<double> rtol,
                         std::optional<double> atol);

/// Compares every tensor of `want` with the same-named one of `got`; prints
/// one line per tensor ("verify <name> ... ok" to `out`, failures to `err`).
/// False when one is missing, misshapen or above tolerance.
bool compareOutputs(const TensorMap& got, const TensorMap& want, std::optional<double> rtol,
                    std::optional<double> atol, std::ostream& out, std::ostream& err);

/// Checks --verify / --verify-against before any worker starts: not both,
/// --verify a readable .pt2 archive and only with --steps 1, --verify-against
/// a readable safetensors file whose tensors are all outputs of `program`
/// (o.program's graph). Errors name the file.
Status checkVerifyOptions(const DistributedOptions& o, const ir::ExportedProgram& program);

/// After the run: the reference (o.verify run on one device with the first
/// batch of o.inputs, or the tensors of o.verifyAgainst), compared with the
/// outputs in `outputFile`. Returns 0, kFailure (above tolerance, the
/// reference did not run) or kBadInput (an unreadable reference).
int verifyOutputs(const DistributedOptions& o, const std::string& outputFile, std::ostream& out,
                  std::ostream& err);

}  // namespace spmd::runtime
